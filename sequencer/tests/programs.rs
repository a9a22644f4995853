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

/// `TODOS` with a `while` loop on line 7, which the seal refuses (`no-while`).
fn spin() -> String {
    TODOS.replace(
        "    total = 0\n",
        "    total = 0\n    while True:\n        pass\n",
    )
}

/// Boots the agent `demo` with `files` (relative to its ACR) on its persona and a workspace
/// note of two TODOs, runs `script` to idle and returns its Log, checked.
async fn boot_with(files: &[(&str, String)], script: &str) -> Vec<l3m_core::log::Record> {
    let evaluator = evaluator();
    let bound = "files = [\"workspace\", \"agent\"]\nspawn = \"persist\"";
    let hub = TestHub::start_bound(bound).await;
    hub.spawn_with("demo", 10, "files = [\"workspace\", \"agent\"]")
        .await;
    let acr = hub.acr("demo");
    for (rel, text) in files {
        let path = acr.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(acr.join("workspace/notes.md"), "TODO a\nfine\nTODO b\n").unwrap();
    hub.letter("demo", "count the TODOs").await;
    let provider = counting(script, Duration::ZERO);
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
    log
}

/// The system prompt the agent booted with.
fn system_prompt(log: &[l3m_core::log::Record]) -> &str {
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        panic!("{:?}", kinds(log))
    };
    text
}

/// Each tool result: its output and whether it is an error.
fn results(log: &[l3m_core::log::Record]) -> Vec<(&str, bool)> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.as_str(), *is_error)),
            _ => None,
        })
        .collect()
}

/// Whether an event told the agent something containing every one of `says`.
fn told(log: &[l3m_core::log::Record], says: &[&str]) -> bool {
    log.iter().any(|r| match &r.body {
        RecordBody::Event { text, .. } => says.iter().all(|s| text.contains(s)),
        _ => false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_on_the_persona_is_a_tool_at_boot_and_a_refused_one_is_named() {
    let files = [
        ("agent/programs/todos.star", TODOS.to_owned()),
        ("agent/programs/spin.star", spin()),
    ];
    let log = boot_with(&files, SCRIPT).await;
    let text = system_prompt(&log);
    assert!(text.contains("program_todos"), "{text}");
    assert!(!text.contains("program_spin"), "{text}");
    assert_eq!(results(&log), [(r#"{"todos":2}"#, false)]);
    assert!(
        told(&log, &["agent/programs/spin.star:7", "no-while"]),
        "the agent was not told why spin.star did not load"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_plugin_is_offered_whole_and_one_with_a_bad_program_offers_none() {
    let files = [
        ("agent/plugins/tally/todos.star", TODOS.to_owned()),
        ("agent/plugins/tally/again.star", TODOS.to_owned()),
        ("agent/plugins/mixed/todos.star", TODOS.to_owned()),
        ("agent/plugins/mixed/spin.star", spin()),
    ];
    let script = SCRIPT.replace("program_todos", "program_tally-todos");
    let log = boot_with(&files, &script).await;
    let text = system_prompt(&log);
    assert!(text.contains("program_tally-todos"), "{text}");
    assert!(text.contains("program_tally-again"), "{text}");
    assert!(!text.contains("program_mixed-"), "{text}");
    assert_eq!(results(&log), [(r#"{"todos":2}"#, false)]);
    assert!(
        told(
            &log,
            &[
                "1 of your programs or plugins did not load",
                "agent/plugins/mixed/spin.star:7",
                "no-while",
                "plugin `mixed` refused whole"
            ]
        ),
        "the agent was not told why the plugin mixed did not load"
    );
}

/// The whole path of self-extension: in one session the agent writes its own program with a
/// tame edit (journaled for undo like any write), and at its next boot the program is a tool
/// it uses. Nothing but the model's own calls puts the file there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_writes_its_program_with_a_tame_edit_and_uses_it_after_its_next_boot() {
    let evaluator = evaluator();
    let bound = "files = [\"workspace\", \"agent\"]";
    let hub = TestHub::start_bound(bound).await;
    hub.spawn_with("demo", 10, bound).await;
    std::fs::write(
        hub.acr("demo").join("workspace/notes.md"),
        "TODO a\nfine\nTODO b\n",
    )
    .unwrap();
    let config = || {
        config(&format!(
            "idle_exit_secs = 2\nprogram_evaluator = {:?}",
            evaluator.display().to_string()
        ))
    };
    let session = |script: String| {
        let hub = &hub;
        async move {
            let run = hub
                .run(
                    "demo",
                    config(),
                    factory_of(counting(&script, Duration::ZERO)),
                )
                .await;
            assert_eq!(
                run_agent(run, CancellationToken::new()).await.unwrap(),
                Exit::Idle
            );
        }
    };

    hub.letter("demo", "write yourself a TODO counter").await;
    let write: String = format!(
        "[[turn]]\ntext = \"writing my tool\"\n[[turn.tool_use]]\nname = \"make_dir\"\n\
         input = {{ path = \"agent/programs\" }}\n[[turn.tool_use]]\nname = \"write_file\"\n\
         [turn.tool_use.input]\npath = \"agent/programs/todos.star\"\ncontent = '''\n{TODOS}'''\n\
         [[turn]]\ntext = \"written; it loads at my next boot\"\n"
    );
    // The scripted model answers by the turns already in the conversation, so one script
    // serves both sessions: the second starts where the first stopped.
    let script = write + SCRIPT;
    session(script.clone()).await;
    let first = hub.log("demo").await;
    check_log(&first);
    assert!(!system_prompt(&first).contains("program_todos"));
    assert_eq!(results(&first).len(), 2);
    assert!(
        results(&first).iter().all(|(_, failed)| !failed),
        "{:?}",
        results(&first)
    );
    let journaled = first.iter().any(|r| match &r.body {
        RecordBody::ToolResult { effects, .. } => effects.iter().any(|e| e.undo.is_some()),
        _ => false,
    });
    assert!(journaled, "the write left an undo entry");

    hub.letter("demo", "count the TODOs").await;
    session(script).await;
    let log = hub.log("demo").await;
    check_log(&log);
    let reboot = log
        .iter()
        .rev()
        .find_map(|r| match &r.body {
            RecordBody::SystemPrompt { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .unwrap();
    assert!(reboot.contains("program_todos"), "{reboot}");
    assert_eq!(
        results(&log).last(),
        Some(&(r#"{"todos":2}"#, false)),
        "{:?}",
        kinds(&log)
    );
}
