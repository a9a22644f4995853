//! The economy fold behind `l3m stats`: from an agent's Log to what its model calls cost — tokens by kind, the
//! share of input read from the provider's cache, compactions, and how much of what was sent
//! was the harness's own narration — per agent and per subtree.
//!
//! Narration is measured on the view each call was sent (core's fold at each `call-started`):
//! text parts that came from a record other than a user line or a compaction's summary
//! (letters and other events, grant and budget changes), told apart by record kind.

use std::collections::BTreeMap;

use crate::log::{Record, RecordBody};
use crate::view::{ViewFold, view_bytes};
use serde::Serialize;

/// One agent's (or one subtree's) economy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EconomyStats {
    /// Input tokens billed at the full rate.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Compactions journaled.
    pub compactions: u64,
    /// Bytes of the views the model calls were sent (as core measures them).
    pub request_bytes: u64,
    /// Of those, the harness's narration.
    pub narration_bytes: u64,
}

impl EconomyStats {
    /// The share of input tokens read from the cache, if any input was billed.
    pub fn cache_hit_share(&self) -> Option<f64> {
        let input = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens;
        (input > 0).then(|| self.cache_read_tokens as f64 / input as f64)
    }

    /// The share of request bytes that was narration, if anything was sent.
    pub fn narration_share(&self) -> Option<f64> {
        (self.request_bytes > 0).then(|| self.narration_bytes as f64 / self.request_bytes as f64)
    }

    fn add(&mut self, other: &EconomyStats) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.compactions += other.compactions;
        self.request_bytes += other.request_bytes;
        self.narration_bytes += other.narration_bytes;
    }
}

/// Folds one agent's Log.
pub fn fold(records: &[Record]) -> EconomyStats {
    let mut stats = EconomyStats::default();
    let mut view = ViewFold::new();
    for record in records {
        match &record.body {
            RecordBody::CallStarted { .. } => {
                stats.request_bytes += view_bytes(view.view());
                stats.narration_bytes += view
                    .texts_by_origin()
                    .filter(|(seq, _)| is_narration(records, *seq))
                    .map(|(_, text)| text.len() as u64)
                    .sum::<u64>();
            }
            RecordBody::AssistantReply { usage, .. } => {
                stats.input_tokens += usage.input_tokens;
                stats.output_tokens += usage.output_tokens;
                stats.cache_read_tokens += usage.cache_read_tokens;
                stats.cache_write_tokens += usage.cache_write_tokens;
            }
            RecordBody::Compaction { .. } => stats.compactions += 1,
            _ => {}
        }
        view.advance(record);
    }
    stats
}

/// Whether the text shown from record `seq` is the harness's narration.
fn is_narration(records: &[Record], seq: u64) -> bool {
    let record = usize::try_from(seq).ok().and_then(|i| records.get(i));
    !matches!(
        record.map(|r| &r.body),
        Some(RecordBody::UserLine { .. } | RecordBody::Compaction { .. }) | None
    )
}

/// Each agent's figures summed with its descendants', for the agents that have any.
pub fn subtrees(agents: &BTreeMap<String, EconomyStats>) -> BTreeMap<String, EconomyStats> {
    let mut out = BTreeMap::new();
    for top in agents.keys() {
        let prefix = format!("{top}/");
        let below: Vec<&EconomyStats> = agents
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, s)| s)
            .collect();
        if below.is_empty() {
            continue;
        }
        let mut sum = agents[top].clone();
        for s in below {
            sum.add(s);
        }
        out.insert(top.clone(), sum);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Fuel;
    use crate::log::{CallId, Usage};
    use crate::names::Entity;

    fn records(bodies: Vec<RecordBody>) -> Vec<Record> {
        (0u64..)
            .zip(bodies)
            .map(|(seq, body)| Record {
                seq,
                at_ms: 0,
                body,
            })
            .collect()
    }

    fn call(n: u64) -> [RecordBody; 2] {
        let call = CallId::new(format!("c{n}")).unwrap();
        [
            RecordBody::CallStarted {
                call: call.clone(),
                provider: "p".into(),
                model: "m".into(),
                attempt: 1,
                fallback_of: None,
            },
            RecordBody::AssistantReply {
                call,
                text: "ok".into(),
                tool_uses: vec![],
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                    cache_read_tokens: 30,
                    cache_write_tokens: 0,
                },
                stop_reason: "end_turn".into(),
            },
        ]
    }

    #[test]
    fn tokens_by_kind_cache_hits_compactions_and_narration_by_record_kind() {
        let line = |text: &str| RecordBody::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: text.into(),
        };
        let mut bodies = vec![
            RecordBody::SystemPrompt {
                text: String::new(),
                continues: false,
            },
            line("(l3m) a user may write this too"),
        ];
        bodies.extend(call(1));
        // Low fuel: narrated.
        bodies.push(RecordBody::BudgetChange {
            left: Fuel {
                model_calls: 1,
                bytes: 10,
                wakes: 0,
            },
            summary: "low".into(),
        });
        bodies.push(line("go on"));
        bodies.push(RecordBody::Compaction {
            from: 1,
            to: 2,
            summary: "earlier".into(),
        });
        bodies.extend(call(2));
        let s = fold(&records(bodies));
        assert_eq!(
            (
                s.input_tokens,
                s.output_tokens,
                s.cache_read_tokens,
                s.compactions
            ),
            (20, 4, 60, 1)
        );
        assert_eq!(s.cache_hit_share(), Some(0.75));
        // The budget line is the only narration; the user's own "(l3m)" line and the summary
        // are not.
        let budget = "(l3m) your budget changed: low (left: 1 calls, 10 bytes, 0 wakes)".len();
        assert_eq!(s.narration_bytes, budget as u64, "{s:?}");
        assert!(s.narration_share().unwrap() < 1.0);

        let agents = BTreeMap::from([
            ("a".to_owned(), s.clone()),
            ("a/b".to_owned(), s.clone()),
            ("c".to_owned(), s),
        ]);
        let sub = subtrees(&agents);
        assert_eq!(sub.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(sub["a"].compactions, 2);
    }
}
