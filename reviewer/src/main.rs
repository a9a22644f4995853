//! `reviewer`: a thin shell over the library — reads the `[review]` and `[models.*]` tables of
//! `l3m.toml`, connects to NATS as its own user, and serves review requests until stopped.
//! Exit codes: 0 stopped (SIGINT or SIGTERM), 2 bad arguments or configuration, 1 a failure
//! while serving.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use l3m_core::review::ReviewConfig;
use l3m_daemon::Stop;
use l3m_daemon::metrics::{self, MetricsArgs};
use l3m_models::{ModelConfig, build};
use l3m_wire::bus::{Bus, ConnectError, NatsArgs};
use l3m_wire::subjects::{HubId, Subjects};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// Deliberates over wild calls before they run.
///
/// The reviewer holds a model of another family than the proposer's and no tool, token or hub
/// credential at all. For each wild call a sequencer asks about, it reads the call's effect
/// (what would change and where) and the proposer's justification, and answers safe, unsafe
/// (optionally with a tame alternative) or unclear. The sequencer journals every round in the
/// proposer's Log; after the configured rounds a stalemate becomes a card for a human
/// (`l3m cards`).
///
/// Configure it in l3m.toml:
///
///   [review]
///   model = "checker"        # a [models.<label>] table, of another family than the agents'
///   rounds = 2               # rounds before a stalemate goes to a human
///   same_family = false      # true accepts a reviewer of the proposer's own family
#[derive(Debug, Parser)]
#[command(name = "reviewer", version, arg_required_else_help = true)]
struct Cli {
    /// The configuration holding [review] and [models.*] (often ~/.l3m/l3m.toml).
    #[arg(long)]
    config: PathBuf,
    /// The hub's id on the bus.
    #[arg(long, default_value = "main")]
    hub_id: String,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
}

/// The parts of l3m.toml the reviewer reads; other tables are someone else's.
#[derive(Debug, Deserialize)]
struct File {
    review: Option<ReviewConfig>,
    #[serde(default)]
    models: std::collections::BTreeMap<String, ModelConfig>,
}

fn reviewer(config: &Path) -> Result<reviewer::Reviewer, Stop> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| Stop::usage(format!("cannot read {}: {e}", config.display())))?;
    let file: File =
        toml::from_str(&text).map_err(|e| Stop::usage(format!("{}: {e}", config.display())))?;
    let review = file
        .review
        .ok_or_else(|| Stop::usage(format!("{} has no [review] table", config.display())))?;
    review.check().map_err(|e| Stop::usage(e.to_string()))?;
    let mut model = file.models.get(&review.model).cloned().ok_or_else(|| {
        Stop::usage(format!(
            "[review] names model {:?} but there is no [models.{}] table",
            review.model, review.model
        ))
    })?;
    model.resolve_paths(config.parent().unwrap_or(Path::new(".")));
    let provider =
        build(&model, &|name| std::env::var(name).ok()).map_err(|e| Stop::usage(e.to_string()))?;
    let max_tokens = model.max_tokens.unwrap_or(1024);
    reviewer::Reviewer::new(
        provider,
        model.model.clone(),
        max_tokens,
        review.same_family,
    )
    .map_err(|e| Stop::usage(e.to_string()))
}

async fn run(cli: Cli) -> Result<(), Stop> {
    let reviewer = reviewer(&cli.config)?;
    let hub = HubId::parse(&cli.hub_id).map_err(|e| Stop::usage(e.to_string()))?;
    let bus: Arc<dyn Bus> = Arc::new(cli.nats.connect().await.map_err(|e| match e {
        ConnectError::PasswordUnset { .. } => Stop::usage(e.to_string()),
        ConnectError::Bus { .. } => Stop::failed(e.to_string()),
    })?);
    let shutdown = CancellationToken::new();
    let rounds = Arc::new(reviewer::Rounds::new());
    let shown = Arc::clone(&rounds);
    metrics::serve_if_asked(&cli.metrics, move || shown.health(), shutdown.clone()).await?;
    tracing::info!(family = %reviewer.family(), hub = %hub, "reviewer serving");
    let stop = shutdown.clone();
    tokio::spawn(async move {
        l3m_daemon::stopped().await;
        stop.cancel();
    });
    reviewer::serve_counting(
        bus.as_ref(),
        &Subjects::new(hub),
        Arc::new(reviewer),
        rounds,
        shutdown,
    )
    .await
    .map_err(|e| Stop::failed(e.to_string()))
}

fn main() -> ExitCode {
    l3m_daemon::run("reviewer", run(Cli::parse()))
}
