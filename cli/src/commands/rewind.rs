//! `l3m rewind`: return an agent's conversation to just after a record, restoring its files and
//! branches.

use std::time::Duration;

use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::control::{self, ControlReply, ControlRequest, Forecast, Target};
use l3m_wire::hubd::tree::AgentLife;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// How long a running sequencer may take to journal a rewind.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// Rewind an agent: append a boundary so the conversation resumes as it was just after record
/// `--to`, and restore, from the undo chain, every file its tame tools changed since and every
/// branch its commits moved (each by compare-and-swap, so the worktree ends clean at the
/// restored commit). Nothing is deleted: the Log keeps every record, and `l3m log` still shows
/// them. What left the host (a push, a letter) is not undone, and the rewind says so.
///
/// If someone else moved one of the agent's branches since its last commit (a human, a merge),
/// the rewind stops before changing anything (exit 4) and says which branch and how to proceed.
/// `--dry-run` shows what would be restored and what not, changing nothing.
///
/// A running agent's sequencer does it (what is open is closed first, as an interrupt would);
/// for an asleep agent, the host that runs it (`l3m up`'s supervisor) takes the agent's lease
/// and does it. Either acts on hubd's voucher that you may; this command never acts as them.
///
/// `--json` prints `{"agent", "to", "next_seq", "online", "forecast"}`; with `--dry-run`, the
/// forecast alone: `{"to", "edits", "paths", "branches", "not_undone"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// The record whose aftermath the conversation returns to (see `l3m log NAME`).
    #[arg(long)]
    pub to: u64,
    /// Why, for the Log.
    #[arg(long, default_value = "rewound by the human")]
    pub reason: String,
    /// Show what would be restored (files, branches) and what cannot be undone (pushes, letters,
    /// spawns), changing nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// What a rewind came to.
#[derive(Debug, serde::Serialize)]
pub struct Rewound {
    /// The agent.
    pub agent: String,
    /// The record returned to.
    pub to: u64,
    /// The Log's next seq after the rewind.
    pub next_seq: u64,
    /// Whether the running sequencer did it (`false`: the host did, under the agent's lease).
    pub online: bool,
    /// What the rewind restores and what it does not undo, as forecast before it began.
    pub forecast: Forecast,
}

/// Runs `l3m rewind`.
pub async fn cmd_rewind(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    if args.dry_run {
        let (_, forecast) = forecast(&session.client, &name, args.to).await?;
        if args.json {
            return output::json(&forecast);
        }
        outln!("{} (dry run: nothing changed)", forecast.narrate(false));
        return Ok(());
    }
    let rewound = rewind(&session.client, &name, args.to, &args.reason).await?;
    if args.json {
        return output::json(&rewound);
    }
    outln!(
        "rewound {name} to record {} ({}); its Log continues at {}",
        rewound.to,
        if rewound.online {
            "by its running sequencer"
        } else {
            "by its host, under its lease"
        },
        rewound.next_seq
    );
    outln!("{}", rewound.forecast.narrate(true));
    Ok(())
}

/// Who acts for `name` now: its running sequencer, or the host that runs it while it sleeps.
async fn target(client: &HubClient, name: &AgentName) -> Result<Target, CliError> {
    let tree = client.list_agents().await?;
    let life = tree
        .agents
        .iter()
        .find(|a| a.name == name.as_str())
        .map(|a| a.life)
        .ok_or_else(|| CliError::NotFound {
            message: format!("no agent {name} in this hub; `l3m ls` lists them"),
        })?;
    match life {
        AgentLife::Running => Ok(Target::Sequencer),
        AgentLife::Asleep => Ok(Target::Host),
        _ => Err(CliError::Refused {
            message: format!("{name} is retired: its ACR is gone, so there is nothing to rewind"),
        }),
    }
}

/// Asks `target` for `name` to carry out `request`.
async fn ask(
    client: &HubClient,
    target: Target,
    name: &AgentName,
    request: &ControlRequest,
) -> Result<ControlReply, CliError> {
    control::call(client, target, name, request, ANSWER_WITHIN)
        .await
        .map_err(|e| match e {
            control::ControlError::Hub(client) => client.into(),
            control::ControlError::NoAnswer { .. } if target == Target::Host => {
                CliError::StackDown {
                    why: format!(
                        "{e}; the host's supervisor runs with `l3m up` (or `sequencer supervise`)"
                    ),
                }
            }
            other => CliError::Refused {
                message: other.to_string(),
            },
        })
}

/// What a rewind of `name` to `to` would do, forecast by whoever would do it.
pub async fn forecast(
    client: &HubClient,
    name: &AgentName,
    to: u64,
) -> Result<(Target, Forecast), CliError> {
    let target = target(client, name).await?;
    match ask(client, target, name, &ControlRequest::Forecast { to }).await? {
        ControlReply::Forecast(forecast) => Ok((target, forecast)),
        ControlReply::Refused { reason } => Err(CliError::Refused { message: reason }),
        other => Err(CliError::Runtime(format!(
            "{name}'s {target:?} answered a forecast with {other:?}"
        ))),
    }
}

/// Rewinds `name` through its running sequencer, or through its host when it is asleep.
pub async fn rewind(
    client: &HubClient,
    name: &AgentName,
    to: u64,
    reason: &str,
) -> Result<Rewound, CliError> {
    let (target, forecast) = forecast(client, name, to).await?;
    let request = ControlRequest::Rewind {
        to,
        reason: reason.to_owned(),
    };
    match ask(client, target, name, &request).await? {
        ControlReply::Done { next_seq } => Ok(Rewound {
            agent: name.to_string(),
            to,
            next_seq,
            online: target == Target::Sequencer,
            forecast,
        }),
        ControlReply::Refused { reason } => Err(CliError::Refused { message: reason }),
        other => Err(CliError::Runtime(format!(
            "{name}'s {target:?} answered a rewind with {other:?}"
        ))),
    }
}
