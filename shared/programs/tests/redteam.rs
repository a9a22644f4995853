//! The hostile corpus in `tests/redteam/programs/`: each program is stopped, at load or at run,
//! by the rule its first line names, and changes nothing outside its write roots; each hook in
//! `tests/redteam/programs/hooks/` is stopped by the rule its first line names, at load or on
//! its first event.

#![allow(clippy::unwrap_used)] // a corpus that cannot be read is a failed test

mod common;

use std::path::PathBuf;

use common::Session;
use l3m_tools::ToolError;

/// `(file stem, expected rule, source)` for every program of the corpus.
fn corpus() -> Vec<(String, String, String)> {
    corpus_in("")
}

/// `(file stem, expected rule, source)` for every `*.star` file of the corpus' folder `sub`.
fn corpus_in(sub: &str) -> Vec<(String, String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/redteam/programs")
        .join(sub);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "star") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let expect = source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()))
            .to_owned();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((stem, expect, source));
    }
    out.sort();
    out
}

/// The rule (or, for an effect the ring refused, the boundary) that stopped a call.
fn stopped_by(err: &ToolError) -> String {
    match err {
        ToolError::Program { rule, .. } => rule.clone(),
        other => other
            .refusal()
            .map(|r| r.boundary)
            .unwrap_or_else(|| format!("unrefused: {other}")),
    }
}

#[test]
fn every_hostile_program_is_stopped_by_its_named_rule_and_changes_nothing() {
    let corpus = corpus();
    assert!(corpus.len() >= 20, "the corpus shrank to {}", corpus.len());
    let mut wrong = Vec::new();
    for (name, expect, source) in corpus {
        let s = Session::new();
        let world = s.hub.world();
        let beyond = s.hub.beyond();
        let got = match s.admit(&name, &source) {
            Err(e) => {
                assert_eq!(e.file, format!("agent/programs/{name}.star"));
                assert!(e.line >= 1);
                e.rule.name().to_owned()
            }
            Ok(tool) => match s.call(&tool, serde_json::json!({})) {
                Ok(out) => format!("ran: {}", out.text),
                Err(e) => stopped_by(&e),
            },
        };
        if got != expect {
            wrong.push(format!("{name}: expected {expect}, got {got}"));
        }
        assert_eq!(s.hub.world(), world, "{name} changed the world");
        assert_eq!(s.hub.beyond(), beyond, "{name} reached beyond the ACR");
        assert!(s.outlet.calls().is_empty(), "{name} reached hubd");
        assert!(s.journal.entries().unwrap().is_empty(), "{name} edited");
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_hostile_hook_is_stopped_by_its_named_rule() {
    use l3m_core::log::{EventId, EventSource};
    use l3m_programs::hooks::{HOOKS_FILE, Hook, event_json};
    let corpus = corpus_in("hooks");
    assert!(
        corpus.len() >= 10,
        "the hooks corpus shrank to {}",
        corpus.len()
    );
    let event = event_json(
        &EventId::new("e1").unwrap(),
        &EventSource::Notice,
        "http://example.invalid/",
    );
    let mut wrong = Vec::new();
    for (name, expect, source) in corpus {
        let got = match Hook::check(&common::evaluator(), HOOKS_FILE, &source) {
            Err(e) => {
                assert_eq!(e.file, HOOKS_FILE);
                assert!(e.line >= 1);
                e.rule.name().to_owned()
            }
            Ok(hook) => match hook.decide(std::slice::from_ref(&event)).pop().unwrap() {
                Ok(d) => format!("decided: {d:?}"),
                Err(e) => e.rule.name().to_owned(),
            },
        };
        if got != expect {
            wrong.push(format!("{name}: expected {expect}, got {got}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
