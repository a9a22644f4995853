//! `l3m cards`: the wild calls waiting for a human, and `l3m card approve|deny`: answering one.
//!
//! A card is a wild call the reviewer and the proposing agent could not settle in the bounded
//! rounds (a stalemate). It shows the effect (what would change and where), the agent's
//! justification and the reviewer's last reason. Only a human's session may answer: hubd
//! refuses an agent. The answer is appended to the agent's cards chain; the agent's sequencer
//! journals it as the last round of review, and the call runs (approve) or is refused (deny).

use l3m_core::names::AgentName;
use l3m_core::review::card::{CardLine, parse_card_line, waiting};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;

/// List the review cards waiting for a human, across every live agent.
///
/// Each card shows its ID (the tool use), the agent, the effect of the call (what would change
/// and where), the agent's justification and the reviewer's reason. Answer one with
/// `l3m card approve ID` or `l3m card deny ID --reason "..."`.
/// `--json` prints `{"cards": [{"id", "agent", "round", "effect", "justification", "reason"}]}`.
///
/// `--serve` shows them as a web page instead, answered with a form: on loopback (127.0.0.1 and
/// a free port, printed on the first line) unless `--bind` says otherwise; each answer must
/// carry the page's CSRF token and come from the page's own origin. Ctrl-C stops it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Serve the cards as a web page.
    #[arg(long, conflicts_with = "json")]
    pub serve: bool,
    /// Where the page listens (only with --serve). Anything but loopback lets other hosts reach it.
    #[arg(long, default_value = "127.0.0.1:0", requires = "serve")]
    pub bind: std::net::SocketAddr,
}

/// Answer a waiting card (humans only).
#[derive(Debug, clap::Subcommand)]
pub enum CardCommand {
    /// Let the call run, in the agent's sandbox and under its grant.
    Approve(AnswerArgs),
    /// Refuse the call; the agent is told your reason.
    Deny(AnswerArgs),
}

/// Which card, and why.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The card's ID, as `l3m cards` shows it.
    pub id: String,
    /// The agent whose card it is (needed only if two agents have a card with this ID).
    #[arg(long)]
    pub agent: Option<String>,
    /// Why; the agent reads it.
    #[arg(long, default_value = "")]
    pub reason: String,
    /// Print JSON: `{"id", "agent", "approve"}`.
    #[arg(long)]
    pub json: bool,
}

/// Every live agent's waiting cards.
pub(super) async fn waiting_cards(
    client: &HubClient,
) -> Result<Vec<(AgentName, CardLine)>, CliError> {
    let tree = client.list_agents().await?;
    let mut out = Vec::new();
    for state in tree
        .agents
        .iter()
        .filter(|a| matches!(a.life, AgentLife::Running | AgentLife::Asleep))
    {
        let Ok(name) = AgentName::parse(&state.name) else {
            continue;
        };
        let lines: Vec<CardLine> = (client.read_cards(&name).await?)
            .iter()
            .filter_map(|l| parse_card_line(l).ok())
            .collect();
        out.extend(
            waiting(&lines)
                .into_iter()
                .map(|c| (name.clone(), c.clone())),
        );
    }
    Ok(out)
}

/// Runs `l3m cards`.
pub async fn cmd_cards(args: Args, cx: Context) -> Result<(), CliError> {
    let session = cx.connect().await?;
    if args.serve {
        let human = session.hub.human.clone();
        return super::cards_serve::serve(session.client, human, args.bind).await;
    }
    let cards = waiting_cards(&session.client).await?;
    if args.json {
        let cards: Vec<_> = cards
            .iter()
            .filter_map(|(agent, card)| match card {
                CardLine::Raised {
                    id,
                    round,
                    effect,
                    justification,
                    reason,
                } => Some(serde_json::json!({
                    "id": id, "agent": agent, "round": round, "effect": effect,
                    "justification": justification, "reason": reason,
                })),
                CardLine::Answered { .. } => None,
            })
            .collect();
        return output::json(&serde_json::json!({ "cards": cards }));
    }
    if cards.is_empty() {
        outln!("no cards wait for you");
        return Ok(());
    }
    for (agent, card) in &cards {
        if let CardLine::Raised {
            id,
            round,
            effect,
            justification,
            reason,
        } = card
        {
            outln!(
                "{id}  {agent}  {} (stalemate at round {round})",
                Foreign(&effect.tool)
            );
            outln!("  effect:        {}", Foreign(&effect.what));
            outln!(
                "  writes under:  {}",
                Foreign(&effect.write_roots.join(", "))
            );
            outln!("  justification: {}", Foreign(justification));
            outln!("  reviewer:      {}", Foreign(reason));
        }
    }
    Ok(())
}

/// Runs `l3m card approve|deny`.
pub async fn cmd_card(command: CardCommand, cx: Context) -> Result<(), CliError> {
    let (args, approve) = match command {
        CardCommand::Approve(args) => (args, true),
        CardCommand::Deny(args) => (args, false),
    };
    let only = args.agent.as_deref().map(agent).transpose()?;
    let session = cx.connect().await?;
    let client = &session.client;
    let matching: Vec<(AgentName, CardLine)> = (waiting_cards(client).await?)
        .into_iter()
        .filter(|(a, c)| c.id().as_str() == args.id && only.as_ref().is_none_or(|o| o == a))
        .collect();
    let (owner, card) = match &matching[..] {
        [one] => one.clone(),
        [] => {
            return Err(CliError::NotFound {
                message: format!("no waiting card {}: see `l3m cards`", args.id),
            });
        }
        _ => {
            return Err(CliError::Usage {
                message: format!(
                    "several agents have a card {}; say which with --agent",
                    args.id
                ),
            });
        }
    };
    // hubd writes the answering human from the session itself; this one is only the shape.
    let by = l3m_core::names::Entity::Human(session.hub.human.clone());
    let line = CardLine::Answered {
        id: card.id().clone(),
        by,
        approve,
        reason: args.reason,
    };
    let text = serde_json::to_string(&line).map_err(|e| CliError::Runtime(e.to_string()))?;
    client.append_card(&owner, text).await?;
    if args.json {
        return output::json(
            &serde_json::json!({ "id": args.id, "agent": owner, "approve": approve }),
        );
    }
    outln!(
        "card {} of {owner} {}; its agent resumes",
        args.id,
        if approve { "approved" } else { "denied" }
    );
    Ok(())
}
