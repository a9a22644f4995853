//! `hubd`: the hub's storage and gatekeeper, serving one hub folder over NATS.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use hubd::init::init_hub;
use hubd::service;
use hubd::store::{Durability, Hub, HubOptions};
use l3m_core::grant::GrantFile;
use l3m_core::names::HumanName;
use l3m_core::refs::paths::CREDENTIALS_DIR;
use l3m_wire::bus::{Bus, NatsArgs};
use l3m_wire::subjects::HubId;
use tokio_util::sync::CancellationToken;

/// The hub's storage and gatekeeper.
///
/// hubd is the only writer of hub.git. It admits spawns through the spawn gate, appends to Logs, inboxes and the ledger by compare-and-swap, checks every request's duty against its session capability, and announces every ref move on NATS. Sessions live in memory: they end when hubd restarts.
///
/// Start with `hubd init` to make a hub, then `hubd serve` to serve it.
#[derive(Debug, Parser)]
#[command(name = "hubd", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Init(InitArgs),
    Serve(ServeArgs),
    Recover(RecoverArgs),
}

/// Create a hub: a bare hub.git, its folders, its first credentials, and a ledger whose first
/// row registers the human root.
///
/// The grant file is TOML: a `[grant]` table (the ceiling of every root agent this human spawns)
/// and optional `[examples]` with `allow` and `deny` lists that must hold, checked before
/// anything is written. See deploy/root-grant.toml.
#[derive(Debug, clap::Args)]
struct InitArgs {
    /// The hub folder to create; it must not exist or be empty.
    #[arg(long)]
    hub: PathBuf,
    /// The human who owns the hub (one lowercase segment, e.g. `alice`).
    #[arg(long)]
    human: String,
    /// The human's grant file (TOML).
    #[arg(long)]
    grant: PathBuf,
}

/// Serve a hub over NATS until interrupted (ctrl-c finishes requests in flight).
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The hub folder (made by `hubd init`).
    #[arg(long)]
    hub: PathBuf,
    /// The hub's id, the second token of every subject.
    #[arg(long)]
    hub_id: String,
    #[command(flatten)]
    nats: NatsArgs,
    /// When a write is acknowledged. `fsync` (the default): once it survives a power cut,
    /// by one fdatasync of hubd's write-ahead log (hubd/wal/), which the next start
    /// replays. `barriers`: once its files and then its ref are fsynced, no WAL (two to
    /// three times as slow; hub.git is whole after a power cut without replay). `relaxed`:
    /// without any fsync, safe only against a crashed process (for throwaway hubs). Whatever
    /// is chosen, a WAL left by an earlier run is replayed first.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Fsync)]
    durability: DurabilityArg,
    #[command(flatten)]
    metrics: l3m_daemon::metrics::MetricsArgs,
}

/// Make a hub whole and durable after a crash, without serving it: replay what hubd's WAL
/// holds into hub.git, fsync everything, and empty the WAL.
///
/// `hubd serve` does the same when it starts; run this first to read a hub with plain git
/// after a power cut while hubd is down (until then the newest writes may be missing from
/// hub.git or torn, though every acknowledged one is in the WAL).
#[derive(Debug, clap::Args)]
struct RecoverArgs {
    /// The hub folder.
    #[arg(long)]
    hub: PathBuf,
}

/// `--durability` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DurabilityArg {
    Fsync,
    Barriers,
    Relaxed,
}

impl From<DurabilityArg> for Durability {
    fn from(arg: DurabilityArg) -> Durability {
        match arg {
            DurabilityArg::Fsync => Durability::Fsync,
            DurabilityArg::Barriers => Durability::Barriers,
            DurabilityArg::Relaxed => Durability::Relaxed,
        }
    }
}

fn main() -> ExitCode {
    let work = async {
        match Cli::parse().command {
            Command::Init(args) => init(args),
            Command::Serve(args) => serve(args).await,
            Command::Recover(args) => recover(args),
        }
        .map_err(|e| e.to_string())
    };
    l3m_daemon::run("hubd", work)
}

fn read_grant(path: &Path) -> Result<GrantFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the grant file {}: {e}", path.display()))?;
    let file: GrantFile = toml::from_str(&text).map_err(|e| {
        format!(
            "the grant file {} is not a valid grant: {e}",
            path.display()
        )
    })?;
    file.check()
        .map_err(|e| format!("the grant file {}: {e}", path.display()))?;
    Ok(file)
}

fn init(args: InitArgs) -> Result<(), Box<dyn std::error::Error>> {
    let human = HumanName::parse(&args.human)?;
    let grant = read_grant(&args.grant)?;
    let now_ms = l3m_core::clock::now_ms();
    init_hub(
        &args.hub,
        HubOptions::default(),
        human.clone(),
        grant.grant,
        now_ms,
    )?;
    println!(
        "created hub {} with human:{human} as its root; its credentials (the CLI's, this host's) are in {}/{CREDENTIALS_DIR} (keep them private)",
        args.hub.display(),
        args.hub.display(),
    );
    println!(
        "next: hubd serve --hub {} --nats nats://127.0.0.1:4222 --hub-id main",
        args.hub.display()
    );
    Ok(())
}

fn recover(args: RecoverArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Barriers: opening replays, syncs what it replayed to disk and deletes the segments.
    let options = HubOptions {
        durability: Durability::Barriers,
        ..HubOptions::default()
    };
    let replayed = Hub::open(&args.hub, options)?.replayed();
    println!(
        "replayed {replayed} logged write(s) into {}/hub.git; the WAL is empty",
        args.hub.display()
    );
    println!(
        "next: git --git-dir {}/hub.git fsck, or hubd serve --hub {}",
        args.hub.display(),
        args.hub.display()
    );
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let hub_id = HubId::parse(&args.hub_id)?;
    let options = HubOptions {
        durability: args.durability.into(),
        ..HubOptions::default()
    };
    let hub = Hub::open(&args.hub, options)?;
    let bus: Arc<dyn Bus> = Arc::new(args.nats.connect().await?);
    let shutdown = CancellationToken::new();
    let started = service::start(bus, hub, hub_id, shutdown.clone()).await?;
    let endpoint = hubd::metrics::Endpoint::of(&started.state());
    l3m_daemon::metrics::serve_if_asked(&args.metrics, endpoint, shutdown.clone()).await?;
    tracing::info!(hub = %args.hub.display(), "hubd serving");
    let stop = shutdown.clone();
    tokio::spawn(async move {
        l3m_daemon::stopped().await;
        tracing::info!("stopping: finishing requests in flight");
        stop.cancel();
    });
    started.serve().await;
    Ok(())
}
