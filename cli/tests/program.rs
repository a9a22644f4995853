//! `l3m program check`: admitted programs print the tool the model is offered (exit 0), refused
//! ones name the file, line and rule (exit 1), bad arguments are usage errors (exit 2). Offline:
//! no hub or stack is needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Home;
use predicates::prelude::*;

const TODOS: &str = r#"FOOTPRINT = ["fs-read", "net"]
DESCRIPTION = "Count TODO lines in one file."
INPUT = {"type": "object", "properties": {"path": {"type": "string"}}}

def main(input):
    return len([l for l in fs_read(input["path"]).split("\n") if "TODO" in l])
"#;

fn write(home: &Home, name: &str, source: &str) -> String {
    let path = home.path().join(name);
    std::fs::write(&path, source).unwrap();
    path.display().to_string()
}

#[test]
fn an_admitted_program_shows_its_tool_and_the_axes_it_needs() {
    let home = Home::new();
    let file = write(&home, "todos.star", TODOS);
    let out = home.json(&["program", "check", &file]);
    assert_eq!(out["admitted"], true);
    assert_eq!(out["tool"]["name"], "program_todos");
    assert_eq!(out["tool"]["tier"], "tame");
    assert_eq!(out["tool"]["input_schema"]["type"], "object");
    assert_eq!(out["needs_axes"], serde_json::json!(["net"]));
    home.l3m(&["program", "check", &file])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "it may call: fs_read(path), fs_list(path), net_fetch(url)",
        ));
}

/// A program that declares the shell is wild: offered with a justification to give, each call
/// reviewed with its source, which must be short enough to be shown whole.
#[test]
fn a_wild_program_asks_for_a_justification_and_must_be_short_enough_to_review() {
    let home = Home::new();
    let lines = r#"FOOTPRINT = ["shell"]
DESCRIPTION = "Count a file's lines."
INPUT = {"type": "object"}

def main(input):
    return shell_run("wc", ["-l", input["file"]])["stdout"]
"#;
    let file = write(&home, "lines.star", lines);
    let out = home.json(&["program", "check", &file]);
    assert_eq!(out["tool"]["tier"], "wild");
    assert_eq!(out["needs_axes"], serde_json::json!(["wild"]));
    let schema = &out["tool"]["input_schema"];
    assert_eq!(schema["required"], serde_json::json!(["justification"]));
    assert_eq!(schema["properties"]["justification"]["type"], "string");
    home.l3m(&["program", "check", &file])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("it may call: shell_run(program, args)")
                .and(predicate::str::contains("each call is reviewed")),
        );
    let padded = format!("{lines}{}", "# padding\n".repeat(1000));
    let long = write(&home, "long.star", &padded);
    home.l3m(&["program", "check", &long])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("too-long-to-review"));
}

#[test]
fn refusals_name_file_line_and_rule_and_exit_1() {
    let home = Home::new();
    let file = write(&home, "todos.star", TODOS);
    let out = home
        .l3m(&["program", "check", &file, "--axis", "files", "--json"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["refusal"]["rule"], "not-covered");
    assert_eq!(out["refusal"]["stage"], "surface");
    assert_eq!(out["refusal"]["line"], 1);
    let looping = write(
        &home,
        "spin.star",
        &TODOS.replace(
            "    return len(",
            "    while True:\n        pass\n    return len(",
        ),
    );
    home.l3m(&["program", "check", &looping])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("spin.star:6:").and(predicate::str::contains("no-while")));
}

#[test]
fn a_plugin_folder_shows_every_tool_or_the_one_refusal_naming_plugin_file_line_rule() {
    let home = Home::new();
    let plugin = home.path().join("agent/plugins/notes");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(plugin.join("todos.star"), TODOS).unwrap();
    std::fs::write(plugin.join("tally.star"), TODOS).unwrap();
    let dir = plugin.display().to_string();
    let out = home.json(&["program", "check", &dir]);
    assert_eq!(out["admitted"], true);
    assert_eq!(out["plugin"], "notes");
    let names: Vec<&str> = out["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tool"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["program_notes-tally", "program_notes-todos"]);
    home.l3m(&["program", "check", &dir])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("plugin `notes` admitted whole")
                .and(predicate::str::contains("admitted: program_notes-tally"))
                .and(predicate::str::contains("admitted: program_notes-todos")),
        );

    std::fs::write(
        plugin.join("spin.star"),
        TODOS.replace(
            "    return len(",
            "    while True:\n        pass\n    return len(",
        ),
    )
    .unwrap();
    let out = home
        .l3m(&["program", "check", &dir, "--json"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["admitted"], false);
    assert_eq!(out["plugin"], "notes");
    assert_eq!(out["refusal"]["file"], format!("{dir}/spin.star"));
    assert_eq!(out["refusal"]["line"], 6);
    assert_eq!(out["refusal"]["rule"], "no-while");
    home.l3m(&["program", "check", &dir])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("admitted").not())
        .stderr(
            predicate::str::contains("spin.star:6:")
                .and(predicate::str::contains("no-while"))
                .and(predicate::str::contains("plugin `notes` refused whole")),
        );

    std::fs::remove_file(plugin.join("spin.star")).unwrap();
    std::fs::write(plugin.join("plugin.toml"), "description = \"notes\"").unwrap();
    home.l3m(&["program", "check", &dir])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("plugin.toml").and(predicate::str::contains("rule plugin")),
        );
}

#[test]
fn unreadable_files_and_unknown_axes_are_usage_errors() {
    let home = Home::new();
    let missing = home.path().join("missing.star").display().to_string();
    home.l3m(&["program", "check", &missing]).assert().code(2);
    let file = write(&home, "todos.star", TODOS);
    home.l3m(&["program", "check", &file, "--axis", "everything"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown axis"));
}
