//! Fetching and pushing packs through hubd ([`crate::hubd::pack`]), chunk by chunk.
//!
//! The client only moves bytes: making a pack from a clone and indexing a fetched one into it
//! is the caller's (it holds the clone); hubd checks what arrives.

use crate::hubd::Op;
use crate::hubd::pack::{
    CHUNK_BYTES, FetchPack, MAX_PACK_BYTES, PackChunk, PushPack, Pushed, RefUpdate,
};
use l3m_core::names::AgentName;

use super::{ClientError, HubClient};

/// An agent's branch tips and the pack that brings a clone holding `have` up to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The work branch's tip.
    pub work: Option<String>,
    /// The persona branch's tip.
    pub persona: Option<String>,
    /// The pack; empty when the clone already holds everything.
    pub pack: Vec<u8>,
}

impl HubClient {
    /// Fetches `agent`'s work and persona branches: their tips and a pack of what a clone
    /// holding the commits `have` lacks. Restarts (a few times) if the branches move while
    /// the chunks arrive.
    pub async fn fetch_pack(
        &self,
        agent: &AgentName,
        have: &[String],
    ) -> Result<Fetched, ClientError> {
        let mut attempt = 0;
        loop {
            match self.fetch_once(agent, have).await {
                Err(error) if error.is_conflict() && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    async fn fetch_once(&self, agent: &AgentName, have: &[String]) -> Result<Fetched, ClientError> {
        let op = Op::FetchPack;
        let mut request = FetchPack {
            capability: self.cap(),
            agent: agent.to_string(),
            have: have.to_vec(),
            offset: 0,
            pack: None,
        };
        let first: PackChunk = self.call_mut(op, &mut request).await?;
        check_chunk(&first, 0, first.total)?;
        let (work, persona, name, total) = (first.work, first.persona, first.pack, first.total);
        let mut pack = first.bytes;
        request.pack = name.clone();
        while (pack.len() as u64) < total {
            request.offset = pack.len() as u64;
            let chunk: PackChunk = self.call_mut(op, &mut request).await?;
            if chunk.pack != name || chunk.work != work || chunk.persona != persona {
                return Err(bad_chunk(request.offset, "it belongs to another pack"));
            }
            check_chunk(&chunk, request.offset, total)?;
            pack.extend(chunk.bytes);
        }
        Ok(Fetched {
            work,
            persona,
            pack,
        })
    }

    /// Pushes `pack` and asks hubd to move `agent`'s branches as `updates` say; returns once
    /// hubd admitted the pack and moved every ref, or refused the push (and wrote nothing).
    pub async fn push_pack(
        &self,
        agent: &AgentName,
        updates: Vec<RefUpdate>,
        pack: &[u8],
    ) -> Result<Pushed, ClientError> {
        let total = pack.len() as u64;
        if total > MAX_PACK_BYTES {
            return Err(ClientError::PackTooLarge {
                len: total,
                limit: MAX_PACK_BYTES,
            });
        }
        let mut request = PushPack {
            capability: self.cap(),
            agent: agent.to_string(),
            updates,
            total,
            offset: 0,
            bytes: Vec::new(),
        };
        let mut chunks = pack.chunks(CHUNK_BYTES).peekable();
        if chunks.peek().is_none() {
            return self.call(Op::PushPack, request).await;
        }
        let mut offset = 0u64;
        let mut pushed = None;
        for chunk in chunks {
            request.offset = offset;
            request.bytes = chunk.to_vec();
            pushed = Some(
                self.call_mut::<_, Pushed>(Op::PushPack, &mut request)
                    .await?,
            );
            offset += chunk.len() as u64;
        }
        pushed.ok_or_else(|| bad_chunk(0, "no chunk was sent"))
    }
}

/// Checks a fetched chunk is where it was asked for, within the pack and the message limit.
fn check_chunk(chunk: &PackChunk, offset: u64, total: u64) -> Result<(), ClientError> {
    let end = chunk.offset.saturating_add(chunk.bytes.len() as u64);
    if chunk.offset != offset {
        return Err(bad_chunk(offset, "it starts elsewhere"));
    }
    if chunk.total != total || total > MAX_PACK_BYTES || end > total {
        return Err(bad_chunk(offset, "it runs past the pack's length or limit"));
    }
    if chunk.bytes.len() > CHUNK_BYTES || (chunk.bytes.is_empty() && end < total) {
        return Err(bad_chunk(offset, "its length is not one chunk's"));
    }
    Ok(())
}

fn bad_chunk(offset: u64, reason: &str) -> ClientError {
    ClientError::BadChunk {
        op: Op::FetchPack.as_str(),
        offset,
        reason: reason.to_owned(),
    }
}
