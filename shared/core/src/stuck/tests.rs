use proptest::prelude::*;

use super::*;
use crate::budget::Fuel;
use crate::log::{CallId, Usage};
use crate::names::Entity;

fn failed(error: &str, retryable: bool) -> RecordBody {
    RecordBody::CallFailed {
        call: CallId::new("c1").unwrap(),
        error: error.into(),
        retryable,
    }
}

fn log(bodies: Vec<RecordBody>) -> Vec<Record> {
    bodies
        .into_iter()
        .zip(0..)
        .map(|(body, seq)| Record::fixture(seq, body))
        .collect()
}

fn interrupted() -> RecordBody {
    RecordBody::Interrupted {
        reason: "boot".into(),
        closed_call: None,
        closed_tools: vec![],
    }
}

fn budget() -> RecordBody {
    RecordBody::BudgetChange {
        left: Fuel::ZERO,
        summary: "spent".into(),
    }
}

/// A record that says something happened: the agent made progress or was given something.
fn progress() -> impl Strategy<Value = RecordBody> {
    prop_oneof![
        Just(RecordBody::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: "go on".into(),
        }),
        Just(RecordBody::CallStarted {
            call: CallId::new("c9").unwrap(),
            provider: "p".into(),
            model: "m".into(),
            attempt: 1,
            fallback_of: None,
        }),
        Just(RecordBody::AssistantReply {
            call: CallId::new("c9").unwrap(),
            text: "done".into(),
            tool_uses: vec![],
            usage: Usage::default(),
            stop_reason: "end_turn".into(),
        }),
    ]
}

fn any_body() -> impl Strategy<Value = RecordBody> {
    prop_oneof![
        progress(),
        Just(RecordBody::TurnEnd),
        Just(interrupted()),
        Just(budget()),
        ".{0,40}".prop_map(|e| failed(&e, false)),
        ".{0,40}".prop_map(|e| failed(&e, true)),
        Just(RecordBody::OutOfFuel {
            unit: FuelUnit::ModelCalls
        }),
    ]
}

fn closing() -> impl Strategy<Value = RecordBody> {
    prop_oneof![
        Just(RecordBody::TurnEnd),
        Just(interrupted()),
        Just(budget())
    ]
}

#[test]
fn a_failed_call_is_still_stuck_after_the_turn_end_that_follows_it() {
    let tail = log(vec![
        RecordBody::TurnEnd,
        failed("HTTP 400: prompt is too long", false),
        RecordBody::TurnEnd,
    ]);
    let verdict = stuck(&tail).unwrap();
    assert_eq!(
        verdict,
        Stuck::CallFailed {
            seq: 1,
            error: "HTTP 400: prompt is too long".into(),
            retryable: false
        }
    );
    assert!(
        verdict
            .why()
            .starts_with("its last model call failed (record 1): HTTP 400")
    );
    assert!(
        verdict.remedy("demo").contains("l3m rewind demo"),
        "{}",
        verdict.remedy("demo")
    );
    assert_eq!(stuck(&[]), None);
    assert_eq!(stuck(&log(vec![RecordBody::TurnEnd])), None);
}

#[test]
fn a_retryable_failure_is_stuck_only_once_its_turn_closed() {
    assert_eq!(stuck(&log(vec![failed("overloaded", true)])), None);
    let spent = stuck(&log(vec![failed("overloaded", true), RecordBody::TurnEnd])).unwrap();
    assert!(spent.why().contains("retries spent"), "{}", spent.why());
    assert!(spent.remedy("a").contains("may have recovered"));
}

#[test]
fn spent_fuel_is_stuck_until_a_loan() {
    let out = RecordBody::OutOfFuel {
        unit: FuelUnit::Wakes,
    };
    let verdict = stuck(&log(vec![out.clone(), RecordBody::TurnEnd])).unwrap();
    assert!(
        verdict
            .why()
            .starts_with("out of fuel: its wakes ran out (record 0)")
    );
    assert!(verdict.remedy("a").contains("lend it more fuel"));
    assert_eq!(stuck(&log(vec![out, budget()])), None);
}

#[test]
fn the_cause_names_what_to_fix() {
    assert_eq!(
        cause("HTTP 401: invalid x-api-key", false),
        Cause::Credential
    );
    assert_eq!(cause("HTTP 404: model: claude-x", false), Cause::Model);
    assert_eq!(
        cause("the model's reply of 300000 bytes exceeds the limit", false),
        Cause::TooLarge
    );
    assert_eq!(cause("timed out", true), Cause::Transient);
    assert_eq!(cause("HTTP 400: bad request", false), Cause::Other);
    let long = Stuck::CallFailed {
        seq: 4,
        error: "x".repeat(500),
        retryable: false,
    };
    assert!(long.why().ends_with('…') && long.why().chars().count() < 220);
}

proptest! {
    /// Closing a turn, a crash's interruption or the spend it accounts never changes the verdict.
    #[test]
    fn bookkeeping_after_a_closed_turn_changes_nothing(
        bodies in prop::collection::vec(any_body(), 0..12),
        more in prop::collection::vec(closing(), 1..4),
    ) {
        let mut bodies = bodies;
        bodies.push(RecordBody::TurnEnd);
        let before = stuck(&log(bodies.clone())).map(|s| s.why());
        bodies.extend(more);
        let after = stuck(&log(bodies)).map(|s| s.why());
        // A loan after spent fuel is the one bookkeeping record that unsticks.
        if after.is_some() || before.as_deref().is_none_or(|w| !w.starts_with("out of fuel")) {
            prop_assert_eq!(before, after);
        }
    }

    /// Anything new (a letter, a call, a reply) after any Log means the agent is not stuck.
    #[test]
    fn progress_unsticks(
        bodies in prop::collection::vec(any_body(), 0..12),
        next in progress(),
    ) {
        let mut bodies = bodies;
        bodies.push(next);
        prop_assert_eq!(stuck(&log(bodies)), None);
    }

    /// The verdict needs only a tail: any suffix that holds the last telling record agrees.
    #[test]
    fn a_tail_decides_as_the_whole_log_does(
        bodies in prop::collection::vec(any_body(), 1..16),
        cut in 0usize..16,
    ) {
        let whole = log(bodies);
        let last_telling = whole.iter().rposition(|r| !bookkeeping(&r.body)).unwrap_or(0);
        let cut = cut.min(last_telling);
        prop_assert_eq!(stuck(&whole[cut..]), stuck(&whole));
    }

    /// A Log whose last telling record is a failure that will not be retried is stuck there.
    #[test]
    fn a_final_failure_is_stuck_at_its_record(
        bodies in prop::collection::vec(any_body(), 0..12),
        error in ".{0,200}",
        after in prop::collection::vec(closing(), 0..3),
    ) {
        let mut bodies = bodies;
        bodies.push(failed(&error, false));
        let seq = bodies.len() as u64 - 1;
        bodies.extend(after);
        let verdict = stuck(&log(bodies));
        let at = match verdict {
            Some(Stuck::CallFailed { seq, .. }) => Some(seq),
            _ => None,
        };
        prop_assert_eq!(at, Some(seq));
    }
}
