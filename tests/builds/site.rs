//! One build site for a test: a real nats-server with deploy/nats.conf's users, a real hubd
//! with two agents (`maker` may build its workspace and fetch from the package host; `player`
//! may run), the builder and the runner serving under their own users, a package source in a
//! container network the test made, and a small project in maker's workspace.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, NetworkCreateRequest};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use hubd::test_support::TestHub;
use l3m_containers::service::Pins;
use l3m_containers::test_support::{busybox_image, fresh_site};
use l3m_containers::{ArtifactStore, Driver, Identity};
use l3m_core::build::{ArtifactDigest, Cover, StageOwner};
use l3m_core::clock::SystemClock;
use l3m_core::duty::Duty;
use l3m_core::grant::{AcrPath, Grant, HostPattern, SpawnRequest};
use l3m_core::names::AgentName;
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::build::{BuildRequest, bundle};
use l3m_wire::bus::{Bus, NatsBus};
use l3m_wire::client::HubClient;
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::hubd::build_voucher::BuildVouched;
use l3m_wire::reply::{RemoteError, Reply};
use l3m_wire::subjects::{Operation, Service, Subjects};
use l3m_wire::test_support::NatsServer;
use tokio_util::sync::CancellationToken;

/// Connects to `server` as one of deploy/nats.conf's users.
pub async fn connect(server: &NatsServer, user: &str) -> NatsBus {
    l3m_wire::test_support::connect_as(server, user).await
}

pub use l3m_containers::test_support::{GREETING_SH, PKG_HOST};

/// The project's folder in maker's ACR, as requests and vouchers name it.
pub const PROJECT: &str = "workspace/project";

/// The grant of the agent that builds: its workspace, the package host, `build`.
pub fn maker_grant() -> Grant {
    Grant {
        files: BTreeSet::from([AcrPath::parse("workspace").unwrap()]),
        net: BTreeSet::from([HostPattern::parse(PKG_HOST).unwrap()]),
        build: true,
        ..Grant::default()
    }
}

/// A running site.
pub struct Site {
    pub hub: TestHub,
    /// maker's sequencer's session: asks for build vouchers.
    pub maker: HubClient,
    /// player's sequencer's session: asks for run vouchers.
    pub player: HubClient,
    /// A second builder like maker, with its own workspace.
    pub other: HubClient,
    pub subjects: Subjects,
    pub store: ArtifactStore,
    /// Holds the package source's files and the artifact cache for as long as the site runs.
    _root: tempfile::TempDir,
    pub pkg_ip: String,
    pub site: String,
    docker: Docker,
    pkg_container: String,
    pkg_network: String,
    shutdown: CancellationToken,
}

impl Site {
    pub async fn start(test: &str) -> Site {
        let image = busybox_image();
        let site = fresh_site(test);
        let root = tempfile::tempdir().unwrap();
        let hub = TestHub::start_as_users(Grant {
            run: true,
            ..maker_grant()
        })
        .await;
        let subjects = hub.subjects.clone();
        let human = hub.human_client().await;
        for (name, grant) in [
            ("maker", maker_grant()),
            (
                "player",
                Grant {
                    run: true,
                    ..Grant::default()
                },
            ),
            ("other", maker_grant()),
        ] {
            human
                .spawn(SpawnRequest::new(AgentName::parse(name).unwrap(), grant))
                .await
                .unwrap();
        }
        let sequencer = |name: &str| Duty::Sequencer {
            agent: AgentName::parse(name).unwrap(),
        };
        let maker = hub.client(sequencer("maker")).await;
        let player = hub.client(sequencer("player")).await;
        let other = hub.client(sequencer("other")).await;
        // Each ACR checked out as its sequencer's boot would, in the hub host's forest.
        for (name, client) in [("maker", &maker), ("player", &player), ("other", &other)] {
            let agent = AgentName::parse(name).unwrap();
            sequencer::acr::Acr::at(&hub.root().join("forest"), &agent)
                .ready(client)
                .await
                .unwrap();
        }
        // The project, in maker's workspace: source, lockfile, and the package source's files.
        let project = hub.acr(&AgentName::parse("maker").unwrap()).join(PROJECT);
        std::fs::create_dir_all(project.join("lock")).unwrap();
        std::fs::write(project.join("app.sh"), "#!/bin/sh\nGREETER=built\n").unwrap();
        std::fs::write(project.join("lock/deps.lock"), "greeting.sh\n").unwrap();
        let srv = root.path().join("srv");
        std::fs::create_dir_all(&srv).unwrap();
        std::fs::write(srv.join("greeting.sh"), GREETING_SH).unwrap();
        // The package source: busybox httpd in a network this test made.
        let docker = Docker::connect_with_local_defaults()
            .unwrap()
            .negotiate_version()
            .await
            .unwrap();
        let pkg_network = format!("l3m-test-pkgs-{site}");
        docker
            .create_network(NetworkCreateRequest {
                name: pkg_network.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let body = ContainerCreateBody {
            image: Some(image),
            cmd: Some(vec![
                "httpd".into(),
                "-f".into(),
                "-p".into(),
                "8080".into(),
                "-h".into(),
                "/srv".into(),
            ]),
            host_config: Some(HostConfig {
                network_mode: Some(pkg_network.clone()),
                mounts: Some(vec![Mount {
                    target: Some("/srv".into()),
                    source: Some(srv.to_str().unwrap().into()),
                    typ: Some(MountType::BIND),
                    read_only: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pkg_container = docker
            .create_container(Some(CreateContainerOptionsBuilder::default().build()), body)
            .await
            .unwrap()
            .id;
        docker.start_container(&pkg_container, None).await.unwrap();
        let info = docker
            .inspect_container(&pkg_container, None)
            .await
            .unwrap();
        let pkg_ip = info.network_settings.unwrap().networks.unwrap()[&pkg_network]
            .ip_address
            .clone()
            .unwrap();
        let resolve: HashMap<String, SocketAddr> = HashMap::from([(
            PKG_HOST.to_owned(),
            format!("{pkg_ip}:8080").parse().unwrap(),
        )]);
        let store = ArtifactStore::open(root.path().join("cache")).unwrap();
        let shutdown = CancellationToken::new();
        // The builder and the runner, each under its own NATS user, each reading hubd's build
        // policy (the voucher key) at start as their binaries do.
        let gate = |bus: &Arc<dyn Bus>| {
            Arc::new(VoucherGate::new(
                Arc::clone(bus),
                subjects.clone(),
                Arc::new(SystemClock),
            ))
        };
        let builder_bus: Arc<dyn Bus> = Arc::new(connect(&hub.nats, "builder").await);
        let builder_gate = gate(&builder_bus);
        builder_gate.policy().await.unwrap();
        let builder_driver =
            Driver::connect(Identity::of_this_process(StageOwner::Builder, site.clone()))
                .await
                .unwrap();
        builder_driver.reap().await.unwrap();
        let config = builder::Config {
            store: store.clone(),
            resolve: Arc::new(resolve),
        };
        // Each request re-reads the settings' pins (none unless a test pins some).
        let builder_pins = Pins::new(Vec::new(), Arc::clone(&builder_gate));
        builder::serve(
            builder_bus.as_ref(),
            &subjects,
            builder_driver,
            config,
            builder_gate,
            Some(builder_pins),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let runner_bus: Arc<dyn Bus> = Arc::new(connect(&hub.nats, "runner").await);
        let runner_gate = gate(&runner_bus);
        runner_gate.policy().await.unwrap();
        let runner_driver =
            Driver::connect(Identity::of_this_process(StageOwner::Runner, site.clone()))
                .await
                .unwrap();
        runner_driver.reap().await.unwrap();
        let runner_pins = Pins::new(Vec::new(), Arc::clone(&runner_gate));
        runner::serve(
            runner_bus.as_ref(),
            &subjects,
            runner_driver,
            store.clone(),
            runner_gate,
            Some(runner_pins),
            shutdown.clone(),
        )
        .await
        .unwrap();
        Site {
            hub,
            maker,
            player,
            other,
            subjects,
            store,
            _root: root,
            pkg_ip,
            site,
            docker,
            pkg_container,
            pkg_network,
            shutdown,
        }
    }

    /// `req` with maker's voucher for exactly it (its source, lockfile and fetch hosts), its
    /// source and lockfile folders uploaded under that voucher as maker's sequencer sends them.
    pub async fn vouched_build(&self, mut req: BuildRequest) -> BuildRequest {
        let vouched = self.maker.vouch_build(build_cover(&req)).await.unwrap();
        let acr = self.hub.acr(&AgentName::parse("maker").unwrap());
        let source = bundle::under_acr(&acr, &req.source, "source").unwrap();
        let lockfile =
            (req.lockfile.as_deref()).map(|l| bundle::under_acr(&acr, l, "lockfile").unwrap());
        let bytes = bundle::pack(&source, lockfile.as_deref()).unwrap();
        self.upload(&vouched, &bytes).await.unwrap();
        req.vouched = Some(vouched);
        req
    }

    /// Uploads `bytes` as a build's source under `vouched`, as the sequencer user.
    pub async fn upload(&self, vouched: &BuildVouched, bytes: &[u8]) -> Result<(), RemoteError> {
        l3m_wire::build::upload(self.hub.bus.as_ref(), &self.subjects, vouched, bytes)
            .await
            .unwrap()
    }

    /// player's voucher for a run of `artifact`.
    pub async fn run_voucher(&self, artifact: &ArtifactDigest) -> BuildVouched {
        let cover = Cover::Run {
            artifact: artifact.clone(),
        };
        self.player.vouch_build(cover).await.unwrap()
    }

    /// The NATS server.
    pub fn nats(&self) -> &NatsServer {
        &self.hub.nats
    }

    /// Sends `req` to `service`'s `op` as the sequencer user, as an agent's tool would.
    pub async fn call<Req: Message, Resp: Message>(
        &self,
        service: Service,
        op: &str,
        req: &Req,
    ) -> Reply<Resp> {
        let subject = self
            .subjects
            .request(service, &Operation::parse(op).unwrap());
        let limits = Limits::default();
        l3m_wire::typed::call(
            self.hub.bus.as_ref(),
            &subject,
            req,
            Duration::from_secs(120),
            &limits,
        )
        .await
        .unwrap()
    }

    /// Containers and networks still labelled with this site.
    pub async fn leftovers(&self) -> usize {
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{}={}", l3m_containers::LABEL_SITE, self.site)],
        )]);
        let c = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let n = bollard::query_parameters::ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        self.docker.list_containers(Some(c)).await.unwrap().len()
            + self.docker.list_networks(Some(n)).await.unwrap().len()
    }

    /// The project's folder in maker's ACR.
    pub fn source(&self) -> PathBuf {
        self.hub
            .acr(&AgentName::parse("maker").unwrap())
            .join(PROJECT)
    }

    /// Stops the services and removes the package source (dropping does too).
    pub async fn close(self) {
        self.shutdown.cancel();
        remove_package_source(&self.docker, &self.pkg_container, &self.pkg_network).await;
    }
}

/// The cover a build request asks for: its source, lockfile and every host its stages reach.
pub fn build_cover(req: &BuildRequest) -> Cover {
    Cover::of_build(
        AcrPath::parse(&req.source).unwrap(),
        req.lockfile.as_deref().map(|l| AcrPath::parse(l).unwrap()),
        &req.plan,
    )
}

async fn remove_package_source(docker: &Docker, container: &str, network: &str) {
    let rm = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(container, Some(rm)).await;
    let _ = docker.remove_network(network).await;
}

impl Drop for Site {
    /// A test that panics before `close` still removes its package source, on a thread of its
    /// own (the test's runtime may be gone); after `close` there is nothing left to remove.
    fn drop(&mut self) {
        self.shutdown.cancel();
        let (docker, container, network) = (
            self.docker.clone(),
            self.pkg_container.clone(),
            self.pkg_network.clone(),
        );
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(remove_package_source(&docker, &container, &network));
        })
        .join();
    }
}
