//! `builder`: runs the fetch and build stages of a build in containers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use builder::Config;
use clap::Parser;
use l3m_containers::ArtifactStore;
use l3m_containers::service;
use l3m_core::build::StageOwner;
use l3m_daemon::metrics::{self, MetricsArgs};
use l3m_wire::bus::NatsArgs;
use tokio_util::sync::CancellationToken;

/// Runs the fetch and build stages of a build in containers, through the Docker API.
///
/// The builder owns the write half of W^X builds: a fetch stage that reads only lockfiles and
/// reaches only the hosts its plan lists (through this process's allowlisting proxy on an
/// internal network), and a build stage that mounts source and the fetched cache read-only with
/// no network and writes one artifact, stored under its blake3 digest in the cache. It never
/// runs a built artifact; that is the runner's duty. Every request must carry hubd's voucher
/// that the agent's grant covers exactly that build; the builder learns hubd's voucher key and
/// the image ids the hub's settings pin from hubd at start (`hubd.read-build-policy`, so start
/// hubd first). It removes every container and network a killed predecessor left (by label),
/// then serves `builder.build` (and its health) on NATS until SIGINT or SIGTERM. Exit codes: 0 after a clean
/// shutdown, 1 if it cannot start, 2 on bad usage.
#[derive(Debug, Parser)]
#[command(name = "builder", version)]
struct Cli {
    /// The hub's id on NATS subjects; also the label its containers carry.
    #[arg(long)]
    hub_id: String,
    /// The artifact cache (HUB/cache/artifacts), shared with the runner.
    #[arg(long)]
    cache: PathBuf,
    /// Allow this image too, by its engine id (`sha256:…`, as deploy/images/build prints it),
    /// besides those the hub's settings pin (`[builds] images`). Repeatable. With neither, a
    /// plan may name any local image.
    #[arg(long = "image", value_name = "ID")]
    images: Vec<String>,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// Resolve a fetch host to an address before DNS, e.g. `deb.mirror=10.0.0.5:80`
    /// (an air-gapped mirror). Repeatable. The host must still be listed by the stage.
    #[arg(long, value_name = "HOST=ADDR", value_parser = parse_resolve)]
    resolve: Vec<(String, SocketAddr)>,
}

fn parse_resolve(s: &str) -> Result<(String, SocketAddr), String> {
    let (host, addr) = s.split_once('=').ok_or("expected HOST=IP:PORT")?;
    Ok((
        host.to_ascii_lowercase(),
        addr.parse().map_err(|e| format!("{addr}: {e}"))?,
    ))
}

fn main() -> ExitCode {
    l3m_daemon::run("builder", run(Cli::parse()))
}

async fn run(cli: Cli) -> Result<(), String> {
    let started = service::start(StageOwner::Builder, &cli.hub_id, &cli.nats, cli.images).await?;
    let config = Config {
        store: ArtifactStore::open(cli.cache).map_err(|e| e.to_string())?,
        resolve: Arc::new(cli.resolve.into_iter().collect::<HashMap<_, _>>()),
    };
    let shutdown = CancellationToken::new();
    let serving = builder::serve(
        started.bus.as_ref(),
        &started.subjects,
        started.driver,
        config,
        started.gate,
        Some(started.pins),
        shutdown.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let meter = serving.meter;
    metrics::serve_if_asked(&cli.metrics, move || meter.health(), shutdown.clone()).await?;
    tracing::info!("serving builder.build");
    l3m_daemon::stopped().await;
    shutdown.cancel();
    serving.task.await.map_err(|e| e.to_string())
}
