//! The embedded stack: hubd's service in this process, over any [`Bus`] — the in-process
//! [`LocalBus`](l3m_wire::bus::LocalBus) for a single-process run (`l3m demo`, tests), or a
//! NATS bus so the human's other commands reach it (`l3m up --embedded`).
//!
//! DESIGN §2: only the CLI composes services, through their library faces. hubd's face is
//! [`hubd::service::start`]; the sequencer supervisor's face plugs in at [`start_sequencers`].

use std::path::Path;
use std::sync::Arc;

use hubd::store::{Hub, HubOptions};
use l3m_wire::bus::Bus;
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

/// Starts the sequencer supervisor on `bus` inside this process.
///
/// The in-process supervisor is the sequencer library's `supervise` (with its
/// `TaskLauncher`), which this branch does not have; until it is composed here, an embedded
/// stack runs hubd alone, and asking for the sequencer says so.
pub async fn start_sequencers(
    _bus: Arc<dyn Bus>,
    _root: &Path,
    _hub_id: &HubId,
    _config: &Path,
) -> Result<(), CliError> {
    Err(CliError::usage(
        "the in-process sequencer supervisor arrives with the sequencer library: \
         run `l3m up --embedded --services hubd`, or `l3m up` without --embedded",
    ))
}
