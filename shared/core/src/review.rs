//! Review as deliberation: the pure decisions over a wild call (DESIGN §4, the paper's §3.3).
//!
//! A wild call (a tool whose footprint has no undo ceiling) never runs on the proposer's word.
//! The proposer must give a *justification* ([`split_justification`]: a call without one is sent
//! back for it); the reviewer, a model of another family ([`check_families`]), reads a
//! [`ReviewRequest`] carrying the call's [`Effect`] — what would change and where, never the
//! tool input alone — and answers a [`Verdict`] ([`parse_verdict`] reads it from the model's
//! text, and refuses garbage). [`conclude`] turns one round's verdict into what happens next:
//! - [`Conclusion::Approved`]: the call runs (in the sandbox its grant bounds, whatever the
//!   reviewer said);
//! - [`Conclusion::Redirected`]: unsafe, and a tame alternative exists: the model is told it;
//! - [`Conclusion::Returned`]: unsafe or unclear before the last round: the model is told why and
//!   may propose the same call again with a better justification (the next round), or do
//!   something else — which withdraws it;
//! - [`Conclusion::Stalemate`]: not safe at the last round: a card waits for a human, whose
//!   answer is the round after the last ([`Conclusion::Approved`] or [`Conclusion::Denied`]).
//!
//! Every round is a `review` record of the proposer's Log, so a replay reads the decision and
//! never asks again. [`ReviewTally`] folds Logs into the paper's Table 6, per tool. A stalemate
//! becomes a [`card`] for a human.
//!
//! **Must never** run anything: it only decides.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::effects::Footprint;
use crate::log::{Record, RecordBody, ToolUseId, Verdict};
use crate::names::AgentName;

/// Rounds of deliberation before a stalemate goes to a human, unless `l3m.toml` says otherwise.
pub const DEFAULT_ROUNDS: u32 = 2;

/// The most rounds a configuration may allow: each round costs the reviewer a model call.
pub const MAX_ROUNDS: u32 = 8;

/// The input field a wild call's justification travels in; it is removed before the tool runs.
pub const JUSTIFICATION_FIELD: &str = "justification";

/// The longest justification accepted, in bytes: it is shown to a model and on a card.
pub const MAX_JUSTIFICATION: usize = 4096;

/// The longest reason or alternative kept from a reviewer's verdict, in bytes.
pub const MAX_REASON: usize = 2048;

/// What went wrong deciding about a review.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// A wild call gave no justification; it is sent back for one.
    #[error(
        "a wild call needs a `justification` field saying why it is needed and why it is safe; {found}"
    )]
    NoJustification {
        /// What was there instead.
        found: &'static str,
    },
    /// The justification is longer than [`MAX_JUSTIFICATION`].
    #[error("the justification is {len} bytes; at most {MAX_JUSTIFICATION} are accepted")]
    JustificationTooLong {
        /// Its length.
        len: usize,
    },
    /// Reviewer and proposer are of the same model family and the human did not opt in.
    #[error(
        "the reviewer's model ({reviewer}) is of the proposer's family ({proposer}); choose a model of another family, or set `same_family = true` under [review] to accept it"
    )]
    SameFamily {
        /// The proposer's family.
        proposer: Family,
        /// The reviewer's family.
        reviewer: Family,
    },
    /// The round bound is out of range.
    #[error("review rounds must be 1..={MAX_ROUNDS}; {rounds} was given")]
    BadRounds {
        /// What was given.
        rounds: u32,
    },
    /// The reviewer's model answered something that is not a verdict.
    #[error("the reviewer's answer is not a verdict ({why}): {excerpt:?}")]
    Garbage {
        /// What is wrong with it.
        why: String,
        /// Its first characters.
        excerpt: String,
    },
}

/// A model family: reviewer and proposer must differ (DESIGN §4), so one family's blind spots
/// are not approved by the same blind spots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Anthropic's models (the Messages API).
    Anthropic,
    /// OpenAI-compatible models (Chat Completions: OpenAI, vLLM, llama.cpp, Ollama).
    OpenAi,
    /// A scripted model (demos, tests): a family of its own, since it is not a model at all.
    Scripted,
}

impl Family {
    /// The family a model dialect (as `l3m.toml` spells it) belongs to.
    pub fn of_dialect(dialect: &str) -> Option<Family> {
        match dialect {
            "anthropic" => Some(Family::Anthropic),
            "openai" => Some(Family::OpenAi),
            "scripted" => Some(Family::Scripted),
            _ => None,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Anthropic => "anthropic",
            Family::OpenAi => "openai",
            Family::Scripted => "scripted",
        })
    }
}

/// Refuses a reviewer of the proposer's family unless the human opted in with `same_family`.
pub fn check_families(
    proposer: Family,
    reviewer: Family,
    same_family: bool,
) -> Result<(), ReviewError> {
    if proposer == reviewer && !same_family {
        return Err(ReviewError::SameFamily { proposer, reviewer });
    }
    Ok(())
}

/// Checks a configured round bound.
pub fn check_rounds(rounds: u32) -> Result<u32, ReviewError> {
    if (1..=MAX_ROUNDS).contains(&rounds) {
        Ok(rounds)
    } else {
        Err(ReviewError::BadRounds { rounds })
    }
}

/// The `[review]` table of `l3m.toml`: whether wild calls are reviewed, by which model, and how
/// long the exchange may go. Without it, a wild call is not run and the model is told that no
/// reviewer is configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    /// The `[models.<label>]` table the reviewer calls.
    pub model: String,
    /// Rounds before a stalemate goes to a human card.
    #[serde(default = "default_rounds")]
    pub rounds: u32,
    /// Accept a reviewer of the proposer's own model family (the human's explicit choice).
    #[serde(default)]
    pub same_family: bool,
    /// Seconds the sequencer waits for one round's answer before telling the model the review
    /// could not be done.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
}

fn default_rounds() -> u32 {
    DEFAULT_ROUNDS
}

fn default_timeout_secs() -> u64 {
    120
}

impl ReviewConfig {
    /// Checks the bounds of the table.
    pub fn check(&self) -> Result<(), ReviewError> {
        check_rounds(self.rounds).map(drop)
    }
}

/// Splits a wild call's input into its justification and the input the tool runs with.
pub fn split_justification(input: &Value) -> Result<(String, Value), ReviewError> {
    let Value::Object(map) = input else {
        return Err(ReviewError::NoJustification {
            found: "the input is not an object",
        });
    };
    let text = match map.get(JUSTIFICATION_FIELD) {
        None => {
            return Err(ReviewError::NoJustification {
                found: "none was given",
            });
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err(ReviewError::NoJustification {
                found: "it is empty",
            });
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ReviewError::NoJustification {
                found: "it is not a string",
            });
        }
    };
    if text.len() > MAX_JUSTIFICATION {
        return Err(ReviewError::JustificationTooLong { len: text.len() });
    }
    let mut rest = map.clone();
    rest.remove(JUSTIFICATION_FIELD);
    Ok((text, Value::Object(rest)))
}

/// `schema` (a tool's input schema) with a required [`JUSTIFICATION_FIELD`] string: how a
/// wild tool is offered to the model, so that its calls carry what their review reads. A schema
/// without `properties` or `required` (a program's may have neither) gets them.
pub fn with_justification(schema: &Value) -> Value {
    let mut schema = schema.clone();
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    let field = serde_json::json!({
        "type": "string",
        "maxLength": MAX_JUSTIFICATION,
        "description": "why this call is needed and why it is safe; a reviewer reads it before the call runs"
    });
    if let Some(props) = (object.entry("properties"))
        .or_insert_with(|| Value::Object(serde_json::Map::new()))
        .as_object_mut()
    {
        props.insert(JUSTIFICATION_FIELD.to_owned(), field);
    }
    if let Some(required) = (object.entry("required"))
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
    {
        required.push(JUSTIFICATION_FIELD.into());
    }
    schema
}

/// What a call would change and where: what the reviewer and a card are shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The tool called.
    pub tool: String,
    /// The effect classes it would use.
    pub footprint: Footprint,
    /// The tool's own account of what would change and where (for the shell: the command, its
    /// working directory, its deadline, no network).
    pub what: String,
    /// Where it may write: the proposer's write roots, the bound the sandbox enforces.
    pub write_roots: Vec<String>,
    /// Hosts it may reach; empty for the shell, whose sandbox has no network.
    pub hosts: Vec<String>,
    /// The input the tool would run with (without the justification).
    pub input: Value,
}

impl Effect {
    /// The key that says two proposals are the same call: the tool and its input. A model that
    /// proposes it again is in the next round; proposing anything else withdraws it.
    pub fn key(tool: &str, input: &Value) -> String {
        let stripped = split_justification(input).map_or_else(|_| input.clone(), |(_, rest)| rest);
        format!("{tool} {stripped}")
    }
}

/// One earlier round of the same deliberation, so the reviewer sees the exchange so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierRound {
    /// The round.
    pub round: u32,
    /// The proposer's justification then.
    pub justification: String,
    /// The reviewer's verdict then.
    pub verdict: Verdict,
}

/// What the sequencer sends the reviewer for one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRequest {
    /// The proposing agent.
    pub agent: AgentName,
    /// The tool use under review.
    pub tool_use: ToolUseId,
    /// This round, from 1.
    pub round: u32,
    /// The rounds allowed before a stalemate.
    pub of: u32,
    /// The proposer's model family; the reviewer refuses to judge its own family's proposals.
    pub proposer: Family,
    /// What the call would change and where.
    pub effect: Effect,
    /// Why the proposer says it is needed and safe.
    pub justification: String,
    /// The rounds before this one.
    pub earlier: Vec<EarlierRound>,
}

/// What one round of review comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conclusion {
    /// The call runs.
    Approved,
    /// Unsafe, with a tame alternative the model is told.
    Redirected {
        /// Why.
        reason: String,
        /// What to do instead.
        alternative: String,
    },
    /// Not approved before the last round: the model may propose it again, better justified.
    Returned {
        /// Why, as the reviewer said.
        reason: String,
    },
    /// Not approved at the last round: a card waits for a human.
    Stalemate {
        /// The reviewer's last reason.
        reason: String,
    },
    /// A human denied it at its card.
    Denied {
        /// Why, as the human said.
        reason: String,
    },
}

impl Conclusion {
    /// Whether the deliberation is over (nothing more will be asked about this call).
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            Conclusion::Returned { .. } | Conclusion::Stalemate { .. }
        )
    }
}

/// The reason a verdict gives, or what an unclear one stands for.
fn reason_of(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Safe => String::new(),
        Verdict::Unsafe { reason, .. } => reason.clone(),
        Verdict::Unclear {
            reason: Some(reason),
        } => reason.clone(),
        Verdict::Unclear { reason: None } => {
            "the reviewer could not tell whether it is safe".to_owned()
        }
    }
}

/// What `verdict` at `round` of `of` comes to. Rounds past `of` are a human's answer at a card.
pub fn conclude(round: u32, of: u32, verdict: &Verdict) -> Conclusion {
    let reason = reason_of(verdict);
    match verdict {
        Verdict::Safe => Conclusion::Approved,
        _ if round > of => Conclusion::Denied { reason },
        Verdict::Unsafe {
            alternative: Some(alternative),
            ..
        } => Conclusion::Redirected {
            reason,
            alternative: alternative.clone(),
        },
        _ if round < of => Conclusion::Returned { reason },
        _ => Conclusion::Stalemate { reason },
    }
}

/// The verdict as the reviewer's model must write it: one JSON object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WrittenVerdict {
    verdict: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    alternative: Option<String>,
}

/// How the reviewer's model is asked to answer, so [`parse_verdict`] can read it.
pub const VERDICT_FORMAT: &str = r#"Answer with one JSON object and nothing else: {"verdict": "safe" | "unsafe" | "unclear", "reason": "why (required unless safe)", "alternative": "a tame way to the same end, if one exists (optional)"}"#;

/// Reads a verdict from a reviewer model's text: the one JSON object in it (a fenced block or
/// surrounding prose is tolerated). Anything else is [`ReviewError::Garbage`]: never a default
/// verdict, so garbage can never approve.
pub fn parse_verdict(text: &str) -> Result<Verdict, ReviewError> {
    let garbage = |why: &str| ReviewError::Garbage {
        why: why.to_owned(),
        excerpt: text.chars().take(120).collect(),
    };
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err(garbage("no JSON object"));
    };
    let object = text
        .get(start..=end)
        .ok_or_else(|| garbage("no JSON object"))?;
    let written: WrittenVerdict =
        serde_json::from_str(object).map_err(|e| garbage(&format!("not a verdict object: {e}")))?;
    let clip = |s: String| -> String {
        let mut cut = s.len().min(MAX_REASON);
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s[..cut].to_owned()
    };
    let reason = written.reason.filter(|r| !r.trim().is_empty()).map(clip);
    let alternative = written
        .alternative
        .filter(|a| !a.trim().is_empty())
        .map(clip);
    match written.verdict.as_str() {
        "safe" => Ok(Verdict::Safe),
        "unclear" => Ok(Verdict::Unclear { reason }),
        "unsafe" => Ok(Verdict::Unsafe {
            reason: reason.ok_or_else(|| garbage("an unsafe verdict without a reason"))?,
            alternative,
        }),
        _ => Err(garbage("the verdict is not safe, unsafe or unclear")),
    }
}

/// What review cost one round: the reviewer's model calls and the time from asking to answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewSpent {
    /// Model calls the reviewer made.
    pub model_calls: u32,
    /// Milliseconds from the request to the answer.
    pub ms: u64,
}

/// The paper's Table 6 for one tool: how its wild calls fared under review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolTally {
    /// Deliberations begun (round-1 reviews).
    pub reviewed: u64,
    /// Approved at the first round.
    pub approved_first: u64,
    /// Approved at a later round, or by a human at a card.
    pub approved_later: u64,
    /// Redirected to a tame alternative.
    pub redirected: u64,
    /// Returned, and not proposed again.
    pub withdrawn: u64,
    /// Reached the last round without approval: a card for a human.
    pub stalemates: u64,
    /// Denied by a human at a card.
    pub denied: u64,
    /// Reviewer model calls spent.
    pub model_calls: u64,
    /// Milliseconds spent in review.
    pub ms: u64,
}

/// Folds Logs into review figures per tool. Feed it each Log's records in order.
#[derive(Debug, Clone, Default)]
pub struct ReviewTally {
    tools: BTreeMap<String, ToolTally>,
    /// The latest reply's tool uses, by id: the tool's name and the call's key.
    uses: HashMap<ToolUseId, (String, String)>,
    /// Returned deliberations not yet proposed again: key to tool.
    returned: BTreeMap<String, String>,
}

impl ReviewTally {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one Log (a new Log starts no deliberation of another's).
    pub fn add_log(&mut self, records: &[Record]) {
        self.uses.clear();
        self.returned.clear();
        for record in records {
            self.apply(&record.body);
        }
    }

    fn apply(&mut self, body: &RecordBody) {
        match body {
            RecordBody::AssistantReply { tool_uses, .. } => {
                let proposed: Vec<(ToolUseId, (String, String))> = (tool_uses.iter())
                    .map(|u| {
                        (
                            u.id.clone(),
                            (u.name.clone(), Effect::key(&u.name, &u.input)),
                        )
                    })
                    .collect();
                let gone: Vec<String> = (self.returned.keys())
                    .filter(|k| !proposed.iter().any(|(_, (_, key))| key == *k))
                    .cloned()
                    .collect();
                for key in gone {
                    if let Some(tool) = self.returned.remove(&key) {
                        self.tools.entry(tool).or_default().withdrawn += 1;
                    }
                }
                self.uses = proposed.into_iter().collect();
            }
            RecordBody::Review {
                call,
                round,
                of,
                verdict,
                spent,
                ..
            } => {
                let Some((tool, key)) = self.uses.get(call).cloned() else {
                    return;
                };
                self.returned.remove(&key);
                let t = self.tools.entry(tool.clone()).or_default();
                t.model_calls += u64::from(spent.model_calls);
                t.ms += spent.ms;
                if *round == 1 {
                    t.reviewed += 1;
                }
                match conclude(*round, *of, verdict) {
                    Conclusion::Approved if *round == 1 => t.approved_first += 1,
                    Conclusion::Approved => t.approved_later += 1,
                    Conclusion::Redirected { .. } => t.redirected += 1,
                    Conclusion::Returned { .. } => {
                        self.returned.insert(key, tool);
                    }
                    Conclusion::Stalemate { .. } => t.stalemates += 1,
                    Conclusion::Denied { .. } => t.denied += 1,
                }
            }
            _ => {}
        }
    }

    /// The figures per tool, by name.
    pub fn tools(&self) -> &BTreeMap<String, ToolTally> {
        &self.tools
    }
}

pub mod card;

#[cfg(test)]
mod tests;
