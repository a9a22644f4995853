//! A builder process killed mid-stage leaves its container; the next builder's start removes it.
//!
//! Runs the real `builder` binary against a real nats-server and the real engine. Needs a
//! running Docker engine, `nats-server`, and `deploy/images/build`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;
use l3m_containers::test_support::busybox_image;
use l3m_containers::{LABEL_OWNER, LABEL_SITE};
use l3m_core::build::Cover;
use l3m_core::build::{Limits, Mount, MountRole, Network, Plan, Stage, StageKind};
use l3m_core::grant::AcrPath;
use l3m_wire::build::{BuildReply, BuildRequest, OP_BUILD};
use l3m_wire::bus::{NatsAuth, NatsBus};
use l3m_wire::envelope::Limits as WireLimits;
use l3m_wire::subjects::{HubId, Operation, Service, Subjects};
use l3m_wire::test_support::{NatsServer, VoucherIssuer};

fn start_builder(nats: &NatsServer, hub: &str, root: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_builder"))
        .args(["--hub-id", hub, "--nats", nats.url()])
        .arg("--cache")
        .arg(root.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn containers(docker: &Docker, hub: &str) -> usize {
    let filters = HashMap::from([(
        "label".to_owned(),
        vec![
            format!("{LABEL_SITE}={hub}"),
            format!("{LABEL_OWNER}=builder"),
        ],
    )]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker.list_containers(Some(opts)).await.unwrap().len()
}

async fn wait_for(docker: &Docker, hub: &str, want: usize) -> bool {
    for _ in 0..600 {
        if containers(docker, hub).await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn a_builder_killed_mid_stage_leaves_no_container_after_the_next_start() {
    let image = busybox_image();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let hub = format!("reap{}x{nanos}", std::process::id());
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("forest/reaper/self/workspace/project")).unwrap();
    let nats = NatsServer::start().unwrap();
    // hubd's part: the voucher key the builder reads at start, and the voucher it takes.
    let hubd_bus = NatsBus::connect(nats.url(), NatsAuth::Anonymous)
        .await
        .unwrap();
    let subjects = Subjects::new(HubId::parse(&hub).unwrap());
    let hubd = VoucherIssuer::serve(&hubd_bus, &subjects).await;
    let docker = Docker::connect_with_local_defaults()
        .unwrap()
        .negotiate_version()
        .await
        .unwrap();
    let mut first = start_builder(&nats, &hub, root.path());

    let stage = Stage {
        name: "slow".into(),
        kind: StageKind::Build,
        image,
        command: vec!["sleep".into(), "600".into()],
        workdir: "/tmp".into(),
        mounts: vec![Mount {
            role: MountRole::Artifact,
            target: "/artifact".into(),
            writable: true,
        }],
        network: Network::None,
        limits: Limits::default(),
    };
    let request = BuildRequest {
        plan: Plan {
            stages: vec![stage],
        },
        source: "workspace/project".into(),
        lockfile: None,
        vouched: Some(hubd.vouch(
            "reaper",
            Cover::Build {
                source: AcrPath::parse("workspace/project").unwrap(),
                lockfile: None,
                hosts: Default::default(),
            },
            u64::MAX,
        )),
    };
    let client = NatsBus::connect(nats.url(), NatsAuth::Anonymous)
        .await
        .unwrap();
    let subject = subjects.request(Service::Builder, &Operation::parse(OP_BUILD).unwrap());
    let source = root.path().join("forest/reaper/self/workspace/project");
    let bundle = l3m_wire::build::bundle::pack(&source, None).unwrap();
    // The builder may not be subscribed yet: the source is sent until it is taken, then the
    // build is asked for.
    let call = tokio::spawn(async move {
        let vouched = request.vouched.clone().unwrap();
        loop {
            let uploaded = l3m_wire::build::upload(&client, &subjects, &vouched, &bundle).await;
            if !matches!(uploaded, Ok(Ok(()))) {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            let r = l3m_wire::typed::call::<_, BuildReply>(
                &client,
                &subject,
                &request,
                Duration::from_secs(2),
                &WireLimits::default(),
            )
            .await;
            if r.is_ok() {
                return;
            }
        }
    });
    assert!(
        wait_for(&docker, &hub, 1).await,
        "the stage's container never started"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    call.abort();
    assert_eq!(
        containers(&docker, &hub).await,
        1,
        "SIGKILL left the container"
    );

    let mut second = start_builder(&nats, &hub, root.path());
    let reaped = wait_for(&docker, &hub, 0).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert!(reaped, "the next builder's start removed it");
}
