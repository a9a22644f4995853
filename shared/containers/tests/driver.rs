//! The container driver against the real engine: each hardening the plan promises, probed from
//! inside a container and stopped at its boundary.
//!
//! Needs a running Docker engine (API ≥ 1.41) and `deploy/images/build` (busybox-static from
//! Debian's mirror the first time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use l3m_containers::test_support::{busybox_image, fresh_site};
use l3m_containers::{Binds, Driver, DriverError, Identity, LABEL_OWNER, LABEL_SITE, StageExit};
use l3m_core::build::{
    Limits, Mount, MountRole, Network, Plan, Stage, StageKind, StageOwner, check_plan,
};

fn stage(kind: StageKind, script: &str, mounts: Vec<Mount>) -> Stage {
    let s = Stage {
        name: format!("probe-{kind}"),
        kind,
        image: busybox_image(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        workdir: "/tmp".into(),
        mounts,
        network: Network::None,
        limits: Limits {
            deadline_ms: 30_000,
            ..Limits::default()
        },
    };
    check_plan(&Plan {
        stages: vec![s.clone()],
    })
    .unwrap();
    s
}

fn out_mount() -> Mount {
    Mount {
        role: MountRole::Out,
        target: "/out".into(),
        writable: true,
    }
}

async fn driver(owner: StageOwner, test: &str) -> Driver {
    Driver::connect(Identity::of_this_process(owner, fresh_site(test)))
        .await
        .unwrap()
}

async fn run(d: &Driver, s: &Stage, binds: &Binds) -> (StageExit, String) {
    let o = d.run_stage(s, binds, None).await.unwrap();
    (o.exit, String::from_utf8_lossy(&o.log).into_owned())
}

async fn labelled(d: &Driver) -> usize {
    let filters = HashMap::from([(
        "label".to_owned(),
        vec![
            format!("{LABEL_SITE}={}", d.identity().site),
            format!("{LABEL_OWNER}={}", d.identity().owner),
        ],
    )]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    d.docker().list_containers(Some(opts)).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_container_has_no_capability_no_privilege_no_network_and_a_read_only_root() {
    let d = driver(StageOwner::Runner, "harden").await;
    let out = tempfile::tempdir().unwrap();
    let art = tempfile::tempdir().unwrap();
    std::fs::write(art.path().join("bin"), "payload").unwrap();
    let binds = Binds::from([
        (MountRole::Out, out.path().into()),
        (MountRole::Artifact, art.path().into()),
    ]);
    let art_mount = Mount {
        role: MountRole::Artifact,
        target: "/artifact".into(),
        writable: false,
    };
    let s = stage(
        StageKind::Run,
        "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; \
         touch /probe 2>/dev/null && echo ROOT-WRITABLE; \
         echo x >> /artifact/bin 2>/dev/null && echo ARTIFACT-WRITABLE; \
         ls /var/run/docker.sock 2>/dev/null && echo SOCKET; \
         wget -q -T 2 -O- http://1.1.1.1/ 2>/dev/null && echo NET; \
         ls /sys/class/net; \
         echo ok > /tmp/t && echo TMP-OK; echo done > /out/result",
        vec![art_mount, out_mount()],
    );
    let (exit, log) = run(&d, &s, &binds).await;
    assert_eq!(exit, StageExit::Exited { code: 0 }, "{log}");
    assert!(log.contains("CapEff:\t0000000000000000"), "{log}");
    assert!(log.contains("CapBnd:\t0000000000000000"), "{log}");
    assert!(log.contains("NoNewPrivs:\t1"), "{log}");
    for escaped in ["ROOT-WRITABLE", "ARTIFACT-WRITABLE", "SOCKET", "NET"] {
        assert!(!log.contains(escaped), "{escaped} in {log}");
    }
    assert!(
        log.lines().any(|l| l.trim() == "lo"),
        "only loopback: {log}"
    );
    assert!(!log.contains("eth0"), "{log}");
    assert!(log.contains("TMP-OK"), "{log}");
    assert_eq!(
        std::fs::read_to_string(out.path().join("result")).unwrap(),
        "done\n"
    );
    assert_eq!(
        std::fs::read_to_string(art.path().join("bin")).unwrap(),
        "payload"
    );
    assert_eq!(
        labelled(&d).await,
        0,
        "the container is removed after its stage"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn outliving_the_deadline_kills_and_removes_and_keeps_the_logs() {
    let d = driver(StageOwner::Runner, "deadline").await;
    let out = tempfile::tempdir().unwrap();
    let mut s = stage(
        StageKind::Run,
        "echo started; i=0; while [ $i -lt 500 ]; do echo line $i; i=$((i+1)); done; sleep 600",
        vec![out_mount()],
    );
    s.limits.deadline_ms = 1_500;
    s.limits.log_bytes = 64;
    let (exit, log) = run(&d, &s, &Binds::from([(MountRole::Out, out.path().into())])).await;
    assert_eq!(exit, StageExit::Deadline);
    assert!(
        log.starts_with("started\nline 0\n"),
        "what it printed before the deadline: {log}"
    );
    assert!(log.len() <= 64, "bounded: {log}");
    assert_eq!(labelled(&d).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pids_limit_stops_a_fork_storm() {
    let d = driver(StageOwner::Runner, "pids").await;
    let out = tempfile::tempdir().unwrap();
    // Builtins only (`[`, `echo`), so the counter needs no fork: /out/n is the last spawn that worked.
    let mut s = stage(
        StageKind::Run,
        "i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); echo $i > /out/n; done",
        vec![out_mount()],
    );
    s.limits.pids = 16;
    s.limits.deadline_ms = 10_000;
    let (exit, log) = run(&d, &s, &Binds::from([(MountRole::Out, out.path().into())])).await;
    let spawned: usize = std::fs::read_to_string(out.path().join("n"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        spawned < 16,
        "spawned {spawned} under pids=16 ({exit:?}): {log}"
    );
    assert_eq!(labelled(&d).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_memory_limit_kills_a_hog_as_out_of_memory() {
    let d = driver(StageOwner::Runner, "memory").await;
    let out = tempfile::tempdir().unwrap();
    let mut s = stage(StageKind::Run, "exec tail /dev/zero", vec![out_mount()]);
    s.limits.memory_bytes = 24 << 20;
    let (exit, log) = run(&d, &s, &Binds::from([(MountRole::Out, out.path().into())])).await;
    assert_eq!(exit, StageExit::OutOfMemory, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_bounded_and_the_excess_counted() {
    let d = driver(StageOwner::Runner, "logs").await;
    let out = tempfile::tempdir().unwrap();
    let mut s = stage(StageKind::Run, "yes | head -c 100000", vec![out_mount()]);
    s.limits.log_bytes = 1000;
    let o = d
        .run_stage(
            &s,
            &Binds::from([(MountRole::Out, out.path().into())]),
            None,
        )
        .await
        .unwrap();
    assert!(o.succeeded());
    assert_eq!((o.log.len(), o.log_dropped), (1000, 99_000));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runner_refuses_a_build_stage_and_the_builder_a_run() {
    let runner = driver(StageOwner::Runner, "duty").await;
    let art = Mount {
        role: MountRole::Artifact,
        target: "/artifact".into(),
        writable: true,
    };
    let build = stage(StageKind::Build, "true", vec![art]);
    let err = runner
        .run_stage(&build, &Binds::new(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DriverError::NotMyStage {
                owner: StageOwner::Runner,
                kind: StageKind::Build,
                ..
            }
        ),
        "{err}"
    );
    let builder = driver(StageOwner::Builder, "duty").await;
    let run_stage = stage(StageKind::Run, "true", vec![out_mount()]);
    let err = builder
        .run_stage(&run_stage, &Binds::new(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DriverError::NotMyStage {
                owner: StageOwner::Builder,
                kind: StageKind::Run,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        labelled(&runner).await + labelled(&builder).await,
        0,
        "nothing was created"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_driver_dropped_mid_stage_leaves_a_container_the_next_start_reaps() {
    let who = Identity::of_this_process(StageOwner::Runner, fresh_site("reap"));
    let d = Driver::connect(who.clone()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let s = stage(StageKind::Run, "sleep 600", vec![out_mount()]);
    let binds = Binds::from([(MountRole::Out, out.path().into())]);
    let task = tokio::spawn({
        let d = d.clone();
        async move { d.run_stage(&s, &binds, None).await }
    });
    // Wait until the container exists, then kill the driving task as a SIGKILL would.
    for _ in 0..200 {
        if labelled(&d).await > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    task.abort();
    let _ = task.await;
    assert_eq!(
        labelled(&d).await,
        1,
        "the killed driver left its container"
    );
    let next = Driver::connect(who).await.unwrap();
    assert_eq!(next.reap().await.unwrap(), 1);
    assert_eq!(labelled(&next).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_is_not_pinned_is_refused_before_any_container_exists() {
    let image = busybox_image();
    let d = driver(StageOwner::Runner, "pins").await;
    let id = d.docker().inspect_image(&image).await.unwrap().id.unwrap();
    let out = tempfile::tempdir().unwrap();
    let binds = Binds::from([(MountRole::Out, out.path().into())]);
    let s = stage(StageKind::Run, "echo pinned > /out/r", vec![out_mount()]);
    let pinned = d.clone().pin_images([id.clone()]);
    assert!(
        pinned
            .run_stage(&s, &binds, None)
            .await
            .unwrap()
            .succeeded()
    );
    let other = d.pin_images(["sha256:0000".to_owned()]);
    let err = other.run_stage(&s, &binds, None).await.unwrap_err();
    assert!(
        matches!(&err, DriverError::ImageNotPinned { id: found, .. } if *found == id),
        "{err}"
    );
    assert_eq!(labelled(&other).await, 0);
}
