//! `runner`: runs a built artifact by digest in a sealed container.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use l3m_containers::ArtifactStore;
use l3m_containers::service;
use l3m_core::build::StageOwner;
use l3m_daemon::metrics::{self, MetricsArgs};
use l3m_wire::bus::NatsArgs;
use tokio_util::sync::CancellationToken;

/// Runs a built artifact by digest in a sealed container, through the Docker API.
///
/// The runner owns the execute half of W^X builds: it takes an artifact only by its blake3
/// digest, copies and re-hashes the stored bytes before mounting the copy (a changed byte is
/// a refusal),
/// mounts them read-only with no network, and gives the run one fresh out/ as its only
/// writable place; the out/ comes back as a digest and a listing. It never fetches, builds, or
/// writes source or artifacts. Every request must carry hubd's voucher that the agent's grant
/// covers a run of exactly that artifact; the runner learns hubd's voucher key and the image
/// ids the hub's settings pin from hubd at start (`hubd.read-build-policy`, so start hubd
/// first). It removes every container a killed predecessor left (by label), then serves
/// `runner.run` (and its health) on NATS until SIGINT or SIGTERM. Exit codes: 0 after a clean shutdown, 1 if it cannot
/// start, 2 on bad usage.
#[derive(Debug, Parser)]
#[command(name = "runner", version)]
struct Cli {
    /// The hub's id on NATS subjects; also the label its containers carry.
    #[arg(long)]
    hub_id: String,
    /// The artifact cache (HUB/cache/artifacts) the builder stores into.
    #[arg(long)]
    cache: PathBuf,
    /// Allow this image too, by its engine id (`sha256:…`, as deploy/images/build prints it),
    /// besides those the hub's settings pin (`[builds] images`). Repeatable. With neither, a
    /// stage may name any local image.
    #[arg(long = "image", value_name = "ID")]
    images: Vec<String>,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
}

fn main() -> ExitCode {
    l3m_daemon::run("runner", run(Cli::parse()))
}

async fn run(cli: Cli) -> Result<(), String> {
    let started = service::start(StageOwner::Runner, &cli.hub_id, &cli.nats, cli.images).await?;
    let store = ArtifactStore::open(cli.cache).map_err(|e| e.to_string())?;
    let shutdown = CancellationToken::new();
    let serving = runner::serve(
        started.bus.as_ref(),
        &started.subjects,
        started.driver,
        store,
        started.gate,
        Some(started.pins),
        shutdown.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let meter = serving.meter;
    metrics::serve_if_asked(&cli.metrics, move || meter.health(), shutdown.clone()).await?;
    tracing::info!("serving runner.run");
    l3m_daemon::stopped().await;
    shutdown.cancel();
    serving.task.await.map_err(|e| e.to_string())
}
