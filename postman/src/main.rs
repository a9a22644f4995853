//! `postman`: carries airmail between hubs over QUIC with mutual TLS.
//!
//! `postman identity` makes and shows the hub's identity between hubs; `postman serve` carries
//! letters between this hub and the offices its settings pin.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use l3m_wire::bus::NatsArgs;
use postman::identity::{IDENTITY_DIR, Identity};

/// Carries airmail between hubs over QUIC with mutual TLS and pinned certificates.
///
/// The postman holds its hub's postman duty and nothing more: it pushes staged outboxes to each
/// office named in the hub's settings, fetches offices only into mirror refs, relays their
/// letters into local inboxes by set union, carries read marks back as receipts, and returns
/// what an office bounced to its sender. It answers `l3m office ls` and `l3m doctor` with its
/// links' state on the bus.
#[derive(Debug, Parser)]
#[command(name = "postman", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make the hub's identity if it has none (a key pair and a self-signed certificate under
    /// HUB/.postman/identity, the key readable by its owner alone), and print the fingerprint a
    /// peer hub pins for this one.
    Identity(IdentityArgs),
    /// Carry letters until interrupted: accept the pinned offices' links and hand what they
    /// carry to this hub's hubd; read this hub's outboxes and carry their letters to the
    /// offices. Offices are read from the hub's settings at start (restart after
    /// `l3m office add`). Logs go to stderr (`RUST_LOG`; `L3M_LOG_FORMAT=json` for JSON lines).
    /// Stops on SIGINT or SIGTERM.
    Serve(Box<ServeArgs>),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The hub folder (its identity, and the postman credential init issued).
    #[arg(long)]
    hub: PathBuf,
    /// The hub's id on NATS subjects.
    #[arg(long)]
    hub_id: String,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    metrics: l3m_daemon::metrics::MetricsArgs,
    /// Where to listen for the offices' links (UDP).
    #[arg(long, default_value = "0.0.0.0:4433")]
    listen: std::net::SocketAddr,
    /// The name the offices give this hub (default: the hub id).
    #[arg(long)]
    name: Option<String>,
    /// The postman credential (default: the one init issued).
    #[arg(long)]
    credential: Option<PathBuf>,
    /// How often outboxes are read, in milliseconds: a staged letter waits up to this long
    /// before it is carried (the bulk of airmail's latency on a fast link).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    poll_ms: u64,
}

#[derive(Debug, clap::Args)]
struct IdentityArgs {
    /// The hub folder.
    #[arg(long)]
    hub: PathBuf,
    /// The hub's name, written into a new certificate (default: the hub folder's name).
    #[arg(long)]
    name: Option<String>,
    /// Print JSON: `{"fingerprint", "certificate"}`.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Identity(args) => l3m_daemon::run("postman", async move { identity(&args) }),
        Command::Serve(args) => l3m_daemon::run("postman", serve(*args)),
    }
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    use std::sync::Arc;

    use l3m_core::duty::Duty;
    use l3m_core::names::ServiceName;
    use l3m_core::refs::paths;
    use l3m_wire::bus::Bus;
    use l3m_wire::credential::KeyFile;
    use l3m_wire::subjects::HubId;
    use postman::carry::{Carrier, Peer};
    use postman::identity::Fingerprint;
    use postman::link::{Limits, Office};

    let identity = Identity::read(&args.hub.join(IDENTITY_DIR)).map_err(|e| e.to_string())?;
    let credential_path = args
        .credential
        .clone()
        .unwrap_or_else(|| args.hub.join(paths::postman_key()));
    let credential = KeyFile::read(&credential_path).map_err(|e| e.to_string())?;
    let hub_id = HubId::parse(&args.hub_id).map_err(|e| e.to_string())?;
    let bus: Arc<dyn Bus> = Arc::new(args.nats.connect().await.map_err(|e| e.to_string())?);
    let service = ServiceName::parse(paths::POSTMAN_SERVICE).map_err(|e| e.to_string())?;
    let hub = l3m_wire::client::HubClient::open(
        bus,
        hub_id.clone(),
        &credential,
        Duty::Postman { service },
    )
    .await
    .map_err(|e| e.to_string())?;
    let settings = hub.read_settings().await.map_err(|e| e.to_string())?;
    let settings =
        l3m_core::settings::Settings::parse(&settings.text).map_err(|e| e.to_string())?;
    let mut peers = Vec::new();
    for (name, office) in &settings.offices {
        let fingerprint = Fingerprint::parse(&office.cert_sha256).map_err(|e| e.to_string())?;
        let addr = tokio::net::lookup_host(&office.addr)
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("office {name}: cannot resolve {}", office.addr))?;
        peers.push(Peer {
            office: Office {
                name: name.to_string(),
                fingerprint,
            },
            addr,
        });
    }
    let limits = Limits::default();
    let offices = peers.iter().map(|p| p.office.clone()).collect();
    let endpoint = postman::link::endpoint(&identity, offices, args.listen, &limits)
        .map_err(|e| e.to_string())?;
    tracing::info!(
        listen = %args.listen,
        offices = peers.len(),
        fingerprint = %identity.fingerprint(),
        "postman serving"
    );
    let carrier = Arc::new(Carrier {
        hub,
        identity,
        me: args.name.clone().unwrap_or_else(|| hub_id.to_string()),
        peers,
        limits,
        poll: std::time::Duration::from_millis(args.poll_ms.max(1)),
    });
    let stop = tokio_util::sync::CancellationToken::new();
    let board = Arc::new(postman::status::Board::new(&carrier));
    let shown = Arc::clone(&board);
    l3m_daemon::metrics::serve_if_asked(&args.metrics, move || shown.health(), stop.clone())
        .await?;
    let serving = tokio::spawn(postman::carry::serve(
        carrier,
        board,
        endpoint,
        stop.clone(),
    ));
    l3m_daemon::stopped().await;
    stop.cancel();
    serving
        .await
        .map_err(|e| format!("the postman stopped badly: {e}"))
}

fn identity(args: &IdentityArgs) -> Result<(), String> {
    if !args.hub.join("hub.git").is_dir() {
        return Err(format!(
            "{} is not a hub folder (it has no hub.git); make one with `l3m init` or `hubd init`",
            args.hub.display()
        ));
    }
    let name = args.name.clone().unwrap_or_else(|| {
        args.hub
            .file_name()
            .map_or_else(|| "hub".to_owned(), |n| n.to_string_lossy().into_owned())
    });
    let dir = args.hub.join(IDENTITY_DIR);
    let identity = Identity::load_or_create(&dir, &name).map_err(|e| e.to_string())?;
    let cert = dir.join(postman::identity::IDENTITY_CERT);
    if args.json {
        let out = serde_json::json!({
            "fingerprint": identity.fingerprint().to_string(),
            "certificate": cert.display().to_string(),
        });
        println!("{out}");
    } else {
        println!("{}", identity.fingerprint());
        println!(
            "(certificate: {}; pin this fingerprint on the peer hub)",
            cert.display()
        );
    }
    Ok(())
}
