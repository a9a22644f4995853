//! `l3m ls`: every agent the ledger knows, with its computed state.

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;
use crate::render::tree::life;

/// List every agent with its computed state (running, asleep, retired, collected).
///
/// A state is never stored: hubd computes it from the ledger and the session leases.
/// `--json` prints `{"agents": [{"name", "parent", "life", "holder"}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Leave out collected agents.
    #[arg(long)]
    pub live: bool,
}

/// Runs `l3m ls`.
pub async fn cmd_ls(args: Args, cx: Context) -> Result<(), CliError> {
    let session = cx.connect().await?;
    // One request per page of up to TREE_PAGE_AGENTS agents; printed as list-agents gives them.
    let page = session.client.list_tree(0).await?;
    let mut tree = l3m_wire::hubd::tree::AgentTree {
        agents: page.agents,
        next: None,
    };
    if args.live {
        tree.agents
            .retain(|a| !matches!(a.life, l3m_wire::hubd::tree::AgentLife::Collected));
    }
    if args.json {
        return output::json(&tree);
    }
    if tree.agents.is_empty() {
        outln!("no agents yet: spawn one with `l3m spawn NAME`");
        return Ok(());
    }
    outln!("{:<32} {:<10} {:<24} holder", "agent", "life", "parent");
    for a in &tree.agents {
        outln!(
            "{:<32} {:<10} {:<24} {}",
            Foreign(&a.name),
            life(a.life),
            Foreign(&a.parent),
            Foreign(a.holder.as_deref().unwrap_or("-"))
        );
    }
    Ok(())
}
