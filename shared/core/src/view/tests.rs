//! The view, record by record and across rewinds and compactions.

use super::*;
use crate::log::{CallId, EventId, Usage};
use crate::names::Entity;

fn records(bodies: Vec<RecordBody>) -> Vec<Record> {
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Record {
            seq: i as u64,
            at_ms: 0,
            body,
        })
        .collect()
}

fn prompt(text: &str, continues: bool) -> RecordBody {
    RecordBody::SystemPrompt {
        text: text.into(),
        continues,
    }
}

fn line(text: &str) -> RecordBody {
    RecordBody::UserLine {
        from: Entity::parse("human:alice").unwrap(),
        text: text.into(),
    }
}

fn reply(text: &str, tools: &[&str]) -> RecordBody {
    RecordBody::AssistantReply {
        call: CallId::new("c").unwrap(),
        text: text.into(),
        tool_uses: tools
            .iter()
            .map(|t| ToolUse {
                id: ToolUseId::new(*t).unwrap(),
                name: "read".into(),
                input: serde_json::Value::Null,
            })
            .collect(),
        usage: Usage::default(),
        stop_reason: "end_turn".into(),
    }
}

fn result(id: &str, output: &str) -> RecordBody {
    RecordBody::ToolResult {
        id: ToolUseId::new(id).unwrap(),
        output: output.into(),
        is_error: false,
        effects: vec![],
        refusal: None,
    }
}

fn text(t: &str) -> Part {
    Part::Text { text: t.into() }
}

fn res(id: &str, output: &str, is_error: bool) -> Part {
    Part::ToolResult {
        id: ToolUseId::new(id).unwrap(),
        output: output.into(),
        is_error,
    }
}

fn user(parts: Vec<Part>) -> Message {
    Message::User { content: parts }
}

fn fold_both(recs: &[Record]) -> View {
    let mut fold = ViewFold::new();
    for r in recs {
        fold.advance(r);
    }
    let full = view(recs);
    assert_eq!(fold.view(), &full);
    full
}

#[test]
fn results_come_first_and_narration_travels_with_the_next_user_turn() {
    let recs = records(vec![
        prompt("p", false),
        line("go"),
        reply("reading", &["t1"]),
        RecordBody::GrantChange {
            summary: "net narrowed".into(),
            grants_commit: "c".into(),
        },
        result("t1", "body"),
    ]);
    let v = fold_both(&recs);
    assert_eq!(v.system, "p");
    assert_eq!(v.messages.len(), 3);
    assert_eq!(
        v.messages[2],
        user(vec![
            res("t1", "body", false),
            text("(l3m) your grants changed: net narrowed")
        ])
    );
}

#[test]
fn an_event_shows_where_its_show_decision_is_and_not_otherwise() {
    let event = |id: &str| RecordBody::Event {
        id: EventId::new(id).unwrap(),
        source: EventSource::Deadline,
        text: id.into(),
    };
    let decide = |id: &str, disposition| RecordBody::HookDecision {
        event: EventId::new(id).unwrap(),
        disposition,
    };
    let recs = records(vec![
        prompt("p", false),
        event("e1"),
        event("e2"),
        event("e3"),
        decide("e2", Disposition::Dismiss),
        decide("e1", Disposition::Show),
        decide("e1", Disposition::Show),
    ]);
    let v = fold_both(&recs);
    assert_eq!(
        v.messages,
        vec![user(vec![text("(l3m) deadline reached: e1")])]
    );
}

#[test]
fn interrupt_closes_waiting_uses_and_stale_results_show_nothing() {
    let recs = records(vec![
        prompt("p", false),
        line("go"),
        reply("", &["t1", "t2"]),
        result("t2", "two"),
        RecordBody::Interrupted {
            reason: "esc".into(),
            closed_call: None,
            closed_tools: vec![ToolUseId::new("t1").unwrap()],
        },
        result("t1", "late"),
        result("zz", "unknown"),
    ]);
    let v = fold_both(&recs);
    assert_eq!(
        v.messages[2],
        user(vec![
            res("t2", "two", false),
            res(
                "t1",
                "(l3m) interrupted before this tool use finished: esc",
                true
            ),
        ])
    );
}

#[test]
fn a_reply_closes_uses_still_waiting_and_empty_replies_are_dropped() {
    let recs = records(vec![
        prompt("p", false),
        reply("a", &["t1"]),
        reply("", &[]),
        reply("b", &[]),
    ]);
    let v = fold_both(&recs);
    assert_eq!(v.messages.len(), 3);
    assert_eq!(
        v.messages[1],
        user(vec![res("t1", narrate::NO_RESULT, true)])
    );
}

#[test]
fn rewind_into_a_retracted_span_restores_that_point() {
    let recs = records(vec![
        prompt("p", false),
        line("a"),
        line("b"),
        RecordBody::Rewind {
            to: 1,
            reason: String::new(),
        },
        line("c"),
        RecordBody::Rewind {
            to: 2,
            reason: String::new(),
        },
    ]);
    assert_eq!(
        fold_both(&recs[..5]).messages,
        vec![user(vec![text("a"), text("c")])]
    );
    assert_eq!(fold_both(&recs), view(&recs[..3]));
}

#[test]
fn a_rewind_settles_what_its_target_waited_for() {
    let recs = records(vec![
        prompt("p", false),
        line("go"),
        reply("", &["t1"]),
        result("t1", "r"),
        RecordBody::Rewind {
            to: 2,
            reason: String::new(),
        },
        line("again"),
    ]);
    let rewound = fold_both(&recs[..5]);
    assert_eq!(rewound.messages[..2], view(&recs[..3]).messages[..]);
    assert_eq!(
        rewound.messages[2],
        user(vec![res("t1", narrate::REWOUND, true)])
    );
    assert_eq!(
        fold_both(&recs).messages[2],
        user(vec![res("t1", narrate::REWOUND, true), text("again")])
    );
}

#[test]
fn what_arrives_while_the_model_answers_shows_after_its_reply() {
    let started = || RecordBody::CallStarted {
        call: CallId::new("c").unwrap(),
        provider: "p".into(),
        model: "m".into(),
        attempt: 1,
        fallback_of: None,
    };
    let recs = records(vec![
        prompt("p", false),
        line("first"),
        started(),
        line("second"),
        reply("answer", &[]),
        started(),
        line("third"),
        RecordBody::CallFailed {
            call: CallId::new("c").unwrap(),
            error: "529".into(),
            retryable: true,
        },
    ]);
    assert_eq!(fold_both(&recs[..4]), view(&recs[..2]));
    let v = fold_both(&recs);
    assert_eq!(
        v.messages,
        vec![
            user(vec![text("first")]),
            Message::Assistant {
                text: "answer".into(),
                tool_uses: vec![]
            },
            user(vec![text("second"), text("third")]),
        ]
    );
}

#[test]
fn epochs_cut_and_continue_keeps() {
    let recs = records(vec![
        prompt("p1", false),
        line("old"),
        prompt("p2", true),
        line("kept"),
        prompt("p3", false),
        line("new"),
    ]);
    assert_eq!(
        fold_both(&recs[..4]).messages,
        vec![user(vec![text("old"), text("kept")])]
    );
    let v = fold_both(&recs);
    assert_eq!(v.system, "p3");
    assert_eq!(v.messages, vec![user(vec![text("new")])]);
}

#[test]
fn compaction_takes_pairs_together_and_keeps_order() {
    let recs = records(vec![
        prompt("p", false),
        line("one"),
        reply("a", &["t1"]),
        result("t1", "r"),
        line("two"),
        reply("b", &[]),
        line("three"),
        RecordBody::Compaction {
            from: 3,
            to: 4,
            summary: "S".into(),
        },
    ]);
    let v = fold_both(&recs);
    assert_eq!(
        v.messages,
        vec![
            user(vec![
                text("one"),
                text("(l3m) summary of earlier conversation: S")
            ]),
            Message::Assistant {
                text: "b".into(),
                tool_uses: vec![]
            },
            user(vec![text("three")]),
        ]
    );
    let nothing_visible = records(vec![
        prompt("p", false),
        line("x"),
        RecordBody::TurnEnd,
        RecordBody::Compaction {
            from: 2,
            to: 2,
            summary: "S".into(),
        },
    ]);
    assert_eq!(fold_both(&nothing_visible), view(&nothing_visible[..2]));
}

#[test]
fn a_second_compaction_swallows_the_first_summary_and_what_it_kept() {
    let mut bodies = vec![
        prompt("p", false),
        line("go"),
        reply("a", &["t1"]),
        result("t1", "one"),
        reply("b", &["t2"]),
        result("t2", "two"),
    ];
    let compact = |bodies: &mut Vec<RecordBody>| {
        let mut fold = ViewFold::new();
        for r in &records(bodies.clone()) {
            fold.advance(r);
        }
        let span = fold.oldest_span(0).unwrap();
        bodies.push(RecordBody::Compaction {
            from: span.from,
            to: span.to,
            summary: format!("s{}", bodies.len()),
        });
        view(&records(bodies.clone()))
    };
    let first = compact(&mut bodies);
    assert_eq!(first.messages.len(), 3, "{first:?}");
    bodies.extend([reply("c", &["t3"]), result("t3", "three")]);
    // The first summary's origin (its compaction) is newer than the exchange it kept; the
    // second span still starts before that exchange, so both go.
    let second = compact(&mut bodies);
    assert_eq!(second.messages.len(), 3, "{second:?}");
    assert_eq!(
        second.messages[0],
        user(vec![text("(l3m) summary of earlier conversation: s9")])
    );
}
