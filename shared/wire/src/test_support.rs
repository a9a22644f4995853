//! A real nats-server for tests, here and in other crates (feature `test-support`).
//!
//! [`NatsServer::start`] launches the `nats-server` binary on a free loopback port chosen by the
//! server itself (`listen: 127.0.0.1:-1`, read back from its ports file, so there is no race
//! for the port), with a temporary configuration, waits until it accepts connections, and kills
//! it when dropped. [`NatsServer::start_with`] adds configuration text, e.g. an `authorization`
//! block with users and permissions.
//!
//! [`deployed_nats_conf`] is deploy/nats.conf with test passwords, so a test's server enforces
//! the deployed permissions, and [`connect_as`] connects as one of its users.
//!
//! [`VoucherIssuer`] plays hubd's part in build and run vouchers for a builder or runner under
//! test without a hub.
//!
//! [`bench_dir`] gives a benchmark a working folder that earlier runs' deletions do not slow.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// How long a server may take to become ready before start gives up.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// How often readiness is polled while waiting.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Where `nats-server` is looked for after `PATH` (Debian installs it in `/usr/sbin`).
const FALLBACK_LOCATIONS: &[&str] = &["/usr/sbin/nats-server", "/usr/local/bin/nats-server"];

/// Why a test nats-server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum NatsServerError {
    /// No `nats-server` binary was found.
    #[error(
        "nats-server is not installed (looked on PATH and in {searched:?}); \
         install it: apt-get install -y nats-server"
    )]
    NotInstalled {
        /// The fallback locations that were tried after `PATH`.
        searched: Vec<PathBuf>,
    },
    /// A file or process operation failed.
    #[error("could not {what} ({path}): {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or binary involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server exited before it became ready.
    #[error("nats-server exited with {status} before it was ready; its log:\n{log}")]
    Exited {
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it wrote.
        log: String,
    },
    /// The server did not become ready in time.
    #[error("nats-server was not ready within {waited:?}; its log:\n{log}")]
    NotReady {
        /// How long start waited.
        waited: Duration,
        /// What it wrote.
        log: String,
    },
}

/// A running nats-server, killed on drop.
#[derive(Debug)]
pub struct NatsServer {
    /// The server process.
    child: Child,
    /// `nats://127.0.0.1:<port>`.
    url: String,
    /// Holds the configuration, ports file and log; removed with the server.
    dir: tempfile::TempDir,
}

/// The JSON nats-server writes to its ports file once it listens.
#[derive(Deserialize)]
struct PortsFile {
    nats: Vec<String>,
}

impl NatsServer {
    /// Starts a server with no authorization.
    pub fn start() -> Result<Self, NatsServerError> {
        Self::start_with("")
    }

    /// Starts a server whose configuration is the defaults plus `extra_config` (nats-server's
    /// config syntax, e.g. `authorization { users = [ ... ] }`).
    pub fn start_with(extra_config: &str) -> Result<Self, NatsServerError> {
        let binary = find_binary()?;
        let dir = tempfile::tempdir().map_err(|source| NatsServerError::Io {
            what: "create a temporary directory",
            path: std::env::temp_dir(),
            source,
        })?;
        let config_path = dir.path().join("nats.conf");
        let config = format!(
            "listen: \"127.0.0.1:-1\"\nports_file_dir: {dir:?}\n{extra_config}\n",
            dir = dir.path().display().to_string()
        );
        std::fs::write(&config_path, config).map_err(|source| NatsServerError::Io {
            what: "write the server configuration",
            path: config_path.clone(),
            source,
        })?;
        let log_path = dir.path().join("nats.log");
        let log = std::fs::File::create(&log_path).map_err(|source| NatsServerError::Io {
            what: "create the server log",
            path: log_path.clone(),
            source,
        })?;
        let child = Command::new(&binary)
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|source| NatsServerError::Io {
                what: "start nats-server",
                path: binary.clone(),
                source,
            })?;
        let mut server = NatsServer {
            child,
            url: String::new(),
            dir,
        };
        server.url = server.wait_until_ready()?;
        Ok(server)
    }

    /// The URL clients connect to, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Waits for the ports file, then for the port to accept a connection.
    fn wait_until_ready(&mut self) -> Result<String, NatsServerError> {
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .try_wait()
                .map_err(|source| NatsServerError::Io {
                    what: "check on nats-server",
                    path: self.dir.path().to_owned(),
                    source,
                })?
            {
                return Err(NatsServerError::Exited {
                    status,
                    log: self.log(),
                });
            }
            if let Some(url) = self.listening_url() {
                let address = url.trim_start_matches("nats://");
                if TcpStream::connect(address).is_ok() {
                    return Ok(url);
                }
            }
            if started.elapsed() > READY_WITHIN {
                return Err(NatsServerError::NotReady {
                    waited: READY_WITHIN,
                    log: self.log(),
                });
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// The client URL from the ports file (`<executable>_<pid>.ports`), once the server has
    /// written it; `None` until then, including while it is half written.
    fn listening_url(&self) -> Option<String> {
        let suffix = format!("_{}.ports", self.child.id());
        let path = std::fs::read_dir(self.dir.path())
            .ok()?
            .filter_map(|entry| Some(entry.ok()?.path()))
            .find(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.ends_with(&suffix))
            })?;
        let ports: PortsFile = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        ports.nats.into_iter().next()
    }

    /// What the server has logged so far, for error messages.
    fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.dir.path().join("nats.log")) {
            // A log that cannot be read leaves the message without it, nothing worse.
            let _ = file.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        // Already-exited servers make kill fail; either way the process is gone after wait.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Finds `nats-server` on `PATH`, then in the fallback locations.
fn find_binary() -> Result<PathBuf, NatsServerError> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .map(|dir| dir.join("nats-server"))
        .chain(FALLBACK_LOCATIONS.iter().map(PathBuf::from))
        .find(|p| is_file(p))
        .ok_or_else(|| NatsServerError::NotInstalled {
            searched: FALLBACK_LOCATIONS.iter().map(PathBuf::from).collect(),
        })
}

fn is_file(path: &Path) -> bool {
    path.metadata().map(|m| m.is_file()).unwrap_or(false)
}

/// Waits until the server reports an error containing `needle` on a
/// [`NatsBus::server_errors`](crate::bus::NatsBus::server_errors) channel, and returns it.
///
/// NATS reports permission violations asynchronously, so a test that checks a refusal waits for
/// the report instead of sleeping. `None` if `patience` runs out or the channel closes first.
pub async fn server_reported(
    errors: &mut tokio::sync::broadcast::Receiver<String>,
    needle: &str,
    patience: Duration,
) -> Option<String> {
    use tokio::sync::broadcast::error::RecvError;
    let wait = async {
        loop {
            match errors.recv().await {
                Ok(text) if text.contains(needle) => return Some(text),
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    };
    tokio::time::timeout(patience, wait).await.ok().flatten()
}

/// A fresh temporary folder for a benchmark under `base`, where the filesystem can put it away
/// from recently deleted files.
///
/// ext4 without a journal, creating a file, skips every inode of the block group freed in the
/// last 5 s, or 305 s while that part of the inode table is not yet written back; in a group
/// where an earlier run just deleted its folder, creating a file was measured at 600 µs
/// against 60 µs, for minutes — a benchmark measured the previous one's cleanup. So the folder
/// is made under `base/l3m-bench`, which gets `FS_TOPDIR_FL` (`chattr +T`): ext4 then places
/// each new folder in it as it places those at the root of the filesystem, in a group with
/// many free inodes. Best effort: where the flag is refused nothing else changes.
pub fn bench_dir(base: &Path) -> std::io::Result<tempfile::TempDir> {
    let parent = base.join("l3m-bench");
    std::fs::create_dir_all(&parent)?;
    let spread = std::fs::File::open(&parent).and_then(|dir| {
        let flags = rustix::fs::ioctl_getflags(&dir)?;
        Ok(rustix::fs::ioctl_setflags(
            &dir,
            flags | rustix::fs::IFlags::TOPDIR,
        )?)
    });
    if let Err(error) = spread {
        tracing::debug!(%error, "the bench folder's parent could not be marked top-level");
    }
    tempfile::tempdir_in(&parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_says_how_to_install_it() {
        let err = NatsServerError::NotInstalled {
            searched: FALLBACK_LOCATIONS.iter().map(PathBuf::from).collect(),
        };
        assert!(
            err.to_string().contains("apt-get install -y nats-server"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_config_is_reported_with_the_servers_log() {
        let err = NatsServer::start_with("this is { not config").unwrap_err();
        assert!(matches!(err, NatsServerError::Exited { .. }), "{err}");
        assert!(
            !err.to_string().ends_with("its log:\n"),
            "the log is included: {err}"
        );
    }

    #[test]
    fn the_server_is_gone_after_drop() {
        let server = NatsServer::start().unwrap();
        let address = server.url().trim_start_matches("nats://").to_owned();
        assert!(TcpStream::connect(&address).is_ok());
        drop(server);
        assert!(TcpStream::connect(&address).is_err());
    }
}

/// deploy/nats.conf (the site's users and permissions) with every `$<USER>_NATS_PASSWORD`
/// replaced by `<user>-secret`: whatever users the file names, a test's server enforces the
/// deployed permissions (start it with [`NatsServer::start_with`]).
pub fn deployed_nats_conf() -> String {
    const SUFFIX: &str = "_NATS_PASSWORD";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/nats.conf");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(after.len());
        match after[..name_len].strip_suffix(SUFFIX) {
            Some(user) if !user.is_empty() => {
                out.push_str(&format!("{}-secret", user.to_lowercase()));
                rest = &after[name_len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Connects to `server` as `user` of [`deployed_nats_conf`], with its test password.
pub async fn connect_as(server: &NatsServer, user: &str) -> crate::bus::NatsBus {
    let auth = crate::bus::NatsAuth::UserPassword {
        user: user.to_owned(),
        password: format!("{user}-secret"),
    };
    crate::bus::NatsBus::connect(server.url(), auth)
        .await
        .unwrap_or_else(|e| panic!("connect as {user}: {e}"))
}

/// hubd's half of build vouchers without a hub, for tests and benchmarks of the builder and the
/// runner that need no grant: a signing key whose public half it serves on
/// `hubd.read-build-policy`, and the vouchers it signs when asked. [`VoucherIssuer::rotate`]
/// changes the key, as a hubd restart does.
#[derive(Debug)]
pub struct VoucherIssuer {
    signer: std::sync::Mutex<crate::credential::LifetimeSigner>,
    next: std::sync::atomic::AtomicU64,
}

impl VoucherIssuer {
    /// An issuer with a fresh key, serving its policy on `bus` for `subjects`' hub until the
    /// bus closes.
    pub async fn serve(
        bus: &dyn crate::bus::Bus,
        subjects: &crate::subjects::Subjects,
    ) -> std::sync::Arc<VoucherIssuer> {
        use crate::hubd::build_voucher::{BuildPolicy, ReadBuildPolicy};
        use crate::typed::{ServeOptions, TypedRequest, TypedServer};
        let issuer = std::sync::Arc::new(VoucherIssuer {
            signer: std::sync::Mutex::new(
                crate::credential::LifetimeSigner::generate()
                    .unwrap_or_else(|e| panic!("a voucher key: {e}")),
            ),
            next: std::sync::atomic::AtomicU64::new(0),
        });
        let subject = crate::hubd::Op::ReadBuildPolicy.subject(subjects);
        let server = TypedServer::<ReadBuildPolicy, BuildPolicy>::bind(
            bus,
            &subject,
            ServeOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("serving the build policy: {e}"));
        let serving = std::sync::Arc::clone(&issuer);
        tokio::spawn(server.run(
            move |_: TypedRequest<ReadBuildPolicy>| {
                let voucher_key = serving
                    .signer
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .public();
                async move {
                    Ok(BuildPolicy {
                        voucher_key,
                        images: vec![],
                    })
                }
            },
            tokio_util::sync::CancellationToken::new(),
        ));
        issuer
    }

    /// Signs a voucher for `cover` to `agent`, good until `expires_ms`, with a nonce of its own.
    pub fn vouch(
        &self,
        agent: &str,
        cover: l3m_core::build::Cover,
        expires_ms: u64,
    ) -> crate::hubd::build_voucher::BuildVouched {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let voucher = crate::hubd::build_voucher::BuildVoucher {
            agent: agent.into(),
            by: format!("sequencer:{agent}"),
            cover,
            expires_ms,
            nonce: format!("{n:016x}"),
        };
        let signature = self
            .signer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .sign(&voucher.statement());
        crate::hubd::build_voucher::BuildVouched { voucher, signature }
    }

    /// Changes the key, as a restarted hubd does.
    pub fn rotate(&self) {
        *self
            .signer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            crate::credential::LifetimeSigner::generate()
                .unwrap_or_else(|e| panic!("a voucher key: {e}"));
    }
}

#[cfg(test)]
mod deployed_tests {
    use super::*;

    #[test]
    fn every_password_reference_of_the_deployed_file_is_replaced() {
        let text = deployed_nats_conf();
        assert!(!text.contains("_NATS_PASSWORD"), "{text}");
        for user in ["hubd", "sequencer", "cli", "postman"] {
            assert!(text.contains(&format!("password: {user}-secret")), "{user}");
        }
    }
}

/// A number from the environment variable `name`, or `default` when it is unset or not a
/// number: how a test or benchmark is made longer than CI runs it (`L3M_BENCH_AGENTS=10000`).
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The binaries l3m ships besides the CLI, as a test that starts them needs them.
pub const SERVICE_BINARIES: [(&str, &str); 7] = [
    ("hubd", "hubd"),
    ("sequencer", "sequencer"),
    ("postman", "postman"),
    ("builder", "builder"),
    ("runner", "runner"),
    ("reviewer", "reviewer"),
    ("l3m-programs", "l3m-program"),
];

/// Builds every binary of [`SERVICE_BINARIES`] into the target folder and profile of the
/// calling test (beside its own executable's `deps/`), in ONE cargo invocation, and returns that
/// profile folder. One invocation means one resolution of features: tests that built a few of
/// them each in their own way made cargo compile the services two or three times over.
///
/// # Panics
/// When the build fails (with cargo's errors), as a test's setup does.
#[allow(
    clippy::expect_used,
    reason = "a test's setup: a failed build fails the test"
)]
pub fn build_service_binaries() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test runs from <target>/<profile>/deps")
        .to_owned();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "--locked", "--quiet"]);
    for (package, bin) in SERVICE_BINARIES {
        build.args(["-p", package, "--bin", bin]);
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        build.env("CARGO_TARGET_DIR", target);
    }
    let out = build.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build of the services failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir
}

/// A small seeded random source (xorshift) for tests whose random choices must be replayable:
/// the seed is printed, and taken from `L3M_SEED` when set.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The seed a run starts from: `L3M_SEED`, else the process id and the clock; printed, so a
    /// failing run can be replayed.
    pub fn seed_from_env() -> u64 {
        let seed = std::env::var("L3M_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                u64::from(std::process::id()) ^ (now.as_nanos() as u64)
            });
        eprintln!("random seed: L3M_SEED={seed}");
        seed
    }

    /// Seeded from [`Rng::seed_from_env`].
    pub fn from_env() -> Rng {
        Rng::seeded(Rng::seed_from_env())
    }

    /// Seeded with `seed` (a second source for a concurrent task, say).
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next number.
    #[allow(clippy::should_implement_trait, reason = "an Rng, not an iterator")]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration of `0..ms` milliseconds.
    pub fn millis(&mut self, ms: u64) -> std::time::Duration {
        std::time::Duration::from_millis(self.below(ms.max(1)))
    }
}

/// Runs `cmd`, asserting it succeeds (naming it, its output and its stderr when not); returns
/// its stdout.
///
/// # Panics
/// When the command cannot start or fails, as a test's step does.
#[allow(
    clippy::expect_used,
    reason = "a test's step: a failure fails the test"
)]
pub fn run_ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the command's output is UTF-8")
}

/// `docker ARGS`, without blocking the runtime (so a workload goes on meanwhile); asserts it
/// succeeds.
///
/// # Panics
/// When docker cannot start or fails.
pub async fn docker(args: &[&str]) {
    let out = tokio::process::Command::new("docker")
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "docker {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `dir/name`, a sequencer host's folder as an operator would: a host credential for the
/// subtree of `root` (issued by `human`, valid for a day, its id derived from `name` so each
/// host of a fresh hub has its own), written as `host.key`, and an `l3m.toml` whose one model is
/// the scripted provider reading `script.toml` (written from `script`). Returns the folder.
///
/// # Panics
/// When the folder cannot be written or hubd refuses the credential, as a test's setup does.
#[allow(
    clippy::expect_used,
    reason = "a test's setup: a failure fails the test"
)]
pub async fn sequencer_host_folder(
    dir: &Path,
    human: &crate::client::HubClient,
    name: &str,
    root: &l3m_core::names::AgentName,
    script: &str,
) -> PathBuf {
    let host = dir.join(name);
    std::fs::create_dir_all(&host).expect("the host's folder");
    // One id per host's name (FNV-1a of it): each test's hub is fresh.
    let id = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let credential = crate::credential::KeyFile::generate(
        l3m_core::credential::CredentialId::parse(&format!("c-{id:016x}")).expect("an id"),
        l3m_core::credential::Scope::Host {
            subtree: Some(root.clone()),
        },
    )
    .expect("a key pair");
    let day = 24 * 3600 * 1000;
    human
        .issue_credential(&credential, l3m_core::clock::now_ms() + day, name)
        .await
        .expect("hubd issues the host's credential");
    credential
        .write(&host.join("host.key"))
        .expect("the host's key file");
    std::fs::write(
        host.join("l3m.toml"),
        "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\n\
         script = \"script.toml\"\n[sequencer]\nidle_exit_secs = 2\nlease_ttl_secs = 2\n",
    )
    .expect("the host's l3m.toml");
    std::fs::write(host.join("script.toml"), script).expect("the host's script");
    host
}
