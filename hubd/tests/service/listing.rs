//! `hubd.list-tree`: one request per page answers what `l3m tree` once read every asleep
//! agent's Log for (two reads each), and answers it the same.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_core::log::{CallId, FuelUnit, Record, RecordBody};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::log::{AppendLog, LogAppended};
use l3m_wire::hubd::tree::{ListTree, STUCK_ERROR_CHARS, TreePage, stuck_suffix};

/// How many of the last records `l3m tree` looks at.
const TAIL: u64 = 32;

fn failed(error: &str, retryable: bool) -> RecordBody {
    RecordBody::CallFailed {
        call: CallId::new("c1").unwrap(),
        error: error.into(),
        retryable,
    }
}

/// The Logs of the test: one shape each of what a tail can say.
fn shapes() -> Vec<(&'static str, Vec<RecordBody>)> {
    let long = "x".repeat(3 * STUCK_ERROR_CHARS);
    let mut buried = vec![RecordBody::OutOfFuel {
        unit: FuelUnit::Wakes,
    }];
    buried.extend((0..TAIL).map(|_| failed("529", true)));
    vec![
        ("a0", vec![]),
        ("a1", vec![RecordBody::TurnEnd]),
        ("a2", vec![failed("400 bad request", false)]),
        ("a3", vec![failed("400", false), RecordBody::TurnEnd]),
        (
            "a4",
            vec![RecordBody::OutOfFuel {
                unit: FuelUnit::ModelCalls,
            }],
        ),
        ("a5", vec![failed("timeout", true)]),
        ("a6", vec![failed(&long, false), RecordBody::TurnEnd]),
        // The spent fuel is older than the tail: it is not said, as from the tail.
        ("a7", buried),
    ]
}

async fn list(f: &Fixture, human: &l3m_wire::hubd::session::Capability, tail: u64) -> TreePage {
    f.call(
        Op::ListTree,
        &ListTree {
            capability: human.clone(),
            after: None,
            tail,
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_in_one_request_says_what_reading_each_log_tail_says() {
    let f = Fixture::start().await;
    let human = f.human().await;
    let mut expected = Vec::new();
    for (name, bodies) in shapes() {
        f.spawn(&human, name, root_grant()).await.unwrap();
        let records: Vec<Record> = bodies
            .into_iter()
            .enumerate()
            .map(|(seq, body)| Record {
                seq: seq as u64,
                at_ms: 7,
                body,
            })
            .collect();
        if !records.is_empty() {
            let capability = f.sequencer(name).await;
            let lines = records.iter().map(|r| r.to_line().unwrap()).collect();
            let _: LogAppended = f
                .call(
                    Op::AppendLog,
                    &AppendLog {
                        capability,
                        agent: name.into(),
                        expected_tip: None,
                        records: lines,
                    },
                )
                .await
                .unwrap();
        }
        // What the CLI once read (the tail), cut to what its stuck fold looks at.
        let tail = &records[records.len().saturating_sub(TAIL as usize)..];
        if let Some(part) = stuck_suffix(tail) {
            expected.push((name.to_owned(), part));
        }
    }
    let page = list(&f, &human, TAIL).await;
    assert_eq!(page.agents.len(), 8);
    assert_eq!(page.next, None);
    let got: Vec<(String, Vec<Record>)> = page
        .stuck
        .iter()
        .map(|s| (s.agent.clone(), s.records.clone()))
        .collect();
    assert_eq!(got, expected);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    // Every tail whose telling record is a failure or spent fuel; a3's failure was closed by a
    // turn's end (the part keeps both), a5's and a7's retry is still owed: the fold judges.
    assert_eq!(names, ["a2", "a3", "a4", "a5", "a6", "a7"]);
    assert_eq!(
        got[5].1.len(),
        1,
        "only the last telling record of a7's tail"
    );
    match &got[4].1[0].body {
        RecordBody::CallFailed { error, .. } => {
            assert_eq!(error.chars().count(), STUCK_ERROR_CHARS)
        }
        other => panic!("{other:?}"),
    }
    // A plain listing reads no tail.
    assert!(list(&f, &human, 0).await.stuck.is_empty());
    // A Log that moves is read again: a2's fuel ran out after its failure.
    let a2 = f.sequencer("a2").await;
    let tip = f.tip(&l3m_core::refs::agent_ref(
        &agent("a2"),
        l3m_core::refs::AgentRef::Log,
    ));
    let _: LogAppended = f
        .call(
            Op::AppendLog,
            &AppendLog {
                capability: a2,
                agent: "a2".into(),
                expected_tip: tip,
                records: vec![
                    Record {
                        seq: 1,
                        at_ms: 7,
                        body: RecordBody::OutOfFuel {
                            unit: FuelUnit::Bytes,
                        },
                    }
                    .to_line()
                    .unwrap(),
                ],
            },
        )
        .await
        .unwrap();
    let again = list(&f, &human, TAIL).await;
    let a2 = again.stuck.iter().find(|s| s.agent == "a2").unwrap();
    assert!(
        matches!(
            a2.records[..],
            [Record {
                seq: 1,
                body: RecordBody::OutOfFuel { .. },
                ..
            }]
        ),
        "{a2:?}"
    );
}
