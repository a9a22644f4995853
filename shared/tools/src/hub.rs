//! The hub-facing tools: `send_letter`, `spawn_agent`, and `read_letter`, which reads on in a
//! letter of the agent's own inbox past where its event was cut.
//!
//! The ring checks the mail token covers the address, and the spawn token's level, before the
//! call reaches hubd through the sequencer's outlet; hubd then applies the real gate (the spawn
//! gate re-reads the parent's grant from the ledger). Refusals come back as [`ToolError::Mail`]
//! and [`ToolError::Spawn`].

use l3m_core::budget::Fuel;
use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::mail::Address;
use l3m_core::names::AgentName;
use l3m_ring::effects::Granted;
use serde_json::{Value, json};

use crate::args::{Args, bad, skip_bytes};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// Sends a letter to an inbox the agent's mail grant covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendLetter;

impl Tool for SendLetter {
    fn decl(&self) -> ToolDecl {
        declare("send_letter", [EffectClass::Mail], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Send a letter. `to` is an agent path (`alice/main`) or an address such as `human:bob*`; `office:NAME agent:PATH*` reaches an agent on another hub (airmail, which needs the airmail axis for that office). You may write to your own subtree, your ancestors, and whoever else your grant names."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "the recipient: an agent path, or `key:value` tokens with the reader starred"},
                "subject": {"type": "string", "description": "an optional one-line subject"},
                "body": {"type": "string", "description": "the letter"}
            },
            "required": ["to", "body"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let to_text = args.string("to")?;
        let to = Address::parse(to_text).map_err(|e| bad("to", e.to_string()))?;
        let id = fx
            .mail()?
            .send(&to, args.opt_string("subject")?, args.string("body")?)?;
        Ok(
            ToolOutput::text(format!("sent letter {id} to {}", to.render()))
                .lasting(EffectClass::Mail, format!("letter to {}", to.render())),
        )
    }
}

/// Reads a letter of the agent's own inbox by id, from a byte: the way on past the cut of a
/// letter too long to show whole in its event, whose note names this call.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadLetter;

impl Tool for ReadLetter {
    fn decl(&self) -> ToolDecl {
        declare(
            "read_letter",
            [EffectClass::TreeView],
            Reversibility::ReadOnly,
        )
    }

    fn description(&self) -> &str {
        "Read a letter of your own inbox by its id, from `from_byte` on (bytes of the letter as you were shown it, `[subject] body`, to skip): a letter too long to show whole was cut with a note naming this call."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "the letter's id, as the cut letter's note names it"},
                "from_byte": {"type": "integer", "minimum": 0, "description": "bytes of the letter to skip (default 0), as the note names them"}
            },
            "required": ["id"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let id = args.string("id")?;
        let skip = args.skip()?;
        let letter = fx.inbox()?.letter(id)?.ok_or_else(|| {
            bad(
                "id",
                format!("your inbox holds no letter {id}; copy the id from the letter's note"),
            )
        })?;
        Ok(ToolOutput::text(skip_bytes(letter.as_read(), skip)))
    }
}

/// Asks hubd to admit a child under a grant within the agent's own.
///
/// A model's spawn is always persistent (it needs spawn level `persist`): the tool call
/// returns as soon as hubd admits the child, so a child driven by it would be retired before
/// it did anything. Driven children are a program's (`spawn_child`), retired when the
/// program's call returns; at level `drive` an agent spawns only through its programs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpawnAgent;

impl Tool for SpawnAgent {
    fn decl(&self) -> ToolDecl {
        declare("spawn_agent", [EffectClass::Spawn], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Spawn a persistent child agent: its full name (your name plus one segment), its task, the grant it gets (every axis within yours; a wider one is refused, never clamped) and optionally the fuel lent to it. The child lives until it is retired, so this needs spawn level persist; at level drive, only your programs spawn children (driven ones, retired when the program's call returns)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the child's full name, e.g. `alice/main/helper`"},
                "task": {"type": "string", "description": "the child's first instruction"},
                "grant": {"type": "object", "description": "the child's grant, axis by axis as in a grant file, e.g. {\"files\": [\"workspace\"], \"spawn\": \"off\"}"},
                "loan": {"type": "object", "description": "fuel lent: {\"model-calls\": n, \"bytes\": n, \"wakes\": n} (default none)"}
            },
            "required": ["name", "task", "grant"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let child =
            AgentName::parse(args.string("name")?).map_err(|e| bad("name", e.to_string()))?;
        let grant = parse_field::<Grant>(&args, "grant")?.unwrap_or_default();
        let loan = parse_field::<Fuel>(&args, "loan")?.unwrap_or(Fuel::ZERO);
        let request = SpawnRequest {
            child,
            grant,
            loan,
            driven: false,
            persona: None,
            fork: None,
        };
        let name = fx.spawn()?.spawn(&request, args.string("task")?)?;
        Ok(ToolOutput::text(format!("spawned {name} (persistent)"))
            .lasting(EffectClass::Spawn, format!("spawned {name}")))
    }
}

/// An optional field read into `T` by its serde form; the error names the field.
fn parse_field<T: serde::de::DeserializeOwned>(
    args: &Args<'_>,
    field: &str,
) -> Result<Option<T>, ToolError> {
    args.opt_value(field)
        .map(|v| serde_json::from_value(v.clone()).map_err(|e| bad(field, e.to_string())))
        .transpose()
}
