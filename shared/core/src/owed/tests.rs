//! The fold and the steps, record by record.

use super::*;
use crate::effects::EffectClass;
use crate::log::Log;

struct Session {
    log: Log,
    owed: Owed,
    tools: BTreeMap<String, Footprint>,
    calls: u32,
}

impl Session {
    fn new() -> Self {
        let mut s = Self {
            log: Log::new(),
            owed: Owed::default(),
            tools: BTreeMap::from([
                ("read".to_owned(), Footprint::of([EffectClass::FsRead])),
                ("sh".to_owned(), Footprint::of([EffectClass::Shell])),
            ]),
            calls: 0,
        };
        s.signal(Signal::Prompt {
            text: "p".into(),
            continues: false,
        })
        .unwrap();
        s
    }

    fn write(&mut self, bodies: Vec<RecordBody>) -> Vec<RecordBody> {
        for body in &bodies {
            let record = self.log.append(0, body.clone()).unwrap().clone();
            self.owed.apply(&record);
        }
        bodies
    }

    fn signal(&mut self, signal: Signal) -> Result<Vec<RecordBody>, Stale> {
        let bodies = journal(&self.owed, signal)?;
        Ok(self.write(bodies))
    }

    fn pass(&mut self) -> Vec<RecordBody> {
        self.calls += 1;
        let call = CallId::new(format!("c{}", self.calls)).unwrap();
        let input = PlanInput {
            call: &call,
            provider: "p",
            model: "m",
            max_attempts: 2,
            tools: &self.tools,
        };
        let bodies = plan(&self.owed, &input).unwrap();
        self.write(bodies)
    }

    fn open(&self) -> CallId {
        self.owed.open_call().unwrap().id.clone()
    }
}

fn line() -> Signal {
    Signal::UserLine {
        from: Entity::parse("human:alice").unwrap(),
        text: "go".into(),
    }
}

fn reply(call: CallId, tools: &[(&str, &str)]) -> Signal {
    Signal::ModelReply {
        call,
        text: String::new(),
        tool_uses: tools
            .iter()
            .map(|(id, name)| ToolUse {
                id: ToolUseId::new(*id).unwrap(),
                name: (*name).into(),
                input: serde_json::json!({"justification": "the task needs it"}),
            })
            .collect(),
        usage: Usage::default(),
        stop_reason: "tool_use".into(),
    }
}

fn tid(s: &str) -> ToolUseId {
    ToolUseId::new(s).unwrap()
}

fn finished(id: &str) -> Signal {
    Signal::ToolFinished {
        id: tid(id),
        output: "ok".into(),
        is_error: false,
        effects: vec![],
        refusal: None,
    }
}

#[test]
fn a_turn_admits_starts_reviews_and_ends() {
    let mut s = Session::new();
    s.signal(line()).unwrap();
    assert!(matches!(
        s.pass()[..],
        [RecordBody::CallStarted { attempt: 1, .. }]
    ));
    let call = s.open();
    s.signal(reply(call, &[("t1", "read"), ("t2", "sh"), ("t3", "nope")]))
        .unwrap();
    let kinds: Vec<_> = s.pass().iter().map(RecordBody::kind).collect();
    assert_eq!(
        kinds,
        ["tool-call", "tool-started", "tool-call", "tool-result"]
    );
    assert_eq!(s.owed.awaiting_review().collect::<Vec<_>>(), [&tid("t2")]);
    assert!(s.pass().is_empty());
    s.signal(Signal::Review {
        tool: tid("t2"),
        round: 1,
        of: 2,
        verdict: Verdict::Unsafe {
            reason: "rm -rf".into(),
            alternative: Some("use the file tools".into()),
        },
        by: "svc:reviewer".into(),
        spent: ReviewSpent::default(),
    })
    .unwrap();
    assert!(matches!(
        &s.pass()[..],
        [RecordBody::ToolResult { is_error: true, output, .. }] if output.contains("instead: use the file tools")
    ));
    s.signal(finished("t1")).unwrap();
    assert_eq!(
        s.signal(finished("t1")),
        Err(Stale::ToolAlreadyClosed { id: tid("t1") })
    );
    assert_eq!(
        s.signal(finished("t9")),
        Err(Stale::ToolNotStarted { id: tid("t9") })
    );
    assert!(matches!(s.pass()[..], [RecordBody::CallStarted { .. }]));
    let call = s.open();
    s.signal(reply(call, &[])).unwrap();
    assert_eq!(s.pass(), vec![RecordBody::TurnEnd]);
    assert!(s.pass().is_empty());
}

/// A reply's uses run one at a time, in its order: the second of two tame uses starts once the
/// first has its result, and a tame use after a wild one waits for the wild one's review and
/// run (a model that writes `make_dir a`, then `write_file a/b`, means them in that order).
#[test]
fn a_replys_uses_start_one_at_a_time_in_its_order() {
    let mut s = Session::new();
    s.signal(line()).unwrap();
    s.pass();
    let call = s.open();
    s.signal(reply(call, &[("t1", "read"), ("t2", "read")]))
        .unwrap();
    let kinds: Vec<_> = s.pass().iter().map(RecordBody::kind).collect();
    assert_eq!(kinds, ["tool-call", "tool-started", "tool-call"]);
    assert_eq!(s.owed.running(), [tid("t1")]);
    assert!(s.pass().is_empty(), "t2 waits while t1 runs");
    s.signal(finished("t1")).unwrap();
    assert_eq!(s.pass(), vec![RecordBody::ToolStarted { id: tid("t2") }]);
    s.signal(finished("t2")).unwrap();
    assert!(matches!(s.pass()[..], [RecordBody::CallStarted { .. }]));

    let call = s.open();
    s.signal(reply(call, &[("t3", "sh"), ("t4", "read")]))
        .unwrap();
    let kinds: Vec<_> = s.pass().iter().map(RecordBody::kind).collect();
    assert_eq!(
        kinds,
        ["tool-call", "tool-call"],
        "t4 waits for t3's review"
    );
    s.signal(Signal::Review {
        tool: tid("t3"),
        round: 1,
        of: 2,
        verdict: Verdict::Safe,
        by: "svc:reviewer".into(),
        spent: ReviewSpent::default(),
    })
    .unwrap();
    assert_eq!(s.pass(), vec![RecordBody::ToolStarted { id: tid("t3") }]);
    assert!(s.pass().is_empty(), "t4 waits while t3 runs");
    s.signal(finished("t3")).unwrap();
    assert_eq!(s.pass(), vec![RecordBody::ToolStarted { id: tid("t4") }]);
}

#[test]
fn stale_replies_reused_ids_retries_and_fallbacks() {
    let mut s = Session::new();
    s.signal(line()).unwrap();
    s.pass();
    let first = s.open();
    let stale = CallId::new("old").unwrap();
    assert_eq!(
        s.signal(reply(stale.clone(), &[])),
        Err(Stale::CallNotOpen {
            call: stale,
            open: Some(first.clone())
        })
    );
    s.signal(Signal::ModelFailed {
        call: first.clone(),
        error: "529".into(),
        retryable: true,
    })
    .unwrap();
    assert_eq!(s.owed.retrying().map(|r| &r.id), Some(&first));
    let started = s.pass();
    assert!(matches!(
        &started[..],
        [RecordBody::CallStarted {
            attempt: 2,
            fallback_of: None,
            ..
        }]
    ));
    let second = s.open();
    s.signal(reply(second, &[("t1", "read")])).unwrap();
    s.pass();
    s.signal(finished("t1")).unwrap();
    s.pass();
    let third = s.open();
    // A reused id, and one no provider takes back, are renamed fresh from the call and the
    // position; the uses run as any other, and the call is not failed.
    let odd = "x".repeat(41);
    let journaled = s
        .signal(reply(
            third.clone(),
            &[
                ("t1", "read"),
                ("t2", "read"),
                ("t2", "read"),
                (odd.as_str(), "read"),
            ],
        ))
        .unwrap();
    let [RecordBody::AssistantReply { tool_uses, .. }] = &journaled[..] else {
        panic!("{journaled:?}");
    };
    let ids: Vec<&str> = tool_uses.iter().map(|u| u.id.as_str()).collect();
    let fresh = [
        format!("{third}-u0"),
        format!("{third}-u2"),
        format!("{third}-u3"),
    ];
    assert_eq!(ids, [fresh[0].as_str(), "t2", &fresh[1], &fresh[2]]);
    assert!(tool_uses.iter().all(|u| u.id.is_wire_safe()));
    // All four run, in the reply's order; then a retryable failure, and the limit is two
    // attempts.
    let mut started = Vec::new();
    for id in [fresh[0].as_str(), "t2", &fresh[1], &fresh[2]] {
        started.extend(s.pass().into_iter().filter_map(|b| match b {
            RecordBody::ToolStarted { id } => Some(id),
            _ => None,
        }));
        s.signal(finished(id)).unwrap();
    }
    let ran: Vec<&str> = started.iter().map(ToolUseId::as_str).collect();
    assert_eq!(ran, ids);
    s.pass();
    let failing = s.open();
    s.signal(Signal::ModelFailed {
        call: failing,
        error: "529".into(),
        retryable: true,
    })
    .unwrap();
    s.pass();
    let fourth = s.open();
    s.signal(Signal::ModelFailed {
        call: fourth,
        error: "529".into(),
        retryable: true,
    })
    .unwrap();
    assert_eq!(s.pass(), vec![RecordBody::TurnEnd]);
}

#[test]
fn plan_refuses_a_reused_call_id_and_reports_a_fallback() {
    let mut s = Session::new();
    s.signal(line()).unwrap();
    s.pass();
    let first = s.open();
    s.signal(Signal::ModelFailed {
        call: first.clone(),
        error: "timeout".into(),
        retryable: true,
    })
    .unwrap();
    let input = PlanInput {
        call: &first,
        provider: "p",
        model: "m",
        max_attempts: 3,
        tools: &s.tools,
    };
    assert_eq!(
        plan(&s.owed, &input),
        Err(Stale::CallIdReused {
            call: first.clone()
        })
    );
    let fresh = CallId::new("fresh").unwrap();
    let other = PlanInput {
        call: &fresh,
        model: "other",
        ..input
    };
    assert!(matches!(
        &plan(&s.owed, &other).unwrap()[..],
        [RecordBody::CallStarted { fallback_of: Some(f), .. }] if *f == first
    ));
}

#[test]
fn out_of_fuel_stops_the_agent() {
    let mut s = Session::new();
    s.signal(Signal::BudgetChanged {
        left: Fuel {
            model_calls: 1,
            bytes: 10,
            wakes: 0,
        },
        summary: "loan".into(),
    })
    .unwrap();
    s.signal(line()).unwrap();
    s.pass();
    let call = s.open();
    s.signal(reply(call, &[])).unwrap();
    s.pass();
    s.signal(line()).unwrap();
    assert_eq!(s.owed.fuel_short(), Some(FuelUnit::ModelCalls));
    assert_eq!(
        s.pass(),
        vec![RecordBody::OutOfFuel {
            unit: FuelUnit::ModelCalls
        }]
    );
    assert!(!s.owed.is_live());
}

#[test]
fn events_wait_for_decisions_and_bad_signals_are_refused() {
    let mut s = Session::new();
    let e = EventId::new("e1").unwrap();
    let event = Signal::Event {
        id: e.clone(),
        source: EventSource::Notice,
        text: "hi".into(),
    };
    s.signal(event.clone()).unwrap();
    assert_eq!(
        s.signal(event),
        Err(Stale::DuplicateEvent { id: e.clone() })
    );
    assert!(s.pass().is_empty());
    let show = Signal::Decision {
        event: e.clone(),
        disposition: Disposition::Show,
    };
    s.signal(show.clone()).unwrap();
    assert_eq!(s.signal(show), Err(Stale::EventNotUndecided { event: e }));
    assert!(matches!(s.pass()[..], [RecordBody::CallStarted { .. }]));
    let next = s.owed.next_seq();
    assert_eq!(
        s.signal(Signal::Rewind {
            to: next,
            reason: String::new()
        }),
        Err(Stale::RewindOutOfLog {
            to: next,
            next_seq: next
        })
    );
    assert_eq!(
        s.signal(Signal::Compact {
            from: 2,
            to: 1,
            summary: String::new()
        }),
        Err(Stale::SpanOutOfLog {
            from: 2,
            to: 1,
            next_seq: next
        })
    );
    assert_eq!(
        s.signal(Signal::Review {
            tool: tid("t1"),
            round: 1,
            of: 2,
            verdict: Verdict::Safe,
            by: String::new(),
            spent: ReviewSpent::default(),
        }),
        Err(Stale::NotUnderReview {
            tool: tid("t1"),
            round: 1,
            of: 2
        })
    );
    let closed = s
        .signal(Signal::Rewind {
            to: 1,
            reason: "undo".into(),
        })
        .unwrap();
    assert_eq!(
        closed.iter().map(RecordBody::kind).collect::<Vec<_>>(),
        ["interrupted", "rewind"]
    );
    assert!(s.owed.open_call().is_none());
    assert!(close_open(&s.owed, "boot").is_empty());
}

fn reply_with(call: CallId, uses: &[(&str, &str, serde_json::Value)]) -> Signal {
    Signal::ModelReply {
        call,
        text: String::new(),
        tool_uses: uses
            .iter()
            .map(|(id, name, input)| ToolUse {
                id: tid(id),
                name: (*name).into(),
                input: input.clone(),
            })
            .collect(),
        usage: Usage::default(),
        stop_reason: "tool_use".into(),
    }
}

#[test]
fn arguments_that_are_not_an_object_go_back_to_the_model_as_an_error() {
    let mut s = Session::new();
    s.signal(line()).unwrap();
    s.pass();
    let raw = serde_json::Value::String("{\"path\": ".into());
    s.signal(reply_with(s.open(), &[("t1", "read", raw)]))
        .unwrap();
    let planned = s.pass();
    let [
        RecordBody::ToolResult {
            output,
            is_error: true,
            refusal: Some(refusal),
            ..
        },
        RecordBody::CallStarted { .. },
    ] = &planned[..]
    else {
        panic!("expected a refusal and a new call, got {planned:?}");
    };
    assert_eq!(refusal.boundary, "tool-arguments");
    assert!(output.contains("not a JSON object") && output.contains("{\"path\": "));
    // The correction runs.
    let fixed = serde_json::json!({"path": "a"});
    s.signal(reply_with(s.open(), &[("t2", "read", fixed)]))
        .unwrap();
    let kinds: Vec<_> = s.pass().iter().map(RecordBody::kind).collect();
    assert_eq!(kinds, ["tool-call", "tool-started"]);
}

proptest::proptest! {
    /// However a model mixes mistakes (arguments that are not an object, unknown tools, reused
    /// ids) with good calls, one turn asks it again at most `MAX_CORRECTIONS` times after a mistake, then
    /// ends; a new line gives it its corrections anew.
    #[test]
    fn corrections_per_turn_are_bounded(kinds in proptest::collection::vec(0u8..4, 1..40)) {
        let mut s = Session::new();
        s.signal(line()).unwrap();
        s.pass();
        let mut calls_after_mistakes = 0u32;
        for (n, kind) in kinds.iter().enumerate() {
            let Some(open) = s.owed.open_call().map(|o| o.id.clone()) else { break };
            let id = format!("u{n}");
            let use_ = match kind {
                0 => (id.as_str(), "read", serde_json::Value::String("{".into())),
                1 => (id.as_str(), "nope", serde_json::json!({})),
                2 => ("u0", "read", serde_json::json!({})),
                _ => (id.as_str(), "read", serde_json::json!({})),
            };
            s.signal(reply_with(open, &[use_])).unwrap();
            let planned = s.pass();
            if let Some(RecordBody::ToolStarted { id }) = planned.last() {
                s.signal(finished(id.as_str())).unwrap();
                s.pass();
            } else if planned.iter().any(|b| b.kind() == "call-started") {
                calls_after_mistakes += 1;
            } else {
                proptest::prop_assert_eq!(planned.last().map(RecordBody::kind), Some("turn-end"));
            }
        }
        proptest::prop_assert!(calls_after_mistakes <= MAX_CORRECTIONS);
        if s.owed.open_call().is_some() {
            return Ok(());
        }
        s.signal(line()).unwrap();
        proptest::prop_assert!(s.pass().iter().any(|b| b.kind() == "call-started"));
    }
}
