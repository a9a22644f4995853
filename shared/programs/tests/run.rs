//! Programs run in the evaluator process and reach the world only through the parent's ring.

mod common;

use common::Session;
use l3m_programs::Rule;
use l3m_programs::host::{self, PROGRAMS_DIR};
use l3m_tools::{Tool, ToolError};
use serde_json::json;

const TODOS: &str = r#""""Counts TODO lines."""
FOOTPRINT = ["fs-read"]
DESCRIPTION = "Count the lines containing TODO in the files of a directory."
INPUT = {"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]}
MARK = "TODO"

def count(text):
    return len([line for line in text.split("\n") if MARK in line])

def main(input):
    total = 0
    for entry in fs_list(input["dir"]):
        if entry["kind"] == "regular file":
            total += count(fs_read(input["dir"] + "/" + entry["name"]))
    return {"todos": total}
"#;

#[test]
fn a_read_only_program_counts_through_the_ring() {
    let s = Session::new();
    std::fs::write(
        s.hub.ws("src/a.rs"),
        "// TODO one\nfn a() {}\n// TODO two\n",
    )
    .unwrap();
    let tool = s.admit("todos", TODOS).unwrap();
    let decl = tool.decl();
    assert_eq!(decl.name, "program_todos");
    assert_eq!(decl.footprint.tier(), l3m_core::effects::Tier::Tame);
    let out = s.call(&tool, json!({"dir": "workspace/src"})).unwrap();
    assert_eq!(out.text, r#"{"todos":2}"#);
}

/// The schema the model is shown is enforced before the evaluator starts: an input it rules
/// out is refused naming the field, and the same tool runs once the input fits; a schema with
/// a keyword that would go unenforced is refused at load, naming its line.
#[test]
fn an_input_its_schema_rules_out_is_refused_naming_the_field_before_the_program_runs() {
    let s = Session::new();
    let tool = s.admit("todos", TODOS).unwrap();
    for (input, field, reason) in [
        (json!({}), "input.dir", "required"),
        (json!({"dir": 7}), "input.dir", "expected string"),
    ] {
        match s.call(&tool, input) {
            Err(ToolError::BadInput {
                field: f,
                reason: r,
            }) => {
                assert_eq!(f, field);
                assert!(r.contains(reason), "{r}");
            }
            other => panic!("expected a bad input, got {other:?}"),
        }
    }
    let out = s.call(&tool, json!({"dir": "workspace"})).unwrap();
    assert_eq!(out.text, r#"{"todos":0}"#);
    let pattern = TODOS.replace(
        r#"{"type": "string"}"#,
        r#"{"type": "string", "pattern": "^workspace"}"#,
    );
    let refused = s.admit("todos", &pattern).unwrap_err();
    assert_eq!((refused.rule, refused.line), (Rule::InputSchema, 4));
    assert!(refused.detail.contains("`pattern`"), "{refused}");
}

/// A wild program: it declares the shell, so each call of it is reviewed before it runs.
const LINES: &str = r#"FOOTPRINT = ["shell"]
DESCRIPTION = "Count a file's lines with wc, and note that it did."
INPUT = {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]}

def main(input):
    counted = shell_run("wc", ["-l", input["file"]])
    noted = shell_run("sh", ["-c", "echo counted > counted.txt; echo out > ../escaped.txt"])
    return {"lines": int(counted["stdout"].split(" ")[0]), "noted": noted["status"], "err": noted["stderr"]}
"#;

#[test]
fn a_wild_program_is_offered_only_with_the_shell_and_runs_it_in_the_sandbox() {
    // Without the shell among its wild classes, the agent does not have the program.
    let e = Session::new().admit("lines", LINES).unwrap_err();
    assert_eq!(e.rule, Rule::NotCovered, "{e}");

    let s = Session::minted(|input| {
        input.wild = Some(vec![l3m_core::effects::EffectClass::Shell]);
    });
    std::fs::write(s.hub.ws("notes.md"), "one\ntwo\nthree\n").unwrap();
    let tool = s.admit("lines", LINES).unwrap();
    assert_eq!(tool.decl().footprint.tier(), l3m_core::effects::Tier::Wild);
    // Its reviewer is shown the whole source: everything a call can do.
    let shown = tool.effect(&json!({"file": "notes.md"}));
    assert!(
        shown.contains(LINES) && shown.contains("shell (wild)"),
        "{shown}"
    );

    let out = s.call(&tool, json!({"file": "notes.md"})).unwrap();
    let out: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(out["lines"], 3, "{out}");
    // The run wrote in the workspace, and the sandbox kept it from writing above it.
    assert_eq!(
        std::fs::read_to_string(s.hub.ws("counted.txt")).unwrap(),
        "counted\n"
    );
    assert!(!s.hub.acr.join("escaped.txt").exists());
    assert_ne!(out["noted"], 0, "{out}");
    assert!(!out["err"].as_str().unwrap().is_empty(), "{out}");
}

#[test]
fn a_writing_program_is_journaled_and_mail_goes_to_the_outlet() {
    let s = Session::new();
    let source = r#"
FOOTPRINT = ["fs-write", "mail", "clock"]
DESCRIPTION = "Write a note and tell my parent."
INPUT = {"type": "object"}

def main(input):
    fs_write("workspace/note.txt", "at " + str(clock_now()))
    return mail_send("alice", "wrote the note")
"#;
    let tool = s.admit("note", source).unwrap();
    let out = s.call(&tool, json!({})).unwrap();
    assert_eq!(out.text, "l-1");
    assert_eq!(
        std::fs::read_to_string(s.hub.ws("note.txt")).unwrap(),
        "at 1750000000000"
    );
    assert_eq!(
        s.journal.entries().unwrap().len(),
        1,
        "the write was journaled first"
    );
    assert_eq!(
        s.outlet.calls(),
        ["letter to agent:alice* | None | wrote the note"]
    );
}

#[test]
fn a_refused_effect_is_the_calls_error_with_its_boundary() {
    let s = Session::new();
    let world = s.hub.world();
    let source = r#"
FOOTPRINT = ["fs-read", "fs-write"]
DESCRIPTION = "Reach outside."
INPUT = {"type": "object"}

def main(input):
    fs_write(".l3m/grants.toml", "files = ['/']")
    return fs_read("../../other/self/workspace/theirs.txt")
"#;
    let tool = s.admit("reach", source).unwrap();
    let err = s.call(&tool, json!({})).unwrap_err();
    assert!(matches!(err, ToolError::Files(_)), "{err}");
    assert!(err.refusal().is_some());
    assert_eq!(s.hub.world(), world);
}

#[test]
fn load_finds_admits_and_refuses_naming_each_file() {
    let s = Session::new();
    s.install("todos", TODOS);
    s.install(
        "fetch",
        &TODOS.replace("\"fs-read\"]", "\"fs-read\", \"net\"]"),
    );
    s.install("Bad", TODOS);
    std::fs::write(
        s.hub.acr.join(PROGRAMS_DIR).join("notes.txt"),
        "not a program",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        s.hub.outside.join("secret"),
        s.hub.acr.join(PROGRAMS_DIR).join("link.star"),
    )
    .unwrap();
    let loaded = host::load(&common::evaluator(), &s.hub.acr, &s.conferred);
    let names: Vec<String> = loaded.tools.iter().map(|t| t.decl().name).collect();
    assert_eq!(names, ["program_todos"]);
    let refused: Vec<(String, Rule)> = loaded
        .refused
        .iter()
        .map(|e| (e.file.clone(), e.rule))
        .collect();
    assert_eq!(
        refused,
        [
            ("agent/programs/Bad.star".to_owned(), Rule::FileName),
            ("agent/programs/fetch.star".to_owned(), Rule::NotCovered),
            ("agent/programs/link.star".to_owned(), Rule::FileName),
        ]
    );
    assert!(!loaded.refused[2].detail.contains("outside secret"));
}

#[test]
fn load_admits_a_plugin_whole_or_refuses_it_naming_plugin_file_line_and_rule() {
    let s = Session::new();
    std::fs::write(s.hub.ws("src/a.rs"), "// TODO one\n").unwrap();
    s.install("todos", TODOS);
    s.install_in_plugin("notes", "todos", TODOS);
    s.install_in_plugin("notes", "tally", TODOS);
    s.install_in_plugin("mixed", "todos", TODOS);
    s.install_in_plugin(
        "mixed",
        "spin",
        &TODOS.replace(
            "    total = 0\n",
            "    total = 0\n    while True:\n        pass\n",
        ),
    );
    s.install_in_plugin("wide", "todos", TODOS);
    s.install_in_plugin(
        "wide",
        "fetch",
        &TODOS.replace("\"fs-read\"]", "\"fs-read\", \"net\"]"),
    );
    let plugins = s.hub.acr.join(l3m_programs::plugin::PLUGINS_DIR);
    std::fs::create_dir_all(plugins.join("empty")).unwrap();
    s.install_in_plugin("stowaway", "todos", TODOS);
    std::fs::write(plugins.join("stowaway/plugin.toml"), "description = \"x\"").unwrap();
    std::os::unix::fs::symlink(plugins.join("notes"), plugins.join("linked")).unwrap();
    s.install_in_plugin("Bad-Name", "todos", TODOS);
    for i in 0..=l3m_programs::plugin::MAX_PLUGIN_PROGRAMS {
        s.install_in_plugin("crowd", &format!("p{i}"), TODOS);
    }
    let loaded = host::load(&common::evaluator(), &s.hub.acr, &s.conferred);
    let names: Vec<String> = loaded.tools.iter().map(|t| t.decl().name).collect();
    assert_eq!(
        names,
        [
            "program_todos",
            "program_notes-tally",
            "program_notes-todos"
        ]
    );
    let refused: Vec<(&str, u32, Rule)> = loaded
        .refused
        .iter()
        .map(|e| (e.file.as_str(), e.line, e.rule))
        .collect();
    assert_eq!(
        refused,
        [
            ("agent/plugins/Bad-Name", 1, Rule::Plugin),
            ("agent/plugins/crowd", 1, Rule::Plugin),
            ("agent/plugins/empty", 1, Rule::Plugin),
            ("agent/plugins/linked", 1, Rule::Plugin),
            ("agent/plugins/mixed/spin.star", 12, Rule::NoWhile),
            ("agent/plugins/stowaway/plugin.toml", 1, Rule::Plugin),
            ("agent/plugins/wide/fetch.star", 2, Rule::NotCovered),
        ]
    );
    assert!(
        loaded.refused[4]
            .detail
            .starts_with("plugin `mixed` refused whole, none of its 2 programs is offered"),
        "{}",
        loaded.refused[4]
    );
    let tally = &loaded.tools[1];
    let out = s.call(tally, json!({"dir": "workspace/src"})).unwrap();
    assert_eq!(out.text, r#"{"todos":1}"#);
}

#[test]
fn a_missing_evaluator_is_a_named_refusal() {
    let mut e = common::evaluator();
    e.program = "/nonexistent/l3m-program".into();
    let err = host::check_source(&e, "agent/programs/todos.star", TODOS).unwrap_err();
    assert_eq!(err.rule, Rule::Evaluator);
    assert!(err.detail.contains("/nonexistent/l3m-program"), "{err}");
}
