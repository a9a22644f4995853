//! Inputs from the hub: unread letters, grant moves, answered cards, fired vigils, and the
//! lease's renewal.
//!
//! Each runs as its own task and only posts inputs to the writer; none of them writes the Log.
//! The watcher hears only the inbox, grants, cards and vigils refs ([`watch`]).
//! Letters are found by reading the inbox from where the last read stopped; at boot the whole
//! inbox is scanned and every letter this agent has not marked read is posted (core refuses one
//! already journaled as a duplicate event, and the writer then marks it read); so is every
//! vigil the chain says fired (one event each, refused as a duplicate once journaled).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use l3m_core::log::EventId;
use l3m_core::mail::{Inbox, InboxEntry};
use l3m_core::names::{AgentName, Entity};
use l3m_core::refs::{self, AgentRef};
use l3m_core::review::card::{CardLine, parse_card_line};
use l3m_core::vigil;
use l3m_wire::bus::MessageStream;
use l3m_wire::client::{ClientError, HubClient};
use l3m_wire::reply::ErrorCode;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::SequencerError;
use crate::drive::Driven;
use crate::writer::Input;

/// Subscribes to the moves of the agent's inbox, grants and cards refs: the only refs the
/// watcher acts on (a card moves when a human answers it). Not to its Log, which this sequencer writes itself, so its own two appends a turn do not
/// come back to it as notifications to decode and drop.
pub(crate) async fn watch(
    client: &HubClient,
    agent: &AgentName,
) -> Result<MessageStream, SequencerError> {
    let mut streams = Vec::new();
    for which in [
        AgentRef::Inbox,
        AgentRef::Grants,
        AgentRef::Cards,
        AgentRef::Vigils,
    ] {
        let subject = client.subjects().ref_changed(which, agent);
        let stream = client
            .bus()
            .subscribe(&subject)
            .await
            .map_err(|source| ClientError::Wire { subject, source })?;
        streams.push(stream);
    }
    Ok(futures_util::stream::select_all(streams).boxed())
}

/// Scans the inbox, then starts the watcher and the lease renewal; returns the unread letters.
/// Letters from `driven` children are never posted: they are the programs' ([`crate::drive`]).
#[allow(clippy::too_many_arguments)] // each is one thing the watcher needs, none derived
pub(crate) async fn start(
    client: HubClient,
    agent: AgentName,
    watch: MessageStream,
    tx: mpsc::UnboundedSender<Input>,
    driven: Driven,
    lease: u64,
    ttl: Duration,
    stop: CancellationToken,
) -> Result<Vec<Input>, SequencerError> {
    let me = Entity::Agent(agent.clone());
    let read = client.read_inbox(&agent, 0).await?;
    let mut initial: Vec<Input> = Inbox::unread_in_order(&read.entries, &me)
        .filter(|l| !driven.sent(&l.from))
        .map(|l| Input::Letter(Box::new(l.clone())))
        .collect();
    initial.extend(fired_vigils(&client.read_vigils(&agent).await?));
    tokio::spawn(watch_refs(
        client.clone(),
        agent.clone(),
        watch,
        tx.clone(),
        driven,
        read.len,
        stop.clone(),
    ));
    tokio::spawn(renew(client, agent, tx, lease, ttl, stop));
    Ok(initial)
}

async fn watch_refs(
    client: HubClient,
    agent: AgentName,
    mut watch: MessageStream,
    tx: mpsc::UnboundedSender<Input>,
    driven: Driven,
    mut inbox_len: u64,
    stop: CancellationToken,
) {
    let grants_ref = refs::agent_ref(&agent, AgentRef::Grants);
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return,
            m = watch.next() => match m { Some(m) => m, None => return },
        };
        let Some((which, _)) = client.subjects().parse_ref_changed(&message.subject) else {
            continue;
        };
        let moved: Option<l3m_wire::hubd::notify::RefMoved> =
            l3m_wire::envelope::decode(&message.payload, &Default::default()).ok();
        match which {
            AgentRef::Inbox => match client.read_inbox(&agent, inbox_len).await {
                Ok(read) => {
                    inbox_len = read.from + read.entries.len() as u64;
                    for letter in read.entries.into_iter().filter_map(InboxEntry::into_letter) {
                        if !driven.sent(&letter.from)
                            && tx.send(Input::Letter(Box::new(letter))).is_err()
                        {
                            return;
                        }
                    }
                }
                Err(e) => tracing::warn!(%agent, error = %e, "could not read the inbox"),
            },
            AgentRef::Grants => {
                let tip = moved.and_then(|m| m.tip);
                match (client.read_grant(&agent).await, tip) {
                    (Ok(view), Some(tip)) => {
                        let _closed = tx.send(Input::Grant(Box::new(view), tip));
                    }
                    (Err(e), _) if e.code() == Some(ErrorCode::NotFound) => {
                        let _closed = tx.send(Input::Retired);
                    }
                    (Err(e), _) => tracing::warn!(%agent, error = %e, "could not read the grant"),
                    (Ok(_), None) => {
                        tracing::debug!(%agent, ref_ = grants_ref, "grants ref deleted");
                        let _closed = tx.send(Input::Retired);
                    }
                }
            }
            AgentRef::Vigils => match client.read_vigils(&agent).await {
                Ok(lines) => {
                    for input in fired_vigils(&lines) {
                        if tx.send(input).is_err() {
                            return;
                        }
                    }
                }
                Err(e) => tracing::warn!(%agent, error = %e, "could not read the vigils"),
            },
            AgentRef::Cards => match client.read_cards(&agent).await {
                Ok(lines) => {
                    for line in lines {
                        if let Ok(CardLine::Answered {
                            id,
                            by,
                            approve,
                            reason,
                        }) = parse_card_line(&line)
                            && tx
                                .send(Input::CardAnswered {
                                    id,
                                    by: by.to_string(),
                                    approve,
                                    reason,
                                })
                                .is_err()
                        {
                            return;
                        }
                    }
                }
                Err(e) => tracing::warn!(%agent, error = %e, "could not read the cards"),
            },
            _ => {}
        }
    }
}

/// The events of every vigil a vigils chain says fired, oldest first; lines that do not parse
/// are skipped (hubd wrote every one).
pub(crate) fn fired_vigils(lines: &[String]) -> Vec<Input> {
    let parsed: Vec<_> = lines
        .iter()
        .filter_map(|l| vigil::parse_vigil_line(l).ok())
        .collect();
    vigil::fired(&parsed)
        .iter()
        .filter_map(|(v, fact, _)| {
            let (id, source, text) = vigil::event(v, fact);
            let id = EventId::new(id).ok()?;
            Some(Input::Event { id, source, text })
        })
        .collect()
}

async fn renew(
    client: HubClient,
    agent: AgentName,
    tx: mpsc::UnboundedSender<Input>,
    token: u64,
    ttl: Duration,
    stop: CancellationToken,
) {
    let every = ttl / 3;
    let mut last_ok = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        match client.renew_lease(&agent, token).await {
            Ok(_) => last_ok = Instant::now(),
            Err(e) if e.is_conflict() => {
                let _closed = tx.send(Input::LeaseLost(e.to_string()));
                return;
            }
            Err(e) if last_ok.elapsed() >= ttl => {
                let _closed = tx.send(Input::LeaseLost(format!("not renewed within its ttl: {e}")));
                return;
            }
            Err(e) => tracing::warn!(%agent, error = %e, "lease renewal failed; retrying"),
        }
    }
}
