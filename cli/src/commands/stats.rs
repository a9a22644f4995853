//! `l3m stats`: a fold over the Logs.

use std::collections::BTreeMap;

use l3m_core::names::AgentName;
use l3m_core::review::ReviewTally;
use l3m_wire::hubd::tree::AgentLife;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render::economy::{self, EconomyStats};
use crate::render::stats::{AgentStats, fold, table};

/// Model calls, tokens in and out, and each tool's uses, errors and latency (from its
/// `tool-started` to its `tool-result`), per agent: a fold over the Logs, nothing stored.
///
/// With NAME, that agent and its descendants; without, every agent not yet collected.
/// `--json` prints `{"agents": {<name>: {"model_calls", "failed_calls", "tokens_in",
/// "tokens_out", "tools": {<tool>: {"uses", "errors", "timed", "total_ms", "max_ms"}}}},
/// "review": {<tool>: {"reviewed", "approved_first", "approved_later", "redirected",
/// "withdrawn", "stalemates", "denied", "model_calls", "ms"}}, "economy": {<name>:
/// {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "compactions",
/// "request_bytes", "narration_bytes"}}, "subtrees": {<name>: the same, summed over the agent
/// and its descendants}}`.
///
/// The review table is the paper's Table 6 over the Logs: per wild tool, how many calls were
/// reviewed, approved at the first round (ok@1) or later (ok@>1, a human's card included),
/// redirected to a tame alternative, withdrawn, stalemated into a card or denied there, and the
/// reviewer model calls and seconds spent — so a card almost always approved can be re-aimed.
///
/// The economy section shows tokens by kind, the share of input read from the provider's
/// cache, compactions, and the share of what was sent that was the harness's narration.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The top of the subtree to fold (default: every agent).
    pub name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m stats`.
pub async fn cmd_stats(args: Args, cx: Context) -> Result<(), CliError> {
    let top = args.name.as_deref().map(agent).transpose()?;
    let session = cx.connect().await?;
    let client = &session.client;
    let tree = client.list_agents().await?;
    if let Some(top) = &top
        && !tree.agents.iter().any(|a| a.name == top.as_str())
    {
        return Err(CliError::NotFound {
            message: format!("no agent {top} in the ledger: see `l3m ls`"),
        });
    }
    let mut agents: BTreeMap<String, AgentStats> = BTreeMap::new();
    let mut review = ReviewTally::new();
    let mut economies: BTreeMap<String, EconomyStats> = BTreeMap::new();
    for state in tree
        .agents
        .iter()
        .filter(|a| a.life != AgentLife::Collected)
    {
        let Ok(name) = AgentName::parse(&state.name) else {
            continue;
        };
        if top.as_ref().is_some_and(|t| !name.is_within(t)) {
            continue;
        }
        let read = client.read_log_from(&name, 0).await?;
        agents.insert(state.name.clone(), fold(&read.records));
        review.add_log(&read.records);
        economies.insert(state.name.clone(), economy::fold(&read.records));
    }
    if args.json {
        return output::json(&serde_json::json!({
            "agents": agents,
            "review": review.tools(),
            "economy": economies,
            "subtrees": economy::subtrees(&economies),
        }));
    }
    out!("{}", table(&agents));
    out!("{}", review_table(&review));
    out!("{}", economy::table(&economies));
    Ok(())
}

/// The paper's Table 6 per tool: how its wild calls fared under review, and what review cost.
fn review_table(review: &ReviewTally) -> String {
    use std::fmt::Write as _;
    if review.tools().is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{:<16} {:>8} {:>8} {:>8} {:>10} {:>9} {:>10} {:>6} {:>11} {:>9}\n",
        "review",
        "reviewed",
        "ok@1",
        "ok@>1",
        "redirected",
        "withdrawn",
        "stalemates",
        "denied",
        "model calls",
        "seconds"
    );
    for (tool, t) in review.tools() {
        let _ = writeln!(
            out,
            "{tool:<16} {:>8} {:>8} {:>8} {:>10} {:>9} {:>10} {:>6} {:>11} {:>9.1}",
            t.reviewed,
            t.approved_first,
            t.approved_later,
            t.redirected,
            t.withdrawn,
            t.stalemates,
            t.denied,
            t.model_calls,
            t.ms as f64 / 1000.0
        );
    }
    out
}
