//! `watch` and `unwatch`: vigils, asking hubd to tell the agent when a hub fact comes true.
//!
//! Both declare `tree-view` (a vigil watches what the agent may already see and only changes
//! when it is told) and `clock` (a deadline and a bound are read against it). hubd's vigil
//! gate is the whole check: whose refs may be watched, who may pin or cancel, how many, and
//! for how long. The event arrives in a later turn, or wakes the agent if it sleeps.

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_core::names::AgentName;
use l3m_core::refs::AgentRef;
use l3m_core::vigil::{MAX_SPAN_MS, Watch};
use l3m_ring::effects::Granted;
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// How long a vigil stays armed unless `for_secs` says otherwise: one day.
const DEFAULT_SPAN_SECS: usize = 24 * 60 * 60;

/// Arms a vigil on the agent, or pins one on a descendant.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchTool;

impl Tool for WatchTool {
    fn decl(&self) -> ToolDecl {
        declare(
            "watch",
            [EffectClass::TreeView, EffectClass::Clock],
            Reversibility::ReadOnly,
        )
    }

    fn description(&self) -> &str {
        "Arm a vigil: be told (in a later turn, or woken if you sleep) when a fact comes true. \
         `fact` is `ref-moved` (`ref` of `agent`, yourself or a descendant, moves), `letter-read` \
         (`letter` you sent to `reader` is read), `child-done` (`child`, a descendant, is \
         retired) or `deadline` (`in_secs` from now). It fires once, and lapses after \
         `for_secs` (default one day, at most seven). `on` pins it on a descendant, who cannot \
         cancel it. At most 16 armed at once."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "fact": {"type": "string", "enum": ["ref-moved", "letter-read", "child-done", "deadline"]},
                "agent": {"type": "string", "description": "ref-moved: whose ref (your own full name, or a descendant's)"},
                "ref": {"type": "string", "enum": ["log", "inbox", "outbox", "undo", "claims", "persona", "cards", "grants"], "description": "ref-moved: which ref"},
                "letter": {"type": "string", "description": "letter-read: the letter's id, as send_letter returned it"},
                "reader": {"type": "string", "description": "letter-read: the agent you sent it to"},
                "child": {"type": "string", "description": "child-done: the descendant"},
                "in_secs": {"type": "integer", "minimum": 1, "description": "deadline: seconds from now"},
                "for_secs": {"type": "integer", "minimum": 1, "description": "how long it stays armed (default 86400)"},
                "on": {"type": "string", "description": "a descendant to pin the vigil on (default: you)"}
            },
            "required": ["fact"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let max_secs = usize::try_from(MAX_SPAN_MS / 1000).unwrap_or(usize::MAX);
        let now = fx.clock()?.now_ms();
        let secs = |n: usize| u64::try_from(n).unwrap_or(u64::MAX).saturating_mul(1000);
        let span = args
            .opt_count("for_secs", max_secs)?
            .unwrap_or(DEFAULT_SPAN_SECS);
        let until_ms = now.saturating_add(secs(span));
        let name = |field: &str| -> Result<AgentName, ToolError> {
            AgentName::parse(args.string(field)?).map_err(|e| bad(field, e.to_string()))
        };
        let on = args
            .opt_string("on")?
            .map(|s| AgentName::parse(s).map_err(|e| bad("on", e.to_string())))
            .transpose()?;
        let watch = match args.string("fact")? {
            "ref-moved" => Watch::RefMoved {
                agent: name("agent")?,
                which: serde_json::from_value::<AgentRef>(Value::from(args.string("ref")?))
                    .map_err(|e| bad("ref", e.to_string()))?,
                from: None,
            },
            "letter-read" => Watch::LetterRead {
                letter: args.string("letter")?.to_owned(),
                reader: name("reader")?,
            },
            "child-done" => Watch::ChildDone {
                child: name("child")?,
            },
            "deadline" => {
                let Some(after) = args.opt_count("in_secs", max_secs)? else {
                    return Err(bad("in_secs", "a deadline needs `in_secs`".into()));
                };
                Watch::Deadline {
                    at_ms: now.saturating_add(secs(after)),
                }
            }
            other => return Err(bad("fact", format!("unknown fact `{other}`"))),
        };
        let described = watch.describe();
        let id = fx.vigils()?.arm(on.as_ref(), watch, until_ms)?;
        let whom = on.map_or(String::new(), |on| format!(" pinned on {on}"));
        Ok(ToolOutput::text(format!(
            "armed vigil {id}{whom}: you will be told when {described}, or when it lapses at {}",
            l3m_core::clock::rfc3339(until_ms)
        )))
    }
}

/// Cancels a vigil the agent armed (a pinned one only its pinner may cancel).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unwatch;

impl Tool for Unwatch {
    fn decl(&self) -> ToolDecl {
        declare("unwatch", [EffectClass::TreeView], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "Cancel an armed vigil by its id (`v1`, …). `on` names the descendant you pinned it on; \
         a vigil pinned on you by an ancestor cannot be cancelled by you."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "the vigil's id, as watch returned it"},
                "on": {"type": "string", "description": "the descendant it was pinned on (default: you)"}
            },
            "required": ["id"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let on = args
            .opt_string("on")?
            .map(|s| AgentName::parse(s).map_err(|e| bad("on", e.to_string())))
            .transpose()?;
        let id = args.string("id")?;
        fx.vigils()?.cancel(on.as_ref(), id)?;
        Ok(ToolOutput::text(format!("cancelled vigil {id}")))
    }
}
