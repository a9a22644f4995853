//! The agent's driven children: the children its programs' calls spawn (a model-level spawn is
//! always persistent), which exist only to answer the call that spawned them.
//!
//! Two rules follow, kept here:
//! - **their letters are the programs' alone**: a letter from a driven child is never posted to
//!   the writer as mail, so the agent's model never reads it; a program's `await_answer` takes
//!   it from the inbox, marks it read and hands on one menu word. A letter no call took stays
//!   unread in the inbox (the human can read it there), is never shown to the model, and
//!   does not wake the agent (the supervisor does not count it as unread mail);
//! - **no call survives a restart**: at boot, every live driven child of the agent is retired
//!   (the call that spawned it died with the last process), and every driven child the ledger
//!   knows joins the set, so its unread letters are not shown either.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use l3m_core::mail::Address;
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;

use crate::SequencerError;

/// The driven children of this session's agent, shared by its outlet (which adds each child a
/// program spawns) and its inbox watcher (which holds back their letters).
#[derive(Debug, Clone, Default)]
pub struct Driven(Arc<Mutex<BTreeSet<AgentName>>>);

impl Driven {
    /// Adds `child`, before it can write its first letter.
    pub fn note(&self, child: AgentName) {
        self.lock().insert(child);
    }

    /// Whether a letter from `from` is a driven child's (on this hub).
    pub fn sent(&self, from: &Address) -> bool {
        from.local_agent().is_some_and(|a| self.lock().contains(a))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<AgentName>> {
        // The set is only ever added to: a poisoned one is still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Notes every driven child of `agent` the ledger knows, and retires each that is still live:
/// the call that spawned it ended with the process that ran it. Returns those retired.
pub(crate) async fn retire_left(
    client: &HubClient,
    agent: &AgentName,
    driven: &Driven,
) -> Result<Vec<AgentName>, SequencerError> {
    let mut retired = Vec::new();
    for state in client.list_agents().await?.agents {
        let Ok(child) = AgentName::parse(&state.name) else {
            continue;
        };
        if !state.driven || child.parent().as_ref() != Some(agent) {
            continue;
        }
        driven.note(child.clone());
        if matches!(state.life, AgentLife::Running | AgentLife::Asleep) {
            client.retire(&child).await?;
            tracing::info!(%agent, %child, "retired a driven child its call left behind");
            retired.push(child);
        }
    }
    Ok(retired)
}
