//! A hub served by a real hubd over a real nats-server, and git run isolated from the machine's
//! configuration: one fixture for hubd's tests and the crates built on it (the sequencer's,
//! benchmarks), instead of a copy in each.
//!
//! Compiled only with the `test-support` feature; no l3m binary enables it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use l3m_core::duty::Duty;
use l3m_core::grant::Grant;
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::client::HubClient;
use l3m_wire::credential::KeyFile;
use l3m_wire::subjects::{HubId, Subjects};
use l3m_wire::test_support::NatsServer;
use tokio_util::sync::CancellationToken;

use crate::init::{init_hub, local_key};
use crate::store::{Durability, Hub, HubOptions};

/// The hub id every test hub serves under.
pub const HUB_ID: &str = "t";
/// The human every test hub registers at init.
pub const HUMAN: &str = "alice";

/// A hub folder made by `init` (human [`HUMAN`]), served by hubd in this process over its own
/// nats-server until dropped.
#[derive(Debug)]
pub struct TestHub {
    /// Holds the hub folder (`HUB/`).
    pub dir: tempfile::TempDir,
    /// The nats-server hubd serves on.
    pub nats: NatsServer,
    /// A connection to it for the test's own requests (anonymous when the test server has no
    /// users; the `sequencer` user with [`TestHub::start_as_users`]).
    pub bus: Arc<dyn Bus>,
    /// The connection hubd serves on (the same as `bus`, or the `hubd` user's).
    hubd_bus: Arc<dyn Bus>,
    /// [`HUB_ID`], parsed.
    pub hub_id: HubId,
    /// The hub's subjects.
    pub subjects: Subjects,
    /// Stops hubd.
    pub shutdown: CancellationToken,
    /// What hubd serves from, for its gauges and metrics (none while it restarts).
    state: Option<Arc<crate::service::State>>,
    /// hubd serving, until `shutdown`.
    served: Option<tokio::task::JoinHandle<()>>,
}

impl TestHub {
    /// A hub whose human is registered with `bound` (the ceiling of her roots), served over a
    /// nats-server whose configuration has `nats_config` added.
    pub async fn start(bound: Grant, nats_config: &str) -> TestHub {
        TestHub::start_in(tempfile::tempdir().unwrap(), bound, nats_config).await
    }

    /// [`TestHub::start`] with the hub folder made in `dir` (a benchmark's folder away from
    /// recently deleted files, say).
    pub async fn start_in(dir: tempfile::TempDir, bound: Grant, nats_config: &str) -> TestHub {
        let nats = NatsServer::start_with(nats_config).unwrap();
        let bus: Arc<dyn Bus> = Arc::new(
            NatsBus::connect(nats.url(), NatsAuth::Anonymous)
                .await
                .unwrap(),
        );
        TestHub::make(dir, bound, nats, Arc::clone(&bus), bus).await
    }

    /// A hub served over a nats-server enforcing deploy/nats.conf: hubd connects as its user
    /// `hubd`, and [`TestHub::bus`] (and every session [`TestHub::client`] opens) as
    /// `sequencer`, so other services under test can join as their own users.
    pub async fn start_as_users(bound: Grant) -> TestHub {
        let nats = NatsServer::start_with(&l3m_wire::test_support::deployed_nats_conf()).unwrap();
        let hubd: Arc<dyn Bus> = Arc::new(l3m_wire::test_support::connect_as(&nats, "hubd").await);
        let clients: Arc<dyn Bus> =
            Arc::new(l3m_wire::test_support::connect_as(&nats, "sequencer").await);
        TestHub::make(tempfile::tempdir().unwrap(), bound, nats, hubd, clients).await
    }

    /// Makes the hub in `dir` and serves it on `hubd_bus`; `bus` is what the test speaks on.
    async fn make(
        dir: tempfile::TempDir,
        bound: Grant,
        nats: NatsServer,
        hubd_bus: Arc<dyn Bus>,
        bus: Arc<dyn Bus>,
    ) -> TestHub {
        let options = HubOptions {
            durability: Durability::Relaxed,
            ..HubOptions::default()
        };
        drop(init_hub(dir.path().join("HUB"), options, human(), bound, 1).unwrap());
        let hub_id = HubId::parse(HUB_ID).unwrap();
        let mut hub = TestHub {
            state: None,
            served: None,
            dir,
            nats,
            bus,
            hubd_bus,
            subjects: Subjects::new(hub_id.clone()),
            hub_id,
            shutdown: CancellationToken::new(),
        };
        hub.serve().await;
        hub
    }

    /// Starts hubd on the hub, as a new process would.
    async fn serve(&mut self) {
        let options = || HubOptions {
            durability: Durability::Relaxed,
            ..HubOptions::default()
        };
        // The old hubd's last tasks (a request in flight, the applier) may still hold the hub
        // for a moment after it stopped serving, as an old process would until it exits.
        let mut waited = 0;
        let hub = loop {
            match Hub::open(self.root(), options()) {
                Err(crate::store::StoreError::HubBusy { .. }) if waited < 100 => {
                    waited += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                opened => break opened.unwrap(),
            }
        };
        self.shutdown = CancellationToken::new();
        let started = crate::service::start(
            Arc::clone(&self.hubd_bus),
            hub,
            self.hub_id.clone(),
            self.shutdown.clone(),
        )
        .await
        .unwrap();
        self.state = Some(started.state());
        self.served = Some(tokio::spawn(started.serve()));
    }

    /// Stops hubd and starts a new one on the same hub and bus, the way an operator restarts
    /// the process: every session ends, what hubd made durable (the refs, the lease journal)
    /// stays.
    pub async fn restart_hubd(&mut self) {
        self.shutdown.cancel();
        // hubd stops once every holder of its state is gone, and the last one lets go of the
        // hub's process lock.
        self.state = None;
        if let Some(served) = self.served.take() {
            served.await.unwrap();
        }
        self.serve().await;
    }

    /// What hubd serves from, for its gauges and metrics.
    pub fn state(&self) -> Arc<crate::service::State> {
        Arc::clone(self.state.as_ref().expect("hubd is serving"))
    }

    /// The hub folder.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("HUB")
    }

    /// The hub's bare repository.
    pub fn git_dir(&self) -> PathBuf {
        self.root().join("hub.git")
    }

    /// `agent`'s ACR.
    pub fn acr(&self, agent: &AgentName) -> PathBuf {
        self.root().join(l3m_core::refs::paths::acr(agent))
    }

    /// The credential init issued that opens `duty`'s sessions: the human's or the host's.
    pub fn key_for(&self, duty: &Duty) -> KeyFile {
        local_key(&self.root(), duty).unwrap()
    }

    /// A session for `duty`, opened with the credential init issued for it.
    pub async fn client(&self, duty: Duty) -> HubClient {
        HubClient::open(
            Arc::clone(&self.bus),
            self.hub_id.clone(),
            &self.key_for(&duty),
            duty,
        )
        .await
        .unwrap()
    }

    /// The human's session.
    pub async fn human_client(&self) -> HubClient {
        self.client(Duty::Human { human: human() }).await
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// [`HUMAN`], parsed.
pub fn human() -> HumanName {
    HumanName::parse(HUMAN).unwrap()
}

/// A git command run in `dir`, isolated from the machine as `l3m_git` isolates every git, with
/// a fixed identity for any commit it makes. For a bare repository
/// pass `--git-dir` first in `args`.
pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = l3m_git::command(dir);
    cmd.args(args)
        .env("GIT_AUTHOR_NAME", "l3m test")
        .env("GIT_AUTHOR_EMAIL", "test@l3m.invalid")
        .env("GIT_COMMITTER_NAME", "l3m test")
        .env("GIT_COMMITTER_EMAIL", "test@l3m.invalid");
    cmd
}

/// Runs [`git_command`] with `stdin` fed; returns stdout, asserting success (naming the
/// command and git's stderr when it fails).
pub fn git_with_input(dir: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = git_command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {} failed ({}): {}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs [`git_command`]; returns stdout, asserting success.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_with_input(dir, args, "")
}

/// Runs git on the bare repository `git_dir`; returns stdout, asserting success.
pub fn git_bare(git_dir: &Path, args: &[&str]) -> String {
    let dir = git_dir.display().to_string();
    let mut all = vec!["--git-dir", dir.as_str()];
    all.extend_from_slice(args);
    git(git_dir, &all)
}
