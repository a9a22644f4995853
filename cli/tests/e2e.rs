//! The real `l3m` binary end to end against a real stack: nats-server and hubd started by
//! `l3m up`, every command run as a separate process, `--json` output parsed and asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use l3m_core::log::{CallId, RecordBody, ToolUse, ToolUseId, Usage};
use l3m_core::names::Entity;
use l3m_wire::bus::{NatsAuth, NatsBus};
use predicates::prelude::*;

/// Appends a short session to `agent`'s Log as its sequencer would (a sequencer-duty session
/// opened with the host credential), so log, view and stats have something real to read.
fn append_session(home: &Home, agent: &str) {
    let call = CallId::new("c1").unwrap();
    let tool = ToolUseId::new("t1").unwrap();
    let bodies = vec![
        RecordBody::SystemPrompt {
            text: "You keep notes.".into(),
            continues: false,
        },
        RecordBody::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: "write the notes".into(),
        },
        started(&call),
        RecordBody::AssistantReply {
            call,
            text: "Writing them now.".into(),
            tool_uses: vec![ToolUse {
                id: tool.clone(),
                name: "write_file".into(),
                input: serde_json::json!({"path": "workspace/notes.md", "content": "hi"}),
            }],
            usage: Usage {
                input_tokens: 120,
                output_tokens: 30,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
            },
            stop_reason: "tool_use".into(),
        },
        RecordBody::ToolStarted { id: tool.clone() },
        RecordBody::ToolResult {
            id: tool,
            output: "wrote workspace/notes.md".into(),
            is_error: false,
            effects: vec![],
            refusal: None,
        },
    ];
    append_log(home, agent, vec![bodies]);
}

/// A first attempt of `call` on the scripted demo model.
fn started(call: &CallId) -> RecordBody {
    RecordBody::CallStarted {
        call: call.clone(),
        provider: "scripted".into(),
        model: "demo".into(),
        attempt: 1,
        fallback_of: None,
    }
}

/// Appends a model call that failed for good to `agent`'s Log.
fn append_failed_call(home: &Home, agent: &str) {
    let call = CallId::new("c2").unwrap();
    let bodies = vec![
        started(&call),
        RecordBody::CallFailed {
            call,
            error: "the model's reply of 300000 bytes exceeds the limit".into(),
            retryable: false,
        },
    ];
    append_log(home, agent, vec![bodies]);
}

#[test]
fn a_whole_session_through_the_cli() {
    let home = Home::new();
    home.init();
    let doc = std::fs::read_to_string(home.path().join("l3m.toml")).unwrap();
    assert!(
        doc.contains("human = \"alice\"") && doc.contains("[hubs.local]"),
        "{doc}"
    );
    let stack = home.up();
    let pids = home.run_pids();
    assert_eq!(pids.len(), 2, "nats-server and hubd: {:?}", home.run_file());
    assert!(pids.iter().all(|p| pid_alive(*p)));
    // Auth is on even on one machine: a connection without a user is refused, so no local
    // process can watch sessions open; the services' passwords are in no process's arguments.
    let anonymous = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(NatsBus::connect(&home.nats_url(), NatsAuth::Anonymous));
    assert!(anonymous.is_err(), "an anonymous connection was accepted");
    let users = std::fs::read_to_string(home.hub_root().join(".l3m-run/nats-users.toml")).unwrap();
    for pid in &pids {
        // nats-server and hubd get no API key of the shell that ran `l3m up`.
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(
            !String::from_utf8_lossy(&environ).contains(SENTINEL),
            "pid {pid} inherited the shell's API key"
        );
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let argv = String::from_utf8_lossy(&argv);
        for line in users.lines() {
            let password = line.split('"').nth(1).unwrap();
            assert!(
                !argv.contains(password),
                "a password in pid {pid}'s arguments"
            );
        }
    }

    // Spawn under flags; the task arrives as a letter from the human.
    let spawned = home.json(&[
        "spawn",
        "demo",
        "--files",
        "workspace",
        "--spawn",
        "persist",
        "--task",
        "write notes",
    ]);
    assert_eq!(spawned["child"], "demo");
    assert_eq!(spawned["work_branch"], "refs/heads/l3m/demo/_/work");
    assert!(spawned["task_letter"].is_string());

    // A widening spawn is refused naming the axis, exit 4.
    home.l3m(&["spawn", "wide", "--net", "example.com"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("axis `net`"));

    let ls = home.json(&["ls"]);
    assert_eq!(ls["agents"].as_array().unwrap().len(), 1);
    assert_eq!(ls["agents"][0]["name"], "demo");
    assert_eq!(ls["agents"][0]["life"], "asleep");
    assert_eq!(ls["agents"][0]["parent"], "human:alice");

    home.l3m(&["say", "demo", "hello there"]).assert().success();
    home.l3m(&["mail", "send", "demo", "second letter", "--subject", "more"])
        .assert()
        .success()
        .stdout(predicate::str::contains("→ demo"));
    let mail = home.json(&["mail", "ls", "demo"]);
    let letters = mail["inboxes"][0]["letters"].as_array().unwrap();
    assert_eq!(letters.len(), 3);
    assert_eq!(letters[0]["subject"], "task");
    assert_eq!(letters[1]["body"], "hello there");
    assert_eq!(letters[2]["subject"], "more");
    assert!(
        letters
            .iter()
            .all(|l| l["read"] == false && l["from"] == "human:alice*")
    );
    home.l3m(&["mail", "ls"])
        .assert()
        .success()
        .stdout(predicate::str::contains("[ ]"));

    let grant = home.json(&["grant", "show", "demo"]);
    assert_eq!(grant["grant"]["files"], serde_json::json!(["workspace"]));
    assert_eq!(grant["grant"]["spawn"], "persist");
    assert_eq!(grant["account"]["loan"]["model-calls"], 100);
    home.l3m(&["grant", "show", "demo"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("spawn      persist")
                .and(predicate::str::contains("net        (none)")),
        );

    // A Log written as the sequencer writes it: log, view and stats read it back.
    append_session(&home, "demo");
    // Offices: this hub's identity was made at init; pinning a peer writes the settings, a
    // bad pin or a second one of the same name is refused with nothing written.
    let identity = home.json(&["office", "show-identity"]);
    let fingerprint = identity["fingerprint"].as_str().unwrap().to_owned();
    assert!(
        fingerprint.starts_with("sha256:") && fingerprint.len() == 71,
        "{identity}"
    );
    home.l3m(&[
        "office",
        "add",
        "south",
        "--addr",
        "127.0.0.1:4433",
        "--cert-sha256",
        &fingerprint,
    ])
    .assert()
    .success();
    home.l3m(&[
        "office",
        "add",
        "south",
        "--addr",
        "127.0.0.1:4434",
        "--cert-sha256",
        &fingerprint,
    ])
    .assert()
    .code(4)
    .stderr(predicate::str::contains("already pinned"));
    home.l3m(&[
        "office",
        "add",
        "west",
        "--addr",
        "127.0.0.1:4435",
        "--cert-sha256",
        "12ab",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains("64 hex"));
    let offices = home.json(&["office", "ls"]);
    assert_eq!(offices["offices"].as_array().unwrap().len(), 1, "{offices}");
    assert_eq!(offices["offices"][0]["name"], "south");
    assert_eq!(offices["offices"][0]["addr"], "127.0.0.1:4433");
    // No postman runs in this stack: the link state says so rather than inventing one.
    assert_eq!(offices["postman"], false, "{offices}");
    assert!(offices["offices"][0]["status"].is_null(), "{offices}");
    assert_eq!(
        format!(
            "sha256:{}",
            offices["offices"][0]["cert_sha256"].as_str().unwrap()
        ),
        fingerprint
    );
    // doctor fails while an office is pinned and no postman carries to it.
    let doctor = home.l3m(&["doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert!(!doctor.status.success(), "{report}");
    let postman = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "postman" && c["ok"] == false)
        .unwrap_or_else(|| panic!("no failed postman check: {report}"))
        .clone();
    assert!(
        postman["detail"]
            .as_str()
            .unwrap()
            .contains("no postman answers"),
        "{postman}"
    );
    home.l3m(&["office", "rm", "south"]).assert().success();
    assert_eq!(
        home.json(&["office", "ls"])["offices"],
        serde_json::json!([])
    );

    // Rewinding an asleep agent is its host's to do; with no supervisor up (this stack runs
    // hubd alone) the command says so and what to run, and the CLI does not act in its place.
    let log_text = |home: &Home| home.l3m(&["log", "demo"]).output().unwrap().stdout;
    let before = log_text(&home);
    home.l3m(&["rewind", "demo", "--to", "1", "--dry-run"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("the host of demo did not answer"))
        .stderr(predicate::str::contains("l3m up"));
    assert_eq!(log_text(&home), before, "nothing was journaled");
    let grant = home.json(&["grant", "show", "demo"]);
    assert_eq!(grant["spent_per_log"]["model-calls"], 1, "{grant}");
    assert_eq!(grant["left"]["model-calls"], 99, "{grant}");
    home.l3m(&["log", "demo"])
        .assert()
        .success()
        .stdout(predicate::str::contains("#0").and(predicate::str::contains("write_file")));
    let out = home
        .l3m(&["log", "demo", "--from", "4", "--json"])
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["kind"], "tool-started");
    assert_eq!(lines[1]["seq"], 5);
    let view = home.json(&["view", "demo"]);
    assert_eq!(view["system"], "You keep notes.");
    assert_eq!(view["messages"][1]["role"], "assistant");
    assert_eq!(view["messages"][1]["tool_uses"][0]["name"], "write_file");
    home.l3m(&["view", "demo"]).assert().success().stdout(
        predicate::str::contains("── system ──").and(predicate::str::contains("← result t1")),
    );
    let stats = home.json(&["stats"]);
    let demo = &stats["agents"]["demo"];
    assert_eq!(demo["model_calls"], 1);
    assert_eq!(
        (demo["tokens_in"].as_u64(), demo["tokens_out"].as_u64()),
        (Some(120), Some(30))
    );
    assert_eq!(demo["tools"]["write_file"]["uses"], 1);
    assert_eq!(demo["tools"]["write_file"]["total_ms"], 250);
    let economy = &stats["economy"]["demo"];
    assert_eq!(
        (
            economy["input_tokens"].as_u64(),
            economy["output_tokens"].as_u64()
        ),
        (Some(120), Some(30))
    );
    assert!(
        economy["request_bytes"].as_u64().is_some_and(|b| b > 0),
        "{economy}"
    );

    // Personas: a human publishes one; an agent without a persona branch has nothing to publish.
    let published = home.json(&["persona", "new", "coder"]);
    assert_eq!(published["refname"], "refs/l3m/personas/coder");
    // This home configures no model: spawn says so, and the tree says why the agent sleeps.
    let spawned = home.json(&["spawn", "wearer", "--persona", "coder"]);
    assert!(
        spawned["warning"]
            .as_str()
            .is_some_and(|w| w.contains("default_model") && w.contains("sleep")),
        "{spawned}"
    );
    let tree = home.json(&["tree"]);
    let roots = tree["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 2);
    let wearer = roots.iter().find(|n| n["name"] == "wearer").unwrap();
    assert!(
        wearer["stuck"]
            .as_str()
            .is_some_and(|s| s.contains("no sequencer runs it")),
        "{tree}"
    );
    home.l3m(&["tree"])
        .assert()
        .success()
        .stdout(predicate::str::contains("└── wearer  stuck: "));
    // An agent whose last call failed for good says so where the human looks.
    append_failed_call(&home, "demo");
    let tree = home.json(&["tree"]);
    let demo = tree["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "demo")
        .unwrap();
    assert!(
        demo["stuck"].as_str().is_some_and(
            |s| s.contains("its last model call failed") && s.contains("exceeds the limit")
        ),
        "{tree}"
    );
    let again = home.json(&["persona", "publish", "coder", "--from", "wearer"]);
    assert_eq!(again["previous"], published["commit"]);
    let pulled = home.json(&["persona", "pull", "wearer"]);
    assert_eq!(pulled["persona"], "coder");
    assert_eq!(pulled["upstream"], again["commit"]);
    assert_eq!(pulled["updated"], serde_json::json!([]));
    home.l3m(&["persona", "pull", "demo"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("wears no persona"));
    home.l3m(&["persona", "publish", "coder", "--from", "demo"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("has no instructions.md"));

    // Unknown agents are exit 3 everywhere.
    for args in [
        &["log", "ghost"][..],
        &["grant", "show", "ghost"],
        &["retire", "ghost"],
        &["stats", "ghost"],
    ] {
        home.l3m(args)
            .assert()
            .code(3)
            .stderr(predicate::str::contains("ghost"));
    }
    // A bad name is a usage error before anything is sent.
    home.l3m(&["log", "Bad Name"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not an agent name"));

    let retired = home.json(&["retire", "demo"]);
    assert_eq!(retired["agents"], serde_json::json!(["demo"]));
    let collected = home.json(&["collect", "demo"]);
    assert_eq!(collected["agent"], "demo");
    let ls = home.json(&["ls"]);
    let demo = ls["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "demo")
        .unwrap()
        .clone();
    assert_eq!(demo["life"], "collected");

    // Settings: shown as written, replaced whole against the commit read, a bad URL refused
    // (exit 2, naming the remote), an edit against an older commit refused (exit 4).
    let shown = home.json(&["settings", "show"]);
    let first_tip = shown["tip"].as_str().unwrap().to_owned();
    let mut text = shown["text"].as_str().unwrap().to_owned();
    text.push_str("[remotes]\norigin = \"https://git.example/app.git\"\n");
    let file = home.path().join("settings.toml");
    std::fs::write(&file, &text).unwrap();
    let file_arg = file.to_str().unwrap();
    let applied = home.json(&["settings", "apply", file_arg, "--expect", &first_tip]);
    assert_eq!(applied["previous"], first_tip.as_str());
    home.l3m(&["settings", "show"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "origin = \"https://git.example/app.git\"",
        ));
    home.l3m(&["settings", "apply", file_arg, "--expect", &first_tip])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("refs/l3m/settings"));
    std::fs::write(
        &file,
        text.replace("https://git.example/app.git", "ext::sh -c id"),
    )
    .unwrap();
    home.l3m(&["settings", "apply", file_arg])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("`origin`"));

    let doctor = home.l3m(&["doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(check("nats-server")["ok"], true);
    assert_eq!(check("hubd")["ok"], true);
    assert_eq!(check("hub")["ok"], true);
    assert!(
        check("stack")["detail"]
            .as_str()
            .unwrap()
            .contains("2 of 2 processes alive")
    );
    assert_eq!(doctor.status.success(), report["ok"] == true);

    // `l3m status` shows hubd well, with its process and the ledger's agents; nothing runs
    // agents (no supervisor) and no postman answers.
    let status = home.json(&["status"]);
    assert_eq!(status["hubd"]["service"], "hubd");
    let hubd_pid = status["hubd"]["pid"].as_u64().unwrap() as u32;
    assert!(pids.contains(&hubd_pid), "status names the stack's hubd");
    assert!(status["hubd"]["checks"][0]["ok"].as_bool().unwrap());
    assert!(status["hubd"]["gauges"]["agents_live"].as_u64().unwrap() >= 1);
    assert!(status["hubd"]["gauges"]["requests_total"].as_u64().unwrap() > 10);
    assert_eq!(status["hosts"], serde_json::json!([]));
    assert!(status["postman"].is_null());
    home.l3m(&["status"])
        .assert()
        .success()
        .stdout(predicate::str::contains("hubd       ok on"));

    // `l3m up` over a live stack refuses; `l3m down` stops every process.
    home.l3m(&["up", "--services", "hubd"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already up"));
    home.l3m(&["down"]).assert().success();
    assert!(pids.iter().all(|p| !pid_alive(*p)), "every process stopped");
    assert!(home.run_file().is_none());
    for command in ["ls", "status"] {
        home.l3m(&[command])
            .assert()
            .code(5)
            .stderr(predicate::str::contains("run `l3m up`"));
    }
    drop(stack);
}

#[test]
fn log_follow_prints_records_as_they_are_appended() {
    use std::io::BufRead;
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.l3m(&["spawn", "demo"]).assert().success();
    let mut follow = std::process::Command::new(assert_cmd::cargo::cargo_bin("l3m"))
        .env("L3M_HOME", home.path())
        .args(["log", "demo", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // The follower subscribes before its first read; give it a moment to be up, then append.
    std::thread::sleep(std::time::Duration::from_millis(500));
    append_session(&home, "demo");
    let mut seen = Vec::new();
    while seen.len() < 6 {
        match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(line) => seen.push(serde_json::from_str::<serde_json::Value>(&line).unwrap()),
            Err(e) => {
                let _ = follow.kill();
                panic!("only {} records followed: {e}", seen.len());
            }
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    let seqs: Vec<u64> = seen.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5]);
    assert_eq!(seen[0]["kind"], "system-prompt");
}
