//! The undo chain through hubd over a real nats-server: only an agent's own sequencer appends
//! to it, by compare-and-swap, lines of one JSON object each; it is read by that sequencer, a
//! human or a host, never by a parent's or a sibling's sequencer (it holds file contents).
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::undo::{AppendUndo, ReadUndo, UndoAppended, UndoRange};
use l3m_wire::reply::ErrorCode;

fn append(by: &Capability, agent: &str, tip: Option<&str>, lines: &[&str]) -> AppendUndo {
    AppendUndo {
        capability: by.clone(),
        agent: agent.into(),
        expected_tip: tip.map(str::to_owned),
        lines: lines.iter().map(|l| (*l).to_owned()).collect(),
    }
}

fn read(by: &Capability, agent: &str) -> ReadUndo {
    ReadUndo {
        capability: by.clone(),
        agent: agent.into(),
        from: 0,
        to: u64::MAX,
    }
}

const LINE: &str = r#"{"v":1,"id":1,"path":"workspace/a","prior":{"kind":"absent"},"at_ms":0}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_agents_own_sequencer_appends_and_only_it_a_host_or_a_human_reads() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    f.spawn(&bob, "bob/sib", root_grant()).await.unwrap();
    let kid = f.sequencer("bob/kid").await;
    let sib = f.sequencer("bob/sib").await;

    let first: UndoAppended = f
        .call(Op::AppendUndo, &append(&kid, "bob/kid", None, &[LINE]))
        .await
        .unwrap();
    assert_eq!(first.len, 1);
    // A stale tip is a conflict, not a second chain.
    let stale = f
        .call::<_, UndoAppended>(Op::AppendUndo, &append(&kid, "bob/kid", None, &[LINE]))
        .await
        .unwrap_err();
    assert_eq!(stale.code, ErrorCode::Conflict);

    // Its parent, a sibling and a human cannot write it.
    for by in [&bob, &sib, &human] {
        let refused = f
            .call::<_, UndoAppended>(
                Op::AppendUndo,
                &append(by, "bob/kid", Some(&first.tip), &[LINE]),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Refused, "{}", refused.message);
    }
    // Its own sequencer and a human read it; its parent and a sibling do not.
    for by in [&kid, &human] {
        let range: UndoRange = f.call(Op::ReadUndo, &read(by, "bob/kid")).await.unwrap();
        assert_eq!(range.lines, [LINE]);
        assert_eq!(range.tip.as_deref(), Some(first.tip.as_str()));
    }
    for by in [&bob, &sib] {
        let refused = f
            .call::<_, UndoRange>(Op::ReadUndo, &read(by, "bob/kid"))
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Refused);
        assert!(
            refused
                .message
                .contains("undo chain is read only by its own sequencer"),
            "{}",
            refused.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_one_json_object_within_the_limit_is_refused_and_nothing_written() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let long = format!(
        r#"{{"v":1,"x":"{}"}}"#,
        "a".repeat(l3m_core::record_format::MAX_STORED_LINE)
    );
    for lines in [
        vec![],
        vec!["not json"],
        vec!["{\"v\":1}\n{\"v\":1}"],
        vec![r#"{"v":99}"#],
        vec![long.as_str()],
    ] {
        let refused = f
            .call::<_, UndoAppended>(Op::AppendUndo, &append(&bob, "bob", None, &lines))
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Invalid, "{}", refused.message);
    }
    let range: UndoRange = f.call(Op::ReadUndo, &read(&bob, "bob")).await.unwrap();
    assert_eq!((range.len, range.tip), (0, None));
}
