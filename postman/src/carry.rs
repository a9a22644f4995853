//! Carrying letters between hubs: the serving postman.
//!
//! **Sending.** Every `poll`, and whenever hubd announces that an outbox moved, the carrier reads each agent's outbox through hubd from where it
//! last got to, groups the staged letters by the office they are addressed to, and sends each
//! group over that office's link as [`Frame::Letters`]. The office answers
//! [`Frame::Delivered`] only once its hubd holds them (mirrored, then relayed into inboxes);
//! only then does the office's cursor move past them. The cursors are durable, on
//! `refs/l3m/mirror/<office>/sent` (moved through hubd by compare-and-swap, never backwards), so
//! a restarted postman resumes where the offices' acknowledgments left it. A letter whose link
//! failed is sent again on the next round; the receiving hub's set union makes that harmless.
//!
//! **Receiving.** Each accepted link's streams carry [`Frame::Letters`]; the carrier hands them
//! to its hubd (`deliver-airmail`, as the office the link authenticated) and answers with what
//! hubd made of them.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use l3m_core::mail::InboxEntry;
use l3m_core::names::AgentName;
use l3m_core::record_format;
use l3m_core::refs::AgentRef;
use l3m_wire::bus::MessageStream;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::mail::{Bounced, Returned};
use l3m_wire::hubd::tree::AgentLife;
use tokio_util::sync::CancellationToken;

use crate::frame::{self, Frame, MAX_FRAME};
use crate::identity::Identity;
use crate::link::{self, Limits, Link, LinkError, Office};
use crate::status::{self, Board};

/// An office as the carrier reaches it.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The office, as this hub's settings pin it.
    pub office: Office,
    /// Where its postman listens.
    pub addr: SocketAddr,
}

/// What a serving postman holds.
#[derive(Debug)]
pub struct Carrier {
    /// Its session with its own hubd (duty `postman`).
    pub hub: HubClient,
    /// The hub's identity between hubs.
    pub identity: Identity,
    /// The name the offices give this hub (what its hello says).
    pub me: String,
    /// The offices it carries to and from.
    pub peers: Vec<Peer>,
    /// Link timeouts and bounds.
    pub limits: Limits,
    /// How often outboxes are read.
    pub poll: Duration,
}

impl Carrier {
    /// Opens a link to `peer` from `endpoint`, as this hub (handshake and hello).
    pub async fn dial(&self, endpoint: &quinn::Endpoint, peer: &Peer) -> Result<Link, LinkError> {
        link::connect(
            endpoint,
            &self.identity,
            &self.me,
            &peer.office,
            peer.addr,
            &self.limits,
        )
        .await
    }
}

/// Why a round of carrying stopped.
#[derive(Debug, thiserror::Error)]
pub enum CarryError {
    /// hubd refused or could not be reached.
    #[error("hubd: {0}")]
    Hub(#[from] l3m_wire::client::ClientError),
    /// A link failed.
    #[error(transparent)]
    Link(#[from] link::LinkError),
    /// A stream failed.
    #[error("office {office}: {reason}")]
    Stream {
        /// The office.
        office: String,
        /// What failed.
        reason: String,
    },
}

/// Serves on `endpoint` until `shutdown`: accepts the offices' links and delivers what they
/// carry, and carries this hub's staged letters to them, keeping each link's state on `board`
/// (made with [`Board::new`] from the same carrier; its health answer and metrics read it).
pub async fn serve(
    carrier: Arc<Carrier>,
    board: Arc<Board>,
    endpoint: quinn::Endpoint,
    shutdown: CancellationToken,
) {
    let status = status::serve(
        Arc::clone(&carrier),
        endpoint.clone(),
        Arc::clone(&board),
        shutdown.child_token(),
    );
    if let Err(error) = status.await {
        tracing::warn!(%error, "the postman's status is not served; carrying goes on");
    }
    let accepting = {
        let (carrier, endpoint) = (Arc::clone(&carrier), endpoint.clone());
        // Connections not yet through their hello, at most `max_incoming` at a time: quinn's
        // own bound counts only those not yet taken from `accept`, and this loop takes them at
        // once, so without this a flood of half-open connections (each held up to the hello
        // timeout) would grow the postman without bound.
        let unproven = Arc::new(tokio::sync::Semaphore::new(carrier.limits.max_incoming));
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let Ok(permit) = Arc::clone(&unproven).try_acquire_owned() else {
                    tracing::debug!(peer = %incoming.remote_address(), "refused a connection: too many unproven ones");
                    incoming.refuse();
                    continue;
                };
                let carrier = Arc::clone(&carrier);
                tokio::spawn(async move {
                    if let Err(error) = receive(&carrier, incoming, permit).await {
                        tracing::warn!(%error, "an incoming link ended");
                    }
                });
            }
        })
    };
    let outboxes = carrier.hub.subjects().ref_changes_of_kind(AgentRef::Outbox);
    let mut moves = match carrier.hub.bus().subscribe(&outboxes).await {
        Ok(moves) => Some(moves),
        Err(error) => {
            tracing::warn!(%error, "outbox moves are not heard; carrying every poll only");
            None
        }
    };
    let mut cursors: HashMap<String, OfficeCursor> = HashMap::new();
    let mut links: HashMap<String, Link> = HashMap::new();
    loop {
        if let Err(error) = carry_once(&carrier, &endpoint, &board, &mut cursors, &mut links).await
        {
            tracing::warn!(%error, "a round of carrying stopped; it is retried");
        }
        // A round runs every `poll`, and at once when an outbox moves (hubd announces it).
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(carrier.poll) => {}
            Some(_) = next_move(&mut moves) => {}
        }
    }
    accepting.abort();
    endpoint.close(0u32.into(), b"postman stopping");
}

/// The next outbox move heard, or never if none can be heard.
async fn next_move(moves: &mut Option<MessageStream>) -> Option<()> {
    match moves {
        Some(moves) => moves.next().await.map(|_| ()),
        None => std::future::pending().await,
    }
}

/// Accepts one office's link and delivers every batch it carries; `unproven` is held until the
/// link is through its hello.
async fn receive(
    carrier: &Carrier,
    incoming: quinn::Incoming,
    unproven: tokio::sync::OwnedSemaphorePermit,
) -> Result<(), CarryError> {
    let offices: Vec<Office> = carrier.peers.iter().map(|p| p.office.clone()).collect();
    let link = link::accept(incoming, &carrier.me, &offices, &carrier.limits).await;
    drop(unproven);
    let link = link?;
    let office = link.office.name.clone();
    let stream = |reason: String| CarryError::Stream {
        office: office.clone(),
        reason,
    };
    loop {
        let (mut send, mut recv) = match link.connection.accept_bi().await {
            Ok(streams) => streams,
            Err(quinn::ConnectionError::ApplicationClosed(_)) => return Ok(()),
            Err(e) => return Err(stream(e.to_string())),
        };
        let answer = match frame::read(&mut recv).await {
            Ok(Frame::Letters { letters }) => {
                match carrier.hub.deliver_airmail(&office, letters).await {
                    Ok(done) => Frame::Delivered {
                        delivered: done.delivered,
                        already: done.already,
                        bounced: pairs(done.bounced),
                        refused: pairs(done.refused),
                    },
                    Err(e) => Frame::Refused {
                        reason: format!("the receiving hub did not take the letters: {e}"),
                    },
                }
            }
            Ok(other) => Frame::Refused {
                reason: format!("expected letters, got {other:?}"),
            },
            Err(e) => Frame::Refused {
                reason: e.to_string(),
            },
        };
        frame::write(&mut send, &answer)
            .await
            .map_err(|e| stream(e.to_string()))?;
        let _finished = send.finish();
    }
}

/// Each refusal as `(letter, reason)`, as frames carry it.
fn pairs(refusals: Vec<Bounced>) -> Vec<(String, String)> {
    refusals.into_iter().map(|b| (b.letter, b.reason)).collect()
}

/// An office's durable cursor as last read or moved: per agent, the first outbox line the
/// office does not hold yet, and the cursor ref's tip.
#[derive(Debug, Clone, Default)]
struct OfficeCursor {
    positions: BTreeMap<String, u64>,
    tip: Option<String>,
}

/// Reads every outbox past the offices' cursors, sends each office its letters, and moves each
/// office's cursor past what it now holds.
async fn carry_once(
    carrier: &Carrier,
    endpoint: &quinn::Endpoint,
    board: &Board,
    cursors: &mut HashMap<String, OfficeCursor>,
    links: &mut HashMap<String, Link>,
) -> Result<(), CarryError> {
    for peer in &carrier.peers {
        if !cursors.contains_key(&peer.office.name) {
            let read = carrier.hub.read_cursor(&peer.office.name).await?;
            cursors.insert(
                peer.office.name.clone(),
                OfficeCursor {
                    positions: read.positions,
                    tip: read.tip,
                },
            );
        }
    }
    let mut by_office: BTreeMap<String, Vec<Staged>> = BTreeMap::new();
    let mut reached: BTreeMap<String, u64> = BTreeMap::new();
    for state in carrier.hub.list_agents().await?.agents {
        if matches!(state.life, AgentLife::Collected) {
            continue;
        }
        let Ok(agent) = AgentName::parse(&state.name) else {
            continue;
        };
        let held = |office: &str| {
            cursors
                .get(office)
                .and_then(|c| c.positions.get(agent.as_str()).copied())
                .unwrap_or(0)
        };
        let Some(from) = carrier.peers.iter().map(|p| held(&p.office.name)).min() else {
            return Ok(());
        };
        let read = carrier.hub.read_outbox(&agent, from).await?;
        for (at, entry) in (from..).zip(read.entries) {
            let (office, letter) = match &entry {
                InboxEntry::Letter(letter) => match letter.to.office() {
                    Some(office) => (office.to_string(), letter.id.to_string()),
                    None => continue,
                },
                InboxEntry::Receipt(receipt) => {
                    (receipt.office.to_string(), receipt.letter.to_string())
                }
                InboxEntry::ReadMark(_) => continue,
            };
            if !cursors.contains_key(&office) || at < held(&office) {
                continue;
            }
            let Ok(line) = entry.to_line() else { continue };
            by_office.entry(office).or_default().push(Staged {
                agent: agent.to_string(),
                letter,
                line,
            });
        }
        reached.insert(agent.to_string(), read.len);
    }
    for peer in &carrier.peers {
        let office = &peer.office.name;
        if let Some(staged) = by_office.get(office) {
            let lines: Vec<String> = staged.iter().map(|s| s.line.clone()).collect();
            let bounced = match send_to(carrier, endpoint, links, office, &lines).await {
                Ok(bounced) => bounced,
                Err(error) => {
                    tracing::warn!(%office, %error, "letters not carried this round");
                    board.failed(office, lines.len() as u64, &error.to_string());
                    links.remove(office);
                    continue;
                }
            };
            board.carried(office, lines.len() as u64);
            return_bounces(carrier, office, staged, bounced).await?;
        }
        move_cursor(carrier, cursors, office, &reached).await?;
    }
    Ok(())
}

/// A line read from an outbox, on its way to an office.
#[derive(Debug)]
struct Staged {
    /// Whose outbox.
    agent: String,
    /// The letter it is (or a receipt answers).
    letter: String,
    /// The stored line, as carried.
    line: String,
}

/// Hands the letters `office` bounced back to this hub's hubd, which writes each sender a
/// bounce letter; only then may the cursor move past them, so no bounce is lost to a crash.
async fn return_bounces(
    carrier: &Carrier,
    office: &str,
    staged: &[Staged],
    bounced: Vec<(String, String)>,
) -> Result<(), CarryError> {
    let returned: Vec<Returned> = bounced
        .into_iter()
        .filter_map(|(letter, reason)| {
            let from = staged.iter().find(|s| s.letter == letter);
            if from.is_none() {
                tracing::warn!(
                    office,
                    letter,
                    "the office bounced a letter it was not sent"
                );
            }
            Some(Returned {
                agent: from?.agent.clone(),
                letter,
                reason,
            })
        })
        .collect();
    if returned.is_empty() {
        return Ok(());
    }
    let done = carrier.hub.return_bounces(office, returned).await?;
    for letter in &done.written {
        tracing::info!(office, letter, "a bounced letter went back to its sender");
    }
    Ok(())
}

/// Moves `office`'s cursor to `reached` for every agent read, now that the office holds every
/// letter for it up to there.
async fn move_cursor(
    carrier: &Carrier,
    cursors: &mut HashMap<String, OfficeCursor>,
    office: &str,
    reached: &BTreeMap<String, u64>,
) -> Result<(), CarryError> {
    let cursor = cursors.entry(office.to_owned()).or_default();
    let mut positions = cursor.positions.clone();
    for (agent, len) in reached {
        let at = positions.entry(agent.clone()).or_insert(0);
        *at = (*at).max(*len);
    }
    if positions == cursor.positions {
        return Ok(());
    }
    match carrier
        .hub
        .move_cursor(office, positions.clone(), cursor.tip.as_deref())
        .await
    {
        Ok(moved) => {
            *cursor = OfficeCursor {
                positions,
                tip: Some(moved.tip),
            };
            Ok(())
        }
        Err(e) => {
            // Someone else moved it (another postman of this hub): read it again next round.
            cursors.remove(office);
            Err(e.into())
        }
    }
}

/// Sends `staged` to `office` over its link (made if needed), in frames that fit, and waits
/// for each to be held by the office's hubd; returns the letters it bounced, with its reasons.
async fn send_to(
    carrier: &Carrier,
    endpoint: &quinn::Endpoint,
    links: &mut HashMap<String, Link>,
    office: &str,
    staged: &[String],
) -> Result<Vec<(String, String)>, CarryError> {
    let Some(peer) = carrier.peers.iter().find(|p| p.office.name == office) else {
        return Err(CarryError::Stream {
            office: office.into(),
            reason: "no such office is pinned in this hub's settings (l3m office add)".into(),
        });
    };
    if !links.contains_key(office) {
        let link = carrier.dial(endpoint, peer).await?;
        links.insert(office.to_owned(), link);
    }
    let Some(link) = links.get(office) else {
        return Ok(Vec::new());
    };
    let mut bounces = Vec::new();
    let stream = |reason: String| CarryError::Stream {
        office: office.into(),
        reason,
    };
    // Frames well under the frame limit (a letter line is at most the stored limit).
    for batch in record_format::batches(staged.iter().cloned(), MAX_FRAME / 2) {
        let exchange = async {
            let (mut send, mut recv) = link
                .connection
                .open_bi()
                .await
                .map_err(|e| stream(e.to_string()))?;
            frame::write(&mut send, &Frame::Letters { letters: batch })
                .await
                .map_err(|e| stream(e.to_string()))?;
            let _finished = send.finish();
            frame::read(&mut recv)
                .await
                .map_err(|e| stream(e.to_string()))
        };
        let answer = tokio::time::timeout(carrier.limits.answer_within, exchange)
            .await
            .map_err(|_| {
                stream(format!(
                    "no answer within {:?}",
                    carrier.limits.answer_within
                ))
            })??;
        match answer {
            Frame::Delivered {
                bounced, refused, ..
            } => {
                for (letter, reason) in &bounced {
                    tracing::warn!(office, letter, reason, "the office bounced a letter");
                }
                for (letter, reason) in refused {
                    tracing::warn!(office, letter, reason, "the office refused a receipt");
                }
                bounces.extend(bounced);
            }
            Frame::Refused { reason } => return Err(stream(reason)),
            other => return Err(stream(format!("answered letters with {other:?}"))),
        }
    }
    Ok(bounces)
}
