//! The embedded stack: hubd's service in this process, over any [`Bus`] — the in-process
//! [`LocalBus`](l3m_wire::bus::LocalBus) for a single-process run (`l3m demo`, tests), or a
//! NATS bus so the human's other commands reach it (`l3m up --embedded`).
//!
//! DESIGN §2: only the CLI composes services, through their library faces. hubd's face is
//! [`hubd::service::start`]; the sequencer supervisor's is `sequencer::supervise`, composed in
//! [`start_sequencers`].

use std::path::Path;
use std::sync::Arc;

use hubd::store::{Hub, HubOptions};
use l3m_core::duty::Duty;
use l3m_wire::bus::Bus;
use l3m_wire::client::HubClient;
use l3m_wire::subjects::HubId;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::CliError;

/// hubd serving in this process.
#[derive(Debug)]
pub struct Embedded {
    /// The bus it serves on.
    pub bus: Arc<dyn Bus>,
    shutdown: CancellationToken,
    serving: JoinHandle<()>,
}

impl Embedded {
    /// Opens the hub at `root` and starts hubd on `bus`; every subject is live on return.
    pub async fn start(
        bus: Arc<dyn Bus>,
        root: &Path,
        hub_id: HubId,
    ) -> Result<Embedded, CliError> {
        let hub = Hub::open(root, HubOptions::default()).map_err(|e| {
            CliError::Runtime(format!("cannot open the hub at {}: {e}", root.display()))
        })?;
        let shutdown = CancellationToken::new();
        let started = hubd::service::start(Arc::clone(&bus), hub, hub_id, shutdown.clone())
            .await
            .map_err(|e| CliError::Runtime(format!("hubd could not start: {e}")))?;
        let serving = tokio::spawn(started.serve());
        Ok(Embedded {
            bus,
            shutdown,
            serving,
        })
    }

    /// Stops hubd after the requests in flight are answered.
    pub async fn stop(self) {
        self.shutdown.cancel();
        if let Err(error) = self.serving.await {
            tracing::warn!(%error, "embedded hubd ended badly");
        }
    }
}

/// The sequencer supervisor running in this process, and every sequencer it launched.
#[derive(Debug)]
pub struct Sequencers {
    shutdown: CancellationToken,
    supervising: JoinHandle<()>,
}

impl Sequencers {
    /// Stops the supervisor and every sequencer task (each releases its lease as it ends).
    pub async fn stop(self) {
        self.shutdown.cancel();
        if let Err(error) = self.supervising.await {
            tracing::warn!(%error, "the embedded supervisor ended badly");
        }
        // Give the sequencer tasks a moment to append their last records and release leases.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// Reads the sequencer's sections of the human's document (`[models.*]`, `[[agents]]`,
/// `default_model`, `[sequencer]`); every other section is the CLI's and is ignored here.
pub fn sequencer_config(document: &Path) -> Result<sequencer::Config, CliError> {
    let text = match std::fs::read_to_string(document) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(CliError::Runtime(format!(
                "cannot read {}: {e}",
                document.display()
            )));
        }
    };
    sequencer::Config::parse(&text)
        .map_err(|e| CliError::usage(format!("{}: {e}", document.display())))
}

/// Starts the sequencer supervisor on `bus` inside this process: it wakes each asleep agent
/// with unread mail by running its sequencer as a task here (the library's `TaskLauncher`).
pub async fn start_sequencers(
    bus: Arc<dyn Bus>,
    root: &Path,
    hub_id: &HubId,
    config: sequencer::Config,
    config_dir: &Path,
) -> Result<Sequencers, CliError> {
    let credential = crate::context::host_key(root)?;
    let shutdown = CancellationToken::new();
    let factory = sequencer::model::provider_factory(
        config.clone(),
        config_dir.to_path_buf(),
        Arc::new(|name: &str| std::env::var(name).ok()),
    );
    let launcher = sequencer::TaskLauncher {
        bus: Arc::clone(&bus),
        hub: hub_id.clone(),
        credential: credential.clone(),
        forest: root.join(l3m_core::refs::paths::FOREST_DIR),
        config,
        provider_factory: factory,
        holder: format!("l3m-embedded:{}", std::process::id()),
        shutdown: shutdown.clone(),
    };
    let client = HubClient::open(
        bus,
        hub_id.clone(),
        &credential,
        Duty::Host { subtree: None },
    )
    .await?;
    let supervisor = sequencer::Supervisor {
        host: sequencer::HostControl {
            client,
            credential,
            forest: root.join(l3m_core::refs::paths::FOREST_DIR),
            subtree: None,
        },
        launcher: Arc::new(launcher),
    };
    let stop = shutdown.clone();
    let supervising = tokio::spawn(async move {
        if let Err(error) = sequencer::supervise(supervisor, stop).await {
            tracing::warn!(%error, "the embedded supervisor stopped");
        }
    });
    Ok(Sequencers {
        shutdown,
        supervising,
    })
}
