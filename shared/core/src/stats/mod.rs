//! The folds behind `l3m stats`: from an agent's Log records to its model calls, tokens, and
//! each tool's uses, errors and latency ([`fold`]); and to what its calls cost ([`economy`]).
//! Latency is the span from a use's `tool-started` to its `tool-result` (`at_ms` of each); a
//! result with no start (refused by the harness) counts as a use with no latency.
//!
//! Pure, so the CLI renders them and the demo reports them without folding records itself.

use std::collections::{BTreeMap, HashMap};

use crate::log::{Record, RecordBody};

pub mod economy;
use serde::Serialize;

/// One tool's figures for one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolStats {
    /// Uses with a result.
    pub uses: u64,
    /// Of which failed or were refused.
    pub errors: u64,
    /// Of those, refused by a boundary (the result's typed refusal), by boundary.
    pub refused: BTreeMap<String, u64>,
    /// Uses that started and finished, so have a latency.
    pub timed: u64,
    /// Sum of their latencies, in milliseconds.
    pub total_ms: u64,
    /// The longest latency, in milliseconds.
    pub max_ms: u64,
}

impl ToolStats {
    /// The mean latency of the timed uses, in milliseconds.
    pub fn mean_ms(&self) -> Option<u64> {
        (self.timed > 0).then(|| self.total_ms / self.timed)
    }
}

/// One agent's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentStats {
    /// Model calls started.
    pub model_calls: u64,
    /// Calls that failed.
    pub failed_calls: u64,
    /// Input tokens over all replies.
    pub tokens_in: u64,
    /// Output tokens over all replies.
    pub tokens_out: u64,
    /// Per tool, by name.
    pub tools: BTreeMap<String, ToolStats>,
}

/// Folds one agent's Log.
pub fn fold(records: &[Record]) -> AgentStats {
    let mut stats = AgentStats::default();
    let mut names: HashMap<String, String> = HashMap::new();
    let mut started: HashMap<String, u64> = HashMap::new();
    for record in records {
        match &record.body {
            RecordBody::CallStarted { .. } => stats.model_calls += 1,
            RecordBody::CallFailed { .. } => stats.failed_calls += 1,
            RecordBody::AssistantReply {
                usage, tool_uses, ..
            } => {
                stats.tokens_in += usage.input_tokens;
                stats.tokens_out += usage.output_tokens;
                for used in tool_uses {
                    names.insert(used.id.to_string(), used.name.clone());
                }
            }
            RecordBody::ToolCall { id, name, .. } => {
                names.insert(id.to_string(), name.clone());
            }
            RecordBody::ToolStarted { id } => {
                started.insert(id.to_string(), record.at_ms);
            }
            RecordBody::ToolResult {
                id,
                is_error,
                refusal,
                ..
            } => {
                let id = id.to_string();
                let name = names
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| "(unknown)".into());
                let tool = stats.tools.entry(name).or_default();
                tool.uses += 1;
                tool.errors += u64::from(*is_error);
                if let Some(refusal) = refusal {
                    *tool.refused.entry(refusal.boundary.clone()).or_default() += 1;
                }
                if let Some(at) = started.remove(&id) {
                    let ms = record.at_ms.saturating_sub(at);
                    tool.timed += 1;
                    tool.total_ms += ms;
                    tool.max_ms = tool.max_ms.max(ms);
                }
            }
            _ => {}
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{ToolUse, Usage};

    fn record(seq: u64, at_ms: u64, body: RecordBody) -> Record {
        Record { seq, at_ms, body }
    }

    fn id(s: &str) -> crate::log::ToolUseId {
        serde_json::from_value(serde_json::json!(s)).unwrap()
    }

    #[test]
    fn latency_runs_from_start_to_result_and_tokens_add_up() {
        let call: crate::log::CallId = serde_json::from_value(serde_json::json!("c1")).unwrap();
        let records = vec![
            record(
                1,
                10,
                RecordBody::CallStarted {
                    call: call.clone(),
                    provider: "scripted".into(),
                    model: "m".into(),
                    attempt: 1,
                    fallback_of: None,
                },
            ),
            record(
                2,
                20,
                RecordBody::AssistantReply {
                    call,
                    text: String::new(),
                    tool_uses: vec![ToolUse {
                        id: id("t1"),
                        name: "read_file".into(),
                        input: serde_json::json!({}),
                    }],
                    usage: Usage {
                        input_tokens: 100,
                        output_tokens: 7,
                        cache_read_tokens: 0,
                        cache_write_tokens: 0,
                    },
                    stop_reason: "tool_use".into(),
                },
            ),
            record(3, 30, RecordBody::ToolStarted { id: id("t1") }),
            record(
                4,
                75,
                RecordBody::ToolResult {
                    id: id("t1"),
                    output: "ok".into(),
                    is_error: false,
                    effects: vec![],
                    refusal: None,
                },
            ),
        ];
        let s = fold(&records);
        assert_eq!((s.model_calls, s.tokens_in, s.tokens_out), (1, 100, 7));
        let t = &s.tools["read_file"];
        assert_eq!((t.uses, t.timed, t.total_ms, t.max_ms), (1, 1, 45, 45));
        assert_eq!(t.mean_ms(), Some(45));
    }

    #[test]
    fn refusals_are_counted_by_their_boundary_not_their_text() {
        let refused = |seq, boundary: &str| {
            record(
                seq,
                seq,
                RecordBody::ToolResult {
                    id: id(&format!("t{seq}")),
                    output: "anything at all".into(),
                    is_error: true,
                    effects: vec![],
                    refusal: Some(crate::log::Refusal::new(boundary, None)),
                },
            )
        };
        let failed = record(
            9,
            9,
            RecordBody::ToolResult {
                id: id("t9"),
                output: "refused by the host boundary (but a failure)".into(),
                is_error: true,
                effects: vec![],
                refusal: None,
            },
        );
        let s = fold(&[
            refused(1, "host"),
            refused(2, "host"),
            refused(3, "hub"),
            failed,
        ]);
        let t = &s.tools["(unknown)"];
        assert_eq!(t.errors, 4);
        assert_eq!(
            t.refused,
            BTreeMap::from([("host".into(), 2), ("hub".into(), 1)])
        );
    }
}
