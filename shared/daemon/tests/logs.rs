//! A service's logs as an operator configures them, checked in a child process (a subscriber
//! is set once per process): JSON lines with `L3M_LOG_FORMAT=json`, text otherwise, filtered
//! by `RUST_LOG`.

use std::process::Command;

/// Set in the child: log one line at each level and exit.
const CHILD: &str = "L3M_DAEMON_LOGS_CHILD";

#[test]
fn json_lines_when_asked_text_otherwise_and_rust_log_filters() {
    if std::env::var_os(CHILD).is_some() {
        l3m_daemon::logs::init();
        tracing::debug!(detail = 1, "a debug line");
        tracing::info!(agent = "alice", "an info line");
        tracing::warn!("a warning");
        return;
    }
    let child = |format: Option<&str>, filter: Option<&str>| {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "json_lines_when_asked_text_otherwise_and_rust_log_filters",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .env_remove("RUST_LOG")
            .env_remove(l3m_daemon::logs::FORMAT_VAR);
        if let Some(format) = format {
            command.env(l3m_daemon::logs::FORMAT_VAR, format);
        }
        if let Some(filter) = filter {
            command.env("RUST_LOG", filter);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };

    let json = child(Some("json"), None);
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect();
    assert_eq!(lines.len(), 2, "info is the default level: {json}");
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(lines[0]["fields"]["message"], "an info line");
    assert_eq!(lines[0]["fields"]["agent"], "alice");
    assert!(lines[0]["timestamp"].is_string());
    assert_eq!(lines[1]["level"], "WARN");

    let text = child(None, Some("warn"));
    assert!(text.contains("a warning"), "{text}");
    assert!(!text.contains("an info line"), "RUST_LOG=warn: {text}");
    assert!(serde_json::from_str::<serde_json::Value>(text.trim()).is_err());
    assert!(
        !text.contains('\u{1b}'),
        "no colour when stderr is not a terminal"
    );

    let debug = child(Some("JSON"), Some("debug"));
    assert!(debug.contains("\"a debug line\""), "{debug}");
}
