//! Fetching an agent's branches as a pack, and pushes: their chunks held until the pack is
//! whole, then checked in a quarantine and the branches moved by compare-and-swap.

use std::collections::HashMap;
use std::sync::{MutexGuard, PoisonError};

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::pack::{
    CHUNK_BYTES, FetchPack, MAX_HAVES, MAX_OBJECT_BYTES, MAX_PACK_BYTES, PackChunk, PushPack,
    Pushed, RefUpdate,
};

use super::{Moved, State};
use crate::service::error::ServiceError;
use crate::service::gate::{self, BranchMove};
use crate::store::Tip;

/// The most pushes whose packs may be arriving at once, over all sessions.
const MAX_UPLOADS: usize = 4;

/// How long a push's pack may sit unfinished before another push may take its place.
const UPLOAD_IDLE_MS: u64 = 60_000;

/// One push whose pack is still arriving.
#[derive(Debug)]
struct Upload {
    agent: String,
    updates: Vec<RefUpdate>,
    total: u64,
    bytes: Vec<u8>,
    touched_ms: u64,
}

/// Pushes whose packs are still arriving, by session: one per session, at most
/// [`MAX_UPLOADS`] in all, so the memory they hold is bounded by that many packs (each within
/// `MAX_PACK_BYTES`).
#[derive(Debug, Default)]
pub(in crate::service) struct Uploads {
    by_session: HashMap<String, Upload>,
}

/// What one chunk made of its push.
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    /// More is to come; this many bytes are held.
    Partial(u64),
    /// The whole pack.
    Whole(Vec<u8>),
}

impl Uploads {
    /// Adds `chunk` (already checked against the limits) to its session's push. A chunk at
    /// byte 0 starts the push afresh; any other must continue it exactly (same agent, updates
    /// and length, at the byte after the last), or the push is dropped and must start again.
    fn take(&mut self, session: &str, chunk: PushPack, now_ms: u64) -> Result<Taken, ServiceError> {
        let len = chunk.bytes.len() as u64;
        if chunk.offset == 0 && len == chunk.total {
            self.by_session.remove(session);
            return Ok(Taken::Whole(chunk.bytes));
        }
        if chunk.offset == 0 {
            self.by_session.remove(session);
            self.make_room(now_ms)?;
            self.by_session.insert(
                session.to_owned(),
                Upload {
                    agent: chunk.agent,
                    updates: chunk.updates,
                    total: chunk.total,
                    bytes: chunk.bytes,
                    touched_ms: now_ms,
                },
            );
            return Ok(Taken::Partial(len));
        }
        let Some(mut upload) = self.by_session.remove(session) else {
            return Err(ServiceError::Invalid(format!(
                "a chunk at byte {} continues no push of this session; start at byte 0",
                chunk.offset
            )));
        };
        if upload.agent != chunk.agent
            || upload.updates != chunk.updates
            || upload.total != chunk.total
            || upload.bytes.len() as u64 != chunk.offset
        {
            return Err(ServiceError::Invalid(format!(
                "a chunk at byte {} does not continue this session's push (it holds {} bytes of \
                 {}); the push is dropped, start again at byte 0",
                chunk.offset,
                upload.bytes.len(),
                upload.total
            )));
        }
        upload.bytes.extend(chunk.bytes);
        if upload.bytes.len() as u64 == upload.total {
            return Ok(Taken::Whole(upload.bytes));
        }
        upload.touched_ms = now_ms;
        let held = upload.bytes.len() as u64;
        self.by_session.insert(session.to_owned(), upload);
        Ok(Taken::Partial(held))
    }

    /// Drops idle pushes until one more fits, or refuses.
    fn make_room(&mut self, now_ms: u64) -> Result<(), ServiceError> {
        self.by_session
            .retain(|_, upload| now_ms.saturating_sub(upload.touched_ms) < UPLOAD_IDLE_MS);
        if self.by_session.len() >= MAX_UPLOADS {
            return Err(ServiceError::Invalid(format!(
                "hubd holds {MAX_UPLOADS} unfinished pushes; push again once one ends (an idle \
                 one is dropped after {} s)",
                UPLOAD_IDLE_MS / 1000
            )));
        }
        Ok(())
    }
}

impl State {
    fn uploads(&self) -> MutexGuard<'_, Uploads> {
        // `take` replaces or removes whole entries, so a poisoned lock is still usable.
        self.uploads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `hubd.fetch-pack`: the branch tips and one chunk of the pack a clone lacks.
    pub fn fetch_pack(&self, req: &FetchPack) -> Result<PackChunk, ServiceError> {
        let duty = self.duty(&req.capability)?;
        let agent = gate::agent(&req.agent)?;
        self.require_known(&agent)?;
        gate::may_fetch(&duty, &agent)?;
        if req.have.len() > MAX_HAVES {
            return Err(ServiceError::Invalid(format!(
                "a fetch names {} commits it has, over the limit of {MAX_HAVES}; name the \
                 clone's branch tips",
                req.have.len()
            )));
        }
        let mut haves = Vec::with_capacity(req.have.len());
        for have in &req.have {
            if let Tip::At(id) = gate::tip(Some(have))?
                && self.hub.has_commit(id)?
            {
                haves.push(id);
            }
        }
        let work = self.hub.tip(&refs::work_branch(&agent))?.id();
        let persona = self
            .hub
            .tip(&refs::agent_ref(&agent, AgentRef::Persona))?
            .id();
        let wants: Vec<_> = work.into_iter().chain(persona).collect();
        let pack = self.hub.pack_of(&wants, &haves, MAX_PACK_BYTES)?;
        let name: Option<String> = pack
            .len()
            .checked_sub(20)
            .filter(|_| !pack.is_empty())
            .map(|at| pack[at..].iter().map(|b| format!("{b:02x}")).collect());
        if req.pack.is_some() && req.pack != name {
            return Err(ServiceError::PackChanged {
                agent: req.agent.clone(),
            });
        }
        let total = pack.len() as u64;
        let start = usize::try_from(req.offset)
            .ok()
            .filter(|&start| start <= pack.len())
            .ok_or_else(|| {
                ServiceError::Invalid(format!(
                    "byte {} is past the end of a pack of {total} bytes",
                    req.offset
                ))
            })?;
        let end = pack.len().min(start + CHUNK_BYTES);
        Ok(PackChunk {
            work: work.map(|id| id.to_string()),
            persona: persona.map(|id| id.to_string()),
            pack: name,
            total,
            offset: req.offset,
            bytes: pack[start..end].to_vec(),
        })
    }

    /// `hubd.push-pack`: holds the chunk; once the pack is whole, checks it and every move,
    /// then admits the pack and moves the branches. A refusal writes nothing.
    pub fn push_pack(&self, req: PushPack) -> Result<(Pushed, Vec<Moved>), ServiceError> {
        let duty = self.duty(&req.capability)?;
        let agent = gate::agent(&req.agent)?;
        self.require_known(&agent)?;
        let moves = gate::push_updates(&duty, &agent, &req.updates)?;
        for step in &moves {
            may_write(&duty, &step.refname, RefWrite::Set)?;
        }
        gate::push_chunk(req.total, req.offset, req.bytes.len())?;
        let session = req.capability.0.clone();
        let total = req.total;
        let pack = match self.uploads().take(&session, req, self.now_ms())? {
            Taken::Partial(received) => {
                return Ok((
                    Pushed {
                        received,
                        done: false,
                    },
                    Vec::new(),
                ));
            }
            Taken::Whole(pack) => pack,
        };
        self.land(&moves, &pack)?;
        let moved = moves
            .iter()
            .filter(|step| step.refname == refs::agent_ref(&agent, AgentRef::Persona))
            .map(|_| (AgentRef::Persona, agent.clone()))
            .collect();
        Ok((
            Pushed {
                received: total,
                done: true,
            },
            moved,
        ))
    }

    /// Checks `pack` and `moves` against the hub and, only if all pass, admits the pack and
    /// moves each branch by compare-and-swap (putting earlier ones back if a later one loses).
    fn land(&self, moves: &[BranchMove], pack: &[u8]) -> Result<(), ServiceError> {
        for step in moves {
            let actual = self.hub.tip(&step.refname)?;
            if actual != Tip::At(step.old) {
                return Err(ServiceError::Conflict {
                    refname: step.refname.clone(),
                    expected: Tip::At(step.old),
                    actual,
                });
            }
        }
        let quarantine = match pack.is_empty() {
            true => None,
            false => Some(self.hub.quarantine(pack, MAX_OBJECT_BYTES)?),
        };
        for step in moves {
            let (refname, old, new) = (
                step.refname.clone(),
                step.old.to_string(),
                step.new.to_string(),
            );
            if step.back {
                if quarantine.is_some() || !self.hub.is_ancestor(step.new, step.old)? {
                    return Err(ServiceError::NotAncestor { refname, old, new });
                }
            } else if !self
                .hub
                .fast_forward(quarantine.as_ref(), step.old, step.new)?
            {
                return Err(ServiceError::NotFastForward { refname, old, new });
            }
        }
        if let Some(quarantine) = quarantine {
            self.hub.admit(quarantine)?;
        }
        for (done, step) in moves.iter().enumerate() {
            if let Err(error) = self.hub.set_ref(&step.refname, Tip::At(step.old), step.new) {
                for back in moves[..done].iter().rev() {
                    if let Err(undo) = self.hub.set_ref(&back.refname, Tip::At(back.new), back.old)
                    {
                        tracing::warn!(refname = %back.refname, %undo, "could not put a pushed branch back");
                    }
                }
                return Err(error.into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_wire::hubd::session::Capability;

    fn chunk(offset: u64, total: u64, bytes: &[u8]) -> PushPack {
        PushPack {
            capability: Capability("c".into()),
            agent: "bob".into(),
            updates: Vec::new(),
            total,
            offset,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn chunks_in_order_make_the_pack_and_any_other_order_drops_the_push() {
        let mut uploads = Uploads::default();
        assert_eq!(
            uploads.take("s", chunk(0, 4, b"ab"), 0).unwrap(),
            Taken::Partial(2)
        );
        assert_eq!(
            uploads.take("s", chunk(2, 4, b"cd"), 0).unwrap(),
            Taken::Whole(b"abcd".to_vec())
        );
        // Out of order: refused, and the push is gone.
        uploads.take("s", chunk(0, 4, b"ab"), 0).unwrap();
        assert!(uploads.take("s", chunk(3, 4, b"d"), 0).is_err());
        assert!(uploads.take("s", chunk(2, 4, b"cd"), 0).is_err());
        // Another session's chunk continues nothing.
        uploads.take("s", chunk(0, 4, b"ab"), 0).unwrap();
        assert!(uploads.take("t", chunk(2, 4, b"cd"), 0).is_err());
    }

    #[test]
    fn at_most_max_uploads_wait_unless_idle() {
        let mut uploads = Uploads::default();
        for n in 0..MAX_UPLOADS {
            uploads.take(&n.to_string(), chunk(0, 4, b"ab"), 0).unwrap();
        }
        assert!(uploads.take("late", chunk(0, 4, b"ab"), 1).is_err());
        assert_eq!(
            uploads
                .take("late", chunk(0, 4, b"ab"), UPLOAD_IDLE_MS)
                .unwrap(),
            Taken::Partial(2)
        );
    }
}
