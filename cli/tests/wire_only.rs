//! The CLI built without the `embedded` feature speaks to the services on the wire only: it
//! links neither hubd nor the sequencer, so no code path opens a hub's store or runs agents, and
//! nothing outside the embedded code reads the host credential or opens a session as anything
//! but the human. (CI also builds and lints that configuration: `scripts/test`.)
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The normal (non-dev, non-build) dependencies of the CLI built with `features`.
fn dependencies(features: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "l3m",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn crate_named(tree: &str, name: &str) -> bool {
    tree.lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

#[test]
fn without_embedded_the_cli_links_neither_hubd_nor_the_sequencer() {
    let wire_only = dependencies(&["--no-default-features"]);
    assert!(crate_named(&wire_only, "l3m-wire"), "{wire_only}");
    for service in ["hubd", "sequencer", "postman", "l3m-ring", "l3m-tools"] {
        assert!(
            !crate_named(&wire_only, service),
            "{service} in:\n{wire_only}"
        );
    }
    // The check can fail: the default build does link them.
    let full = dependencies(&[]);
    assert!(crate_named(&full, "hubd") && crate_named(&full, "sequencer"));
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

#[test]
fn only_embedded_code_reads_the_host_credential_or_opens_another_duty() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // Compiled only with `embedded` (their `mod` lines are gated in lib.rs and commands/mod.rs).
    let embedded_only = ["embedded.rs", "commands/init.rs", "commands/demo/"];
    let mut offenders = Vec::new();
    for file in sources(&src) {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if embedded_only.iter().any(|e| rel.starts_with(e)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let named = [
                "context::host_key",
                "fn host_key",
                "Duty::Sequencer",
                "Duty::Host",
                "Duty::Postman",
            ]
            .iter()
            .any(|n| line.contains(n));
            let gated = lines[i.saturating_sub(3)..i]
                .iter()
                .any(|l| l.contains("#[cfg(feature = \"embedded\")]"));
            if named && !gated && !line.trim_start().starts_with("//") {
                offenders.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
    assert!(
        lib_gates(&src.join("lib.rs"), "pub mod embedded;")
            && lib_gates(&src.join("commands/mod.rs"), "pub mod init;")
            && lib_gates(&src.join("commands/mod.rs"), "pub mod demo;"),
        "the embedded-only modules are compiled only with the feature"
    );
}

/// Whether `item` in `file` is preceded by the `embedded` feature gate.
fn lib_gates(file: &Path, item: &str) -> bool {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        l.trim() == item && i > 0 && lines[i - 1].contains("#[cfg(feature = \"embedded\")]")
    })
}
