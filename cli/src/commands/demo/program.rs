//! The demo's self-extension: `smith`, granted its workspace and its own `agent/` folder,
//! writes a sealed program (a TODO counter) with tame edits; at its next boot the program has
//! passed the seal, type and surface checks and is the tool `program_todos`, which it calls.
//! The program runs in its own evaluator process (bubblewrap, rlimits, a system-call filter)
//! and reads the files only through smith's tokens: capability grew, authority did not.
//!
//! The evaluator is this very binary started under the evaluator's name, through a link the
//! demo makes in its folder (`main` turns into the evaluator under that name), so the one
//! `cargo run` that runs the demo builds everything it shows. Without bubblewrap this part is
//! skipped and says why.

use std::path::Path;
use std::time::{Duration, Instant};

use l3m_core::log::{Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;

use super::credentials::Seen;
use super::{assign, name, runtime, until_turn_end};
use crate::error::CliError;

/// The agent that writes its own tool.
pub const AGENT: &str = "smith";

/// Its grant: its workspace, and its own `agent/` folder, where programs live.
const GRANT: &str = "files = [\"workspace\", \"agent\"]";

/// The tool its program becomes.
const TOOL: &str = "program_todos";

/// What its program answers: `workspace/plan.md`, which smith writes, has three TODO lines.
const COUNTED: &str = r#"{"todos":3}"#;

/// Whether programs can run in this demo.
pub enum Programs {
    /// The sequencers were given the evaluator.
    Ready,
    /// This part is not shown; the reason is printed.
    Skipped(String),
}

impl Programs {
    /// Gives `config` the evaluator, a link at `root/bin/` to this binary under the evaluator's
    /// name; without bubblewrap (the evaluator's sandbox) it gives nothing.
    pub fn prepare(root: &Path, config: &mut sequencer::Config) -> Result<Programs, CliError> {
        let bwrap = crate::stack::binaries::install_hint("bwrap");
        if let Err(e) = crate::stack::binaries::find("bwrap", bwrap) {
            return Ok(Programs::Skipped(format!(
                "sealed programs need bubblewrap for their evaluator's sandbox: {e}"
            )));
        }
        let exe = std::env::current_exe().map_err(runtime)?;
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| CliError::io("make", &bin, e))?;
        let link = bin.join(l3m_programs::process::EVALUATOR_NAME);
        std::os::unix::fs::symlink(&exe, &link).map_err(|e| CliError::io("link", &link, e))?;
        config.sequencer.program_evaluator = Some(link);
        Ok(Programs::Ready)
    }
}

/// Spawns smith and asks it for a TODO counter; once that session has ended (its lease
/// released), asks it to count, which boots it again with its program as a tool.
pub async fn step(me: &HubClient, programs: &Programs, within: Duration) -> Result<Seen, CliError> {
    if let Programs::Skipped(why) = programs {
        return Ok(Seen {
            checks: vec![],
            text: format!("\nself-extension: skipped, {why}\n"),
        });
    }
    let smith = name(AGENT)?;
    let deadline = Instant::now() + within;
    let task = "Write yourself a tool that counts the TODOs in your workspace.";
    assign(me, &smith, GRANT, async || Ok(()), task).await?;
    until_turn_end(me, &smith, "first session", within).await?;
    asleep(me, &smith, deadline).await?;
    let count = "Count the TODOs in your workspace with your new tool.";
    me.send_letter(smith.as_str(), Some("task"), count).await?;
    let log = loop {
        let log = me.read_log_from(&smith, 0).await?.records;
        if turn_ends(&log) >= 2 {
            break log;
        }
        if Instant::now() > deadline {
            return Err(runtime(format!(
                "{smith} did not use its program within {within:?}; `l3m log {smith}` shows how \
                 far it got"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let prompts: Vec<&str> = (log.iter())
        .filter_map(|r| match &r.body {
            RecordBody::SystemPrompt { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let offered = |prompt: Option<&&str>| prompt.is_some_and(|p| p.contains(TOOL));
    let grew = prompts.len() >= 2 && !offered(prompts.first()) && offered(prompts.last());
    let answer = result_of(&log, TOOL);
    let text = format!(
        "\nself-extension: {smith} wrote agent/programs/todos.star with tame edits; its next \
         boot checked it (seal, type, surface) and offered `{TOOL}`, which ran in its own \
         sandboxed evaluator and answered {}\n",
        answer.unwrap_or("(nothing)")
    );
    Ok(Seen {
        checks: vec![
            (
                "smith's own program was a tool only from the boot after it wrote it",
                grew,
            ),
            (
                "smith's program ran in its evaluator and counted the TODOs through smith's tokens",
                answer == Some(COUNTED),
            ),
        ],
        text,
    })
}

/// Waits until no sequencer holds `agent`'s lease: its session has ended, so the next letter
/// boots it again.
async fn asleep(me: &HubClient, agent: &AgentName, deadline: Instant) -> Result<(), CliError> {
    loop {
        let tree = me.list_agents().await?;
        let held = (tree.agents.iter()).any(|a| a.name == agent.as_str() && a.holder.is_some());
        if !held {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(runtime(format!(
                "{agent}'s first session did not end in time; `l3m tree` shows who holds it"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many turns the Log has ended.
fn turn_ends(log: &[Record]) -> usize {
    (log.iter())
        .filter(|r| matches!(r.body, RecordBody::TurnEnd))
        .count()
}

/// The output of the first successful call of `tool`.
fn result_of<'a>(log: &'a [Record], tool: &str) -> Option<&'a str> {
    let id = log.iter().find_map(|r| match &r.body {
        RecordBody::ToolCall { id, name, .. } if name == tool => Some(id),
        _ => None,
    })?;
    log.iter().find_map(|r| match &r.body {
        RecordBody::ToolResult {
            id: done,
            output,
            is_error: false,
            ..
        } if done == id => Some(output.as_str()),
        _ => None,
    })
}
