//! `l3m grant show`: a grant axis by axis, and the account beside it.

use l3m_core::budget::Fuel;
use l3m_core::owed::Owed;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render;

/// Show a live agent's grant, axis by axis (an axis left out confers nothing), and its budget
/// account: the loan, what it spent, what it has lent to live children, and what is left.
///
/// The spend is the agent's Log's (one call per model call started, the bytes charged with
/// each), and what is left is the account's less that spend: what its sequencer budgets by.
///
/// `--json` prints `{"agent", "grant": {<axis>: ...}, "account": {"loan", "spent",
/// "lent-out", "retired-consumed"}, "spent_per_log", "left"}` (each fuel `{"model-calls",
/// "bytes", "wakes"}`; `account.spent` is hubd's, which does not see the agent's own spend).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m grant show`.
pub async fn cmd_show(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let view = session.client.read_grant(&name).await?;
    let log = session.client.read_log_from(&name, 0).await?;
    let spent = Owed::from_records(&log.records).spent();
    if args.json {
        #[derive(serde::Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            view: &'a l3m_wire::hubd::authority::GrantView,
            spent_per_log: Fuel,
            left: Fuel,
        }
        let left = render::grant::left(&view.account, spent);
        return output::json(&Shown {
            view: &view,
            spent_per_log: spent,
            left,
        });
    }
    out!(
        "{}",
        render::grant::render(&view.agent, &view.grant, &view.account, spent)
    );
    Ok(())
}
