//! The scripted provider: replies chosen by the view alone, tool-use ids per call, the end of
//! the script, expectations, and scripts that are wrong.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

use std::path::Path;
use std::time::Duration;

use l3m_core::log::{CallId, ToolUse, ToolUseId};
use l3m_core::view::{Message, Part, View};
use l3m_models::scripted::{NO_MORE_TURNS, Script, Scripted};
use l3m_models::{Dialect, ModelConfig, ModelError, ModelRequest, Provider, build};
use serde_json::json;

const SCRIPT: &str = r#"
[[turn]]
text = "I will read the file."
expect_contains = "read the README"
[[turn.tool_use]]
name = "read_file"
input = { path = "workspace/README.md" }
[[turn.tool_use]]
name = "list_dir"

[[turn]]
text = "Done."

[[turn]]
text = "Slow."
delay_ms = 60000
"#;

fn user(text: &str) -> Message {
    Message::User {
        content: vec![Part::Text { text: text.into() }],
    }
}

fn assistant(text: &str) -> Message {
    Message::Assistant {
        text: text.into(),
        tool_uses: Vec::new(),
    }
}

fn request(call: &str, messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "demo".into(),
        view: View {
            system: "sys".into(),
            messages,
        },
        notes: None,
        tools: Vec::new(),
        max_tokens: 100,
        call: CallId::new(call).unwrap(),
    }
}

fn provider() -> Scripted {
    Scripted::new(Script::parse(Path::new("demo.toml"), SCRIPT).unwrap())
}

#[tokio::test]
async fn the_turn_is_the_number_of_assistant_messages_and_ids_come_from_the_call() {
    let p = provider();
    assert_eq!(p.name(), "scripted");
    let first = p
        .complete(&request("call-7", vec![user("please read the README")]))
        .await
        .unwrap();
    assert_eq!(first.text, "I will read the file.");
    assert_eq!(first.stop_reason, "tool_use");
    let uses: Vec<_> = first
        .tool_uses
        .iter()
        .map(|u| (u.id.as_str(), u.name.as_str(), u.input.clone()))
        .collect();
    assert_eq!(
        uses,
        vec![
            (
                "call-7-1",
                "read_file",
                json!({"path": "workspace/README.md"})
            ),
            ("call-7-2", "list_dir", json!({})),
        ]
    );
    assert!(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);

    let again = p
        .complete(&request("call-8", vec![user("please read the README")]))
        .await
        .unwrap();
    assert_eq!(
        again.text, first.text,
        "the same view gets the same turn (a restart, a rewind)"
    );
    assert_eq!(
        again.tool_uses[0].id.as_str(),
        "call-8-1",
        "ids are fresh per call"
    );

    let used = Message::Assistant {
        text: first.text.clone(),
        tool_uses: vec![ToolUse {
            id: ToolUseId::new("call-7-1").unwrap(),
            name: "read_file".into(),
            input: json!({}),
        }],
    };
    let result = Message::User {
        content: vec![Part::ToolResult {
            id: ToolUseId::new("call-7-1").unwrap(),
            output: "# README".into(),
            is_error: false,
        }],
    };
    let second = p
        .complete(&request(
            "call-9",
            vec![user("please read the README"), used, result],
        ))
        .await
        .unwrap();
    assert_eq!(second.text, "Done.");
    assert_eq!(second.stop_reason, "end_turn");
    assert!(second.tool_uses.is_empty());
}

#[tokio::test]
async fn past_the_last_turn_it_says_so() {
    let messages = vec![
        user("a"),
        assistant("1"),
        user("b"),
        assistant("2"),
        user("c"),
        assistant("3"),
        user("d"),
    ];
    let reply = provider().complete(&request("c", messages)).await.unwrap();
    assert_eq!(reply.text, NO_MORE_TURNS);
    assert_eq!(reply.stop_reason, "end_turn");
}

#[tokio::test]
async fn an_unmet_expectation_is_a_non_retryable_error_naming_it() {
    let error = provider()
        .complete(&request("c", vec![user("something else")]))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::ScriptExpectation { turn: 1, .. }),
        "{error:?}"
    );
    assert!(!error.retryable());
    let text = error.to_string();
    assert!(
        text.contains("demo.toml")
            && text.contains("read the README")
            && text.contains("something else"),
        "{text}"
    );
}

#[tokio::test]
async fn a_delayed_turn_is_not_answered_before_its_delay() {
    let messages = vec![
        user("a"),
        assistant("1"),
        user("b"),
        assistant("2"),
        user("c"),
    ];
    let p = provider();
    let request = request("c", messages);
    let early = tokio::time::timeout(Duration::from_millis(50), p.complete(&request)).await;
    assert!(early.is_err(), "a 60 s turn answered within 50 ms");
}

#[test]
fn malformed_scripts_name_the_file_and_line() {
    let cases = [
        (
            "[[turn]]\ntext = \"a\"\n\n[[turn]]\ntxet = \"b\"\n",
            5,
            "txet",
        ),
        ("[[turn]]\ntext = 3\n", 2, "string"),
        (
            "[[turn]]\ntext = \"a\"\n[[turn]]\ndelay_ms = 5\n",
            3,
            "neither text nor a tool_use",
        ),
        (
            "[[turn]]\ntext = \"a\"\n[[turn.tool_use]]\nname = \"\"\n",
            1,
            "empty name",
        ),
        ("[[turn]\n", 1, ""),
        ("[[turns]]\ntext = \"a\"\n", 1, "turns"),
    ];
    for (text, line, mentions) in cases {
        let error = Script::parse(Path::new("bad.toml"), text).unwrap_err();
        let ModelError::ScriptParse {
            path,
            line: found,
            message,
        } = &error
        else {
            panic!("{text:?}: {error:?}");
        };
        assert_eq!(path, Path::new("bad.toml"));
        assert_eq!(*found, line, "{text:?}: {error}");
        assert!(message.contains(mentions), "{text:?}: {error}");
        assert!(!error.retryable());
    }
}

#[test]
fn build_reads_the_script_and_refuses_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, SCRIPT).unwrap();
    let no_env = |_: &str| None;
    let mut config: ModelConfig = toml::from_str(&format!(
        "dialect = \"scripted\"\nmodel = \"demo\"\nscript = {:?}\n",
        path
    ))
    .unwrap();
    assert_eq!(config.dialect, Dialect::Scripted);
    assert_eq!(build(&config, &no_env).unwrap().name(), "scripted");

    config.script = Some(dir.path().join("missing.toml"));
    let error = build(&config, &no_env).unwrap_err();
    assert!(matches!(error, ModelError::ScriptRead { .. }), "{error:?}");
    assert!(error.to_string().contains("missing.toml"));

    config.script = None;
    let error = build(&config, &no_env).unwrap_err();
    assert!(
        matches!(error, ModelError::Config { .. }) && error.to_string().contains("script"),
        "{error}"
    );
}

#[tokio::test]
async fn replies_and_failures_journal_as_records_the_log_accepts() {
    use l3m_core::log::{Log, RecordBody};
    let mut log = Log::new();
    let call = CallId::new("call-1").unwrap();
    log.append(
        0,
        RecordBody::SystemPrompt {
            text: "sys".into(),
            continues: false,
        },
    )
    .unwrap();
    log.append(
        1,
        RecordBody::CallStarted {
            call: call.clone(),
            provider: "scripted".into(),
            model: "demo".into(),
            attempt: 1,
            fallback_of: None,
        },
    )
    .unwrap();
    let failed = provider()
        .complete(&request("call-1", vec![user("nope")]))
        .await
        .unwrap_err();
    let record = failed.to_record(call.clone());
    assert!(
        matches!(&record, RecordBody::CallFailed { retryable: false, error, .. } if error.contains("read the README"))
    );
    log.append(2, record).unwrap();
    let reply = provider()
        .complete(&request("call-1", vec![user("read the README")]))
        .await
        .unwrap();
    log.append(3, reply.clone().into_record(call.clone()))
        .unwrap();
    let RecordBody::AssistantReply {
        tool_uses,
        usage,
        stop_reason,
        ..
    } = &log.records()[3].body
    else {
        panic!("not a reply");
    };
    assert_eq!(
        (tool_uses, usage, stop_reason),
        (&reply.tool_uses, &reply.usage, &reply.stop_reason)
    );
    let decoded = Log::decode(&log.encode().unwrap()).unwrap();
    assert_eq!(decoded.records(), log.records());
}
