//! The CLI's only way to the terminal. Everything it prints is a [`Shown`], whose one
//! constructor makes every control and format character visible but newlines and tabs
//! ([`crate::render::escape::visible`]); `println!`, `eprintln!` and `std::io::stdout` are
//! denied in this crate (`cli/clippy.toml`), so no agent's or model's text can drive the human's
//! terminal, whichever command prints it. Renders escape foreign one-line fields themselves
//! ([`crate::render::escape::Foreign`]) so a field cannot fake a line either.
//!
//! `--json` output is one pretty JSON document per listing (JSON Lines for `log --json`), on
//! stdout; serde escapes C0 controls, and [`json`] also writes DEL, C1 and format characters as
//! `\uXXXX`, so the document means the same and shows nothing raw. The shapes are documented in
//! docs/cli.md and are part of the CLI's interface.
//!
//! A closed stdout (`l3m log X | head -1`) ends the process quietly with status 141, as a
//! process killed by SIGPIPE reports in a shell (git's behaviour); a closed stderr is ignored.

use std::fmt;
use std::io::Write;

use serde::Serialize;

use crate::error::CliError;
use crate::render::escape::{is_format, visible};

/// The exit status when stdout's reader has gone: 128 + SIGPIPE, as a shell reports a process
/// SIGPIPE killed.
pub const CLOSED_PIPE: u8 = 141;

/// Text fit for the terminal: nothing in it but printable characters, newlines and tabs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    /// `text` with every control and format character made visible but newlines and tabs.
    pub fn new(text: &str) -> Shown {
        Shown(visible(text))
    }

    /// The text as it will be written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<fmt::Arguments<'_>> for Shown {
    fn from(args: fmt::Arguments<'_>) -> Shown {
        match args.as_str() {
            Some(text) => Shown::new(text),
            None => Shown::new(&args.to_string()),
        }
    }
}

/// Writes `text` to stdout. A closed pipe ends the process with [`CLOSED_PIPE`]; any other
/// failure to write ends it with status 1 and a word on stderr, as `println!` would have
/// panicked.
#[allow(clippy::disallowed_methods)]
pub fn out(text: &Shown) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.0.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::exit(i32::from(CLOSED_PIPE))
        }
        Err(e) => {
            err(&Shown::new(&format!("l3m: cannot write to stdout: {e}\n")));
            std::process::exit(1)
        }
    }
}

/// Writes `text` to stderr; a closed or failing stderr is ignored (there is nowhere to say so).
#[allow(clippy::disallowed_methods)]
pub fn err(text: &Shown) {
    let mut stderr = std::io::stderr().lock();
    let _ignored = stderr
        .write_all(text.0.as_bytes())
        .and_then(|()| stderr.flush());
}

/// `println!` through [`out`]: formats, escapes, writes a line to stdout.
#[macro_export]
macro_rules! outln {
    () => { $crate::output::out(&$crate::output::Shown::new("\n")) };
    ($($arg:tt)*) => {
        $crate::output::out(&$crate::output::Shown::new(
            &::std::format!("{}\n", ::std::format_args!($($arg)*)),
        ))
    };
}

/// `print!` through [`out`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::out(&$crate::output::Shown::from(::std::format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`err`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::err(&$crate::output::Shown::new(
            &::std::format!("{}\n", ::std::format_args!($($arg)*)),
        ))
    };
}

/// JSON text with DEL, C1 controls and format characters (which serde leaves raw) written as
/// `\uXXXX`. Outside strings JSON holds only ASCII, so this changes no value's meaning.
pub fn json_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\u{7F}' || ('\u{80}'..='\u{9F}').contains(&c) || is_format(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Prints `value` as pretty JSON.
pub fn json<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Runtime(format!("encoding JSON output: {e}")))?;
    out(&Shown::new(&(json_escaped(&text) + "\n")));
    Ok(())
}

/// Prints `value` as one compact JSON line.
pub fn json_line<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string(value)
        .map_err(|e| CliError::Runtime(format!("encoding JSON output: {e}")))?;
    out(&Shown::new(&(json_escaped(&text) + "\n")));
    Ok(())
}

/// A spinner on stderr for a long step; indicatif hides it when stderr is not a terminal. Its
/// message is made visible like any other text.
pub fn spinner(message: &str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(visible(message));
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_meaning_with_nothing_raw() {
        let hostile = "a\x1b[2J\u{7f}\u{9b}\u{202E}\r\nb";
        let text = serde_json::to_string(&serde_json::json!({ "t": hostile })).unwrap();
        let escaped = json_escaped(&text);
        assert!(
            !escaped.chars().any(crate::render::escape::is_hostile),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back["t"], hostile);
    }

    #[test]
    fn shown_text_holds_no_escape() {
        let shown = Shown::from(format_args!("{}", "x\x1b]0;title\x07\u{9b}y\n"));
        assert_eq!(shown.as_str(), "x^[]0;title^G<U+009B>y\n");
    }
}
