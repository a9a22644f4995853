//! `now`: the current time, read through the granted clock.

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use serde_json::{Value, json};

use crate::args::Args;
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// Tells the model the current UTC time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Now;

impl Tool for Now {
    fn decl(&self) -> ToolDecl {
        declare("now", [EffectClass::Clock], Reversibility::ReadOnly)
    }

    fn description(&self) -> &str {
        "The current time in UTC, as RFC 3339 and as milliseconds since the Unix epoch."
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        Args::parse(&input, &self.input_schema())?;
        let ms = fx.clock()?.now_ms();
        Ok(ToolOutput::text(format!(
            "{} ({ms} ms since the Unix epoch)",
            l3m_core::clock::rfc3339(ms)
        )))
    }
}
