//! `runner`: runs a built artifact by digest in a sealed container.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use l3m_containers::{ArtifactStore, Driver, Identity};
use l3m_core::build::StageOwner;
use l3m_core::clock::SystemClock;
use l3m_wire::build::gate::VoucherGate;
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
/// writes source or artifacts. Every request must carry hubd's voucher that the agent's grant
/// covers a run of exactly that artifact; the runner learns hubd's voucher key and the image
/// ids the hub's settings pin from hubd at start (`hubd.read-build-policy`, so start hubd
/// first). It removes every container a killed predecessor left (by label), then serves
/// `runner.run` on NATS until interrupted. Exit codes: 0 after a clean shutdown, 1 if it cannot
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
    let subjects = Subjects::new(hub.clone());
    let gate = Arc::new(VoucherGate::new(
        Arc::clone(&bus),
        subjects.clone(),
        Arc::new(SystemClock),
    ));
    let policy = gate.policy().await.map_err(|e| e.to_string())?;
    let mut driver = Driver::connect(Identity::of_this_process(StageOwner::Runner, hub.as_str()))
        .await
        .map_err(|e| e.to_string())?;
    let images: Vec<String> = cli.images.into_iter().chain(policy.images).collect();
    if !images.is_empty() {
        tracing::info!(?images, "only these images may run");
        driver = driver.pin_images(images);
    }
    let reaped = driver.reap().await.map_err(|e| e.to_string())?;
    tracing::info!(reaped, "removed what a previous runner left");
    let store = ArtifactStore::open(cli.cache).map_err(|e| e.to_string())?;
    let shutdown = CancellationToken::new();
    let task = runner::serve(
        bus.as_ref(),
        &subjects,
        driver,
        store,
        gate,
        shutdown.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("serving runner.run");
    let _ = tokio::signal::ctrl_c().await;
    shutdown.cancel();
    task.await.map_err(|e| e.to_string())
}
