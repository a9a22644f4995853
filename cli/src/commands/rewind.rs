//! `l3m rewind`: return an agent's conversation to just after a record, restoring its files and
//! branches.

use std::path::Path;
use std::time::Duration;

use l3m_core::duty::Duty;
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;
use sequencer::control::{self, ControlReply, ControlRequest, Forecast};

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// How long a running sequencer may take to journal a rewind.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// Rewind an agent: append a boundary so the conversation resumes as it was just after record
/// `--to`, and restore, from the undo journal, every file its tame tools changed since and every
/// branch its commits moved (each by compare-and-swap, so the worktree ends clean at the
/// restored commit). Nothing is deleted: the Log keeps every record, and `l3m log` still shows
/// them. What left the host (a push, a letter) is not undone, and the rewind says so.
///
/// If someone else moved one of the agent's branches since its last commit (a human, a merge),
/// the rewind stops before changing anything (exit 4) and says which branch and how to proceed.
/// `--dry-run` shows what would be restored and what not, changing nothing.
///
/// A running agent's sequencer does it (what is open is closed first, as an interrupt would);
/// for an asleep agent, this command takes the agent's lease and does it itself.
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
    /// Whether the running sequencer did it (`false`: done offline under the lease).
    pub online: bool,
    /// What the rewind restores and what it does not undo, as forecast before it began.
    pub forecast: Forecast,
}

/// Runs `l3m rewind`.
pub async fn cmd_rewind(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    if args.dry_run {
        let grant = session.client.read_grant(&name).await?;
        let forecast =
            control::forecast(&session.client, session.hub.root(), &name, &grant, args.to).await?;
        if args.json {
            return output::json(&forecast);
        }
        println!("{} (dry run: nothing changed)", forecast.narrate(false));
        return Ok(());
    }
    let rewound = rewind(
        &session.client,
        session.hub.root(),
        &name,
        args.to,
        &args.reason,
    )
    .await?;
    if args.json {
        return output::json(&rewound);
    }
    println!(
        "rewound {name} to record {} ({}); its Log continues at {}",
        rewound.to,
        if rewound.online {
            "by its running sequencer"
        } else {
            "offline, under its lease"
        },
        rewound.next_seq
    );
    println!("{}", rewound.forecast.narrate(true));
    Ok(())
}

/// Rewinds `name` through its running sequencer, or offline when it is asleep.
pub async fn rewind(
    client: &HubClient,
    root: &Path,
    name: &AgentName,
    to: u64,
    reason: &str,
) -> Result<Rewound, CliError> {
    let tree = client.list_agents().await?;
    let life = tree
        .agents
        .iter()
        .find(|a| a.name == name.as_str())
        .map(|a| a.life)
        .ok_or_else(|| CliError::NotFound {
            message: format!("no agent {name} in this hub; `l3m ls` lists them"),
        })?;
    let online = life == AgentLife::Running;
    if !matches!(life, AgentLife::Running | AgentLife::Asleep) {
        return Err(CliError::Refused {
            message: format!("{name} is retired: its ACR is gone, so there is nothing to rewind"),
        });
    }
    let grant = client.read_grant(name).await?;
    let forecast = control::forecast(client, root, name, &grant, to).await?;
    if online {
        let request = ControlRequest::Rewind {
            to,
            reason: reason.to_owned(),
        };
        return match control::call(client, name, &request, ANSWER_WITHIN).await? {
            ControlReply::Done { next_seq } => Ok(Rewound {
                agent: name.to_string(),
                to,
                next_seq,
                online,
                forecast,
            }),
            ControlReply::Refused { reason } => Err(CliError::Refused { message: reason }),
            ControlReply::Status(_) => Err(CliError::Runtime(format!(
                "{name}'s sequencer answered a rewind with its status"
            ))),
        };
    }
    let credential = crate::context::host_key(root)?;
    let writer = HubClient::open(
        client.bus().clone(),
        client.subjects().hub().clone(),
        &credential,
        Duty::Sequencer {
            agent: name.clone(),
        },
    )
    .await?;
    control::rewind_offline(&writer, root, name, to, reason).await?;
    let next_seq = writer.read_log(name, 0, 0).await?.len;
    Ok(Rewound {
        agent: name.to_string(),
        to,
        next_seq,
        online,
        forecast,
    })
}
