//! The laws of the folds kept beside `Owed` and behind `l3m stats`: each byte journaled is
//! charged to one call, a defer is open exactly until its completion, and the stats count each
//! record once. Over Logs of the records these folds read (calls, replies naming tools, tool
//! starts and results, compactions, defers and their completions), at arbitrary times.

// The strategies build ids from literals the id rules accept; a panic here is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use l3m_core::log::{
    CallId, Disposition, EventId, EventSource, Record, RecordBody, ToolUse, ToolUseId, Usage,
};
use l3m_core::names::Entity;
use l3m_core::owed::{CallCharge, OpenDefers, completion_id, fold_defers};
use l3m_core::stats::{self, economy::EconomyStats};
use proptest::collection::vec;
use proptest::prelude::*;

fn tool_id(k: u8) -> ToolUseId {
    ToolUseId::new(format!("t{k}")).unwrap()
}

/// One record body of the kinds the folds read, about a small pool of calls, tools and defers.
fn body() -> impl Strategy<Value = RecordBody> {
    prop_oneof![
        (0u8..3).prop_map(|c| RecordBody::CallStarted {
            call: CallId::new(format!("c{c}")).unwrap(),
            provider: "p".into(),
            model: "m".into(),
            attempt: 1,
            fallback_of: None,
        }),
        (0u8..3).prop_map(|c| RecordBody::CallFailed {
            call: CallId::new(format!("c{c}")).unwrap(),
            error: "boom".into(),
            retryable: true,
        }),
        (vec(0u8..4, 0..3), 0u64..1000, 0u64..100).prop_map(|(tools, input, output)| {
            RecordBody::AssistantReply {
                call: CallId::new("c0").unwrap(),
                text: "ok".into(),
                tool_uses: (tools.into_iter())
                    .map(|t| ToolUse {
                        id: tool_id(t),
                        name: format!("tool{}", t % 2),
                        input: serde_json::json!({}),
                    })
                    .collect(),
                usage: Usage {
                    input_tokens: input,
                    output_tokens: output,
                    cache_read_tokens: input / 2,
                    cache_write_tokens: 0,
                },
                stop_reason: "tool_use".into(),
            }
        }),
        (0u8..5).prop_map(|t| RecordBody::ToolStarted { id: tool_id(t) }),
        (0u8..5, any::<bool>()).prop_map(|(t, is_error)| RecordBody::ToolResult {
            id: tool_id(t),
            output: "out".into(),
            is_error,
            effects: vec![],
            refusal: None,
        }),
        Just(RecordBody::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: "go on".into(),
        }),
        (0u64..4).prop_map(|to| RecordBody::Compaction {
            from: 0,
            to,
            summary: "earlier".into(),
        }),
        (0u8..4).prop_map(|p| RecordBody::HookDecision {
            event: EventId::new("e0").unwrap(),
            disposition: Disposition::Defer {
                program: format!("p{p}")
            },
        }),
        (0u64..12).prop_map(|of| RecordBody::Event {
            id: completion_id(of).unwrap(),
            source: EventSource::ProgramDone {
                program: "p".into()
            },
            text: "ok: done".into(),
        }),
    ]
}

/// A Log of such records, each at a time no earlier than the one before.
fn log() -> impl Strategy<Value = Vec<Record>> {
    vec((body(), 0u64..50), 0..24).prop_map(|steps| {
        let mut at_ms = 0;
        (0u64..)
            .zip(steps)
            .map(|(seq, (body, gap))| {
                at_ms += gap;
                Record { seq, at_ms, body }
            })
            .collect()
    })
}

fn count(records: &[Record], kind: fn(&RecordBody) -> bool) -> u64 {
    records.iter().filter(|r| kind(&r.body)).count() as u64
}

proptest! {
    /// Every byte journaled is charged to exactly one call, or is still owed by the next: the
    /// charges at each call's start and the one pending add up to every other record's bytes.
    #[test]
    fn each_byte_is_charged_once(records in log(), sizes in vec(0u64..500, 24)) {
        let mut charge = CallCharge::default();
        let (mut charged, mut total) = (0u64, 0u64);
        for (record, bytes) in records.iter().zip(sizes.iter()) {
            if matches!(record.body, RecordBody::CallStarted { .. }) {
                charged += charge.bytes();
            } else {
                total += bytes;
            }
            charge.journaled(&record.body, *bytes);
        }
        prop_assert_eq!(charged + charge.bytes(), total);
    }

    /// A defer is open exactly while its decision has no completion after it.
    #[test]
    fn a_defer_is_open_until_its_completion(records in log()) {
        let mut open = OpenDefers::new();
        for record in &records {
            fold_defers(&mut open, record);
        }
        let completes = |d: &Record| {
            records[d.seq as usize..].iter().any(|r| {
                matches!(&r.body, RecordBody::Event { id, .. } if Some(id) == completion_id(d.seq).as_ref())
            })
        };
        let expected: BTreeSet<u64> = (records.iter())
            .filter(|r| matches!(r.body, RecordBody::HookDecision { .. }))
            .filter(|d| !completes(d))
            .map(|d| d.seq)
            .collect();
        prop_assert_eq!(open.values().map(|d| d.decision).collect::<BTreeSet<_>>(), expected);
    }

    /// `l3m stats` counts each call and each tool result once (a use of one tool), times only
    /// uses that started, and adds each reply's tokens once; the economy agrees on tokens, and
    /// its narration is part of what was sent.
    #[test]
    fn stats_count_each_record_once(records in log()) {
        let s = stats::fold(&records);
        prop_assert_eq!(s.model_calls, count(&records, |b| matches!(b, RecordBody::CallStarted { .. })));
        prop_assert_eq!(s.failed_calls, count(&records, |b| matches!(b, RecordBody::CallFailed { .. })));
        let uses: u64 = s.tools.values().map(|t| t.uses).sum();
        prop_assert_eq!(uses, count(&records, |b| matches!(b, RecordBody::ToolResult { .. })));
        let timed: u64 = s.tools.values().map(|t| t.timed).sum();
        let started = count(&records, |b| matches!(b, RecordBody::ToolStarted { .. }));
        prop_assert!(timed <= started, "{timed} timed of {started} started");
        for t in s.tools.values() {
            prop_assert!(t.errors <= t.uses && t.timed <= t.uses, "{t:?}");
            prop_assert!(t.max_ms <= t.total_ms && t.total_ms <= t.max_ms.saturating_mul(t.timed), "{t:?}");
        }
        let e = stats::economy::fold(&records);
        prop_assert_eq!((e.input_tokens, e.output_tokens), (s.tokens_in, s.tokens_out));
        prop_assert_eq!(e.compactions, count(&records, |b| matches!(b, RecordBody::Compaction { .. })));
        prop_assert!(e.narration_bytes <= e.request_bytes);
    }

    /// A subtree's economy is its top's plus each descendant's, and only an agent with a
    /// descendant heads one.
    #[test]
    fn a_subtree_sums_its_agents(tokens in vec(("[ab](/[ab]){0,2}", 0u64..100), 0..8)) {
        let agents: BTreeMap<String, EconomyStats> = (tokens.into_iter())
            .map(|(name, n)| (name, EconomyStats { input_tokens: n, compactions: 1, ..EconomyStats::default() }))
            .collect();
        let below = |top: &str, name: &str| name.starts_with(&format!("{top}/"));
        let subtrees = stats::economy::subtrees(&agents);
        for (top, sum) in &subtrees {
            let members: Vec<&EconomyStats> = (agents.iter())
                .filter(|(name, _)| *name == top || below(top, name))
                .map(|(_, s)| s)
                .collect();
            prop_assert_eq!(sum.input_tokens, members.iter().map(|s| s.input_tokens).sum::<u64>());
            prop_assert_eq!(sum.compactions, members.len() as u64);
        }
        let heads = agents.keys().filter(|top| agents.keys().any(|n| below(top, n))).count();
        prop_assert_eq!(subtrees.len(), heads);
    }
}
