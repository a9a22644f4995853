//! The review decisions and their laws, on their own and through the owed fold.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::effects::{EffectClass, Footprint};
use crate::log::{CallId, Log, ToolUse, Usage};
use crate::owed::{Owed, PlanInput, Signal, journal, plan};

/// A reviewer's answer shaped like a verdict: entries of verdict-like keys and values (each
/// maybe a near miss), around which prose or a fence may stand.
#[derive(Debug, Clone)]
struct WrittenVerdictCase {
    entries: Vec<(&'static str, serde_json::Value)>,
    before: &'static str,
    after: &'static str,
    text: String,
}

impl WrittenVerdictCase {
    /// The oracle, from the verdict format alone: no `{` before the one object and no `}` after
    /// it (prose around it is tolerated), only the keys `verdict`, `reason` and `alternative`, each at most once, `reason` and
    /// `alternative` text or null, and `verdict` exactly the string `safe`.
    fn says_safe(&self) -> bool {
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in &self.entries {
            if seen.contains(key) {
                return false;
            }
            seen.push(key);
            let fits = match *key {
                "verdict" => value.as_str() == Some("safe"),
                "reason" | "alternative" => value.is_string() || value.is_null(),
                _ => false,
            };
            if !fits {
                return false;
            }
        }
        seen.contains(&"verdict") && !self.before.contains('{') && !self.after.contains('}')
    }
}

fn written_verdict() -> impl Strategy<Value = WrittenVerdictCase> {
    let key = prop::sample::select(vec![
        "verdict",
        "verdict",
        "verdict",
        "reason",
        "alternative",
        "Verdict",
        "verdict ",
        "safe",
        "approved",
    ]);
    let value = prop_oneof![
        4 => Just(json!("safe")),
        4 => prop::sample::select(vec![
            "Safe", "SAFE", " safe", "safe ", "saf", "safe\n", "\"safe\"", "unsafe", "unclear",
            "approve", "yes", "",
        ])
        .prop_map(|s| json!(s)),
        2 => "[a-z ]{0,12}".prop_map(|s| json!(s)),
        1 => prop::sample::select(vec![
            json!(true),
            json!(1),
            serde_json::Value::Null,
            json!(["safe"]),
            json!({"verdict": "safe"}),
        ]),
    ];
    let wrap = prop::sample::select(vec![
        "",
        "",
        "Verdict: ",
        "```json\n",
        "\n```",
        "{",
        "}",
        "I think it is safe. ",
    ]);
    (
        prop::collection::vec((key, value), 0..4),
        wrap.clone(),
        wrap,
    )
        .prop_map(|(entries, before, after)| {
            let object = entries
                .iter()
                .map(|(k, v)| format!("{}: {v}", json!(k)))
                .collect::<Vec<_>>()
                .join(", ");
            let text = format!("{before}{{{object}}}{after}");
            WrittenVerdictCase {
                entries,
                before,
                after,
                text,
            }
        })
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Safe),
        Just(Verdict::Unclear { reason: None }),
        (any::<bool>()).prop_map(|alt| Verdict::Unsafe {
            reason: "it deletes the workspace".into(),
            alternative: alt.then(|| "use edit_file".into()),
        }),
    ]
}

/// A Log driven through core's own journal and plan, as the sequencer drives it.
struct Driver {
    log: Log,
    owed: Owed,
    tools: BTreeMap<String, Footprint>,
    n: u32,
}

impl Driver {
    fn new() -> Self {
        let mut d = Driver {
            log: Log::new(),
            owed: Owed::default(),
            tools: BTreeMap::from([("shell".to_owned(), Footprint::of([EffectClass::Shell]))]),
            n: 0,
        };
        d.signal(Signal::Prompt {
            text: "p".into(),
            continues: false,
        });
        d.signal(Signal::UserLine {
            from: crate::names::Entity::parse("human:alice").unwrap(),
            text: "clean up".into(),
        });
        d.plan();
        d
    }

    fn write(&mut self, bodies: Vec<RecordBody>) -> Vec<RecordBody> {
        for body in &bodies {
            let record = self.log.append(0, body.clone()).unwrap().clone();
            self.owed.apply(&record);
        }
        bodies
    }

    fn signal(&mut self, signal: Signal) -> Vec<RecordBody> {
        let bodies = journal(&self.owed, signal).unwrap();
        self.write(bodies)
    }

    fn plan(&mut self) -> Vec<RecordBody> {
        self.n += 1;
        let call = CallId::new(format!("c{}", self.n)).unwrap();
        let input = PlanInput {
            call: &call,
            provider: "p",
            model: "m",
            max_attempts: 1,
            tools: &self.tools,
        };
        let bodies = plan(&self.owed, &input).unwrap();
        self.write(bodies)
    }

    /// The model (whose call is open) proposes `rm -r build` with `justification`.
    fn propose(&mut self, input: serde_json::Value) -> ToolUseId {
        let call = self.owed.open_call().unwrap().id.clone();
        let id = ToolUseId::new(format!("u{}", self.n)).unwrap();
        self.signal(Signal::ModelReply {
            call,
            text: String::new(),
            tool_uses: vec![ToolUse {
                id: id.clone(),
                name: "shell".into(),
                input,
            }],
            usage: Usage::default(),
            stop_reason: "tool_use".into(),
        });
        id
    }

    fn review(&mut self, id: &ToolUseId, round: u32, of: u32, verdict: Verdict, by: &str) {
        self.signal(Signal::Review {
            tool: id.clone(),
            round,
            of,
            verdict,
            by: by.into(),
            spent: ReviewSpent {
                model_calls: 1,
                ms: 10,
            },
        });
    }

    fn started(&self, id: &ToolUseId) -> bool {
        self.log
            .records()
            .iter()
            .any(|r| matches!(&r.body, RecordBody::ToolStarted { id: s } if s == id))
    }

    fn result(&self, id: &ToolUseId) -> Option<String> {
        self.log.records().iter().find_map(|r| match &r.body {
            RecordBody::ToolResult { id: s, output, .. } if s == id => Some(output.clone()),
            _ => None,
        })
    }
}

fn rm(justification: &str) -> serde_json::Value {
    json!({"program": "rm", "args": ["-r", "build"], "justification": justification})
}

#[test]
fn a_call_without_justification_is_sent_back_unreviewed() {
    let mut d = Driver::new();
    let id = d.propose(json!({"program": "rm", "args": ["-r", "build"]}));
    d.plan();
    assert!(d.owed.awaiting_review().next().is_none());
    assert!(d.result(&id).unwrap().contains("needs a `justification`"));
}

#[test]
fn returned_then_proposed_again_is_round_two_and_approval_runs_it() {
    let mut d = Driver::new();
    let first = d.propose(rm("stale output"));
    d.plan();
    assert_eq!(d.owed.review_round(&first), 1);
    d.review(
        &first,
        1,
        2,
        Verdict::Unclear { reason: None },
        "svc:reviewer",
    );
    d.plan();
    assert!(
        d.result(&first)
            .unwrap()
            .contains("propose the same call again")
    );
    let second = d.propose(rm("build/ holds only compiler output; make recreates it"));
    d.plan();
    assert_eq!(d.owed.review_round(&second), 2);
    assert_eq!(
        d.owed.earlier_rounds(&second)[0].justification,
        "stale output"
    );
    d.review(&second, 2, 2, Verdict::Safe, "svc:reviewer");
    d.plan();
    assert!(d.started(&second));
    let mut tally = ReviewTally::new();
    tally.add_log(d.log.records());
    let shell = tally.tools()["shell"];
    assert_eq!(
        (
            shell.reviewed,
            shell.approved_later,
            shell.model_calls,
            shell.ms
        ),
        (1, 1, 2, 20)
    );
}

#[test]
fn stalemate_waits_for_a_human_whose_answer_decides() {
    for (verdict, runs) in [
        (Verdict::Safe, true),
        (
            Verdict::Unsafe {
                reason: "no".into(),
                alternative: None,
            },
            false,
        ),
    ] {
        let mut d = Driver::new();
        let id = d.propose(rm("needed"));
        d.plan();
        d.review(&id, 1, 1, Verdict::Unclear { reason: None }, "svc:reviewer");
        d.plan();
        assert_eq!(d.owed.stalemates().count(), 1);
        assert!(!d.started(&id) && d.result(&id).is_none());
        // A reviewer cannot answer past the last round; only the card's answer can.
        assert!(
            journal(
                &d.owed,
                Signal::Review {
                    tool: id.clone(),
                    round: 1,
                    of: 1,
                    verdict: Verdict::Safe,
                    by: "svc:reviewer".into(),
                    spent: ReviewSpent::default(),
                }
            )
            .is_err()
        );
        d.review(&id, 2, 1, verdict, "human:alice");
        d.plan();
        assert_eq!(d.started(&id), runs);
        let mut tally = ReviewTally::new();
        tally.add_log(d.log.records());
        let shell = tally.tools()["shell"];
        assert_eq!(shell.stalemates, 1);
        assert_eq!(
            (shell.approved_later, shell.denied),
            (u64::from(runs), u64::from(!runs))
        );
    }
}

#[test]
fn a_crash_mid_review_resumes_at_the_same_round_from_the_log() {
    let mut d = Driver::new();
    let first = d.propose(rm("x"));
    d.plan();
    d.review(
        &first,
        1,
        3,
        Verdict::Unclear {
            reason: Some("why?".into()),
        },
        "svc:reviewer",
    );
    d.plan();
    let second = d.propose(rm("because"));
    d.plan();
    assert_eq!(d.owed.review_round(&second), 2);
    // The sequencer dies while round 2 is asked: boot closes the use, as an interrupt would.
    let closed = crate::owed::close_open(&d.owed, "restarted");
    d.write(closed);
    d.signal(Signal::UserLine {
        from: crate::names::Entity::parse("human:alice").unwrap(),
        text: "carry on".into(),
    });
    d.plan();
    let again = d.propose(rm("because, again"));
    d.plan();
    assert_eq!(d.owed.review_round(&again), 2);
    assert_eq!(d.owed.earlier_rounds(&again)[0].justification, "x");
    // An old record without a reason still reads.
    let old: Verdict = serde_json::from_str(r#"{"kind":"unclear"}"#).unwrap();
    assert_eq!(old, Verdict::Unclear { reason: None });
}

#[test]
fn a_stalemate_survives_a_boot_and_its_answer_resumes_the_turn() {
    for approve in [true, false] {
        let mut d = Driver::new();
        let call = d.owed.open_call().unwrap().id.clone();
        let tame = ToolUseId::new("t1").unwrap();
        let wild = ToolUseId::new("w1").unwrap();
        d.tools
            .insert("read".into(), Footprint::of([EffectClass::FsRead]));
        d.signal(Signal::ModelReply {
            call,
            text: String::new(),
            tool_uses: vec![
                ToolUse {
                    id: tame.clone(),
                    name: "read".into(),
                    input: json!({}),
                },
                ToolUse {
                    id: wild.clone(),
                    name: "shell".into(),
                    input: rm("needed"),
                },
            ],
            usage: Usage::default(),
            stop_reason: "tool_use".into(),
        });
        d.plan();
        d.review(
            &wild,
            1,
            1,
            Verdict::Unclear { reason: None },
            "svc:reviewer",
        );
        d.plan();
        assert_eq!(d.owed.running().to_vec(), vec![tame.clone()]);
        assert!(!d.owed.waits_only_on_cards(), "a tame tool still runs");
        // The process dies with the tame tool running and the card waiting. Boot closes the
        // tame tool as an interrupt would, but keeps the stalemate, and the turn stays live.
        let interrupt = crate::owed::close_open(&d.owed, "restarted");
        let at_boot = crate::owed::close_at_boot(&d.owed, "restarted");
        assert!(
            matches!(&interrupt[..], [RecordBody::Interrupted { closed_tools, .. }]
            if *closed_tools == [tame.clone(), wild.clone()])
        );
        assert!(
            matches!(&at_boot[..], [RecordBody::Interrupted { closed_tools, .. }]
            if *closed_tools == [tame.clone()])
        );
        d.write(at_boot);
        assert!(d.owed.is_live() && d.owed.waits_only_on_cards());
        assert!(!d.owed.call_owed() && !d.owed.turn_end_owed());
        // A second boot finds nothing more to close.
        assert!(crate::owed::close_at_boot(&d.owed, "restarted").is_empty());
        assert!(d.plan().is_empty(), "nothing is owed while the card waits");
        // The human's answer, read from the cards chain, is journaled as the round after.
        let answered = card::CardLine::Answered {
            id: wild.clone(),
            by: crate::names::Entity::parse("human:alice").unwrap(),
            approve,
            reason: "as you say".into(),
        };
        let lines = [answered];
        assert_eq!(card::answers_awaited(&lines, &d.owed).len(), 1);
        d.review(
            &wild,
            2,
            1,
            card::CardLine::verdict(approve, "as you say"),
            "human:alice",
        );
        assert!(card::answers_awaited(&lines, &d.owed).is_empty());
        d.plan();
        assert_eq!(d.started(&wild), approve);
        if approve {
            d.signal(Signal::ToolFinished {
                id: wild.clone(),
                output: "exit 0".into(),
                is_error: false,
                effects: vec![],
                refusal: None,
            });
            assert!(
                d.owed.call_owed(),
                "the model is owed a call to read the result"
            );
        } else {
            assert!(d.result(&wild).unwrap().contains("as you say"));
            assert!(
                d.owed.open_call().is_some(),
                "the model is asked, told the denial"
            );
        }
    }
}

#[test]
fn without_a_stalemate_boot_closes_as_an_interrupt_does() {
    let mut d = Driver::new();
    let id = d.propose(rm("x"));
    d.plan();
    assert_eq!(
        crate::owed::close_at_boot(&d.owed, "r"),
        crate::owed::close_open(&d.owed, "r")
    );
    assert!(!d.owed.waits_only_on_cards(), "it waits for the reviewer");
    d.review(&id, 1, 2, Verdict::Unclear { reason: None }, "svc:reviewer");
    d.plan();
    assert!(!d.owed.waits_only_on_cards());
}

#[test]
fn doing_something_else_withdraws() {
    let mut d = Driver::new();
    let id = d.propose(rm("x"));
    d.plan();
    d.review(&id, 1, 2, Verdict::Unclear { reason: None }, "svc:reviewer");
    d.plan();
    let other = d.propose(json!({"program": "ls", "justification": "look first"}));
    d.plan();
    assert_eq!(d.owed.review_round(&other), 1);
    let mut tally = ReviewTally::new();
    tally.add_log(d.log.records());
    assert_eq!(tally.tools()["shell"].withdrawn, 1);
}

#[test]
fn verdicts_parse_from_prose_and_fences_and_garbage_is_refused() {
    assert_eq!(
        parse_verdict("Sure.\n```json\n{\"verdict\": \"safe\"}\n```").unwrap(),
        Verdict::Safe
    );
    assert_eq!(
        parse_verdict(r#"{"verdict":"unsafe","reason":"wide","alternative":"use edit_file"}"#)
            .unwrap(),
        Verdict::Unsafe {
            reason: "wide".into(),
            alternative: Some("use edit_file".into())
        }
    );
    for bad in [
        "",
        "approve",
        "{}",
        r#"{"verdict":"yes"}"#,
        r#"{"verdict":"unsafe"}"#,
        r#"{"verdict":"safe","also":"run rm"}"#,
    ] {
        assert!(
            matches!(parse_verdict(bad), Err(ReviewError::Garbage { .. })),
            "{bad}"
        );
    }
}

#[test]
fn families_must_differ_unless_the_human_opts_in() {
    assert!(check_families(Family::Anthropic, Family::OpenAi, false).is_ok());
    assert_eq!(
        check_families(Family::OpenAi, Family::OpenAi, false),
        Err(ReviewError::SameFamily {
            proposer: Family::OpenAi,
            reviewer: Family::OpenAi
        })
    );
    assert!(check_families(Family::OpenAi, Family::OpenAi, true).is_ok());
    assert_eq!(Family::of_dialect("openai"), Some(Family::OpenAi));
    assert_eq!(Family::of_dialect("gemini"), None);
    assert!(check_rounds(0).is_err() && check_rounds(MAX_ROUNDS + 1).is_err());
}

proptest! {
    /// `conclude_is_bounded`: a safe verdict always approves; a stalemate happens only at the
    /// last round, a return only before it, a denial only at the card after it; a redirect
    /// only with an alternative.
    #[test]
    fn conclude_is_bounded(round in 1u32..6, of in 1u32..5, v in verdict()) {
        let c = conclude(round, of, &v);
        prop_assert_eq!(c == Conclusion::Approved, v == Verdict::Safe);
        match c {
            Conclusion::Stalemate { .. } => prop_assert_eq!(round, of),
            Conclusion::Returned { .. } => prop_assert!(round < of),
            Conclusion::Denied { .. } => prop_assert!(round > of),
            Conclusion::Redirected { .. } => {
                let has_alternative = matches!(v, Verdict::Unsafe { alternative: Some(_), .. });
                prop_assert!(round <= of && has_alternative);
            }
            Conclusion::Approved => {}
        }
    }

    /// `garbage_never_approves`: verdict-shaped text (a JSON object with verdict-like keys and
    /// values, in prose or a fence, with near misses of every part) approves exactly when it is
    /// one object of the written keys only, each once, whose `verdict` is the string `"safe"`.
    #[test]
    fn garbage_never_approves(written in written_verdict()) {
        let approved = parse_verdict(&written.text) == Ok(Verdict::Safe);
        prop_assert_eq!(approved, written.says_safe(), "{}", written.text);
    }

    /// `justification_is_not_the_effect`: the key of a call ignores its justification, and the
    /// input the tool runs with never carries it.
    #[test]
    fn justification_is_not_the_effect(a in "[a-z ]{1,40}", b in "[a-z ]{1,40}", arg in "[a-z]{0,10}") {
        prop_assume!(!a.trim().is_empty() && !b.trim().is_empty());
        let x = json!({"program": "ls", "args": [arg.clone()], "justification": a});
        let y = json!({"program": "ls", "args": [arg], "justification": b});
        prop_assert_eq!(Effect::key("shell", &x), Effect::key("shell", &y));
        let (text, rest) = split_justification(&x).unwrap();
        prop_assert_eq!(text, a);
        prop_assert!(rest.get(JUSTIFICATION_FIELD).is_none());
    }

    /// `review_is_bounded_and_only_safe_starts`: whatever the reviewer answers, a proposer that
    /// keeps proposing the same call is reviewed at most `of` rounds before a card, and a wild
    /// call starts only after a safe verdict for it.
    #[test]
    fn review_is_bounded_and_only_safe_starts(of in 1u32..4, verdicts in proptest::collection::vec(verdict(), 1..8)) {
        let mut d = Driver::new();
        let mut verdicts = verdicts.into_iter();
        let mut reviewer_rounds = 0;
        loop {
            let id = d.propose(rm("needed"));
            d.plan();
            let round = d.owed.review_round(&id);
            prop_assert!(round <= of);
            let Some(v) = verdicts.next() else { break };
            d.review(&id, round, of, v.clone(), "svc:reviewer");
            reviewer_rounds += 1;
            d.plan();
            prop_assert_eq!(d.started(&id), v == Verdict::Safe);
            if d.owed.stalemates().next().is_some() {
                prop_assert_eq!(round, of);
                break;
            }
            if d.result(&id).is_none() && !d.started(&id) {
                break;
            }
            if d.started(&id) {
                d.signal(Signal::ToolFinished {
                    id, output: "ok".into(), is_error: false, effects: vec![], refusal: None,
                });
            }
            d.plan();
            if d.owed.open_call().is_none() {
                break;
            }
        }
        prop_assert!(reviewer_rounds <= 8);
    }
}

mod cards {
    use super::*;
    use crate::duty::Duty;
    use crate::names::{AgentName, HumanName, ServiceName};
    use crate::review::card::{CardError, CardLine, admit_card_line, parse_card_line, waiting};

    fn agent() -> AgentName {
        AgentName::parse("alice/main").unwrap()
    }

    fn raised() -> CardLine {
        CardLine::Raised {
            id: ToolUseId::new("u1").unwrap(),
            round: 2,
            effect: Effect {
                tool: "shell".into(),
                footprint: Footprint::of([EffectClass::Shell]),
                what: "runs `rm`".into(),
                write_roots: vec!["workspace".into()],
                hosts: vec![],
                input: json!({"program": "rm"}),
            },
            justification: "stale".into(),
            reason: "unclear purpose".into(),
        }
    }

    fn answer(by: &str) -> CardLine {
        CardLine::Answered {
            id: ToolUseId::new("u1").unwrap(),
            by: crate::names::Entity::parse(by).unwrap(),
            approve: true,
            reason: "fine".into(),
        }
    }

    fn human(name: &str) -> Duty {
        Duty::Human {
            human: HumanName::parse(name).unwrap(),
        }
    }

    #[test]
    fn the_proposer_raises_a_human_answers_once_and_is_named_by_hubd() {
        let own = Duty::Sequencer { agent: agent() };
        let line = admit_card_line(&own, &agent(), &[], raised()).unwrap();
        let stored = vec![parse_card_line(&serde_json::to_string(&line).unwrap()).unwrap()];
        assert_eq!(waiting(&stored).len(), 1);
        // The caller claims to be bob; hubd writes the session's human, alice.
        let answered =
            admit_card_line(&human("alice"), &agent(), &stored, answer("human:bob")).unwrap();
        assert!(
            matches!(&answered, CardLine::Answered { by, .. } if by.to_string() == "human:alice")
        );
        let mut both = stored.clone();
        both.push(answered);
        assert!(waiting(&both).is_empty());
        assert!(matches!(
            admit_card_line(&human("alice"), &agent(), &both, answer("human:alice")),
            Err(CardError::NotWaiting {
                state: "was already answered",
                ..
            })
        ));
        assert!(matches!(
            admit_card_line(&human("alice"), &agent(), &[], answer("human:alice")),
            Err(CardError::NotWaiting {
                state: "was never raised",
                ..
            })
        ));
        let other = Duty::Sequencer {
            agent: AgentName::parse("bob").unwrap(),
        };
        assert!(matches!(
            admit_card_line(&other, &agent(), &[], raised()),
            Err(CardError::NotTheProposer { .. })
        ));
        assert!(parse_card_line("{\"kind\":\"raised\"}").is_err());
    }

    proptest! {
        /// `only_humans_answer_cards`: no agent's sequencer (its own included), host or postman
        /// can answer a card, whatever it claims in `by`.
        #[test]
        fn only_humans_answer_cards(which in 0u8..4, claim in "(human:alice|alice/main|bob)") {
            let duty = match which {
                0 => Duty::Sequencer { agent: agent() },
                1 => Duty::Sequencer { agent: AgentName::parse("alice").unwrap() },
                2 => Duty::Host { subtree: None },
                _ => Duty::Postman { service: ServiceName::parse("postmaster").unwrap() },
            };
            let stored = vec![raised()];
            let refused = admit_card_line(&duty, &agent(), &stored, answer(&claim));
            prop_assert!(
                matches!(refused, Err(CardError::NotAHuman { .. })),
                "{:?}",
                refused
            );
        }
    }
}
