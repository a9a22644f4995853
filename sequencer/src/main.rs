//! `sequencer`: advances exactly one agent, as the single writer of its Log.
//!
//! A thin shell over the library: it reads arguments, the credential and the configuration file,
//! connects to NATS, and calls `run_agent` or `supervise`. Exit codes: 0 idle or stopped, 2 bad
//! usage, 3 the lease is held by another sequencer, 4 out of fuel, 1 anything else.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use l3m_core::credential::Scope;
use l3m_core::duty::Duty;
use l3m_core::names::AgentName;
use l3m_core::refs::paths;
use l3m_daemon::Stop;
use l3m_wire::bus::{Bus, ConnectError, NatsArgs};
use l3m_wire::client::HubClient;
use l3m_wire::credential::KeyFile;
use l3m_wire::subjects::HubId;
use sequencer::model::provider_factory;
use sequencer::{
    AgentRun, Config, Exit, HostControl, HostMeter, ProcessLauncher, ProviderFactory,
    SequencerError, Supervisor,
};
use tokio_util::sync::CancellationToken;

/// Advances exactly one agent: the single writer of its Log.
///
/// `sequencer run` drains the agent's signals (letters, model replies, finished tools),
/// journals them, folds the Log into what is owed, appends by compare-and-swap and only then
/// starts model calls and tools. A second sequencer for the same agent refuses to start and
/// names the holder of the lease. `sequencer supervise` starts a `sequencer run` for every
/// asleep agent that has unread mail. Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug),
/// and L3M_LOG_FORMAT=json for JSON lines.
///
/// Exit codes: 0 idle or stopped, 2 bad usage, 3 lease held by another, 4 out of fuel, 1 other.
#[derive(Debug, Parser)]
#[command(name = "sequencer", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run one agent until it is idle (if `idle_exit_secs` is set), out of fuel, or stopped.
    Run(RunArgs),
    /// Wake asleep agents with unread mail by starting `sequencer run` for each.
    Supervise(SuperviseArgs),
}

/// How to reach the hub.
#[derive(Debug, Clone, clap::Args)]
struct Connection {
    /// The hub folder (made by `hubd init`); on a sequencer host away from the hub, the
    /// folder of this host's files: only `--credential` and `--forest` default under it, and
    /// nothing here reads `hub.git`.
    #[arg(long)]
    hub: PathBuf,
    /// The hub's id, the second token of every subject.
    #[arg(long)]
    hub_id: String,
    #[command(flatten)]
    nats: NatsArgs,
    /// This host's credential (mode 0600; `l3m credential issue --host` makes one)
    /// [default: HUB/.hubd/credentials/host.key].
    #[arg(long)]
    credential: Option<PathBuf>,
    /// The configuration (TOML: [models.*], [[agents]], [sequencer]); often ~/.l3m/l3m.toml.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where this host keeps its agents' ACRs, each a clone fetched from and pushed back
    /// through hubd [default: HUB/forest].
    #[arg(long)]
    forest: Option<PathBuf>,
}

impl Connection {
    /// Where this host keeps its agents' ACRs.
    fn forest(&self) -> PathBuf {
        self.forest
            .clone()
            .unwrap_or_else(|| self.hub.join(l3m_core::refs::paths::FOREST_DIR))
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    conn: Connection,
    /// The agent to run, e.g. demo/parent.
    #[arg(long)]
    agent: String,
}

#[derive(Debug, clap::Args)]
struct SuperviseArgs {
    #[command(flatten)]
    conn: Connection,
    /// Wake only the agents of this subtree (the credential must cover it) [default: every
    /// agent the credential covers].
    #[arg(long)]
    subtree: Option<String>,
    #[command(flatten)]
    metrics: l3m_daemon::metrics::MetricsArgs,
}

fn main() -> ExitCode {
    l3m_daemon::run("sequencer", start(Cli::parse()))
}

/// Runs the command until it ends or the process is asked to stop (SIGINT, SIGTERM).
async fn start(cli: Cli) -> Result<(), Stop> {
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        l3m_daemon::stopped().await;
        stop.cancel();
    });
    let outcome = match cli.command {
        Command::Run(args) => run(args, shutdown).await,
        Command::Supervise(args) => supervise(args, shutdown).await.map(|()| Exit::Shutdown),
    };
    match outcome {
        Ok(Exit::OutOfFuel) => Err(Stop::with_code(4, "the agent is out of fuel")),
        Ok(Exit::LeaseLost) => Err(Stop::failed("the lease was lost to another sequencer")),
        Ok(_) => Ok(()),
        Err(Failure::Usage(e)) => Err(Stop::usage(e)),
        Err(Failure::Run(e @ SequencerError::LeaseHeld { .. })) => {
            Err(Stop::with_code(3, e.to_string()))
        }
        Err(Failure::Run(e)) => Err(Stop::failed(e.to_string())),
    }
}

enum Failure {
    Usage(String),
    Run(SequencerError),
}

impl From<SequencerError> for Failure {
    fn from(e: SequencerError) -> Self {
        Failure::Run(e)
    }
}

impl From<l3m_wire::client::ClientError> for Failure {
    fn from(e: l3m_wire::client::ClientError) -> Self {
        Failure::Run(e.into())
    }
}

struct Opened {
    bus: Arc<dyn Bus>,
    hub: HubId,
    credential: KeyFile,
    config: Config,
    factory: ProviderFactory,
}

async fn open(conn: &Connection) -> Result<Opened, Failure> {
    let hub = HubId::parse(&conn.hub_id).map_err(|e| Failure::Usage(e.to_string()))?;
    let credential_file = conn
        .credential
        .clone()
        .unwrap_or_else(|| conn.hub.join(paths::host_key()));
    let credential = KeyFile::read(&credential_file).map_err(|e| Failure::Usage(e.to_string()))?;
    let (config, base) = match &conn.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
            let config = Config::parse(&text).map_err(|e| Failure::Usage(e.to_string()))?;
            let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (config, base)
        }
        None => (Config::default(), PathBuf::new()),
    };
    let bus: Arc<dyn Bus> = Arc::new(conn.nats.connect().await.map_err(|e| match e {
        ConnectError::PasswordUnset { .. } => Failure::Usage(e.to_string()),
        ConnectError::Bus { source, .. } => Failure::Run(SequencerError::Bus {
            what: "connecting to NATS".into(),
            source,
        }),
    })?);
    let factory = provider_factory(
        config.clone(),
        base,
        Arc::new(|name: &str| std::env::var(name).ok()),
    );
    Ok(Opened {
        bus,
        hub,
        credential,
        config,
        factory,
    })
}

fn holder() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    format!("{host}:{}", std::process::id())
}

async fn run(args: RunArgs, shutdown: CancellationToken) -> Result<Exit, Failure> {
    let agent = AgentName::parse(&args.agent).map_err(|e| Failure::Usage(e.to_string()))?;
    let opened = open(&args.conn).await?;
    let client = HubClient::open(
        opened.bus,
        opened.hub,
        &opened.credential,
        Duty::Sequencer {
            agent: agent.clone(),
        },
    )
    .await?;
    let mut config = opened.config;
    if config.sequencer.program_evaluator.is_none() {
        // The evaluator installed beside this binary (`scripts/install`, `cargo build`).
        config.sequencer.program_evaluator = std::env::current_exe()
            .ok()
            .and_then(|exe| l3m_programs::host::Evaluator::beside(&exe))
            .map(|e| e.program);
    }
    let run = AgentRun {
        forest: args.conn.forest(),
        agent,
        client,
        config,
        provider_factory: opened.factory,
        holder: holder(),
    };
    Ok(sequencer::run_agent(run, shutdown).await?)
}

async fn supervise(args: SuperviseArgs, shutdown: CancellationToken) -> Result<(), Failure> {
    let opened = open(&args.conn).await?;
    let subtree = match &args.subtree {
        Some(root) => Some(AgentName::parse(root).map_err(|e| Failure::Usage(e.to_string()))?),
        None => match &opened.credential.scope {
            Scope::Host { subtree } => subtree.clone(),
            other => {
                return Err(Failure::Usage(format!(
                    "credential {} is for the {other}, not a sequencer host; pass a host \
                     credential with --credential",
                    opened.credential.id
                )));
            }
        },
    };
    let client = HubClient::open(
        opened.bus,
        opened.hub,
        &opened.credential,
        Duty::Host {
            subtree: subtree.clone(),
        },
    )
    .await?;
    let conn = &args.conn;
    let mut pass = vec![
        "--hub".to_owned(),
        conn.hub.display().to_string(),
        "--hub-id".to_owned(),
        conn.hub_id.clone(),
    ];
    pass.extend(conn.nats.to_args());
    let optional = [
        (
            "--credential",
            conn.credential.as_ref().map(|p| p.display().to_string()),
        ),
        (
            "--config",
            conn.config.as_ref().map(|p| p.display().to_string()),
        ),
        (
            "--forest",
            conn.forest.as_ref().map(|p| p.display().to_string()),
        ),
    ];
    for (flag, value) in optional {
        if let Some(value) = value {
            pass.push(flag.to_owned());
            pass.push(value);
        }
    }
    let program = std::env::current_exe()
        .map_err(|e| Failure::Usage(format!("cannot find this executable: {e}")))?;
    let sup = Supervisor {
        host: HostControl {
            client,
            credential: opened.credential,
            forest: conn.forest(),
            subtree,
        },
        launcher: Arc::new(ProcessLauncher::new(program, pass)),
    };
    let meter = Arc::new(HostMeter::new());
    let shown = sequencer::HostShown(Arc::clone(&meter));
    l3m_daemon::metrics::serve_if_asked(&args.metrics, shown, shutdown.clone())
        .await
        .map_err(Failure::Usage)?;
    Ok(sequencer::supervise_metered(sup, meter, shutdown).await?)
}
