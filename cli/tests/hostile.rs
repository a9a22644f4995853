//! What an agent or a model writes never drives the human's terminal: hostile records (ANSI
//! clear screen and colours, a fake line made of CR and LF, a bidi override, a C1 CSI) stored
//! in a real hub are printed through every command that shows them, and the bytes each command
//! writes hold no escape, no C1 and no control byte but the CLI's own newlines (and tabs). A
//! closed stdout ends a command quietly with status 141.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Read;
use std::process::Stdio;

use common::*;
use l3m_core::log::{CallId, RecordBody, ToolUse, ToolUseId, Usage};
use l3m_core::names::Entity;

/// Everything an agent could try on a terminal.
const HOSTILE: &str = "ok\x1b[2J\x1b[H\x1b[31mRED\x1b[0m\r\n#99   1970-01-01 fake-line\u{202E}txt.exe\u{9b}31m\x07\x08\u{200B}end";

/// Hostile text behind a plain start: hubd refuses a record whose one-line summary (the first
/// 72 characters of its text) holds a control character, so what gets stored past it is what a
/// model or a provider could still bring in the rest of a field.
fn hostile() -> String {
    format!("{}{HOSTILE}", "plain ".repeat(14))
}

/// A benign line first in each append: hubd's commit subject is written from the first telling
/// record, and the store wants it on one line.
fn benign() -> RecordBody {
    RecordBody::UserLine {
        from: Entity::parse("human:alice").unwrap(),
        text: "look".into(),
    }
}

/// Hostile text in every field the CLI shows and hubd stores: the prompt, a line, a reply, its
/// tool use's input and stop reason, a tool's output, a compaction's summary, a failed call's
/// error (the last word of the Log, so `tree`, `status` and `log` quote it as why the agent is
/// stuck).
fn hostile_session() -> Vec<Vec<RecordBody>> {
    let call = CallId::new("c1").unwrap();
    let tool = ToolUseId::new("t1").unwrap();
    let failed = CallId::new("c2").unwrap();
    vec![
        vec![
            RecordBody::SystemPrompt {
                text: HOSTILE.into(),
                continues: false,
            },
            benign(),
            RecordBody::UserLine {
                from: Entity::parse("human:alice").unwrap(),
                text: hostile(),
            },
            RecordBody::CallStarted {
                call: call.clone(),
                provider: "p".into(),
                model: "m".into(),
                attempt: 1,
                fallback_of: None,
            },
        ],
        vec![
            benign(),
            RecordBody::AssistantReply {
                call,
                text: hostile(),
                tool_uses: vec![ToolUse {
                    id: tool.clone(),
                    name: "read_file".into(),
                    input: serde_json::json!({ "path": HOSTILE }),
                }],
                usage: Usage::default(),
                stop_reason: HOSTILE.into(),
            },
            RecordBody::ToolStarted { id: tool.clone() },
            RecordBody::ToolResult {
                id: tool,
                output: hostile(),
                is_error: false,
                effects: vec![],
                refusal: None,
            },
        ],
        vec![
            benign(),
            RecordBody::CallStarted {
                call: failed.clone(),
                provider: "p".into(),
                model: "m".into(),
                attempt: 1,
                fallback_of: None,
            },
            RecordBody::Compaction {
                from: 1,
                to: 3,
                summary: HOSTILE.into(),
            },
            RecordBody::CallFailed {
                call: failed,
                error: hostile(),
                retryable: false,
            },
            RecordBody::TurnEnd,
        ],
    ]
}

/// The bytes `out` holds that a terminal would act on: ESC, C1 (as UTF-8), DEL, and every C0
/// control but newline and tab; and the invisible format characters that reorder text.
fn raw_controls(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n' && *c != '\t')
                || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect()
}

/// Runs `l3m ARGS` and checks neither stream carries a raw control; returns stdout.
fn shown(home: &Home, args: &[&str]) -> String {
    let out = home.l3m(args).output().unwrap();
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw = raw_controls(bytes);
        assert!(
            raw.is_empty(),
            "l3m {args:?} wrote {raw:?} raw on {stream}: {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn no_command_lets_an_agent_write_to_the_terminal() {
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.l3m(&["spawn", "demo"]).assert().success();
    append_log(&home, "demo", hostile_session());
    // A letter whose subject and body are hostile, when hubd takes it.
    let _ = home
        .l3m(&["mail", "send", "demo", HOSTILE, "--subject", HOSTILE])
        .output()
        .unwrap();

    let log = shown(&home, &["log", "demo"]);
    assert!(log.contains("^[[2J"), "the escape is shown, visibly: {log}");
    assert!(log.contains("<U+202E>"), "{log}");
    // The fake line stays inside its record's line: one line per record, and the stuck line.
    let records = log.lines().filter(|l| l.starts_with('#')).count();
    assert_eq!(records, 13, "{log}");
    assert!(
        log.lines()
            .last()
            .is_some_and(|l| l.starts_with("stuck: its last model call failed")),
        "{log}"
    );
    let view = shown(&home, &["view", "demo"]);
    assert!(view.contains("^[[31mRED^[[0m"), "{view}");
    let tree = shown(&home, &["tree"]);
    assert!(
        tree.contains("demo  stuck: its last model call failed (record "),
        "{tree}"
    );
    let status = shown(&home, &["status"]);
    assert!(
        status.contains("stuck      demo: its last model call failed"),
        "{status}"
    );
    for args in [
        &["stats"][..],
        &["ls"],
        &["mail", "ls", "demo"],
        &["cards"],
        &["credential", "ls"],
        &["grant", "show", "demo"],
    ] {
        shown(&home, args);
    }
    // JSON keeps every byte's meaning, with nothing raw on the way.
    for args in [
        &["log", "demo", "--json"][..],
        &["view", "demo", "--json"],
        &["tree", "--json"],
        &["status", "--json"],
        &["stats", "--json"],
        &["mail", "ls", "demo", "--json"],
    ] {
        shown(&home, args);
    }
    let json = shown(&home, &["log", "demo", "--json"]);
    let compaction: serde_json::Value = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["kind"] == "compaction")
        .unwrap();
    assert_eq!(
        compaction["summary"], HOSTILE,
        "the record's own summary, as stored"
    );
    assert_eq!(compaction["line"], "#1..#3 summarized");
    // An error quoting what the human typed is made visible too.
    let bad = home.l3m(&["log", "bad\x1b[2Jname"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(raw_controls(&bad.stderr).is_empty(), "{:?}", bad.stderr);

    // A closed stdout ends the command quietly, with 141, whatever it was printing.
    let big: Vec<Vec<RecordBody>> = (0..4)
        .map(|_| {
            (0..40)
                .map(|_| RecordBody::UserLine {
                    from: Entity::parse("human:alice").unwrap(),
                    text: "x".repeat(2_000),
                })
                .collect()
        })
        .collect();
    append_log(&home, "demo", big);
    for args in [&["log", "demo", "--json"][..], &["view", "demo"]] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("l3m"))
            .env("L3M_HOME", home.path())
            .env_remove("RUST_LOG")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 64];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(141),
            "l3m {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
