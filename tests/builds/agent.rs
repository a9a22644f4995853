//! The `build` and `run` tools of an agent's sequencer, driven by a scripted model against the
//! real builder, runner and engine: a fetch through the proxy, a build and a run by digest land
//! in the Log as tool results; a tame Makefile is built with no human and its artifact run by
//! digest; and an agent whose grant lacks the axes is offered neither tool and has a forged
//! call refused.

use std::sync::Arc;
use std::time::Duration;

use l3m_containers::hash_tree;
use l3m_containers::test_support::{FETCH, busybox_image};
use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::effects::EffectClass;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::log::{Record, RecordBody};
use l3m_core::names::AgentName;
use sequencer::model::{Provider, Script, Scripted};
use sequencer::{AgentRun, Config, Exit, run_agent};
use tokio_util::sync::CancellationToken;

use crate::site::Site;

/// What the agent's artifact prints: its source names the greeter, the fetched package greets.
const GREETING: &str = "hello from a fetched-and-built artifact";

/// Spawns root agent `name` with `grant` and fuel for a few calls, as the site's human.
async fn spawn(site: &Site, name: &str, grant: Grant) {
    let fuel = Fuel {
        model_calls: 10,
        bytes: 10_000_000,
        wakes: 10,
    };
    let human = site.hub.human_client().await;
    human
        .spawn(SpawnRequest {
            child: AgentName::parse(name).unwrap(),
            grant,
            loan: fuel,
            driven: false,
            persona: None,
            fork: None,
        })
        .await
        .unwrap();
    human
        .send_letter(name, None, "build and run it")
        .await
        .unwrap();
}

/// Runs `name`'s sequencer with `script` as its model until it is idle; returns its Log.
async fn run_scripted(site: &Site, name: &str, script: &str) -> Vec<Record> {
    let agent = AgentName::parse(name).unwrap();
    let script = Script::parse(std::path::Path::new("agent.toml"), script).unwrap();
    let provider: Arc<dyn Provider> = Arc::new(Scripted::new(script));
    let config = Config::parse(
        "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\n\
         [sequencer]\nretry_backoff_ms = 1\nidle_exit_secs = 2\n",
    )
    .unwrap();
    let run = AgentRun {
        forest: site.hub.root().join("forest"),
        agent: agent.clone(),
        client: site
            .hub
            .client(Duty::Sequencer {
                agent: agent.clone(),
            })
            .await,
        config,
        provider_factory: Arc::new(move |_| Ok(provider.clone())),
        holder: format!("test:{name}"),
    };
    let exit = tokio::time::timeout(
        Duration::from_secs(300),
        run_agent(run, CancellationToken::new()),
    )
    .await
    .expect("the agent went idle in time")
    .unwrap();
    assert_eq!(exit, Exit::Idle);
    let human = site.hub.human_client().await;
    human.read_log_from(&agent, 0).await.unwrap().records
}

/// One tool result of the Log, as these tests look at it.
#[derive(Debug)]
struct ToolResult {
    output: String,
    is_error: bool,
    /// The refusing boundary, if refused.
    boundary: Option<String>,
    /// The classes and targets of its effects.
    effects: Vec<(EffectClass, String)>,
}

/// The Log's tool results, in order.
fn results(log: &[Record]) -> Vec<ToolResult> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output,
                is_error,
                refusal,
                effects,
                ..
            } => Some(ToolResult {
                output: output.clone(),
                is_error: *is_error,
                boundary: refusal.as_ref().map(|r| r.boundary.clone()),
                effects: effects
                    .iter()
                    .map(|e| (e.class.clone(), e.target.clone()))
                    .collect(),
            }),
            _ => None,
        })
        .collect()
}

/// The tools the system prompt says are offered.
fn offered(log: &[Record]) -> Vec<String> {
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        panic!("the Log starts with its system prompt")
    };
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Tools offered: "))
        .expect("a tools line");
    line.trim_end_matches('.')
        .split(", ")
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_builds_with_its_tool_and_runs_the_artifact_by_the_returned_digest() {
    let site = Site::start("agent-tools").await;
    let grant = Grant {
        build: true,
        run: true,
        ..crate::site::maker_grant()
    };
    spawn(&site, "crafter", grant).await;
    let project = site
        .hub
        .acr(&AgentName::parse("crafter").unwrap())
        .join("workspace/hello");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(project.join("lock")).unwrap();
    std::fs::write(project.join("lock/deps.lock"), "greeting.sh\n").unwrap();
    let source = "#!/bin/sh\nGREETER=fetched-and-built\n";
    std::fs::write(project.join("app.sh"), source).unwrap();
    // Content addressing makes the digest known in advance: the same bytes and mode, hashed
    // here, are what the build must report (and what the scripted model passes to `run`).
    let expected = tempfile::tempdir().unwrap();
    let app = expected.path().join("app");
    std::fs::write(&app, format!("{source}{}", crate::site::GREETING_SH)).unwrap();
    std::fs::set_permissions(&app, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let digest = hash_tree(expected.path()).unwrap();
    let script = r#"
[[turn]]
text = "building"
[[turn.tool_use]]
name = "build"
[turn.tool_use.input]
source = "workspace/hello"
lockfile = "workspace/hello/lock"
hosts = ["pkgs.test"]
image = "IMAGE"
fetch_command = ["sh", "-c", '''FETCH''']
command = ["sh", "-c", "cat /src/app.sh /cache/greeting.sh > /artifact/app && chmod +x /artifact/app && echo built"]
[[turn]]
text = "running"
[[turn.tool_use]]
name = "run"
input = { artifact = "DIGEST", image = "IMAGE", command = ["sh", "-c", "/artifact/app > /out/result && echo ran"] }
[[turn]]
text = "running what was never built"
[[turn.tool_use]]
name = "run"
input = { artifact = "UNKNOWN", image = "IMAGE", command = ["/artifact/app"] }
[[turn]]
text = "done"
"#
    .replace("FETCH", FETCH)
    .replace("IMAGE", &busybox_image())
    .replace("DIGEST", digest.as_str())
    .replace(
        "UNKNOWN",
        l3m_core::build::ArtifactDigest::from_bytes([7; 32]).as_str(),
    );
    let log = run_scripted(&site, "crafter", &script).await;
    let offered = offered(&log);
    assert!(offered.iter().any(|t| t == "build") && offered.iter().any(|t| t == "run"));
    let results = results(&log);
    let [build, run, unknown] = &results[..] else {
        panic!("three results: {results:#?}")
    };
    // The real runner's refusal of a digest it does not hold is a typed result, not a crash.
    assert!(unknown.is_error, "{unknown:#?}");
    assert!(
        unknown.output.contains("the runner refused (not-found)"),
        "{unknown:#?}"
    );
    for result in [build, run] {
        assert!(!result.is_error && result.boundary.is_none(), "{result:#?}");
    }
    let (built, ran) = (&build.output, &run.output);
    assert!(
        built.contains("stage fetch: exited 0") && built.contains("\nfetched\n"),
        "{built}"
    );
    assert!(built.contains("stage build: exited 0"), "{built}");
    assert!(built.contains("\nbuilt\n"), "the stage's log: {built}");
    assert!(
        built.contains(&format!("artifact: {}", digest.as_str())),
        "{built}"
    );
    assert!(
        build
            .effects
            .iter()
            .any(|(c, t)| *c == EffectClass::Build && t.contains(digest.as_str())),
        "the artifact is named as a lasting effect: {:?}",
        build.effects
    );
    assert!(
        ran.contains("stage run: exited 0") && ran.contains("\nran\n"),
        "{ran}"
    );
    assert!(ran.contains("  result ("), "the listing of out/: {ran}");
    assert!(run.effects.iter().any(|(c, _)| *c == EffectClass::Run));
    let out = ran
        .lines()
        .find_map(|l| l.strip_prefix("out: "))
        .expect("the out digest");
    let out = l3m_core::build::ArtifactDigest::parse(out).unwrap();
    let result = std::fs::read_to_string(site.store.path_of(&out).join("result")).unwrap();
    assert_eq!(result, format!("{GREETING}\n"));
    assert_eq!(site.leftovers().await, 0, "no container or network is left");
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_makes_a_tame_target_with_no_human_and_runs_the_artifact_by_digest() {
    let site = Site::start("agent-tame").await;
    let grant = Grant {
        build: true,
        run: true,
        ..crate::site::maker_grant()
    };
    spawn(&site, "tamer", grant).await;
    let project = site
        .hub
        .acr(&AgentName::parse("tamer").unwrap())
        .join("workspace/tame");
    std::fs::create_dir_all(&project).unwrap();
    let makefile = "# tame: the harness lowers it, make never runs\n\
                    build/bin/app: app.sh build/bin\n\tcp app.sh build/bin/app\n\
                    build/bin:\n\tmkdir build/bin\n";
    std::fs::write(project.join("Makefile"), makefile).unwrap();
    let source = "#!/bin/sh\necho tamed\n";
    let mode: std::fs::Permissions = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::write(project.join("app.sh"), source).unwrap();
    std::fs::set_permissions(project.join("app.sh"), mode.clone()).unwrap();
    let expected = tempfile::tempdir().unwrap();
    std::fs::create_dir(expected.path().join("bin")).unwrap();
    std::fs::write(expected.path().join("bin/app"), source).unwrap();
    std::fs::set_permissions(expected.path().join("bin/app"), mode).unwrap();
    let digest = hash_tree(expected.path()).unwrap();
    let script = format!(
        r#"
[[turn]]
text = "making"
[[turn.tool_use]]
name = "make"
input = {{ source = "workspace/tame", target = "build/bin/app", image = "{image}" }}
[[turn]]
text = "running"
[[turn.tool_use]]
name = "run"
input = {{ artifact = "{digest}", image = "{image}", command = ["sh", "-c", "/artifact/bin/app > /out/result"] }}
[[turn]]
text = "done"
"#,
        image = busybox_image(),
        digest = digest.as_str()
    );
    let log = run_scripted(&site, "tamer", &script).await;
    let results = results(&log);
    let [made, ran] = &results[..] else {
        panic!("two results: {results:#?}")
    };
    for result in [made, ran] {
        assert!(!result.is_error && result.boundary.is_none(), "{result:#?}");
    }
    // The stage's log shows the steps the harness wrote, prerequisites first.
    let (mkdir, cp) = (
        made.output.find("+ mkdir build/bin").expect("mkdir ran"),
        made.output
            .find("+ cp app.sh build/bin/app")
            .expect("cp ran"),
    );
    assert!(mkdir < cp, "{}", made.output);
    assert!(
        made.output
            .contains(&format!("artifact: {}", digest.as_str())),
        "{}",
        made.output
    );
    assert!(
        made.effects
            .iter()
            .any(|(c, t)| *c == EffectClass::Build && t.contains("tame build/bin/app")),
        "{:?}",
        made.effects
    );
    let out = ran
        .output
        .lines()
        .find_map(|l| l.strip_prefix("out: "))
        .expect("the out digest");
    let out = l3m_core::build::ArtifactDigest::parse(out).unwrap();
    let result = std::fs::read_to_string(site.store.path_of(&out).join("result")).unwrap();
    assert_eq!(result, "tamed\n");
    assert_eq!(site.leftovers().await, 0, "no container or network is left");
    site.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_without_the_axes_is_offered_neither_tool_and_a_forged_call_is_refused() {
    let site = Site::start("agent-noaxis").await;
    let grant = Grant {
        build: false,
        run: false,
        ..crate::site::maker_grant()
    };
    spawn(&site, "writer", grant).await;
    let image = busybox_image();
    let script = format!(
        r#"
[[turn]]
text = "forging"
[[turn.tool_use]]
name = "build"
input = {{ source = "workspace/project", image = "{image}", command = ["true"] }}
[[turn.tool_use]]
name = "run"
input = {{ artifact = "{digest}", image = "{image}", command = ["true"] }}
[[turn]]
text = "done"
"#,
        digest = l3m_core::build::ArtifactDigest::from_bytes([7; 32]).as_str()
    );
    let log = run_scripted(&site, "writer", &script).await;
    let offered = offered(&log);
    assert!(
        !offered.iter().any(|t| t == "build" || t == "run"),
        "{offered:?}"
    );
    let results = results(&log);
    assert_eq!(results.len(), 2, "{results:#?}");
    for (result, tool) in results.iter().zip(["build", "run"]) {
        assert!(result.is_error, "{result:#?}");
        let named = format!("no tool named {tool:?} is offered");
        assert!(result.output.contains(&named), "{result:#?}");
        assert_eq!(result.boundary.as_deref(), Some("tool-table"));
        assert!(result.effects.is_empty());
    }
    assert_eq!(site.leftovers().await, 0, "nothing was started");
    site.close().await;
}
