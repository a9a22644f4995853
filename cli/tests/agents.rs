//! Agents that really run: `l3m up` (processes: nats-server, hubd, `sequencer supervise`) and
//! `l3m up --embedded` (one process) each wake a spawned agent with its task letter and run
//! its scripted model to the end of its turn; and `l3m demo` runs its whole scenario.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Home, StackGuard, build_services};
use predicates::prelude::*;

const SCRIPT: &str = r#"
[[turn]]
text = "Checking the clock first."
[[turn.tool_use]]
name = "now"
input = {}

[[turn]]
text = "All done with the task."
"#;

/// A home whose l3m.toml gives every agent the scripted model above.
fn scripted_home() -> Home {
    let home = Home::new();
    home.init();
    std::fs::write(home.path().join("script.toml"), SCRIPT).unwrap();
    let doc = home.path().join("l3m.toml");
    // Top-level keys go before the document's first table.
    let mut text = "default_model = \"s\"\n".to_owned();
    text.push_str(&std::fs::read_to_string(&doc).unwrap());
    text.push_str(
        "\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\nscript = \"script.toml\"\n\
         [sequencer]\nidle_exit_secs = 1\n",
    );
    std::fs::write(&doc, text).unwrap();
    home
}

/// Spawns `worker` with a task and waits until its Log shows the scripted turn finished.
fn spawn_and_wait_for_the_turn(home: &Home) {
    home.l3m(&["spawn", "worker", "--task", "tell me the time"])
        .assert()
        .success();
    let begun = Instant::now();
    loop {
        let out = home.l3m(&["log", "worker", "--json"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("All done with the task.") && text.contains("\"turn-end\"") {
            assert!(text.contains("\"tool-result\""), "{text}");
            assert!(text.contains("\"provider\":\"scripted\""), "{text}");
            return;
        }
        assert!(
            begun.elapsed() < Duration::from_secs(60),
            "the agent never finished its turn; its Log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn up_runs_a_spawned_agent_through_the_sequencer_processes() {
    let home = scripted_home();
    build_services();
    let _guard = StackGuard { home: &home };
    home.l3m(&["up"]).assert().success();
    spawn_and_wait_for_the_turn(&home);
    let stats = home.l3m(&["stats", "worker"]).output().unwrap();
    assert!(String::from_utf8_lossy(&stats.stdout).contains("now"));

    // `l3m status` hears the supervisor process (the sequencer host) say how it is: it woke
    // the worker, and nothing failed.
    let status = home.json(&["status"]);
    let processes = status["processes"].as_array().unwrap();
    let host = processes
        .iter()
        .find(|p| p["service"] == "host")
        .unwrap_or_else(|| panic!("no host answered: {status}"));
    assert!(
        host["gauges"]["agents_woken_total"].as_u64().unwrap() >= 1,
        "{host}"
    );
    assert_eq!(host["gauges"]["wake_failures_total"], 0, "{host}");
    assert_ne!(host["pid"], status["hubd"]["pid"], "{status}");

    // Asleep now (idle exit), the worker is rewound by its host, the supervisor process, on
    // the human's voucher: a dry run first, which changes nothing, then the rewind.
    let begun = Instant::now();
    while home.json(&["ls"])["agents"][0]["life"] != "asleep" {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "the worker never fell asleep"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = || {
        let out = home.l3m(&["log", "worker", "--json"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = log();
    let forecast = home.json(&["rewind", "worker", "--to", "1", "--dry-run"]);
    assert_eq!(forecast["edits"], 0, "{forecast}");
    assert_eq!(forecast["branches"], serde_json::json!([]), "{forecast}");
    assert_eq!(log(), before, "the dry run journaled nothing");
    let rewound = home.json(&["rewind", "worker", "--to", "1"]);
    assert_eq!(rewound["online"], false, "{rewound}");
    let after = log();
    assert!(after.contains("asked by human:alice"), "{after}");
    home.l3m(&["down"]).assert().success();
}

/// The `--json` check of `l3m doctor` named `name`, run with `DOCKER_HOST` = `docker_host`
/// when given.
fn doctor_check(home: &Home, name: &str, docker_host: Option<&str>) -> serde_json::Value {
    let mut doctor = home.l3m(&["doctor", "--json"]);
    if let Some(host) = docker_host {
        doctor.env("DOCKER_HOST", host);
    }
    let out = doctor.output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {report}"))
        .clone()
}

#[test]
fn up_says_in_one_line_why_builds_are_off_and_starts_the_rest() {
    let home = scripted_home();
    build_services();
    let _guard = StackGuard { home: &home };
    let gone = home.path().join("no-engine.sock");
    let host = format!("unix://{}", gone.display());
    let up = home
        .l3m(&["up"])
        .env("DOCKER_HOST", &host)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(up.status.success(), "{text}");
    let off: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("builds are off"))
        .collect();
    assert_eq!(off.len(), 1, "{text}");
    assert!(off[0].contains(&host), "{text}");
    let run = home.run_file().unwrap();
    assert!(
        run.contains("sequencer") && !run.contains("builder"),
        "{run}"
    );
    let engine = doctor_check(&home, "engine", Some(&host));
    assert_eq!(engine["ok"], false, "{engine}");
    assert_eq!(doctor_check(&home, "builds", None)["ok"], false);
    // Asked for by name, they need the engine: nothing more starts.
    home.l3m(&["down"]).assert().success();
    home.l3m(&["up", "--services", "hubd,builder"])
        .env("DOCKER_HOST", &host)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("need a Docker engine"));
    assert!(home.run_file().is_none());
}

/// Needs a Docker engine (as the W^X build tests do): the builder and the runner reap their
/// labels and read hubd's build policy at start.
#[test]
fn up_starts_the_builder_and_the_runner_when_an_engine_answers() {
    let home = scripted_home();
    build_services();
    let _guard = StackGuard { home: &home };
    let up = home.l3m(&["up"]).output().unwrap();
    let text = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(up.status.success(), "{text}");
    assert!(!text.contains("builds are off"), "{text}");
    let run = home.run_file().unwrap();
    assert!(run.contains("builder") && run.contains("runner"), "{run}");
    assert_eq!(doctor_check(&home, "engine", None)["ok"], true);
    let builds = doctor_check(&home, "builds", None);
    assert_eq!(builds["ok"], true, "{builds}");
    home.l3m(&["down"]).assert().success();
    assert!(home.run_pids().is_empty() || home.run_file().is_none());
}

#[test]
fn up_embedded_runs_a_spawned_agent_in_one_process() {
    let home = scripted_home();
    let _guard = StackGuard { home: &home };
    let mut up = std::process::Command::new(assert_cmd::cargo::cargo_bin("l3m"))
        .env("L3M_HOME", home.path())
        .args(["up", "--embedded"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    while home.run_file().is_none() {
        assert!(
            up.try_wait().unwrap().is_none(),
            "l3m up --embedded exited early"
        );
        assert!(begun.elapsed() < Duration::from_secs(30), "no run file");
        std::thread::sleep(Duration::from_millis(50));
    }
    spawn_and_wait_for_the_turn(&home);
    home.l3m(&["down"]).assert().success();
    let _ = up.wait();
}

/// Whether the demo will find bubblewrap: by the demo's own rule (`stack::binaries::find`,
/// next to the l3m binary, on PATH, then the fallback directories), which the demo process
/// inherits this process's PATH for. In CI (`CI` set) bubblewrap must be found, since
/// `scripts/install-deps` installs it: a skipped part there would be a test that cannot fail.
fn demo_finds_bwrap() -> bool {
    let l3m = assert_cmd::cargo::cargo_bin("l3m");
    let path = std::env::var_os("PATH");
    let found = l3m::stack::binaries::find_in("bwrap", Some(&l3m), path.as_deref())
        .iter()
        .any(|p| l3m::stack::binaries::is_executable(p));
    assert!(
        found || std::env::var_os("CI").is_none(),
        "CI installs bubblewrap (scripts/install-deps), yet the demo's rule finds no bwrap: \
         the demo would skip its sandboxed parts"
    );
    found
}

/// What the demo prints of `tidy`'s reviewed shell call: the deliberation and the sandboxed
/// run where bubblewrap is installed, and why it was skipped where it is not.
fn reviewed_shell_call() -> predicates::BoxPredicate<str> {
    if demo_finds_bwrap() {
        predicate::str::contains(
            "[ok] the shell call was deliberated: unclear at round 1, safe at round 2",
        )
        .and(predicate::str::contains(
            "[ok] the approved shell call ran in the sandbox and its result was journaled",
        ))
        .and(predicate::str::contains("3 lines.txt"))
        .and(predicate::str::contains(
            "why does the task need a new file",
        ))
        .boxed()
    } else {
        predicate::str::contains(
            "reviewed shell call: skipped, the reviewed shell call needs bubblewrap",
        )
        .boxed()
    }
}

/// What the demo prints of `smith`'s own program: the tool it wrote, offered from its next
/// boot and answering through its tokens, where bubblewrap is installed; why it was skipped
/// where it is not.
fn self_extension() -> predicates::BoxPredicate<str> {
    if demo_finds_bwrap() {
        predicate::str::contains(
            "[ok] smith's own program was a tool only from the boot after it wrote it",
        )
        .and(predicate::str::contains(
            "[ok] smith's program ran in its evaluator and counted the TODOs through smith's tokens",
        ))
        .and(predicate::str::contains(r#"answered {"todos":3}"#))
        .boxed()
    } else {
        predicate::str::contains("self-extension: skipped, sealed programs need bubblewrap").boxed()
    }
}

#[test]
fn the_demo_shows_the_refused_widening_the_restored_file_and_branch_airmail_vigils_and_a_program() {
    // The demo's W^X build runs in the image deploy/images/build makes; the demo makes it
    // itself when the engine lacks it, so nothing is prepared here.
    let home = Home::new();
    let root = home.path().join("demo-hub");
    home.l3m(&["demo", "--hub-root", root.to_str().unwrap()])
        .timeout(Duration::from_secs(180))
        .assert()
        .success()
        .stdout(predicate::str::contains("SCRIPTED"))
        .stdout(predicate::str::contains("refused widening"))
        .stdout(predicate::str::contains("axis `net`"))
        .stdout(predicate::str::contains(
            "restored 1 file edit of workspace/notes.md; moved back 1 branch: refs/heads/l3m/lead/worker/_/work",
        ))
        .stdout(predicate::str::contains(
            "not undone (it left this host or cannot be taken back): mail letter to agent:lead",
        ))
        .stdout(predicate::str::contains(
            "[ok] the worker committed on its work branch",
        ))
        .stdout(predicate::str::contains(
            "[ok] lead's airmail reached bob at south, stamped office:north agent:lead*",
        ))
        .stdout(predicate::str::contains(
            "[ok] bob's read came back to lead at north as a receipt",
        ))
        .stdout(predicate::str::contains("no agent nobody lives on this hub"))
        .stdout(reviewed_shell_call())
        .stdout(self_extension())
        .stdout(predicate::str::contains(
            "[ok] the build ran with no network and journaled the artifact's digest",
        ))
        .stdout(predicate::str::contains(
            "[ok] the run, by that digest only, wrote its result into a fresh out/",
        ))
        .stdout(predicate::str::contains(
            "out/greeting.txt: \"built without a network, run by its digest\"",
        ))
        .stdout(predicate::str::contains(
            "[ok] keeper could not cancel the vigil the human pinned on it",
        ))
        .stdout(predicate::str::contains(
            "[ok] both vigils fired once each and reached keeper as events",
        ))
        .stdout(predicate::str::contains("FAILED").not());
    for hub in [root.clone(), root.join("south")] {
        let fsck = l3m_git::repo_command(&hub.join("hub.git"))
            .args(["fsck", "--strict"])
            .output()
            .unwrap();
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );
    }
    // The rewind went back before the commit: the branch no longer holds it.
    let git = |args: &[&str]| {
        let out = l3m_git::repo_command(&root.join("hub.git"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let work = "refs/heads/l3m/lead/worker/_/work";
    let log = git(&["log", "--oneline", work]);
    assert!(!log.contains("notes: first version"), "{log}");
    assert!(log.contains("work of lead begins"), "{log}");
}
