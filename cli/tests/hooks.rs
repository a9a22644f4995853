//! `l3m hooks test`: the hook runs in the evaluator on one event; an admissible disposition
//! exits 0, an inadmissible one or a refused hook exits 1 naming the rule, a bad event exits 2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Home, build_services};
use serde_json::Value;

const HOOK: &str = r#"
def on_event(event):
    if event["kind"] == "letter" and "newsletter" in event["text"]:
        return "dismiss"
    if event["kind"] == "letter":
        return {"kind": "reply", "text": "thanks, " + event["from"]}
    return "show"
"#;

fn write(home: &Home, name: &str, text: &str) -> String {
    let path = home.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Runs `l3m hooks test alice/main EVENT --file HOOK --json`, expecting exit `code`.
fn test(home: &Home, hook: &str, event: &str, extra: &[&str], code: i32) -> Value {
    build_services();
    let mut args = vec![
        "hooks",
        "test",
        "alice/main",
        event,
        "--file",
        hook,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = home.l3m(&args).assert().code(code).get_output().clone();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn an_admissible_disposition_exits_0_and_an_inadmissible_one_names_its_rule() {
    let home = Home::new();
    let hook = write(&home, "hooks.star", HOOK);
    let newsletter = write(
        &home,
        "news.json",
        r#"{"kind": "letter", "letter_id": "l1", "from": "alice", "text": "the newsletter"}"#,
    );
    let out = test(&home, &hook, &newsletter, &[], 0);
    assert_eq!(out["proposed"]["kind"], "dismiss");
    assert_eq!(out["admissible"], true);
    assert_eq!(out["journaled"]["kind"], "dismiss");

    // A reply to a reply is never automatic: the default (show) is journaled instead.
    let reply = write(
        &home,
        "reply.json",
        r#"{"kind": "letter", "letter_id": "l2", "from": "alice/main/w", "in_reply_to": "l1", "text": "done"}"#,
    );
    let out = test(&home, &hook, &reply, &[], 1);
    assert_eq!(out["proposed"]["kind"], "reply");
    assert_eq!(out["admissible"], false);
    assert_eq!(out["rule"], "reply-to-reply");
    assert_eq!(out["journaled"]["kind"], "show");

    // A human the agent's default reach does not cover; with a --mail cover the reply is
    // still refused: hubd keeps inboxes for agents only, so the letter would be swallowed.
    let human = write(
        &home,
        "human.json",
        r#"{"kind": "letter", "letter_id": "l3", "from": "human:bob", "text": "hi"}"#,
    );
    assert_eq!(test(&home, &hook, &human, &[], 1)["rule"], "not-reached");
    let out = test(&home, &hook, &human, &["--mail", "human:bob"], 1);
    assert_eq!(out["proposed"]["text"], "thanks, human:bob");
    assert_eq!(out["rule"], "no-inbox");
    assert_eq!(out["journaled"]["kind"], "show");
}

#[test]
fn a_hook_that_tries_an_effect_is_refused_and_bad_events_are_usage_errors() {
    let home = Home::new();
    let event = write(&home, "deadline.json", r#"{"kind": "deadline"}"#);
    let fetching = write(
        &home,
        "fetch.star",
        "def on_event(event):\n    return net_fetch(\"http://example.invalid/\")\n",
    );
    let out = test(&home, &fetching, &event, &[], 1);
    assert_eq!(out["rule"], "no-effect");
    assert_eq!(out["failure"]["line"], 2);
    assert_eq!(out["failure"]["stage"], "type");

    let failing = write(
        &home,
        "fail.star",
        "def on_event(event):\n    return 1 // 0\n",
    );
    let out = test(&home, &failing, &event, &[], 1);
    assert_eq!(out["rule"], "runtime");
    assert_eq!(out["journaled"]["kind"], "show");

    build_services();
    let hook = write(&home, "hooks.star", HOOK);
    let bad = write(&home, "bad.json", r#"{"kind": "launch"}"#);
    home.l3m(&["hooks", "test", "alice/main", &bad, "--file", &hook])
        .assert()
        .code(2);
    home.l3m(&["hooks", "test", "Not/An/Agent", &bad, "--file", &hook])
        .assert()
        .code(2);
}
