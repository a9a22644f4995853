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
            rfc3339(ms)
        )))
    }
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
pub fn rfc3339(ms: u64) -> String {
    let days = ms / 86_400_000;
    let in_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`, for
/// non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_621_538_123), "2025-12-01T20:38:58.123Z");
        assert_eq!(rfc3339(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }
}
