//! `--json` output: one pretty JSON document per listing (JSON Lines for `log --json`), on
//! stdout. The shapes are documented in docs/cli.md and are part of the CLI's interface.

use serde::Serialize;

use crate::error::CliError;

/// Prints `value` as pretty JSON.
pub fn json<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Runtime(format!("encoding JSON output: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Prints `value` as one compact JSON line.
pub fn json_line<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string(value)
        .map_err(|e| CliError::Runtime(format!("encoding JSON output: {e}")))?;
    println!("{text}");
    Ok(())
}
