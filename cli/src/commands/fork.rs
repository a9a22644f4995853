//! `l3m fork`: a new agent that starts from any point of another's Log.

use l3m_core::budget::Fuel;
use l3m_core::grant::{ForkFrom, SpawnRequest};
use serde::Serialize;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Fork an agent: spawn NEW as a root of yours whose Log begins with SOURCE's records up to
/// and including `--at` (what was open there is closed, as an interrupt would), so its next
/// turn continues that conversation. Its grant is SOURCE's, or `--grant-file`'s when given;
/// either way hubd's spawn gate refuses one wider than SOURCE's or yours. hubd writes the new
/// Log itself, as part of the spawn. SOURCE is left as it is.
///
/// `--json` prints `{"agent", "records"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent forked from.
    pub source: String,
    /// The new agent (one segment: a root of yours).
    pub new: String,
    /// The last record of SOURCE's Log the fork carries (see `l3m log SOURCE`).
    #[arg(long)]
    pub at: u64,
    /// A TOML grant file for NEW (default: SOURCE's grant).
    #[arg(long, value_name = "F")]
    pub grant_file: Option<std::path::PathBuf>,
    /// Model calls lent to NEW; its Log carries SOURCE's spending, so lend more than that.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub model_calls: u64,
    /// Bytes lent to NEW.
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub bytes: u64,
    /// Wakes lent to NEW.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub wakes: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Forked {
    agent: String,
    records: u64,
}

/// Runs `l3m fork`.
pub async fn cmd_fork(args: Args, cx: Context) -> Result<(), CliError> {
    let source = agent(&args.source)?;
    let new = agent(&args.new)?;
    let session = cx.connect().await?;
    let grant = match &args.grant_file {
        Some(path) => super::spawn::read_grant_file(path)?,
        None => session.client.read_grant(&source).await?.grant,
    };
    let loan = Fuel {
        model_calls: args.model_calls,
        bytes: args.bytes,
        wakes: args.wakes,
    };
    session
        .client
        .spawn(SpawnRequest {
            child: new.clone(),
            grant,
            loan,
            driven: false,
            persona: None,
            fork: Some(ForkFrom {
                source: source.clone(),
                at: args.at,
            }),
        })
        .await?;
    let records = session.client.read_log(&new, 0, 0).await?.len;
    let out = Forked {
        agent: new.to_string(),
        records,
    };
    if args.json {
        return output::json(&out);
    }
    outln!(
        "forked {source} at record {} into {} ({} records carried)",
        args.at,
        out.agent,
        out.records
    );
    Ok(())
}
