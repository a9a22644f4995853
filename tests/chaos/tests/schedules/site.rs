//! One hub's site in containers, started through testcontainers on a network it creates:
//! NATS (deploy/nats.conf's users), hubd serving a hub folder bind-mounted from a temp dir,
//! and a sequencer host holding a credential for `crew/hand`'s subtree. Every container is
//! removed when the site is dropped (testcontainers' guards), failed test or not; the network
//! goes with the last of them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use hubd::init::local_key;
use hubd::store::HubOptions;
use l3m_core::duty::Duty;
use l3m_core::names::AgentName;
use l3m_wire::bus::{Bus, NatsAuth, NatsBus, NatsTls};
use l3m_wire::client::HubClient;
use l3m_wire::subjects::HubId;
use testcontainers::core::{IntoContainerPort as _, Mount, WaitFor};
use testcontainers::runners::AsyncRunner as _;
use testcontainers::{ContainerAsync, GenericImage, Image as _, ImageExt as _};

/// The hub's id on the bus.
pub const HUB_ID: &str = "north";

/// The NATS users of deploy/nats.conf whose passwords the containers get.
const USERS: [&str; 7] = [
    "hubd",
    "sequencer",
    "cli",
    "postman",
    "builder",
    "runner",
    "reviewer",
];

/// The password the site gives the NATS user `user`.
pub fn password(user: &str) -> String {
    format!("chaos-{user}-{}", std::process::id())
}

pub use l3m_wire::test_support::run_ok as run;

/// The images the site runs: `dev` (the services as built) or `fault` (hubd built with its
/// `fault-drop-acked-on-restart` switch, the rest as `dev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Images {
    Dev,
    Fault,
}

impl Images {
    fn tag(self) -> &'static str {
        match self {
            Images::Dev => "dev",
            Images::Fault => "fault",
        }
    }
}

/// The profile folder of this test's own build (target/debug for `cargo test`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_owned()
}

/// `cargo build --locked --quiet ARGS` into this test's target folder and profile.
fn cargo_build(args: &[&str]) {
    let profile = profile_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--locked", "--quiet"]).args(args);
    if profile.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    run(build.env("CARGO_TARGET_DIR", profile.parent().unwrap()));
}

/// deploy/compose/build-images over the binaries in `binaries`, tagging the images `tag`.
fn build_images_from(binaries: &Path, tag: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/compose/build-images");
    run(Command::new("bash")
        .arg(script)
        .env("L3M_IMAGE_BINARIES", binaries)
        .env("L3M_IMAGE_TAG", tag));
}

/// Builds the images `images` needs, once per test process, as postman/tests/compose.rs does:
/// the five service binaries of this test's own profile, put in images by build-images with
/// `L3M_IMAGE_BINARIES`. The `fault` images hold a hubd built with the fault switch, copied
/// out of the profile folder into a folder of their own before the plain hubd is built again
/// over it (so target/debug/hubd is the plain one whenever this returns).
pub fn build(images: Images) {
    static DEV: std::sync::Once = std::sync::Once::new();
    static FAULT: std::sync::Once = std::sync::Once::new();
    let services = ["hubd", "postman", "sequencer", "builder", "runner"];
    // The five with the fault switch, at once (a build of hubd alone would resolve features
    // apart from every other build and rebuild half the dependency tree).
    let all = |extra: &[&'static str]| {
        let mut args = Vec::new();
        for service in services {
            args.extend(["-p", service, "--bin", service]);
        }
        args.extend_from_slice(extra);
        cargo_build(&args);
    };
    // The plain services as every other test builds them (one invocation, one feature set).
    let plain = || {
        l3m_wire::test_support::build_service_binaries();
    };
    if images == Images::Fault {
        FAULT.call_once(|| {
            let started = std::time::Instant::now();
            let profile = profile_dir();
            let folder = profile.join("chaos-fault");
            std::fs::create_dir_all(&folder).unwrap();
            all(&["--features", "hubd/fault-drop-acked-on-restart"]);
            std::fs::copy(profile.join("hubd"), folder.join("hubd")).unwrap();
            plain();
            for service in &services[1..] {
                std::fs::copy(profile.join(service), folder.join(service)).unwrap();
            }
            build_images_from(&folder, "fault");
            eprintln!("fault images built in {:?}", started.elapsed());
        });
    }
    DEV.call_once(|| {
        let started = std::time::Instant::now();
        plain();
        build_images_from(&profile_dir(), "dev");
        eprintln!("dev images built in {:?}", started.elapsed());
    });
}

/// The services the nemesis may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    Hubd,
    Seqhost,
}

/// A running site: its containers (removed on drop), its network, its hub folder.
pub struct Site {
    /// The hub folder `north/` and the sequencer host's folder `seqhost/`.
    pub dir: tempfile::TempDir,
    /// The network the site's containers share (made by testcontainers, gone with them).
    pub network: String,
    // Dropped in reverse order of start: the clients first, NATS last.
    seqhost: Option<ContainerAsync<GenericImage>>,
    hubd: ContainerAsync<GenericImage>,
    nats: ContainerAsync<GenericImage>,
    /// hubd's command line (NATS's address in it).
    images: Images,
    /// The buses of this host's sessions: `cli` (the human's) and `sequencer`.
    cli: Arc<dyn Bus>,
    sequencer: Arc<dyn Bus>,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Site")
            .field("dir", &self.dir.path())
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

/// An image of the site's, `dev` or `fault`.
fn image(name: &str, images: Images) -> GenericImage {
    GenericImage::new(format!("l3m/{name}"), images.tag().to_owned())
}

/// The uid:gid of `path`'s owner: the containers run as the owner of the hub folder.
fn owner_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).unwrap();
    format!("{}:{}", meta.uid(), meta.gid())
}

impl Site {
    /// Makes the hub folder (`hubd init`'s work, through the library as compose.rs does),
    /// starts NATS and hubd on a fresh network and waits until hubd answers the human.
    pub async fn start(images: Images, name: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("north");
        drop(
            hubd::init::init_hub(
                &hub,
                HubOptions::default(),
                hubd::test_support::human(),
                crew_bound(),
                l3m_core::clock::now_ms(),
            )
            .unwrap(),
        );
        let network = format!("l3mchaos-{name}-{}", std::process::id());
        let mut nats = image("nats", images)
            .with_exposed_port(4222.tcp())
            .with_wait_for(WaitFor::message_on_stderr("Server is ready"))
            .with_network(&network);
        for user in USERS {
            nats = nats.with_env_var(
                format!("{}_NATS_PASSWORD", user.to_uppercase()),
                password(user),
            );
        }
        let nats = nats.start().await.unwrap();
        let nats_ip = nats.get_bridge_ip_address().await.unwrap();
        let nats_port = nats.get_host_port_ipv4(4222.tcp()).await.unwrap();
        let hubd = image("hubd", images)
            .with_cmd([
                "serve".to_owned(),
                "--hub".to_owned(),
                "/hub".to_owned(),
                "--hub-id".to_owned(),
                HUB_ID.to_owned(),
                "--nats".to_owned(),
                format!("nats://{nats_ip}:4222"),
                "--nats-user".to_owned(),
                "hubd".to_owned(),
                "--nats-password-env".to_owned(),
                "HUBD_NATS_PASSWORD".to_owned(),
            ])
            .with_env_var("HUBD_NATS_PASSWORD", password("hubd"))
            .with_user(owner_of(dir.path()))
            .with_mount(Mount::bind_mount(hub.display().to_string(), "/hub"))
            .with_network(&network)
            .start()
            .await
            .unwrap();
        let url = format!("nats://127.0.0.1:{nats_port}");
        let cli = bus(&url, "cli").await;
        let sequencer = bus(&url, "sequencer").await;
        let site = Site {
            dir,
            network,
            seqhost: None,
            hubd,
            nats,
            images,
            cli,
            sequencer,
        };
        drop(site.client(human()).await);
        site
    }

    /// The hub folder.
    pub fn hub(&self) -> PathBuf {
        self.dir.path().join("north")
    }

    /// A session of `duty` (the human's over `cli`, a sequencer's over `sequencer`), retried
    /// for up to a minute while hubd is away (restarting, paused or cut off).
    pub async fn client(&self, duty: Duty) -> HubClient {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let bus = match duty {
            Duty::Human { .. } => &self.cli,
            _ => &self.sequencer,
        };
        let key = local_key(&self.hub(), &duty).unwrap();
        loop {
            let open = HubClient::open(
                Arc::clone(bus),
                HubId::parse(HUB_ID).unwrap(),
                &key,
                duty.clone(),
            );
            match tokio::time::timeout(Duration::from_secs(5), open).await {
                Ok(Ok(client)) => return client,
                _ if tokio::time::Instant::now() > deadline => {
                    panic!("hubd did not answer {duty:?} within a minute")
                }
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }

    /// Spawns `crew` (by the human) and `crew/hand` (by crew's sequencer session), makes the
    /// sequencer host's folder (a credential for hand's subtree, leases of 2 s, a scripted
    /// model) and starts the host, as compose.rs's `host_folder` does.
    pub async fn start_seqhost(&mut self) {
        let human = self.client(human()).await;
        human
            .spawn(spawn_request("crew", crew_grant(), 200))
            .await
            .unwrap();
        let crew = self
            .client(Duty::Sequencer {
                agent: agent("crew"),
            })
            .await;
        let grant = toml::from_str(CREW_GRANT).unwrap();
        crew.spawn(spawn_request("crew/hand", grant, 100))
            .await
            .unwrap();
        let host = l3m_wire::test_support::sequencer_host_folder(
            self.dir.path(),
            &human,
            "seqhost",
            &agent("crew/hand"),
            &hand_script(),
        )
        .await;
        let nats_ip = self.nats.get_bridge_ip_address().await.unwrap();
        let seqhost = image("sequencer", self.images)
            .with_cmd([
                "supervise".to_owned(),
                "--hub".to_owned(),
                "/host".to_owned(),
                "--hub-id".to_owned(),
                HUB_ID.to_owned(),
                "--nats".to_owned(),
                format!("nats://{nats_ip}:4222"),
                "--nats-user".to_owned(),
                "sequencer".to_owned(),
                "--nats-password-env".to_owned(),
                "SEQUENCER_NATS_PASSWORD".to_owned(),
                "--credential".to_owned(),
                "/host/host.key".to_owned(),
                "--forest".to_owned(),
                "/host/forest".to_owned(),
                "--config".to_owned(),
                "/host/l3m.toml".to_owned(),
            ])
            .with_env_var("SEQUENCER_NATS_PASSWORD", password("sequencer"))
            .with_user(owner_of(self.dir.path()))
            .with_mount(Mount::bind_mount(host.display().to_string(), "/host"))
            .with_network(&self.network)
            .start()
            .await
            .unwrap();
        self.seqhost = Some(seqhost);
    }

    /// The container of `service`.
    pub fn container(&self, service: Service) -> &ContainerAsync<GenericImage> {
        match service {
            Service::Hubd => &self.hubd,
            Service::Seqhost => self.seqhost.as_ref().expect("the sequencer host runs"),
        }
    }

    /// Stops hubd the way an operator does (SIGTERM, then its WAL is in hub.git) and waits
    /// until it has exited, so plain git reads everything it acknowledged.
    pub async fn stop_hubd(&self) {
        if let Some(seqhost) = &self.seqhost {
            seqhost.stop().await.unwrap();
        }
        self.hubd.stop().await.unwrap();
    }

    /// The last lines of each container's log, for a failing test's output.
    fn logs(&self) -> String {
        let mut all = String::new();
        let ids = [Some(&self.nats), Some(&self.hubd), self.seqhost.as_ref()];
        for container in ids.into_iter().flatten() {
            let out = Command::new("docker")
                .args(["logs", "--tail", "40", container.id()])
                .output();
            if let Ok(out) = out {
                all.push_str(&format!(
                    "--- {} ({})\n{}{}",
                    container.id(),
                    container.image().name(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        all
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        // The containers themselves are removed by their own guards, after this.
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
            eprintln!("the site's folder was {}", self.dir.path().display());
        }
    }
}

/// The NATS bus at `url` as `user`, retried for up to a minute.
async fn bus(url: &str, user: &str) -> Arc<dyn Bus> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let auth = NatsAuth::UserPassword {
            user: user.to_owned(),
            password: password(user),
        };
        match NatsBus::connect_with(url, auth, &NatsTls::Plain).await {
            Ok(bus) => return Arc::new(bus),
            Err(e) if tokio::time::Instant::now() > deadline => {
                panic!("NATS at {url} did not take {user}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The human's duty.
pub fn human() -> Duty {
    Duty::Human {
        human: hubd::test_support::human(),
    }
}

/// `s` as an agent's name.
pub fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

/// The grant of the agents here (compose.rs's): their workspace, their branches, mail to crew.
const CREW_GRANT: &str = r#"
files = ["workspace"]
git-read = ["refs/heads/l3m/"]
git-write = ["refs/heads/l3m/"]
mail = ["agent:crew"]
"#;

/// crew's grant: the agents' and `spawn`, so it may spawn hand with it.
fn crew_grant() -> l3m_core::grant::Grant {
    toml::from_str(&format!("{CREW_GRANT}spawn = \"persist\"\n")).unwrap()
}

/// The human's bound: crew's grant.
fn crew_bound() -> l3m_core::grant::Grant {
    crew_grant()
}

/// A spawn of `child` under `grant` with a loan of `calls` model calls and as many wakes.
fn spawn_request(
    child: &str,
    grant: l3m_core::grant::Grant,
    calls: u64,
) -> l3m_core::grant::SpawnRequest {
    l3m_core::grant::SpawnRequest {
        loan: l3m_core::budget::Fuel {
            model_calls: calls,
            bytes: calls * 100_000,
            wakes: calls,
        },
        ..l3m_core::grant::SpawnRequest::new(agent(child), grant)
    }
}

/// hand's scripted model: each wake, one turn that notes its mail and ends.
fn hand_script() -> String {
    "[[turn]]\ntext = \"Noted.\"\n".repeat(100)
}
