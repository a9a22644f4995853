//! A real hubd over a real nats-server, agents in it, and a counting scripted provider.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod chat;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::log::{Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use sequencer::model::{ModelError, ModelReply, ModelRequest, Provider, Scripted};
use sequencer::{AgentRun, Config, HostControl, ProviderFactory, Supervisor, TaskLauncher};
use tokio_util::sync::CancellationToken;

/// hubd's shared test hub, with the sequencer tests' own steps (spawning, letters, runs).
pub struct TestHub {
    /// The hub, hubd and nats-server.
    pub hub: hubd::test_support::TestHub,
}

impl std::ops::Deref for TestHub {
    type Target = hubd::test_support::TestHub;

    fn deref(&self) -> &Self::Target {
        &self.hub
    }
}

pub fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

pub fn grant(text: &str) -> Grant {
    toml::from_str(text).unwrap()
}

pub fn fuel(calls: u64) -> Fuel {
    Fuel {
        model_calls: calls,
        bytes: 10_000_000,
        wakes: 10,
    }
}

impl TestHub {
    pub async fn start() -> TestHub {
        TestHub::start_bound("files = [\"workspace\"]\nspawn = \"persist\"").await
    }

    /// A hub whose human `alice` has `bound` (a grant in TOML) as the ceiling of her roots.
    pub async fn start_bound(bound: &str) -> TestHub {
        TestHub {
            hub: hubd::test_support::TestHub::start(grant(bound), "").await,
        }
    }

    pub fn acr(&self, name: &str) -> PathBuf {
        self.hub.acr(&agent(name))
    }

    /// Where the hub's own host keeps its agents' ACRs.
    pub fn forest(&self) -> PathBuf {
        self.root().join(l3m_core::refs::paths::FOREST_DIR)
    }

    /// Makes `name`'s ACR ready as its sequencer's boot does (fetched through hubd, checked
    /// out), so a test can look at or write into it before the first run.
    pub async fn ready_acr(&self, name: &str) {
        let client = self.sequencer_client(name).await;
        sequencer::acr::Acr::at(&self.forest(), &agent(name))
            .ready(&client)
            .await
            .unwrap();
    }

    pub async fn human(&self) -> HubClient {
        self.human_client().await
    }

    pub async fn sequencer_client(&self, name: &str) -> HubClient {
        self.client(Duty::Sequencer { agent: agent(name) }).await
    }

    /// Spawns a root agent with files on `workspace` and `calls` model calls.
    pub async fn spawn(&self, name: &str, calls: u64) {
        self.spawn_with(name, calls, "files = [\"workspace\"]")
            .await;
    }

    /// Spawns a root agent with `granted` (a grant in TOML) and `calls` model calls, and makes
    /// its ACR ready as a sequencer's boot would.
    pub async fn spawn_with(&self, name: &str, calls: u64, granted: &str) {
        self.human()
            .await
            .spawn(SpawnRequest {
                child: agent(name),
                grant: grant(granted),
                loan: fuel(calls),
                driven: false,
                persona: None,
                fork: None,
            })
            .await
            .unwrap();
        self.ready_acr(name).await;
    }

    pub async fn letter(&self, to: &str, body: &str) {
        self.human()
            .await
            .send_letter(to, None, body)
            .await
            .unwrap();
    }

    pub async fn log(&self, name: &str) -> Vec<Record> {
        let c = self.human().await;
        c.read_log_from(&agent(name), 0).await.unwrap().records
    }

    /// A run of `name` with `config` and `factory`.
    pub async fn run(&self, name: &str, config: Config, factory: ProviderFactory) -> AgentRun {
        AgentRun {
            forest: self.forest(),
            agent: agent(name),
            client: self.sequencer_client(name).await,
            config,
            provider_factory: factory,
            holder: format!("test:{name}"),
        }
    }

    /// Runs `name` with `config` and the scripted model `script` until it is idle, and
    /// returns its Log.
    pub async fn run_idle(&self, name: &str, config: Config, script: &str) -> Vec<Record> {
        let run = self
            .run(name, config, factory_of(counting(script, Duration::ZERO)))
            .await;
        assert_eq!(
            sequencer::run_agent(run, CancellationToken::new())
                .await
                .unwrap(),
            sequencer::Exit::Idle
        );
        self.log(name).await
    }
}

impl TestHub {
    /// What the host of `subtree` (the whole hub for `None`) holds, as `l3m up` gives its
    /// supervisor.
    pub async fn host_control(&self, subtree: Option<&str>) -> HostControl {
        let duty = Duty::Host {
            subtree: subtree.map(agent),
        };
        HostControl {
            client: self.client(duty.clone()).await,
            credential: self.key_for(&duty),
            forest: self.forest(),
            subtree: subtree.map(agent),
        }
    }

    /// A supervisor of the whole hub whose sequencers run as tasks here, with `config` and
    /// `factory`, taking leases as `holder`, until `shutdown`.
    pub async fn task_supervisor(
        &self,
        config: Config,
        factory: ProviderFactory,
        holder: &str,
        shutdown: &CancellationToken,
    ) -> Supervisor {
        let launcher = TaskLauncher {
            bus: self.bus.clone(),
            hub: self.hub_id.clone(),
            credential: self.key_for(&Duty::Host { subtree: None }),
            forest: self.forest(),
            config,
            provider_factory: factory,
            holder: holder.into(),
            shutdown: shutdown.clone(),
        };
        Supervisor {
            host: self.host_control(None).await,
            launcher: Arc::new(launcher),
        }
    }
}

/// A scripted provider that counts the requests it is sent.
#[derive(Debug)]
pub struct Counting {
    pub inner: Scripted,
    pub delay: Duration,
    pub requests: AtomicUsize,
    pub name: String,
}

impl Provider for Counting {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            self.inner.complete(request).await
        })
    }
}

pub fn counting(script: &str, delay: Duration) -> Arc<Counting> {
    Arc::new(Counting {
        inner: Scripted::new(
            l3m_models::scripted::Script::parse(std::path::Path::new("test-script.toml"), script)
                .unwrap(),
        ),
        delay,
        requests: AtomicUsize::new(0),
        name: "scripted".into(),
    })
}

/// A factory that answers every label with `provider`.
pub fn factory_of(provider: Arc<Counting>) -> ProviderFactory {
    Arc::new(move |_label: &str| {
        let p: Arc<dyn Provider> = provider.clone();
        Ok(p)
    })
}

/// A configuration with one scripted model and the given `[sequencer]` lines.
pub fn config(sequencer: &str) -> Config {
    Config::parse(&format!(
        "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\n[sequencer]\nretry_backoff_ms = 1\n{sequencer}"
    ))
    .unwrap()
}

pub fn kinds(records: &[Record]) -> Vec<&'static str> {
    records.iter().map(|r| r.body.kind()).collect()
}

/// Each tool result of the Log: its output and whether it is an error, in Log order.
pub fn tool_results(records: &[Record]) -> Vec<(String, bool)> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// How many letters the Log journaled as events: each letter once, whatever restarts happened.
pub fn letters_journaled(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| {
            matches!(
                &r.body,
                RecordBody::Event {
                    source: l3m_core::log::EventSource::Letter { .. },
                    ..
                }
            )
        })
        .count()
}

pub fn assistant_texts(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::AssistantReply { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[allow(unused_imports)] // not every test binary runs git
pub use hubd::test_support::git;

/// Waits until `cond` holds for the Log of `name`, or panics after `secs`.
pub async fn wait_log(hub: &TestHub, name: &str, secs: u64, cond: impl Fn(&[Record]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let log = hub.log(name).await;
        if cond(&log) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; the Log is {:?}",
            kinds(&log)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn read(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// The checks every final Log must pass: contiguous seqs, each use started at most once and
/// closed, every reply's uses answered, at most one open call and it is the last.
pub fn check_log(records: &[Record]) {
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.seq, i as u64, "seqs are contiguous");
    }
    let mut started = HashSet::new();
    let mut closed = HashSet::new();
    let mut open_calls = Vec::new();
    for r in records {
        match &r.body {
            RecordBody::ToolStarted { id } => assert!(started.insert(id.clone()), "{id} twice"),
            RecordBody::ToolResult { id, .. } => {
                closed.insert(id.clone());
            }
            RecordBody::Interrupted {
                closed_tools,
                closed_call,
                ..
            } => {
                closed.extend(closed_tools.iter().cloned());
                if let Some(c) = closed_call {
                    open_calls.retain(|o| o != c);
                }
            }
            RecordBody::CallStarted { call, .. } => open_calls.push(call.clone()),
            RecordBody::AssistantReply { call, .. } | RecordBody::CallFailed { call, .. } => {
                open_calls.retain(|o| o != call)
            }
            _ => {}
        }
    }
    for id in &started {
        assert!(closed.contains(id), "started use {id} has no result");
    }
    assert!(open_calls.len() <= 1, "open calls: {open_calls:?}");
    if let Some(open) = open_calls.first() {
        let last = records
            .iter()
            .rev()
            .find_map(|r| match &r.body {
                RecordBody::CallStarted { call, .. } => Some(call),
                _ => None,
            })
            .unwrap();
        assert_eq!(open, last, "the open call is the last call");
    }
}

/// Starts the `sequencer` binary for agent `name` with the configuration file `config`, as
/// the supervisor would: a process the crash tests can SIGKILL.
pub fn launch_sequencer(hub: &TestHub, config: &Path, name: &str) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_sequencer"))
        .args(["run", "--hub"])
        .arg(hub.root())
        .args(["--hub-id", "t", "--nats", hub.nats.url(), "--agent", name])
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A scripted turn that writes `content` to `workspace/todo.md`.
pub fn write_todo(text: &str, content: &str) -> String {
    format!(
        "[[turn]]\ntext = \"{text}\"\n[[turn.tool_use]]\nname = \"write_file\"\n\
         input = {{ path = \"workspace/todo.md\", content = \"{content}\" }}\n"
    )
}

/// A scripted turn that commits the workspace with `message`.
pub fn commit(text: &str, message: &str) -> String {
    format!(
        "[[turn]]\ntext = \"{text}\"\n[[turn.tool_use]]\nname = \"git_commit\"\n\
         input = {{ message = \"{message}\" }}\n"
    )
}

/// The scripted turn that ends a script.
pub const DONE: &str = "[[turn]]\ntext = \"done\"\n";

/// Builds `l3m-program` (with the other services, in one invocation: see
/// `l3m_wire::test_support::build_service_binaries`) into this test's target directory, once,
/// and returns its path.
pub fn evaluator() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| l3m_wire::test_support::build_service_binaries().join("l3m-program"))
        .clone()
}
