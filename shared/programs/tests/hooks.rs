//! An agent's hook in the real evaluator process: checked, then run over a batch of events,
//! one process per batch; a hook that overruns its deadline is killed and every event of the
//! batch carries the named stop, so the caller falls back to the default.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use l3m_core::log::{Disposition, EventId, EventSource};
use l3m_core::names::Entity;
use l3m_programs::Rule;
use l3m_programs::hooks::{HOOKS_FILE, Hook, event_json};
use serde_json::Value;

fn letter(n: usize, from: &str, text: &str) -> Value {
    event_json(
        &EventId::new(format!("e{n}")).unwrap(),
        &EventSource::Letter {
            letter_id: format!("l{n}"),
            from: Entity::parse(from).unwrap(),
            in_reply_to: None,
        },
        text,
    )
}

const TRIAGE: &str = r#"
def on_event(event):
    if event["kind"] == "letter" and event["from"] == "alice/main/ci":
        return "dismiss"
    if event["text"] == "odd":
        return 7
    return "show"
"#;

#[test]
fn a_batch_is_decided_in_one_evaluator_in_order() {
    let hook = Hook::check(&common::evaluator(), HOOKS_FILE, TRIAGE).unwrap();
    let events: Vec<Value> = (0..100)
        .map(|n| match n % 3 {
            0 => letter(n, "alice/main/ci", "green"),
            1 => letter(n, "human:alice", "hello"),
            _ => letter(n, "human:alice", "odd"),
        })
        .collect();
    let started = Instant::now();
    let decided = hook.decide(&events);
    let took = started.elapsed();
    assert_eq!(decided.len(), 100);
    for (n, d) in decided.iter().enumerate() {
        match n % 3 {
            0 => assert_eq!(d, &Ok(Disposition::Dismiss)),
            1 => assert_eq!(d, &Ok(Disposition::Show)),
            _ => assert_eq!(d.as_ref().unwrap_err().rule, Rule::NotDisposition),
        }
    }
    // 100 events are two batches (MAX_BATCH = 64): two processes, not a hundred. A figure,
    // not a bound: tests assert no wall time.
    eprintln!("100 events decided in {took:?}");
}

#[test]
fn a_hook_past_its_deadline_is_killed_and_every_event_of_the_batch_says_so() {
    let spin = "def on_event(event):\n    n = 0\n    for a in range(1000000000):\n        n += a\n    return \"show\"\n";
    let mut evaluator = common::evaluator();
    evaluator.steps = u64::MAX;
    evaluator.deadline = Duration::from_millis(700);
    let hook = Hook::check(&evaluator, HOOKS_FILE, spin).unwrap();
    let decided = hook.decide(&[letter(1, "human:alice", "a"), letter(2, "human:alice", "b")]);
    assert_eq!(decided.len(), 2);
    for d in decided {
        assert_eq!(d.unwrap_err().rule, Rule::Deadline);
    }
}
