//! `runner`: runs a built artifact by digest in a sealed container.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use l3m_containers::{ArtifactStore, Driver, Identity};
use l3m_core::build::StageOwner;
use l3m_wire::bus::{Bus, NatsArgs};
use l3m_wire::subjects::{HubId, Subjects};
use tokio_util::sync::CancellationToken;

/// Runs a built artifact by digest in a sealed container, through the Docker API.
///
/// The runner owns the execute half of W^X builds: it takes an artifact only by its blake3
/// digest, copies and re-hashes the stored bytes before mounting the copy (a changed byte is
/// a refusal),
/// mounts them read-only with no network, and gives the run one fresh out/ as its only
/// writable place; the out/ comes back as a digest and a listing. It never fetches, builds, or
/// writes source or artifacts. At start it removes every container a killed predecessor left
/// (by label), then serves `runner.run` on NATS until interrupted. Exit codes: 0 after a clean
/// shutdown, 1 if it cannot start, 2 on bad usage.
#[derive(Debug, Parser)]
#[command(name = "runner", version)]
struct Cli {
    /// The hub's id on NATS subjects; also the label its containers carry.
    #[arg(long)]
    hub_id: String,
    /// The artifact cache (HUB/cache/artifacts) the builder stores into.
    #[arg(long)]
    cache: PathBuf,
    /// Allow only this image, by its engine id (`sha256:…`, as deploy/images/build prints it).
    /// Repeatable. Without any, a plan may name any local image.
    #[arg(long = "image", value_name = "ID")]
    images: Vec<String>,
    #[command(flatten)]
    nats: NatsArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runner: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runner: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let hub = HubId::parse(&cli.hub_id).map_err(|e| e.to_string())?;
    let bus: Arc<dyn Bus> = Arc::new(cli.nats.connect().await.map_err(|e| e.to_string())?);
    let mut driver = Driver::connect(Identity::of_this_process(StageOwner::Runner, hub.as_str()))
        .await
        .map_err(|e| e.to_string())?;
    if !cli.images.is_empty() {
        driver = driver.pin_images(cli.images.clone());
    }
    let reaped = driver.reap().await.map_err(|e| e.to_string())?;
    tracing::info!(reaped, "removed what a previous runner left");
    let store = ArtifactStore::open(cli.cache).map_err(|e| e.to_string())?;
    let shutdown = CancellationToken::new();
    let task = runner::serve(
        bus.as_ref(),
        &Subjects::new(hub),
        driver,
        store,
        shutdown.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("serving runner.run");
    let _ = tokio::signal::ctrl_c().await;
    shutdown.cancel();
    task.await.map_err(|e| e.to_string())
}
