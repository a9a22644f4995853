//! The boundary's laws: whatever bytes come through any door, the record it makes is one hubd
//! accepts (core's `log_rule`, the rule hubd's gate runs), and what fit already is left alone.

use super::*;
use l3m_core::log::{CallId, EventId, ToolUse, ToolUseId, Usage};
use l3m_core::log_rule;
use l3m_core::names::Entity;
use proptest::prelude::*;

fn record(body: RecordBody) -> Record {
    Record {
        seq: 7,
        at_ms: 1,
        body,
    }
}

/// Foreign text: arbitrary bytes read as a provider's or tool's text would be (lossily), a
/// chunk repeated so sizes reach past every limit.
fn foreign() -> impl Strategy<Value = String> {
    let times = prop_oneof![3 => 1usize..64, 1 => 6000usize..9000];
    (proptest::collection::vec(any::<u8>(), 1..40), times)
        .prop_map(|(bytes, times)| String::from_utf8_lossy(&bytes).repeat(times))
}

/// The record as hubd's gate reads it: the line within the rules, decoded back to the same
/// record, its commit subject one line.
fn accepted(journaled: &Journaled) -> Result<(), TestCaseError> {
    log_rule::check_line(journaled.line()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: Record = l3m_core::record_format::from_line(journaled.line(), 1)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, journaled.record());
    log_rule::check_summary(&back).map_err(|e| TestCaseError::fail(e.to_string()))?;
    back.body
        .check(back.seq)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok(())
}

fn call() -> CallId {
    CallId::new("c7").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Every door: a reply (text, tool names, arguments, stop reason), a stream or HTTP error, a
    /// tool output or file read, a letter. Each makes a record hubd accepts.
    #[test]
    fn whatever_comes_through_a_door_is_journaled(
        a in foreign(),
        b in foreign(),
        c in "[\\PC\u{0}-\u{1f}\u{7f}-\u{9f}]{0,64}",
    ) {
        let reply = RecordBody::AssistantReply {
            call: call(),
            text: a.clone(),
            tool_uses: vec![
                ToolUse {
                    id: ToolUseId::new("tu1").unwrap(),
                    name: b.clone(),
                    input: serde_json::json!({ "content": a.clone(), "c": c.clone() }),
                },
                ToolUse {
                    id: ToolUseId::new("tu2").unwrap(),
                    name: c.clone(),
                    input: serde_json::Value::String(b.clone()),
                },
            ],
            usage: Usage::default(),
            stop_reason: c.clone(),
        };
        let failed = RecordBody::CallFailed { call: call(), error: b.clone(), retryable: true };
        let output = RecordBody::ToolResult {
            id: ToolUseId::new("tu1").unwrap(),
            output: format!("{c}{a}"),
            is_error: false,
            effects: vec![],
            refusal: None,
        };
        let letter = RecordBody::Event {
            id: EventId::new("l1").unwrap(),
            source: EventSource::Letter {
                letter_id: "l1".into(),
                from: Entity::parse("human:alice").unwrap(),
                in_reply_to: None,
            },
            text: b.clone(),
        };
        let called = RecordBody::ToolCall {
            id: ToolUseId::new("tu1").unwrap(),
            name: c.clone(),
            tier: l3m_core::effects::Footprint::default().tier(),
            footprint: l3m_core::effects::Footprint::default(),
        };
        for body in [reply, failed, output, letter, called] {
            let kind = body.kind();
            let journaled = fit(record(body));
            prop_assert!(journaled.is_ok(), "{}: {:?}", kind, journaled.err());
            if let Ok(j) = journaled {
                accepted(&j)?;
            }
        }
    }

    /// A record that already fits, with no control character, is journaled as it is.
    #[test]
    fn what_fits_is_left_alone(text in "[a-zé \n\t\"]{0,2000}") {
        let body = RecordBody::CallFailed { call: call(), error: text.clone(), retryable: false };
        let fitted = fit(record(body.clone())).unwrap();
        let expected = if stored_len(&text) <= MAX_ERROR { body } else { fitted.record().body.clone() };
        prop_assert_eq!(&fitted.record().body, &expected);
    }
}

#[test]
fn an_unknown_tool_name_of_combining_characters_is_cut_with_a_note() {
    let name = "\u{301}".repeat(80_000);
    let body = RecordBody::AssistantReply {
        call: call(),
        text: "a\u{1b}[2Jb".into(),
        tool_uses: vec![ToolUse {
            id: ToolUseId::new("tu1").unwrap(),
            name,
            input: serde_json::json!({}),
        }],
        usage: Usage::default(),
        stop_reason: "tool_use".into(),
    };
    let j = fit(record(body)).unwrap();
    let RecordBody::AssistantReply {
        text, tool_uses, ..
    } = &j.record().body
    else {
        panic!("a reply stays a reply");
    };
    assert_eq!(text, "a\\u{1b}[2Jb");
    assert!(stored_len(&tool_uses[0].name) <= MAX_NAME);
    assert!(
        tool_uses[0].name.contains("(l3m) tool name cut:") && tool_uses[0].name.contains("160000"),
        "{}",
        &tool_uses[0].name[tool_uses[0].name.len() - 120..]
    );
    assert!(j.line().len() < 4096);
}

#[test]
fn a_two_megabyte_provider_error_becomes_a_short_failure() {
    let body = RecordBody::CallFailed {
        call: call(),
        error: format!("bad response from openai: {}", "\u{1b}x".repeat(1 << 20)),
        retryable: false,
    };
    let j = fit(record(body)).unwrap();
    assert!(j.line().len() <= MAX_ERROR + 200, "{}", j.line().len());
    assert!(j.line().contains("(l3m) error cut:"), "{}", j.line());
}

#[test]
fn arguments_too_large_for_a_record_are_replaced_by_a_note() {
    let big = serde_json::json!({ "content": "z".repeat(300_000) });
    let body = RecordBody::AssistantReply {
        call: call(),
        text: "here".into(),
        tool_uses: vec![ToolUse {
            id: ToolUseId::new("tu1").unwrap(),
            name: "write_file".into(),
            input: big,
        }],
        usage: Usage::default(),
        stop_reason: "tool_use".into(),
    };
    let j = fit(record(body)).unwrap();
    let RecordBody::AssistantReply { tool_uses, .. } = &j.record().body else {
        panic!("a reply stays a reply");
    };
    assert!(
        tool_uses[0]
            .input
            .as_str()
            .is_some_and(|s| s.contains("arguments were cut"))
    );
}

#[test]
fn the_sequencers_own_wrong_record_is_refused_not_stored() {
    let body = RecordBody::Rewind {
        to: 9,
        reason: "r".into(),
    };
    assert!(matches!(fit(record(body)), Err(Refused::Record(_))));
}
