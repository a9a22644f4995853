//! `l3m tree`: the agent hierarchy, drawn.

use l3m_wire::hubd::tree::AgentState;
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::render::tree::{draw, life};

/// Draw the agent tree with each agent's computed state.
///
/// `--json` prints the nested form: `{"roots": [{"name", "parent", "life", "holder",
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
    /// Its children, in name order.
    pub children: Vec<Node>,
}

/// The nested form of hubd's flat list.
pub fn nest(agents: &[AgentState]) -> Vec<Node> {
    fn node(all: &[AgentState], a: &AgentState) -> Node {
        Node {
            name: a.name.clone(),
            parent: a.parent.clone(),
            life: life(a.life),
            holder: a.holder.clone(),
            children: all
                .iter()
                .filter(|c| c.parent == a.name)
                .map(|c| node(all, c))
                .collect(),
        }
    }
    agents
        .iter()
        .filter(|a| !agents.iter().any(|p| p.name == a.parent))
        .map(|a| node(agents, a))
        .collect()
}

/// Runs `l3m tree`.
pub async fn cmd_tree(args: Args, cx: Context) -> Result<(), CliError> {
    let session = cx.connect().await?;
    let tree = session.client.list_agents().await?;
    if args.json {
        return output::json(&serde_json::json!({ "roots": nest(&tree.agents) }));
    }
    if tree.agents.is_empty() {
        println!("no agents yet: spawn one with `l3m spawn NAME`");
    } else {
        print!("{}", draw(&tree.agents));
    }
    Ok(())
}
