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

/// A spinner on stderr for a long step; indicatif hides it when stderr is not a terminal.
pub fn spinner(message: &str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}
