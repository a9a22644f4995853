//! An agent's sealed programs become tools at boot: an admitted one is offered and runs in the
//! evaluator process; a refused one is absent and the agent is told why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use l3m_core::log::RecordBody;
use sequencer::{Exit, run_agent};
use tokio_util::sync::CancellationToken;

const TODOS: &str = r#"FOOTPRINT = ["fs-read"]
DESCRIPTION = "Count the lines containing TODO in the files of a directory."
INPUT = {"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]}

def main(input):
    total = 0
    for entry in fs_list(input["dir"]):
        if entry["kind"] == "regular file":
            text = fs_read(input["dir"] + "/" + entry["name"])
            total += len([l for l in text.split("\n") if "TODO" in l])
    return {"todos": total}
"#;

const SCRIPT: &str = r#"
[[turn]]
text = "counting"
[[turn.tool_use]]
name = "program_todos"
input = { dir = "workspace" }
[[turn]]
text = "done"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_the_persona_is_a_tool_at_boot_and_a_refused_one_is_named() {
    let evaluator = evaluator();
    let bound = "files = [\"workspace\", \"agent\"]\nspawn = \"persist\"";
    let hub = TestHub::start_bound(bound).await;
    hub.spawn_with("demo", 10, "files = [\"workspace\", \"agent\"]")
        .await;
    let acr = hub.acr("demo");
    let programs = acr.join("agent/programs");
    std::fs::create_dir_all(&programs).unwrap();
    std::fs::write(programs.join("todos.star"), TODOS).unwrap();
    std::fs::write(
        programs.join("spin.star"),
        TODOS.replace(
            "    total = 0\n",
            "    total = 0\n    while True:\n        pass\n",
        ),
    )
    .unwrap();
    std::fs::write(acr.join("workspace/notes.md"), "TODO a\nfine\nTODO b\n").unwrap();
    hub.letter("demo", "count the TODOs").await;
    let provider = counting(SCRIPT, Duration::ZERO);
    let config = config(&format!(
        "idle_exit_secs = 2\nprogram_evaluator = {:?}",
        evaluator.display().to_string()
    ));
    let run = hub.run("demo", config, factory_of(provider)).await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::Idle
    );
    let log = hub.log("demo").await;
    check_log(&log);
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        panic!("{:?}", kinds(&log))
    };
    assert!(text.contains("program_todos"), "{text}");
    assert!(!text.contains("program_spin"), "{text}");
    let results: Vec<(&str, bool)> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [(r#"{"todos":2}"#, false)]);
    let told = log.iter().any(|r| match &r.body {
        RecordBody::Event { text, .. } => {
            text.contains("agent/programs/spin.star:7") && text.contains("no-while")
        }
        _ => false,
    });
    assert!(told, "the agent was not told why spin.star did not load");
}
