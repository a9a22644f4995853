//! The demo scenario's data files: they parse, name only tools that exist, and the grants in
//! them behave as the scenario says (the worker's spawn is within the lead's grant, the
//! widening is refused on axis `net`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use l3m_core::axis::Axis;
use l3m_core::grant::{Grant, GrantFile};
use l3m_core::names::AgentName;
use serde::Deserialize;

/// The tools the scripted agents may call.
const TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "git_status",
    "git_diff",
    "git_log",
    "git_commit",
    "send_letter",
    "spawn_agent",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    turn: Vec<Turn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    text: String,
    #[serde(default)]
    tool_use: Vec<Use>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Use {
    name: String,
    input: toml::Table,
}

fn data(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/commands/demo")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn script(name: &str) -> Script {
    let script: Script = toml::from_str(&data(name)).unwrap();
    for turn in &script.turn {
        assert!(
            !turn.text.trim().is_empty(),
            "{name}: every turn says something"
        );
    }
    for used in script.turn.iter().flat_map(|t| &t.tool_use) {
        assert!(
            TOOLS.contains(&used.name.as_str()),
            "{name}: unknown tool {}",
            used.name
        );
    }
    script
}

#[test]
fn the_lead_spawns_within_its_grant_and_its_widening_is_refused_on_net() {
    let lead: GrantFile = toml::from_str(&data("lead-grant.toml")).unwrap();
    lead.check().unwrap();
    let me = AgentName::parse("demo/lead").unwrap();
    let bound = lead.grant.expand_own(&me);
    let spawns: Vec<Grant> = script("lead.toml")
        .turn
        .iter()
        .flat_map(|t| &t.tool_use)
        .filter(|u| u.name == "spawn_agent")
        .map(|u| u.input["grant"].clone().try_into().unwrap())
        .collect();
    assert_eq!(spawns.len(), 2);
    spawns[0].within(&bound).unwrap();
    let refused = spawns[1].within(&bound).unwrap_err();
    assert_eq!(refused.axis, Axis::Net);
}

#[test]
fn the_worker_writes_edits_commits_and_mails_its_parent_in_that_order() {
    let names: Vec<String> = script("worker.toml")
        .turn
        .iter()
        .flat_map(|t| &t.tool_use)
        .map(|u| u.name.clone())
        .collect();
    assert_eq!(
        names,
        ["write_file", "edit_file", "git_commit", "send_letter"]
    );
    let worker = script("worker.toml");
    let letter = &worker.turn[3].tool_use[0].input;
    assert_eq!(letter["to"].as_str(), Some("demo/lead"));
    for turn in &worker.turn[..2] {
        let path = turn.tool_use[0].input["path"].as_str().unwrap();
        assert!(path.starts_with("workspace/"), "{path}");
    }
}

#[test]
fn the_model_sections_parse_as_part_of_a_document() {
    let text = format!(
        "human = \"alice\"\n{}\n[hubs.local]\nroot = \"/x\"\nhub_id = \"local\"\n",
        data("models.toml")
    );
    let doc = l3m::config::Document::parse(std::path::Path::new("l3m.toml"), &text).unwrap();
    assert_eq!(doc.hubs.len(), 1);
}
