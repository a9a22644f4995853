//! `l3m vigil ls|pin|cancel`: what watches an agent, and a human's hand on it.
//!
//! A vigil is a bounded watch on a hub fact (a ref of the agent's subtree moving, a letter it
//! sent being read, a descendant retiring, a deadline); hubd fires it once and the agent is told
//! (woken if it sleeps). Agents arm their own with the `watch` tool. A human may list them, pin
//! one on an agent (which the agent cannot cancel), and cancel any, pinned or not.

use l3m_core::names::AgentName;
use l3m_core::refs::AgentRef;
use l3m_core::vigil::{Fact, Vigil, VigilLine, Watch, parse_vigil_line};

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// The vigil commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List an agent's armed vigils (`--all`: fired and cancelled ones too).
    ///
    /// Each line shows the vigil's ID, its state, what it watches, who armed it (pinned when not
    /// the agent itself) and when it lapses. `--json` prints `{"vigils": [{"id", "state",
    /// "watch", "armed_by", "pinned", "until_ms", "fact"}]}`.
    Ls(LsArgs),
    /// Pin a vigil on an agent, which the agent cannot cancel; its event reaches the agent.
    Pin(PinArgs),
    /// Cancel a vigil (a human may cancel any, pinned or not).
    Cancel(CancelArgs),
}

/// Whose vigils.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// The agent.
    pub agent: String,
    /// Show fired and cancelled vigils too.
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// What to watch, on whom, for how long.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("fact").required(true).args(["deadline_in", "child_done", "ref_moved"])))]
pub struct PinArgs {
    /// The agent the vigil is pinned on.
    pub agent: String,
    /// Fire this many seconds from now.
    #[arg(long, value_name = "SECS")]
    pub deadline_in: Option<u64>,
    /// Fire when this descendant of the agent is retired.
    #[arg(long, value_name = "AGENT")]
    pub child_done: Option<String>,
    /// Fire when this ref moves, as `AGENT:REF` (the agent or a descendant; REF is log, inbox,
    /// outbox, undo, claims, persona, cards or grants).
    #[arg(long, value_name = "AGENT:REF")]
    pub ref_moved: Option<String>,
    /// Lapse after this many seconds if nothing fired (at most 604800, seven days).
    #[arg(long = "for", value_name = "SECS", default_value_t = 86_400)]
    pub for_secs: u64,
    /// Print JSON: `{"agent", "id"}`.
    #[arg(long)]
    pub json: bool,
}

/// Which vigil.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The agent it is armed on.
    pub agent: String,
    /// Its ID, as `l3m vigil ls` shows it.
    pub id: String,
    /// Print JSON: `{"agent", "id"}`.
    #[arg(long)]
    pub json: bool,
}

/// Runs one vigil command.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Ls(args) => ls(args, cx).await,
        Command::Pin(args) => pin(args, cx).await,
        Command::Cancel(args) => cancel(args, cx).await,
    }
}

async fn ls(args: LsArgs, cx: Context) -> Result<(), CliError> {
    let of = agent(&args.agent)?;
    let session = cx.connect().await?;
    let lines: Vec<VigilLine> = (session.client.read_vigils(&of).await?)
        .iter()
        .filter_map(|l| parse_vigil_line(l).ok())
        .collect();
    let shown: Vec<(&Vigil, &str, Option<&Fact>)> = lines
        .iter()
        .filter_map(|l| match l {
            VigilLine::Armed { vigil } => {
                let (state, fact) = ended(&lines, &vigil.id);
                (args.all || state == "armed").then_some((vigil, state, fact))
            }
            _ => None,
        })
        .collect();
    if args.json {
        let rows: Vec<serde_json::Value> = (shown.iter())
            .map(|(vigil, state, fact)| {
                serde_json::json!({
                    "id": vigil.id, "state": state, "watch": vigil.watch,
                    "armed_by": vigil.armed_by, "pinned": vigil.pinned,
                    "until_ms": vigil.until_ms, "fact": fact,
                })
            })
            .collect();
        return output::json(&serde_json::json!({ "vigils": rows }));
    }
    if shown.is_empty() {
        outln!("no vigil is armed on {of}");
    }
    for (vigil, state, fact) in shown {
        let by = if vigil.pinned {
            format!("pinned by {}", vigil.armed_by)
        } else {
            "its own".to_owned()
        };
        let fact = fact.map_or(String::new(), |f| format!(" ({f:?})"));
        outln!(
            "{}  {state}{fact}  {}  {by}  lapses at {}",
            vigil.id,
            vigil.watch.describe(),
            crate::render::time::utc(vigil.until_ms)
        );
    }
    Ok(())
}

/// Whether `id` is armed, fired (with its fact) or cancelled on `lines`.
fn ended<'a>(lines: &'a [VigilLine], id: &str) -> (&'static str, Option<&'a Fact>) {
    for line in lines {
        match line {
            VigilLine::Fired { id: f, fact, .. } if f == id => return ("fired", Some(fact)),
            VigilLine::Cancelled { id: c, .. } if c == id => return ("cancelled", None),
            _ => {}
        }
    }
    ("armed", None)
}

async fn pin(args: PinArgs, cx: Context) -> Result<(), CliError> {
    let on = agent(&args.agent)?;
    let now = l3m_core::clock::now_ms();
    let watch = match (args.deadline_in, &args.child_done, &args.ref_moved) {
        (Some(secs), _, _) => Watch::Deadline {
            at_ms: now.saturating_add(secs.saturating_mul(1000)),
        },
        (_, Some(child), _) => Watch::ChildDone {
            child: agent(child)?,
        },
        (_, _, Some(spec)) => ref_moved(spec)?,
        (None, None, None) => {
            return Err(CliError::usage(
                "say what to watch: --deadline-in, --child-done or --ref-moved",
            ));
        }
    };
    let until_ms = now.saturating_add(args.for_secs.saturating_mul(1000));
    let session = cx.connect().await?;
    let armed = session.client.arm_vigil(&on, watch, until_ms).await?;
    if args.json {
        return output::json(&serde_json::json!({ "agent": on, "id": armed.id }));
    }
    outln!("pinned vigil {} on {on}; it cannot cancel it", armed.id);
    Ok(())
}

/// `AGENT:REF` as a ref-moved watch.
fn ref_moved(spec: &str) -> Result<Watch, CliError> {
    let (whose, which) = spec
        .split_once(':')
        .ok_or_else(|| CliError::usage(format!("--ref-moved takes AGENT:REF, got `{spec}`")))?;
    let which: AgentRef = serde_json::from_value(serde_json::Value::from(which))
        .map_err(|e| CliError::usage(format!("`{which}` is not an agent ref: {e}")))?;
    Ok(Watch::RefMoved {
        agent: agent(whose)?,
        which,
        from: None,
    })
}

async fn cancel(args: CancelArgs, cx: Context) -> Result<(), CliError> {
    let on: AgentName = agent(&args.agent)?;
    let session = cx.connect().await?;
    session.client.cancel_vigil(&on, &args.id).await?;
    if args.json {
        return output::json(&serde_json::json!({ "agent": on, "id": args.id }));
    }
    outln!("cancelled vigil {} on {on}", args.id);
    Ok(())
}
