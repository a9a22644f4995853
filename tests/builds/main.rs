//! W^X builds end to end against the real engine and a real nats-server with deploy/nats.conf:
//! fetch from a package source the test serves, build with no network, run by digest, collect
//! out/; and the probes of issue 19, each stopped at a named boundary with nothing changed.
//!
//! Needs a running Docker engine (API ≥ 1.41), `nats-server`, and `deploy/images/build`
//! (busybox-static from Debian's mirror the first time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod site;

use l3m_containers::hash_tree;
use l3m_core::build::{Limits, Mount, MountRole, Network, Plan, Stage, StageKind, TreeEntry};
use l3m_core::grant::HostPattern;
use l3m_wire::build::{BuildReply, BuildRequest, OP_BUILD, OP_RUN, RunReply, RunRequest};
use l3m_wire::reply::ErrorCode;
use l3m_wire::subjects::Service;
use site::{PKG_HOST, PROJECT, Site};

fn mount(role: MountRole, target: &str, writable: bool) -> Mount {
    Mount {
        role,
        target: target.into(),
        writable,
    }
}

fn stage(
    name: &str,
    kind: StageKind,
    script: String,
    mounts: Vec<Mount>,
    network: Network,
) -> Stage {
    Stage {
        name: name.into(),
        kind,
        image: l3m_containers::test_support::busybox_image(),
        command: vec!["sh".into(), "-c".into(), script],
        workdir: "/tmp".into(),
        mounts,
        network,
        limits: Limits {
            deadline_ms: 60_000,
            ..Limits::default()
        },
    }
}

/// Fetches every file the lockfile names through the proxy; then probes what a fetch must not do.
fn fetch(pkg_ip: &str) -> Stage {
    let script = format!(
        "for f in $(cat /lock/deps.lock); do \
           printf 'GET http://{PKG_HOST}:8080/%s HTTP/1.0\\r\\nHost: {PKG_HOST}\\r\\n\\r\\n' \"$f\" \
             | nc -w 10 \"$L3M_PROXY_HOST\" \"$L3M_PROXY_PORT\" > /tmp/resp; \
           head -1 /tmp/resp | grep -q ' 200 ' || exit 3; \
           sed '1,/^\\r$/d' /tmp/resp > \"/cache/$f\"; \
         done; \
         [ -e /src ] && echo PROBE-SOURCE-VISIBLE; \
         printf 'GET http://evil.test/ HTTP/1.0\\r\\n\\r\\n' | nc -w 10 \"$L3M_PROXY_HOST\" \"$L3M_PROXY_PORT\" | head -1; \
         nc -w 2 {pkg_ip} 8080 </dev/null 2>/dev/null && echo PROBE-DIRECT-REACHED; \
         echo fetched"
    );
    let mounts = vec![
        mount(MountRole::Lockfile, "/lock", false),
        mount(MountRole::Cache, "/cache", true),
    ];
    let hosts = Network::Hosts(vec![HostPattern::parse(PKG_HOST).unwrap()]);
    stage("fetch", StageKind::Fetch, script, mounts, hosts)
}

/// Assembles the artifact from source and the fetched cache; probes writes and the network.
fn build(pkg_ip: &str) -> Stage {
    let script = format!(
        "cat /src/app.sh /cache/greeting.sh > /artifact/app && chmod +x /artifact/app || exit 4; \
         touch /src/x 2>/dev/null && echo PROBE-SOURCE-WRITABLE; \
         touch /cache/x 2>/dev/null && echo PROBE-CACHE-WRITABLE; \
         touch /x 2>/dev/null && echo PROBE-ROOT-WRITABLE; \
         nc -w 2 {pkg_ip} 8080 </dev/null 2>/dev/null && echo PROBE-NET-REACHED; \
         echo built"
    );
    let mounts = vec![
        mount(MountRole::Source, "/src", false),
        mount(MountRole::Cache, "/cache", false),
        mount(MountRole::Artifact, "/artifact", true),
    ];
    stage("build", StageKind::Build, script, mounts, Network::None)
}

/// Runs the artifact into out/; probes writes and the network.
fn run(pkg_ip: &str) -> Stage {
    let script = format!(
        "/artifact/app > /out/result || exit 5; \
         touch /artifact/x 2>/dev/null && echo PROBE-ARTIFACT-WRITABLE; \
         touch /x 2>/dev/null && echo PROBE-ROOT-WRITABLE; \
         nc -w 2 {pkg_ip} 8080 </dev/null 2>/dev/null && echo PROBE-NET-REACHED; \
         echo ran"
    );
    let mounts = vec![
        mount(MountRole::Artifact, "/artifact", false),
        mount(MountRole::Out, "/out", true),
    ];
    stage("run", StageKind::Run, script, mounts, Network::None)
}

/// The build of the project, without a voucher yet ([`Site::vouched_build`] adds maker's).
fn build_request(site: &Site) -> BuildRequest {
    BuildRequest {
        plan: Plan {
            stages: vec![fetch(&site.pkg_ip), build(&site.pkg_ip)],
        },
        source: PROJECT.into(),
        lockfile: Some(format!("{PROJECT}/lock")),
        vouched: None,
    }
}

fn log(outcome: &l3m_core::build::StageOutcome) -> String {
    String::from_utf8_lossy(&outcome.log).into_owned()
}

fn assert_no_probe(log: &str, probes: &[&str]) {
    for probe in probes {
        assert!(!log.contains(probe), "{probe} got through: {log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fetch_build_and_run_by_digest_end_to_end_with_every_probe_stopped() {
    let site = Site::start("e2e").await;
    let source_before = hash_tree(&site.source()).unwrap();
    let request = site.vouched_build(build_request(&site)).await;
    let reply: BuildReply = site
        .call(Service::Builder, OP_BUILD, &request)
        .await
        .unwrap();
    let [fetched, built] = &reply.stages[..] else {
        panic!("two stages: {reply:?}")
    };
    assert!(
        fetched.succeeded(),
        "fetch: {:?} {}",
        fetched.exit,
        log(fetched)
    );
    assert!(built.succeeded(), "build: {:?} {}", built.exit, log(built));
    let fetch_log = log(fetched);
    assert!(
        fetch_log.contains("403"),
        "an unlisted host is refused at the proxy: {fetch_log}"
    );
    assert_no_probe(
        &fetch_log,
        &["PROBE-SOURCE-VISIBLE", "PROBE-DIRECT-REACHED"],
    );
    assert_no_probe(
        &log(built),
        &[
            "PROBE-SOURCE-WRITABLE",
            "PROBE-CACHE-WRITABLE",
            "PROBE-ROOT-WRITABLE",
            "PROBE-NET-REACHED",
        ],
    );
    let cache = reply.cache.clone().unwrap();
    assert_eq!(hash_tree(&site.store.path_of(&cache)).unwrap(), cache);
    let artifact = reply.artifact.clone().unwrap();

    let run_request = RunRequest {
        artifact: artifact.clone(),
        stage: run(&site.pkg_ip),
        vouched: Some(site.run_voucher(&artifact).await),
    };
    let ran: RunReply = site
        .call(Service::Runner, OP_RUN, &run_request)
        .await
        .unwrap();
    let run_log = log(&ran.outcome);
    assert!(
        ran.outcome.succeeded(),
        "run: {:?} {run_log}",
        ran.outcome.exit
    );
    assert_no_probe(
        &run_log,
        &[
            "PROBE-ARTIFACT-WRITABLE",
            "PROBE-ROOT-WRITABLE",
            "PROBE-NET-REACHED",
        ],
    );
    let has_result = ran
        .listing
        .iter()
        .any(|e| matches!(e, TreeEntry::File { path, .. } if path == "result"));
    assert!(has_result, "{:?}", ran.listing);
    let result = std::fs::read_to_string(site.store.path_of(&ran.out).join("result")).unwrap();
    assert_eq!(result, "hello from a built artifact\n");

    assert_eq!(
        hash_tree(&site.source()).unwrap(),
        source_before,
        "source unchanged"
    );
    assert_eq!(
        hash_tree(&site.store.path_of(&artifact)).unwrap(),
        artifact,
        "artifact unchanged"
    );
    // Each voucher is taken once: the same requests again are refused before anything starts.
    let again = site
        .call::<_, BuildReply>(Service::Builder, OP_BUILD, &request)
        .await
        .unwrap_err();
    assert!(again.message.contains("taken before"), "{again:?}");
    let again = site
        .call::<_, RunReply>(Service::Runner, OP_RUN, &run_request)
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::Refused);
    assert!(again.message.contains("taken before"), "{again:?}");
    assert_eq!(site.leftovers().await, 0, "no container or network is left");
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_artifact_changed_after_hashing_is_refused_not_run() {
    let site = Site::start("changed").await;
    let request = site.vouched_build(build_request(&site)).await;
    let reply: BuildReply = site
        .call(Service::Builder, OP_BUILD, &request)
        .await
        .unwrap();
    let artifact = reply.artifact.clone().unwrap();
    let app = site.store.path_of(&artifact).join("app");
    std::process::Command::new("chmod")
        .arg("u+w")
        .arg(&app)
        .status()
        .unwrap();
    let mut bytes = std::fs::read(&app).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&app, &bytes).unwrap();
    let request = RunRequest {
        vouched: Some(site.run_voucher(&artifact).await),
        artifact,
        stage: run(&site.pkg_ip),
    };
    let err = site
        .call::<_, RunReply>(Service::Runner, OP_RUN, &request)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.contains("changed after hashing"),
        "{}",
        err.message
    );
    assert_eq!(site.leftovers().await, 0, "nothing was started");
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_builder_refuses_a_run_stage_and_the_runner_a_build_stage() {
    let site = Site::start("duties").await;
    let mut req = build_request(&site);
    req.plan.stages.push(run(&site.pkg_ip));
    let err = site
        .call::<_, BuildReply>(Service::Builder, OP_BUILD, &req)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.contains("does not run run stages"),
        "{}",
        err.message
    );
    let request = RunRequest {
        artifact: l3m_core::build::ArtifactDigest::from_bytes([7; 32]),
        stage: build(&site.pkg_ip),
        vouched: None,
    };
    let err = site
        .call::<_, RunReply>(Service::Runner, OP_RUN, &request)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.contains("does not run build stages"),
        "{}",
        err.message
    );
    assert_eq!(site.leftovers().await, 0);
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_that_breaks_a_rule_is_refused_naming_stage_and_rule() {
    let site = Site::start("rules").await;
    let mut req = build_request(&site);
    // A fetch that also mounts the source would let private bytes reach the network.
    req.plan.stages[0]
        .mounts
        .push(mount(MountRole::Source, "/src", false));
    let err = site
        .call::<_, BuildReply>(Service::Builder, OP_BUILD, &req)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused);
    let named =
        err.message.contains("stage 0 (fetch)") && err.message.contains("fetch-mounts-private");
    assert!(named, "{}", err.message);
    // The source travels as a bundle under the build's own voucher: a voucher with no upload
    // (other's, while maker's bundles came under maker's)
    // builds nothing, and a hostile bundle (an entry climbing out of its folder) is refused as
    // it is unpacked, writing nothing outside the scratch folder.
    let mut req = build_request(&site);
    req.plan.stages.remove(0);
    req.lockfile = None;
    req.vouched = Some(
        site.other
            .vouch_build(site::build_cover(&req))
            .await
            .unwrap(),
    );
    let err = build_err(&site, req.clone()).await;
    assert_eq!(err.code, ErrorCode::NotFound, "{err:?}");
    assert!(
        err.message.contains("no source was uploaded"),
        "{}",
        err.message
    );
    let vouched = site
        .maker
        .vouch_build(site::build_cover(&req))
        .await
        .unwrap();
    let hostile = [
        r#"l3m source bundle v1"#,
        r#"{"kind":"dir","path":"src"}"#,
        r#"{"kind":"symlink","path":"src/out","target":"../../../../../../tmp"}"#,
        "",
    ]
    .join("\n");
    // Only a build's voucher brings a source: a run's is refused at the first chunk.
    let run = site
        .run_voucher(&l3m_core::build::ArtifactDigest::from_bytes([7; 32]))
        .await;
    let err = site.upload(&run, hostile.as_bytes()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    site.upload(&vouched, hostile.as_bytes()).await.unwrap();
    req.vouched = Some(vouched);
    let err = build_err(&site, req).await;
    assert_eq!(err.code, ErrorCode::Invalid, "{err:?}");
    assert!(
        err.message.contains("outside its folder"),
        "{}",
        err.message
    );
    assert_eq!(site.leftovers().await, 0);
    site.close().await;
}

async fn build_err(site: &Site, req: BuildRequest) -> l3m_wire::reply::RemoteError {
    site.call::<_, BuildReply>(Service::Builder, OP_BUILD, &req)
        .await
        .unwrap_err()
}

async fn run_err(
    site: &Site,
    artifact: &l3m_core::build::ArtifactDigest,
    vouched: Option<l3m_wire::hubd::build_voucher::BuildVouched>,
) -> l3m_wire::reply::RemoteError {
    let req = RunRequest {
        artifact: artifact.clone(),
        stage: run(&site.pkg_ip),
        vouched,
    };
    site.call::<_, RunReply>(Service::Runner, OP_RUN, &req)
        .await
        .unwrap_err()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_or_run_without_a_voucher_for_exactly_it_is_refused_before_anything_starts() {
    let site = Site::start("vouchers").await;
    let refused = |err: &l3m_wire::reply::RemoteError, needle: &str| {
        assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
        assert!(
            err.message.contains(needle),
            "{needle:?} in {}",
            err.message
        );
    };
    // No voucher at all.
    refused(
        &build_err(&site, build_request(&site)).await,
        "carries no voucher",
    );
    // Another axis: player's run voucher.
    let artifact = l3m_core::build::ArtifactDigest::from_bytes([7; 32]);
    let mut req = build_request(&site);
    req.vouched = Some(site.run_voucher(&artifact).await);
    refused(&build_err(&site, req).await, "the voucher covers a run of");
    // Another source: maker's voucher for its whole workspace, asked for the project.
    let mut whole = build_request(&site);
    whole.source = "workspace".into();
    let vouched = site.vouched_build(whole).await.vouched;
    let mut req = build_request(&site);
    req.vouched = vouched;
    refused(
        &build_err(&site, req).await,
        "the voucher covers a build of workspace,",
    );
    // A fetch reaching a host the voucher does not list.
    let mut req = site.vouched_build(build_request(&site)).await;
    req.plan.stages[0].network = Network::Hosts(vec![
        HostPattern::parse(PKG_HOST).unwrap(),
        HostPattern::parse("evil.test").unwrap(),
    ]);
    refused(&build_err(&site, req).await, "reaching evil.test");
    // A voucher edited after hubd signed it.
    let mut req = site.vouched_build(build_request(&site)).await;
    if let Some(v) = req.vouched.as_mut() {
        v.voucher.agent = "other".into();
    }
    refused(
        &build_err(&site, req).await,
        "not signed by this hub's hubd",
    );
    // An agent without `build` gets no voucher from hubd in the first place.
    let no = site
        .player
        .vouch_build(site::build_cover(&build_request(&site)))
        .await
        .unwrap_err();
    assert!(no.to_string().contains("does not confer `build`"), "{no}");

    // The runner: no voucher, a build voucher, a voucher for another artifact.
    refused(&run_err(&site, &artifact, None).await, "carries no voucher");
    let build_voucher = site.vouched_build(build_request(&site)).await.vouched;
    refused(
        &run_err(&site, &artifact, build_voucher).await,
        "the voucher covers a build of",
    );
    let other = l3m_core::build::ArtifactDigest::from_bytes([8; 32]);
    refused(
        &run_err(&site, &artifact, Some(site.run_voucher(&other).await)).await,
        "the voucher covers a run of",
    );
    assert_eq!(site.leftovers().await, 0, "nothing was started");

    // Each refusal is counted in the service's health answer, which the CLI's user may ask.
    let cli = site::connect(site.nats(), "cli").await;
    for (service, refusals) in [(Service::Builder, 5), (Service::Runner, 3)] {
        let answers = l3m_wire::health::gather(
            &cli,
            &site.subjects,
            service,
            std::time::Duration::from_secs(2),
        )
        .await
        .unwrap();
        let [health] = answers.as_slice() else {
            panic!("one {service} answers: {answers:?}")
        };
        assert!(health.ok(), "the engine answers: {health:?}");
        assert!(health.checks.iter().any(|c| c.name == "engine" && c.ok));
        assert_eq!(health.gauges["refused_total"], refusals, "{health:?}");
        assert_eq!(health.gauges["requests_total"], refusals, "{health:?}");
        assert_eq!(health.gauges["requests_running"], 0, "{health:?}");
    }
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn neither_the_builder_nor_the_runner_can_ask_another_service() {
    use l3m_wire::bus::Bus;
    let site = Site::start("nats").await;
    // Each may ask hubd its build policy (the site's start did, for both), and nothing else.
    for (user, forbidden) in [
        ("builder", "l3m.t.runner.run"),
        ("builder", "l3m.t.hubd.append-log"),
        ("builder", "l3m.t.hubd.open-session"),
        ("builder", "l3m.t.hubd.vouch-build"),
        ("runner", "l3m.t.builder.build"),
        ("runner", "l3m.t.hubd.append-log"),
        ("runner", "l3m.t.hubd.open-session"),
        ("runner", "l3m.t.hubd.vouch-build"),
    ] {
        let bus = site::connect(site.nats(), user).await;
        let mut errors = bus.server_errors();
        bus.publish(forbidden, bytes::Bytes::new()).await.unwrap();
        let patience = std::time::Duration::from_secs(20);
        let text = l3m_wire::test_support::server_reported(
            &mut errors,
            "Permissions Violation for Publish",
            patience,
        )
        .await
        .unwrap_or_else(|| panic!("{user} was let publish to {forbidden}"));
        assert!(text.contains(forbidden), "{text}");
    }
    site.close().await;
}

/// A real compiler: make and gcc from the debootstrap toolchain image, with no network; the
/// static binary then runs by digest in the busybox image. Ignored by default, because the
/// first `deploy/images/build` of the toolchain takes minutes and ~400 MB; run it with
/// `L3M_TOOLCHAIN=1 cargo test -p l3m-tests --test builds -- --ignored`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "builds the toolchain image (minutes, ~400 MB): L3M_TOOLCHAIN=1 ... -- --ignored"]
async fn a_c_project_compiles_with_make_and_gcc_and_its_binary_runs_by_digest() {
    let toolchain = l3m_containers::test_support::toolchain_image();
    let site = Site::start("gcc").await;
    let project = site.source().with_file_name("cproject");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("Makefile"),
        "OUT ?= build\n$(OUT)/app: main.c\n\tcc -O2 -static -o $(OUT)/app main.c\n",
    )
    .unwrap();
    std::fs::write(
        project.join("main.c"),
        "#include <stdio.h>\nint main(void) { printf(\"compiled %d\\n\", 6 * 7); return 0; }\n",
    )
    .unwrap();
    let mut compile = stage(
        "compile",
        StageKind::Build,
        String::new(),
        vec![
            mount(MountRole::Source, "/src", false),
            mount(MountRole::Artifact, "/artifact", true),
        ],
        Network::None,
    );
    compile.image = toolchain;
    compile.command = ["make", "-C", "/src", "OUT=/artifact"]
        .map(String::from)
        .to_vec();
    let request = BuildRequest {
        plan: Plan {
            stages: vec![compile],
        },
        source: "workspace/cproject".into(),
        lockfile: None,
        vouched: None,
    };
    let request = site.vouched_build(request).await;
    let reply: BuildReply = site
        .call(Service::Builder, OP_BUILD, &request)
        .await
        .unwrap();
    let built = &reply.stages[0];
    assert!(
        built.succeeded(),
        "compile: {:?} {}",
        built.exit,
        log(built)
    );
    let mut run_it = run(&site.pkg_ip);
    run_it.command = vec![
        "sh".into(),
        "-c".into(),
        "/artifact/app > /out/result".into(),
    ];
    let artifact = reply.artifact.clone().unwrap();
    let request = RunRequest {
        vouched: Some(site.run_voucher(&artifact).await),
        artifact,
        stage: run_it,
    };
    let ran: RunReply = site.call(Service::Runner, OP_RUN, &request).await.unwrap();
    assert!(ran.outcome.succeeded(), "{}", log(&ran.outcome));
    let result = std::fs::read_to_string(site.store.path_of(&ran.out).join("result")).unwrap();
    assert_eq!(result, "compiled 42\n");
    assert_eq!(site.leftovers().await, 0);
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_the_settings_unpin_is_refused_at_the_next_request_with_no_restart() {
    let site = Site::start("repin").await;
    let request = site.vouched_build(build_request(&site)).await;
    let reply: BuildReply = site
        .call(Service::Builder, OP_BUILD, &request)
        .await
        .unwrap();
    let artifact = reply.artifact.unwrap();
    let human = site.hub.human_client().await;
    let pin = |image: &str| {
        let human = &human;
        let image = image.to_owned();
        async move {
            let seen = human.read_settings().await.unwrap();
            let text = format!("schema = 1\n[builds]\nimages = [\"{image}\"]\n");
            human.update_settings(&text, &seen.tip).await.unwrap();
        }
    };
    pin(&format!("sha256:{}", "0".repeat(64))).await;
    let refused = run_err(&site, &artifact, Some(site.run_voucher(&artifact).await)).await;
    assert!(refused.message.contains("is not pinned"), "{refused:?}");
    let refused = build_err(&site, site.vouched_build(build_request(&site)).await).await;
    assert!(refused.message.contains("is not pinned"), "{refused:?}");
    assert_eq!(site.leftovers().await, 0, "nothing was started");

    let busybox = bollard::Docker::connect_with_local_defaults()
        .unwrap()
        .inspect_image(&l3m_containers::test_support::busybox_image())
        .await
        .unwrap()
        .id
        .unwrap();
    pin(&busybox).await;
    let request = RunRequest {
        vouched: Some(site.run_voucher(&artifact).await),
        artifact: artifact.clone(),
        stage: run(&site.pkg_ip),
    };
    let ran: RunReply = site.call(Service::Runner, OP_RUN, &request).await.unwrap();
    assert!(ran.outcome.succeeded(), "{}", log(&ran.outcome));
    site.close().await;
}
