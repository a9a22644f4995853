//! The agent's undo chain on the hub (`refs/l3m/a/<agent>/_/undo`), as the ring's providers
//! record into it: each entry is appended through hubd, by compare-and-swap, before the edit it
//! describes. Nothing about it lives in the ACR, so an ACR deleted and rebuilt still rewinds.
//!
//! One [`HubUndo`] per running agent: it hands out entry ids and knows the chain's tip, so every
//! writer in the sequencer (the tools, a rewind's own branch moves) shares it.

use std::sync::Mutex;

use l3m_core::names::AgentName;
use l3m_core::record_format::{self, MAX_STORED_LINE};
use l3m_ring::undo::{EntryId, UndoEntry, UndoError, UndoStore, lines};
use l3m_wire::client::HubClient;
use tokio::runtime::Handle;

use crate::SequencerError;

/// The most line bytes one append carries: a few lines, well under the bus's 1 MiB message.
const APPEND_BYTES: usize = 3 * MAX_STORED_LINE;

/// The undo chain of one agent, written through its sequencer's session.
#[derive(Debug)]
pub struct HubUndo {
    client: HubClient,
    agent: AgentName,
    runtime: Handle,
    chain: Mutex<Chain>,
}

/// What an append must know: the tip it expects, and the next id to hand out.
#[derive(Debug)]
struct Chain {
    tip: Option<String>,
    next: u64,
}

impl HubUndo {
    /// Opens `agent`'s chain for appending, reading only its last line (the highest id so far).
    /// Its `record` blocks on the hub: call it from a blocking thread, as the tools run.
    pub async fn open(client: HubClient, agent: AgentName) -> Result<HubUndo, SequencerError> {
        let end = client.read_undo_page(&agent, u64::MAX, u64::MAX).await?;
        let (tip, next) = match end.len.checked_sub(1) {
            None => (end.tip, 1),
            Some(last) => {
                let page = client.read_undo_page(&agent, last, end.len).await?;
                let line = page.lines.first().ok_or_else(|| {
                    SequencerError::Tools(format!(
                        "hubd answered a read of {agent}'s undo chain at line {last} with none"
                    ))
                })?;
                let id = lines::id_of(last, line).map_err(undo_error)?;
                (page.tip, id.0.saturating_add(1))
            }
        };
        Ok(HubUndo {
            client,
            agent,
            runtime: Handle::current(),
            chain: Mutex::new(Chain { tip, next }),
        })
    }
}

/// Every entry on `agent`'s undo chain, oldest first (an entry cut by a crash between its
/// appends is not one: its edit never happened).
pub async fn entries(
    client: &HubClient,
    agent: &AgentName,
) -> Result<Vec<UndoEntry>, SequencerError> {
    let read = client.read_undo(agent).await?;
    lines::decode(read.lines.iter().map(String::as_str)).map_err(undo_error)
}

impl UndoStore for HubUndo {
    fn next_id(&self) -> Result<EntryId, UndoError> {
        let mut chain = self.chain.lock().map_err(|_| UndoError::Poisoned)?;
        let id = chain.next;
        chain.next += 1;
        Ok(EntryId(id))
    }

    fn record(&self, entry: &UndoEntry) -> Result<(), UndoError> {
        let lines = lines::encode(entry)?;
        // Held across the appends: one entry's lines are never interleaved with another's.
        let mut chain = self.chain.lock().map_err(|_| UndoError::Poisoned)?;
        for batch in record_format::batches(lines, APPEND_BYTES) {
            let appended = self
                .runtime
                .block_on(
                    self.client
                        .append_undo(&self.agent, chain.tip.as_deref(), batch),
                )
                .map_err(|e| UndoError::Store(e.to_string()))?;
            chain.tip = Some(appended.tip);
        }
        Ok(())
    }
}

/// An undo chain that does not read, as the sequencer reports it.
fn undo_error(e: UndoError) -> SequencerError {
    SequencerError::Tools(format!("the undo chain: {e}"))
}
