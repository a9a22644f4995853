//! One build site for a test: a real nats-server with deploy/nats.conf's users, the builder
//! and the runner serving under their own users, a package source in a container network the
//! test made, and a source root with a small project.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, NetworkCreateRequest};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use l3m_containers::test_support::{busybox_image, fresh_site};
use l3m_containers::{ArtifactStore, Driver, Identity};
use l3m_core::build::StageOwner;
use l3m_wire::bus::NatsBus;
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::reply::Reply;
use l3m_wire::subjects::{HubId, Operation, Service, Subjects};
use l3m_wire::test_support::NatsServer;
use tokio_util::sync::CancellationToken;

/// The deployed authorization file with its password references replaced.
fn nats_config() -> String {
    l3m_wire::test_support::deployed_nats_conf()
}

/// Connects to `server` as one of deploy/nats.conf's users.
pub async fn connect(server: &NatsServer, user: &str) -> NatsBus {
    l3m_wire::test_support::connect_as(server, user).await
}

/// The host name the fetch stage's grant lists.
pub const PKG_HOST: &str = "pkgs.test";

/// A running site.
pub struct Site {
    pub nats: NatsServer,
    pub client: NatsBus,
    pub subjects: Subjects,
    pub store: ArtifactStore,
    pub root: tempfile::TempDir,
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
        let nats = NatsServer::start_with(&nats_config()).unwrap();
        let hub = HubId::parse("main").unwrap();
        let subjects = Subjects::new(hub);
        let root = tempfile::tempdir().unwrap();
        // The project: source, lockfile, and the package source's files.
        let project = root.path().join("src/project");
        std::fs::create_dir_all(project.join("lock")).unwrap();
        std::fs::write(project.join("app.sh"), "#!/bin/sh\nGREETER=built\n").unwrap();
        std::fs::write(project.join("lock/deps.lock"), "greeting.sh\n").unwrap();
        let srv = root.path().join("srv");
        std::fs::create_dir_all(&srv).unwrap();
        std::fs::write(
            srv.join("greeting.sh"),
            "echo \"hello from a $GREETER artifact\"\n",
        )
        .unwrap();
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
        // The builder and the runner, each under its own NATS user.
        let builder_bus = connect(&nats, "builder").await;
        let builder_driver =
            Driver::connect(Identity::of_this_process(StageOwner::Builder, site.clone()))
                .await
                .unwrap();
        builder_driver.reap().await.unwrap();
        let config = builder::Config {
            source_root: root.path().join("src"),
            store: store.clone(),
            resolve: Arc::new(resolve),
        };
        builder::serve(
            &builder_bus,
            &subjects,
            builder_driver,
            config,
            shutdown.clone(),
        )
        .await
        .unwrap();
        let runner_bus = connect(&nats, "runner").await;
        let runner_driver =
            Driver::connect(Identity::of_this_process(StageOwner::Runner, site.clone()))
                .await
                .unwrap();
        runner_driver.reap().await.unwrap();
        runner::serve(
            &runner_bus,
            &subjects,
            runner_driver,
            store.clone(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let client = connect(&nats, "cli").await;
        Site {
            nats,
            client,
            subjects,
            store,
            root,
            pkg_ip,
            site,
            docker,
            pkg_container,
            pkg_network,
            shutdown,
        }
    }

    /// Sends `req` to `service`'s `op` as the cli user.
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
            &self.client,
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

    pub fn source(&self) -> PathBuf {
        self.root.path().join("src/project")
    }

    /// Stops the services and removes the package source (dropping does too).
    pub async fn close(self) {
        self.shutdown.cancel();
        remove_package_source(&self.docker, &self.pkg_container, &self.pkg_network).await;
    }
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
