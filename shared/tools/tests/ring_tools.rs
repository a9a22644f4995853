//! The git, hub and shell tools through a real table and real effects: a whole commit-and-push
//! flow on a worktree of a bare hub repository, letters and spawns reaching the outlet in their
//! core form, and the shell's review card saying what it would do.
// The test plays the harness: it lays the hub out on disk and mints with ambient authority; a
// fixture that cannot be set up is a failed test.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::unwrap_used
)]

#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
use l3m_ring::test_support::git_hub;

#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
use l3m_ring::test_support::net_server;

use std::sync::Arc;

use git_hub::{GitHub, WORK};
use l3m_core::clock::FixedClock;
use l3m_core::grant::SpawnLevel;
use l3m_ring::effects::{Effects, HubOutlet, OutletError};
use l3m_ring::test_support::outlet::Recorder;
use l3m_ring::undo::MemoryUndo;
use l3m_tools::{Dispatch, ToolError, ToolOutput, ToolTable, builtin};
use serde_json::{Value, json};

/// The instant every stamp here reads.
const CLOCK: FixedClock = FixedClock(1_750_000_000_000);

struct Session {
    table: ToolTable,
    fx: Effects,
    outlet: Arc<Recorder>,
}

fn session(hub: &GitHub, spawn: Option<SpawnLevel>, wild: bool) -> Session {
    let mut tokens = hub.tokens();
    if spawn.is_some() || wild {
        let extra = l3m_ring::tokens::MintInput {
            acr: hub.acr.clone(),
            spawn,
            wild: wild.then(|| vec![l3m_core::effects::EffectClass::Shell]),
            ..Default::default()
        };
        let more = l3m_ring::tokens::mint(&extra, l3m_ring::ambient_authority()).unwrap();
        tokens.spawn = more.spawn;
        tokens.wild = more.wild;
    }
    tokens.mail = hub_mail(hub);
    let table = ToolTable::build(builtin(), &tokens.conferred()).unwrap();
    let journal = MemoryUndo::default();
    let outlet = Arc::new(Recorder::refusing_spawns(OutletError::Refused {
        code: "widening".into(),
        reason: "spawn refused on axis `net`".into(),
        axis: None,
    }));
    let fx = Effects::new(
        tokens,
        Arc::new(journal),
        Arc::new(CLOCK),
        Some(Arc::clone(&outlet) as Arc<dyn HubOutlet>),
    );
    Session { table, fx, outlet }
}

fn hub_mail(hub: &GitHub) -> Option<l3m_ring::tokens::MailToken> {
    let input = l3m_ring::tokens::MintInput {
        acr: hub.acr.clone(),
        mail: Some(l3m_ring::tokens::MailInput {
            agent: l3m_core::names::AgentName::parse("alice").unwrap(),
            covers: vec![],
        }),
        ..Default::default()
    };
    l3m_ring::tokens::mint(&input, l3m_ring::ambient_authority())
        .unwrap()
        .mail
}

fn ran(s: &Session, tool: &str, input: Value) -> Result<ToolOutput, ToolError> {
    match s.table.dispatch(tool, input, &s.fx) {
        Dispatch::Ran(result) => result,
        other => panic!("{tool} did not run: {other:?}"),
    }
}

#[test]
fn status_commit_log_and_push_through_the_tools() {
    let hub = GitHub::new();
    let s = session(&hub, None, false);
    std::fs::write(hub.ws.join("notes.md"), "hello\n").unwrap();
    let status = ran(&s, "git_status", json!({})).unwrap().text;
    assert!(
        status.contains(WORK) && status.contains("added: notes.md"),
        "{status}"
    );
    let diff = ran(&s, "git_diff", json!({"worktree": "workspace"}))
        .unwrap()
        .text;
    assert!(
        diff.contains("+++ b/notes.md\n") && diff.contains("+hello"),
        "{diff}"
    );
    let done = ran(&s, "git_commit", json!({"message": "Add notes"}))
        .unwrap()
        .text;
    assert!(
        done.contains(WORK) && done.contains("1 paths changed"),
        "{done}"
    );
    assert_eq!(
        hub.git(&hub.ws, &["log", "-1", "--format=%an|%at|%s"])
            .trim(),
        "alice|1750000000|Add notes"
    );
    let log = ran(&s, "git_log", json!({"count": 1})).unwrap().text;
    assert!(
        log.contains("alice <alice@l3m.invalid> — Add notes"),
        "{log}"
    );
    let pushed = ran(&s, "git_push", json!({"remote": "origin", "branch": WORK}))
        .unwrap()
        .text;
    assert!(pushed.contains("origin"), "{pushed}");
    assert_eq!(hub.tip("remote.git", WORK), hub.tip("hub.git", WORK));
    assert!(matches!(
        ran(&s, "git_log", json!({"count": 0})),
        Err(ToolError::BadInput { field, .. }) if field == "count"
    ));
}

#[test]
fn send_letter_and_spawn_agent_reach_the_outlet_in_core_form() {
    let hub = GitHub::new();
    let s = session(&hub, Some(SpawnLevel::Persist), false);
    let sent = ran(
        &s,
        "send_letter",
        json!({"to": "alice/helper", "subject": "hi", "body": "the plan"}),
    )
    .unwrap()
    .text;
    assert!(sent.contains("l-1"), "{sent}");
    let refused = ran(
        &s,
        "spawn_agent",
        json!({
            "name": "alice/helper",
            "task": "read the code",
            "grant": {"files": ["workspace"], "net": ["example.org"]},
            "loan": {"model-calls": 5, "bytes": 0, "wakes": 0}
        }),
    )
    .unwrap_err();
    assert!(refused.to_string().contains("axis `net`"), "{refused}");
    assert_eq!(
        s.outlet.calls(),
        [
            "letter to agent:alice/helper* | Some(\"hi\") | the plan".to_owned(),
            "spawn alice/helper driven=false loan=5 grant={\"files\":[\"workspace\"],\"git-read\":[],\
             \"git-write\":[],\"git-push\":{},\"net\":[\"example.org\"],\"mail\":[],\"spawn\":\"off\",\
             \"airmail\":[],\"postman\":false,\"wild\":[],\"build\":false,\"run\":false,\
             \"review\":false,\"lifetime\":\"unbounded\"} | read the code"
                .to_owned(),
        ]
    );
    for (input, field) in [
        (json!({"name": "Alice", "task": "t", "grant": {}}), "name"),
        (
            json!({"name": "alice/x", "task": "t", "grant": {"flies": []}}),
            "grant",
        ),
        (
            json!({"name": "alice/x", "task": "t", "grant": {}, "loan": 3}),
            "loan",
        ),
    ] {
        assert!(
            matches!(ran(&s, "spawn_agent", input), Err(ToolError::BadInput { field: f, .. }) if f == field),
            "{field}"
        );
    }
}

#[test]
fn a_shell_call_becomes_a_card_describing_its_effect() {
    let hub = GitHub::new();
    let s = session(&hub, None, true);
    let input = json!({"program": "sh", "args": ["-c", "ls"], "timeout_s": 5});
    match s.table.dispatch("shell", input.clone(), &s.fx) {
        Dispatch::NeedsReview(card) => {
            assert_eq!(card.input, input);
            assert_eq!(
                card.effect,
                "runs `sh` with arguments [\"-c\", \"ls\"] in `workspace`, sandboxed: no network, \
                 writes only under the write roots, killed after 5 s"
            );
        }
        other => panic!("expected a card, got {other:?}"),
    }
}

#[test]
fn fetch_url_fetches_from_a_granted_host_and_refuses_others() {
    let hub = GitHub::new();
    let server = net_server::Server::start("127.0.0.1", |_| {
        net_server::response(
            "200 OK",
            &[("Content-Type", "text/plain")],
            b"hello from the host",
        )
    });
    let mut tokens = hub.tokens();
    tokens.net = Some(net_server::token(&[format!("127.0.0.1:{}", server.port)]));
    let table = ToolTable::build(builtin(), &tokens.conferred()).unwrap();
    let journal = MemoryUndo::default();
    let s = Session {
        table,
        fx: Effects::new(tokens, Arc::new(journal), Arc::new(CLOCK), None),
        outlet: Arc::new(Recorder::default()),
    };
    let url = format!("http://127.0.0.1:{}/page", server.port);
    let got = ran(&s, "fetch_url", json!({"url": url})).unwrap().text;
    assert!(
        got.starts_with("status 200\n")
            && got.contains("content-type text/plain")
            && got.ends_with("\nhello from the host"),
        "{got}"
    );
    let before = server.seen().len();
    for refused in [
        format!("http://127.0.0.2:{}/page", server.port),
        format!("http://localhost:{}/page", server.port),
        "file:///etc/passwd".to_owned(),
    ] {
        assert!(
            matches!(
                ran(&s, "fetch_url", json!({"url": refused})),
                Err(ToolError::Net(_))
            ),
            "{refused}"
        );
    }
    assert_eq!(
        server.seen().len(),
        before,
        "a refused fetch reached nothing"
    );
}

#[test]
fn build_and_run_check_their_fields_and_the_tokens_before_the_outlet_sees_anything() {
    use l3m_core::build::ArtifactDigest;
    use l3m_core::grant::{AcrPath, HostPattern};
    use l3m_ring::effects::StageError;

    let hub = GitHub::new();
    let offered =
        |table: &ToolTable| -> Vec<String> { table.offered().map(|o| o.name.clone()).collect() };
    let without = ToolTable::build(builtin(), &hub.tokens().conferred()).unwrap();
    let names = offered(&without);
    assert!(
        !names.iter().any(|n| n == "build" || n == "run"),
        "{names:?}"
    );

    let alice = l3m_core::names::AgentName::parse("alice").unwrap();
    let extra = l3m_ring::tokens::MintInput {
        acr: hub.acr.clone(),
        build: Some(l3m_ring::tokens::BuildInput {
            agent: alice.clone(),
            sources: [AcrPath::parse("workspace").unwrap()].into(),
            hosts: [HostPattern::parse("pkgs.test").unwrap()].into(),
        }),
        run: Some(alice),
        ..Default::default()
    };
    let more = l3m_ring::tokens::mint(&extra, l3m_ring::ambient_authority()).unwrap();
    let mut tokens = hub.tokens();
    tokens.build = more.build;
    tokens.run = more.run;
    let table = ToolTable::build(builtin(), &tokens.conferred()).unwrap();
    let names = offered(&table);
    assert!(names.iter().any(|n| n == "build") && names.iter().any(|n| n == "run"));
    let outlet = Arc::new(Recorder::default());
    let s = Session {
        table,
        fx: Effects::new(
            tokens,
            Arc::new(MemoryUndo::default()),
            Arc::new(CLOCK),
            Some(Arc::clone(&outlet) as Arc<dyn HubOutlet>),
        ),
        outlet,
    };
    let build = |extra: Value| {
        let mut input = json!({"source": "workspace/app", "image": "img", "command": ["make"]});
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        ran(&s, "build", input)
    };
    // Refused by the ring, naming what is not covered: a source outside the write roots, a
    // fetch host off the net axis.
    let err = ran(
        &s,
        "build",
        json!({"source": "other-repo", "image": "img", "command": ["make"]}),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ToolError::Stage(StageError::Uncovered(_))),
        "{err}"
    );
    assert_eq!(err.refusal().unwrap().boundary, "build");
    let fetch = json!({"lockfile": "workspace/app/lock", "fetch_command": ["fetch"], "hosts": ["evil.test"]});
    let err = build(fetch).unwrap_err();
    assert!(err.to_string().contains("evil.test"), "{err}");
    // Fields that make no plan are the model's to fix.
    for (extra, field) in [
        (json!({"fetch_command": ["fetch"]}), "lockfile"),
        (json!({"lockfile": "workspace/app/lock"}), "fetch_command"),
        (json!({"hosts": ["pkgs.test"]}), "hosts"),
        (json!({"command": []}), "command"),
        (json!({"source": "../escape"}), "source"),
        (json!({"deadline_s": 100_000}), "deadline_s"),
    ] {
        let err = build(extra).unwrap_err();
        assert!(
            matches!(&err, ToolError::BadInput { field: f, .. } if f == field),
            "{field}: {err}"
        );
    }
    let err = ran(
        &s,
        "run",
        json!({"artifact": "not-a-digest", "image": "img", "command": ["/artifact/app"]}),
    )
    .unwrap_err();
    assert!(matches!(&err, ToolError::BadInput { field, .. } if field == "artifact"));
    assert!(
        s.outlet.calls().is_empty(),
        "nothing refused reached the outlet"
    );

    // A covered build and a run reach the outlet; a builder or runner that is not running is
    // a typed error naming the service, not a crash.
    let fetch = json!({"lockfile": "workspace/app/lock", "fetch_command": ["fetch"], "hosts": ["pkgs.test"]});
    let err = build(fetch).unwrap_err();
    assert!(
        matches!(
            &err,
            ToolError::Stage(StageError::Unreachable {
                service: "builder",
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(
        err.refusal(),
        None,
        "unreachable is a failure, not a refusal"
    );
    let digest = ArtifactDigest::from_bytes([7; 32]);
    let err = ran(
        &s,
        "run",
        json!({"artifact": digest.as_str(), "image": "img", "command": ["/artifact/app"]}),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("the runner could not be reached"),
        "{err}"
    );
    assert_eq!(
        s.outlet.calls(),
        [
            "build workspace/app".to_owned(),
            format!("run {}", digest.as_str())
        ]
    );
}

#[test]
fn watch_and_unwatch_reach_the_outlet_with_times_from_the_granted_clock() {
    let hub = GitHub::new();
    let s = session(&hub, None, false);
    let now = CLOCK.0;
    let armed = ran(&s, "watch", json!({"fact": "deadline", "in_secs": 60})).unwrap();
    assert!(armed.text.starts_with("armed vigil v1: "), "{}", armed.text);
    ran(
        &s,
        "watch",
        json!({"fact": "child-done", "child": "alice/helper", "on": "alice/helper", "for_secs": 5}),
    )
    .unwrap();
    ran(
        &s,
        "watch",
        json!({"fact": "ref-moved", "agent": "alice", "ref": "inbox"}),
    )
    .unwrap();
    ran(&s, "unwatch", json!({"id": "v1"})).unwrap();
    let day = 24 * 60 * 60 * 1000;
    assert_eq!(
        s.outlet.calls(),
        [
            format!(
                "arm self {{\"kind\":\"deadline\",\"at_ms\":{}}} until={}",
                now + 60_000,
                now + day
            ),
            format!(
                "arm alice/helper {{\"kind\":\"child-done\",\"child\":\"alice/helper\"}} until={}",
                now + 5_000
            ),
            format!(
                "arm self {{\"kind\":\"ref-moved\",\"agent\":\"alice\",\"which\":\"inbox\",\"from\":null}} until={}",
                now + day
            ),
            "cancel self v1".to_owned(),
        ]
    );
    for (input, field) in [
        (json!({"fact": "deadline"}), "in_secs"),
        (json!({"fact": "deadline", "in_secs": 0}), "in_secs"),
        (
            json!({"fact": "deadline", "in_secs": 5, "for_secs": 700_000}),
            "for_secs",
        ),
        (
            json!({"fact": "ref-moved", "agent": "alice", "ref": "vigilz"}),
            "ref",
        ),
        (
            json!({"fact": "letter-read", "letter": "L1", "reader": "Bob"}),
            "reader",
        ),
        (json!({"fact": "soon"}), "fact"),
    ] {
        let err = ran(&s, "watch", input.clone()).unwrap_err();
        assert!(
            matches!(&err, ToolError::BadInput { field: f, .. } if f == field),
            "{input}: {err}"
        );
    }
    assert_eq!(
        s.outlet.calls().len(),
        4,
        "nothing refused reached the outlet"
    );
}
