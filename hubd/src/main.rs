//! `hubd`: the hub's storage and gatekeeper, serving one hub folder over NATS.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hubd::service;
use hubd::store::{Hub, HubOptions};
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::subjects::HubId;
use tokio_util::sync::CancellationToken;

/// The hub's storage and gatekeeper.
///
/// hubd is the only writer of hub.git. It admits spawns through the spawn gate, appends to Logs, inboxes and the ledger by compare-and-swap, checks every request's duty against its session capability, and announces every ref move on NATS. Sessions live in memory: they end when hubd restarts.
#[derive(Debug, Parser)]
#[command(name = "hubd", version, arg_required_else_help = true)]
struct Cli {
    /// The hub folder (made by `l3m hub init`).
    #[arg(long)]
    hub: PathBuf,
    /// The NATS server, e.g. nats://127.0.0.1:4222.
    #[arg(long)]
    nats: String,
    /// The hub's id, the second token of every subject.
    #[arg(long)]
    hub_id: String,
    /// The NATS user (see deploy/nats.conf).
    #[arg(long, requires = "password")]
    user: Option<String>,
    /// The NATS password.
    #[arg(long, requires = "user")]
    password: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match serve(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("hubd: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let hub_id = HubId::parse(&cli.hub_id)?;
    let hub = Hub::open(&cli.hub, HubOptions::default())?;
    let auth = match (cli.user, cli.password) {
        (Some(user), Some(password)) => NatsAuth::UserPassword { user, password },
        _ => NatsAuth::Anonymous,
    };
    let bus: Arc<dyn Bus> = Arc::new(NatsBus::connect(&cli.nats, auth).await?);
    let shutdown = CancellationToken::new();
    let started = service::start(bus, hub, hub_id, shutdown.clone()).await?;
    tracing::info!(hub = %cli.hub.display(), "hubd serving");
    let stop = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("ctrl-c: finishing requests in flight");
        }
        stop.cancel();
    });
    started.serve().await;
    Ok(())
}
