//! A sealed l3m home in a temporary directory, the real `l3m` binary run against it, and a
//! guard that stops whatever stack a test started, even when the test panics.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;

/// Builds every service binary (`l3m_wire::test_support::SERVICE_BINARIES`) into the same
/// target directory as `l3m`, once per test binary, so `l3m up` (and `l3m hooks test`) find
/// them as siblings.
pub fn build_services() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let built = l3m_wire::test_support::build_service_binaries();
        let l3m = assert_cmd::cargo::cargo_bin("l3m");
        assert_eq!(
            l3m.parent(),
            Some(built.as_path()),
            "l3m and its services apart"
        );
    });
}

/// A variable `l3m up` is started with, standing for a model API key in the human's shell.
pub const SENTINEL_KEY: &str = "L3M_TEST_API_KEY";

/// Its value, which no process that has no use for it may hold.
pub const SENTINEL: &str = "sentinel-api-key-4711";

/// A temporary l3m home.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn hub_root(&self) -> PathBuf {
        self.path().join("hub")
    }

    /// `l3m ARGS` with this home.
    pub fn l3m(&self, args: &[&str]) -> Command {
        self.l3m_at(&assert_cmd::cargo::cargo_bin("l3m"), args)
    }

    /// `BINARY ARGS` (a copy of l3m) with this home.
    pub fn l3m_at(&self, binary: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary);
        cmd.env("L3M_HOME", self.path())
            .env_remove("RUST_LOG")
            .args(args)
            .timeout(std::time::Duration::from_secs(90));
        cmd
    }

    /// Runs `l3m ARGS --json` successfully and parses its stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.l3m(&all).output().unwrap();
        assert!(
            out.status.success(),
            "l3m {all:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "l3m {all:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// `l3m init --human alice`.
    pub fn init(&self) {
        self.l3m(&["init", "--human", "alice"]).assert().success();
    }

    /// `l3m up --services hubd`, guarded; `l3m up` runs with [`SENTINEL_KEY`] in its
    /// environment, as a model API key would be.
    pub fn up(&self) -> StackGuard<'_> {
        build_services();
        let guard = StackGuard { home: self };
        self.l3m(&["up", "--services", "hubd"])
            .env(SENTINEL_KEY, SENTINEL)
            .assert()
            .success();
        guard
    }

    /// The run file's text, if any.
    pub fn run_file(&self) -> Option<String> {
        std::fs::read_to_string(self.hub_root().join(".l3m-run/stack.toml")).ok()
    }

    /// Every pid the run file lists.
    pub fn run_pids(&self) -> Vec<u32> {
        let Some(text) = self.run_file() else {
            return Vec::new();
        };
        let value: toml::Table = toml::from_str(&text).unwrap();
        value
            .get("process")
            .and_then(|p| p.as_array())
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p.get("pid")?.as_integer())
                    .map(|p| p as u32)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How `user` (hubd, sequencer, cli, postman) connects to the stack's NATS server: the
    /// password `l3m up` generated for it.
    pub fn nats_user(&self, user: &str) -> l3m_wire::bus::NatsAuth {
        let text =
            std::fs::read_to_string(self.hub_root().join(".l3m-run/nats-users.toml")).unwrap();
        let users: toml::Table = toml::from_str(&text).unwrap();
        l3m_wire::bus::NatsAuth::UserPassword {
            user: user.to_owned(),
            password: users[user].as_str().unwrap().to_owned(),
        }
    }

    /// The stack's NATS URL, from the run file.
    pub fn nats_url(&self) -> String {
        let value: toml::Table = toml::from_str(&self.run_file().unwrap()).unwrap();
        value["nats"].as_str().unwrap().to_owned()
    }
}

/// Whether `pid` is a live (non-zombie) process.
pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Stops the stack of `home` on drop: `l3m down`, then SIGKILL for anything still alive.
pub struct StackGuard<'a> {
    pub home: &'a Home,
}

impl Drop for StackGuard<'_> {
    fn drop(&mut self) {
        let pids = self.home.run_pids();
        let _ = self.home.l3m(&["down"]).output();
        for pid in pids.into_iter().filter(|p| pid_alive(*p)) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Opens `agent`'s sequencer session (the host credential, the `sequencer` NATS user) and
/// runs `act` with it.
#[cfg(feature = "embedded")]
pub fn as_sequencer<T>(
    home: &Home,
    agent: &str,
    act: impl AsyncFnOnce(&l3m_wire::client::HubClient, &l3m_core::names::AgentName) -> T,
) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let bus: std::sync::Arc<dyn l3m_wire::bus::Bus> = std::sync::Arc::new(
            l3m_wire::bus::NatsBus::connect(&home.nats_url(), home.nats_user("sequencer"))
                .await
                .unwrap(),
        );
        let agent = l3m_core::names::AgentName::parse(agent).unwrap();
        let duty = l3m_core::duty::Duty::Sequencer {
            agent: agent.clone(),
        };
        let credential = hubd::init::local_key(&home.hub_root(), &duty).unwrap();
        let client = l3m_wire::client::HubClient::open(
            bus,
            l3m_wire::subjects::HubId::parse("local").unwrap(),
            &credential,
            duty,
        )
        .await
        .unwrap();
        act(&client, &agent).await
    })
}

/// Appends each batch of `batches` to `agent`'s Log after what it holds, as its sequencer
/// would (one append per batch; record `seq` is stamped 250 ms after `seq - 1`).
#[cfg(feature = "embedded")]
pub fn append_log(home: &Home, agent: &str, batches: Vec<Vec<l3m_core::log::RecordBody>>) {
    as_sequencer(home, agent, async |client, agent| {
        for bodies in batches {
            let read = client.read_log(agent, 0, 0).await.unwrap();
            let records: Vec<l3m_core::log::Record> = bodies
                .into_iter()
                .zip(read.len..)
                .map(|(body, seq)| l3m_core::log::Record {
                    seq,
                    at_ms: 1_000 + 250 * seq,
                    body,
                })
                .collect();
            client
                .append_log(agent, read.tip.as_deref(), &records)
                .await
                .unwrap();
        }
    });
}
