//! The hostile corpus in `tests/redteam/programs/`: each program is stopped, at load or at run,
//! by the rule its first line names, and changes nothing outside its write roots; each hook in
//! `tests/redteam/programs/hooks/` is stopped by the rule its first line names, at load or on
//! its first event.

#![allow(clippy::unwrap_used)] // a corpus that cannot be read is a failed test

mod common;

use std::path::PathBuf;

use common::Session;
use l3m_programs::host;
use l3m_tools::{Tool, ToolError};

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

/// A hostile plugin of the corpus: good programs and one bad one.
struct HostilePlugin {
    plugin: String,
    /// Every program, as `(file name, source)`.
    programs: Vec<(String, String)>,
    /// The file name of the one program with an `# expect:` line.
    bad_file: String,
    /// The rule that line names.
    expect: String,
}

/// Every folder of the corpus' `plugins/`: exactly one program of each has an `# expect:` line.
fn plugin_corpus() -> Vec<HostilePlugin> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/redteam/programs/plugins");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let plugin = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut programs = Vec::new();
        let mut bad = Vec::new();
        for file in std::fs::read_dir(&path).unwrap() {
            let file = file.unwrap().path();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let source = std::fs::read_to_string(&file).unwrap();
            if let Some(rule) = source
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# expect: "))
                .and_then(|l| l.split_whitespace().next())
            {
                bad.push((name.clone(), rule.to_owned()));
            }
            programs.push((name, source));
        }
        programs.sort();
        assert_eq!(
            bad.len(),
            1,
            "{plugin} must hold exactly one `# expect:` program"
        );
        let (bad_file, expect) = bad.pop().unwrap();
        out.push(HostilePlugin {
            plugin,
            programs,
            bad_file,
            expect,
        });
    }
    out.sort_by(|a, b| a.plugin.cmp(&b.plugin));
    out
}

/// Installs `programs` as the agent's plugin `plugin`.
fn install_plugin(s: &Session, plugin: &str, programs: &[&(String, String)]) {
    let dir = s
        .hub
        .acr
        .join(l3m_programs::plugin::PLUGINS_DIR)
        .join(plugin);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, source) in programs {
        std::fs::write(dir.join(name), source).unwrap();
    }
}

#[test]
fn a_plugin_with_one_bad_program_offers_none_and_names_it() {
    let corpus = plugin_corpus();
    assert!(
        corpus.len() >= 2,
        "the plugin corpus shrank to {}",
        corpus.len()
    );
    for HostilePlugin {
        plugin,
        programs,
        bad_file,
        expect,
    } in corpus
    {
        // Without its bad program the plugin is admitted whole: the bad one alone refuses it.
        let good: Vec<&(String, String)> =
            programs.iter().filter(|(n, _)| *n != bad_file).collect();
        assert!(!good.is_empty(), "{plugin} has no good program to withhold");
        let s = Session::new();
        install_plugin(&s, &plugin, &good);
        let loaded = host::load(&common::evaluator(), &s.hub.acr, &s.conferred);
        assert!(loaded.refused.is_empty(), "{plugin}: {:?}", loaded.refused);
        assert_eq!(loaded.tools.len(), good.len(), "{plugin}");

        let s = Session::new();
        install_plugin(&s, &plugin, &programs.iter().collect::<Vec<_>>());
        let world = s.hub.world();
        let loaded = host::load(&common::evaluator(), &s.hub.acr, &s.conferred);
        let offered: Vec<String> = loaded.tools.iter().map(|t| t.decl().name).collect();
        assert!(offered.is_empty(), "{plugin} offered {offered:?}");
        let [refusal] = loaded.refused.as_slice() else {
            panic!("{plugin}: expected one refusal, got {:?}", loaded.refused);
        };
        assert_eq!(refusal.file, format!("agent/plugins/{plugin}/{bad_file}"));
        assert_eq!(refusal.rule.name(), expect, "{plugin}: {refusal}");
        assert!(refusal.line >= 1);
        assert!(
            refusal
                .detail
                .contains(&format!("plugin `{plugin}` refused whole")),
            "{refusal}"
        );
        assert_eq!(s.hub.world(), world, "loading {plugin} changed the world");
        assert!(s.outlet.calls().is_empty(), "{plugin} reached hubd");
        assert!(s.journal.entries().unwrap().is_empty(), "{plugin} edited");
    }
}
