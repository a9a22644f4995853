//! `l3m tree`: the agent hierarchy, drawn.

use std::collections::{BTreeMap, HashMap};

use l3m_core::log::Record;
use l3m_core::names::AgentName;
use l3m_wire::hubd::tree::{AgentLife, AgentState, TreePage};
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::render::tree::{TAIL, draw, life, stuck};

/// Draw the agent tree with each agent's computed state, and why an asleep agent is stuck when
/// its Log says (its last model call failed for good, or its fuel ran out).
///
/// `--json` prints the nested form: `{"roots": [{"name", "parent", "life", "holder", "stuck",
/// "children": [...]}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of a drawing.
    #[arg(long)]
    pub json: bool,
}

/// One node of `--json` output.
#[derive(Debug, Serialize)]
pub struct Node {
    /// The agent.
    pub name: String,
    /// Its parent (`human:<name>` for a root).
    pub parent: String,
    /// Its computed state.
    pub life: &'static str,
    /// Who holds its lease, when running.
    pub holder: Option<String>,
    /// Why it is stuck, when it is asleep and its Log says.
    pub stuck: Option<String>,
    /// Its children, in name order.
    pub children: Vec<Node>,
}

/// The nested form of hubd's flat list, with why each stuck agent is stuck.
pub fn nest(agents: &[AgentState], why: &BTreeMap<String, String>) -> Vec<Node> {
    fn node(all: &[AgentState], why: &BTreeMap<String, String>, a: &AgentState) -> Node {
        Node {
            name: a.name.clone(),
            parent: a.parent.clone(),
            life: life(a.life),
            holder: a.holder.clone(),
            stuck: why.get(&a.name).cloned(),
            children: all
                .iter()
                .filter(|c| c.parent == a.name)
                .map(|c| node(all, why, c))
                .collect(),
        }
    }
    agents
        .iter()
        .filter(|a| !agents.iter().any(|p| p.name == a.parent))
        .map(|a| node(agents, why, a))
        .collect()
}

/// Why each of the `asleep` agents is stuck, from what one `hubd.list-tree` listing (`page`)
/// says of their Logs' tails, else because `document` gives it no model: no Log is read here,
/// so the cost does not grow with asleep agents beyond listing them. `l3m status` shows the
/// same.
pub(crate) fn why_stuck_in(
    page: &TreePage,
    asleep: &[&str],
    document: &std::path::Path,
) -> BTreeMap<String, String> {
    let parts: HashMap<&str, &[Record]> = page
        .stuck
        .iter()
        .map(|s| (s.agent.as_str(), s.records.as_slice()))
        .collect();
    let mut out = BTreeMap::new();
    for agent in asleep {
        let Ok(name) = AgentName::parse(agent) else {
            continue;
        };
        let from_log = parts.get(agent).and_then(|tail| stuck(name.as_str(), tail));
        let no_model = || {
            crate::models::gap(document, &name)
                .map(|e| format!("{e}, so no sequencer runs it (`l3m doctor` says how to add one)"))
        };
        if let Some(why) = from_log.or_else(no_model) {
            out.insert((*agent).to_owned(), why);
        }
    }
    out
}

/// Runs `l3m tree`.
pub async fn cmd_tree(args: Args, cx: Context) -> Result<(), CliError> {
    let session = cx.connect().await?;
    // One request per page of up to TREE_PAGE_AGENTS agents, with what each asleep agent's
    // Log tail says: no Log is read one agent at a time.
    let tree = session.client.list_tree(TAIL).await?;
    let asleep: Vec<&str> = tree
        .agents
        .iter()
        .filter(|a| a.life == AgentLife::Asleep)
        .map(|a| a.name.as_str())
        .collect();
    let why = why_stuck_in(&tree, &asleep, &session.hub.document);
    if args.json {
        return output::json(&serde_json::json!({ "roots": nest(&tree.agents, &why) }));
    }
    if tree.agents.is_empty() {
        outln!("no agents yet: spawn one with `l3m spawn NAME`");
    } else {
        out!("{}", draw(&tree.agents, &why));
    }
    Ok(())
}
