//! What our path adds to the engine's work, measured against a reference in the same run.
//!
//! 1. One stage (busybox `true`, same limits) through the driver (bollard: create, start, logs,
//!    wait, inspect, remove) against `docker run --rm` of the same image and command with the
//!    same hardening flags; prints the medians and their ratio (goal ≤ 1.0×).
//! 2. The time from a build call to the artifact's digest for a small project (the voucher
//!    checked, build stage: source read-only, one artifact written, stored by blake3).
//!
//! `cargo bench -p builder --bench stage` (needs the engine and `deploy/images/build`);
//! `L3M_BENCH_ROUNDS` sets the rounds (default 15).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use builder::Config;
use l3m_containers::test_support::{busybox_image, fresh_site};
use l3m_containers::{ArtifactStore, Binds, Driver, Identity};
use l3m_core::build::Cover;
use l3m_core::build::{Limits, Mount, MountRole, Network, Plan, Stage, StageKind, StageOwner};
use l3m_core::clock::SystemClock;
use l3m_core::grant::AcrPath;
use l3m_wire::build::BuildRequest;
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::bus::LocalBus;
use l3m_wire::subjects::{HubId, Subjects};
use l3m_wire::test_support::VoucherIssuer;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let rounds: usize = l3m_wire::test_support::env_number("L3M_BENCH_ROUNDS", 15);
    let image = busybox_image();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let limits = Limits::default();
        let out = tempfile::tempdir().unwrap();
        let run_stage = Stage {
            name: "bench".into(),
            kind: StageKind::Run,
            image: image.clone(),
            command: vec!["true".into()],
            workdir: "/tmp".into(),
            mounts: vec![Mount { role: MountRole::Out, target: "/out".into(), writable: true }],
            network: Network::None,
            limits,
        };
        let runner = Driver::connect(Identity::of_this_process(StageOwner::Runner, fresh_site("bench"))).await.unwrap();
        let binds = Binds::from([(MountRole::Out, out.path().to_path_buf())]);
        let (mut ours, mut cli) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            assert!(runner.run_stage(&run_stage, &binds, None).await.unwrap().succeeded());
            ours.push(t.elapsed());
            let t = Instant::now();
            let status = Command::new("docker")
                .args(["run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL"])
                .args(["--security-opt", "no-new-privileges", "--tmpfs", "/tmp:size=64m"])
                .args(["--pids-limit", &limits.pids.to_string(), "--memory", &limits.memory_bytes.to_string()])
                .arg("-v")
                .arg(format!("{}:/out", out.path().display()))
                .args([image.as_str(), "true"])
                .status()
                .unwrap();
            assert!(status.success());
            cli.push(t.elapsed());
        }
        let (ours, cli) = (median(ours), median(cli));
        println!(
            "stage `true`: bollard driver {ours:?}, docker run --rm {cli:?}, ratio {:.2}x (median of {rounds})",
            ours.as_secs_f64() / cli.as_secs_f64()
        );

        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("forest/bench/self/workspace/project");
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..50 {
            std::fs::write(src.join(format!("part{i}.txt")), format!("part {i}\n").repeat(200)).unwrap();
        }
        let builder = Driver::connect(Identity::of_this_process(StageOwner::Builder, fresh_site("bench"))).await.unwrap();
        let config = Config {
            store: ArtifactStore::open(root.path().join("cache")).unwrap(),
            resolve: Arc::new(HashMap::new()),
        };
        let bus = LocalBus::new();
        let subjects = Subjects::new(HubId::parse("bench").unwrap());
        let hubd = VoucherIssuer::serve(&bus, &subjects).await;
        let gate = VoucherGate::new(Arc::new(bus), subjects, Arc::new(SystemClock));
        let cover = Cover::Build {
            source: AcrPath::parse("workspace/project").unwrap(),
            lockfile: None,
            hosts: Default::default(),
        };
        let bundle = l3m_wire::build::bundle::pack(&src, None).unwrap();
        let uploads = builder::uploads::Uploads::default();
        let mut times = Vec::new();
        for round in 0..rounds {
            let build = Stage {
                name: "build".into(),
                kind: StageKind::Build,
                image: image.clone(),
                command: vec!["sh".into(), "-c".into(), format!("cat /src/*.txt > /artifact/all; echo {round} > /artifact/round")],
                workdir: "/tmp".into(),
                mounts: vec![
                    Mount { role: MountRole::Source, target: "/src".into(), writable: false },
                    Mount { role: MountRole::Artifact, target: "/artifact".into(), writable: true },
                ],
                network: Network::None,
                limits,
            };
            let vouched = hubd.vouch("bench", cover.clone(), u64::MAX);
            let req = BuildRequest { plan: Plan { stages: vec![build] }, source: "workspace/project".into(), lockfile: None, vouched: Some(vouched) };
            let t = Instant::now();
            let voucher = &req.vouched.as_ref().unwrap().voucher;
            uploads.receive(&voucher.nonce, voucher.expires_ms, bundle.len() as u64, 0, &bundle, 0).unwrap();
            let reply = builder::pipeline::build(&builder, &config, &gate, &uploads, &req).await.unwrap();
            assert!(reply.artifact.is_some());
            times.push(t.elapsed());
        }
        println!("build call to artifact digest (50 source files, unpacked from their bundle): median {:?} of {rounds}", median(times));
    });
}
