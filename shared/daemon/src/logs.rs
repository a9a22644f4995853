//! A service's logs: stderr, through `tracing`, as an operator configures them.

use tracing_subscriber::EnvFilter;

/// The variable that picks the log format: `json` for one JSON object a line (what a log
/// collector reads), anything else or unset for human-readable text.
pub const FORMAT_VAR: &str = "L3M_LOG_FORMAT";

/// Sets this process's logs up: the filter from `RUST_LOG` (default `info`), the format from
/// [`FORMAT_VAR`], colour only when stderr is a terminal. Calling it twice keeps the first.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let json = std::env::var(FORMAT_VAR).is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    // try_init: a second call (a test, an embedded service) keeps the subscriber already set.
    let _ = if json {
        builder.json().with_current_span(false).try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}
