//! Fetching an agent's branches from `hub.git` and pushing commits back, as git packs over
//! the bus: how a sequencer keeps the agent's ACR as its own clone, on the hub's host or
//! another, without a path to `hub.git`.
//!
//! A pack larger than one message travels in chunks of at most [`CHUNK_BYTES`], and a whole
//! pack is at most [`MAX_PACK_BYTES`] either way.
//!
//! # Format
//! - `hubd.fetch-pack` `{ capability, agent: str, have: [str], offset: u64, pack: str|nil }` →
//!   `hubd.pack-chunk` `{ work: str|nil, persona: str|nil, pack: str|nil, total: u64, offset:
//!   u64, bytes: bin }`: the agent's work and persona branch tips and the bytes `offset..` of a
//!   pack of every object reachable from them and not from the `have` commits (commits the
//!   hub does not hold are ignored). `pack` names the pack by its trailing checksum (`nil`: no
//!   object is missing, `total` is 0). The first request has `offset` 0 and `pack` nil; later
//!   ones give the `pack` the first answer named, and are a `conflict` if the branches moved
//!   since (fetch again from 0). Read by the agent's own sequencer, its host, or a human.
//! - `hubd.push-pack` `{ capability, agent: str, updates: [{ refname: str, old: str, new: str,
//!   back: bool? }],
//!   total: u64, offset: u64, bytes: bin }` → `hubd.pushed` `{ received: u64, done: bool }`:
//!   the pack's bytes `offset..`, chunk by chunk in order, each chunk repeating the same
//!   `updates` and `total`. Once `total` bytes arrived hubd checks, before any ref moves: only
//!   the agent's own sequencer pushes, only to the agent's work and persona branches, each
//!   update a fast-forward from the branch's current tip (or, marked `back: true`, a move to
//!   one of its ancestors, for a rewind, with an empty pack), the pack within [`MAX_PACK_BYTES`]
//!   and each object within [`MAX_OBJECT_BYTES`], every object well-formed (as `git fsck
//!   --strict` checks) and every object the new tips reach present. The pack must be
//!   self-contained (not thin). A refused push writes nothing; an accepted one moves each ref by
//!   compare-and-swap and answers `done: true`.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// The most pack bytes one message carries: what fits in nats-server's default 1 MiB
/// payload with the envelope around it.
pub const CHUNK_BYTES: usize = 768 * 1024;

/// The largest pack fetched or pushed: an agent's branches are source and notes, not
/// datasets; a larger one is refused naming its size.
pub const MAX_PACK_BYTES: u64 = 32 * 1024 * 1024;

/// The largest object (uncompressed) a push may bring.
pub const MAX_OBJECT_BYTES: u64 = 16 * 1024 * 1024;

/// The most `have` commits a fetch names: a clone names its branch tips, not its history.
pub const MAX_HAVES: usize = 64;

/// Asks for part of a pack of an agent's branches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchPack {
    /// The caller's session.
    pub capability: Capability,
    /// Whose branches.
    pub agent: String,
    /// Commits the caller already holds, as hex ids.
    pub have: Vec<String>,
    /// The first byte wanted.
    pub offset: u64,
    /// The pack the earlier chunks came from (`None` on the first request).
    pub pack: Option<String>,
}

impl Message for FetchPack {
    const KIND: &'static str = "hubd.fetch-pack";
}

/// One chunk of a pack of an agent's branches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackChunk {
    /// The work branch's tip the pack reaches.
    pub work: Option<String>,
    /// The persona branch's tip the pack reaches.
    pub persona: Option<String>,
    /// The pack's trailing checksum, in hex; `None` when nothing is missing.
    pub pack: Option<String>,
    /// The whole pack's length in bytes.
    pub total: u64,
    /// Where `bytes` start in the pack.
    pub offset: u64,
    /// At most [`CHUNK_BYTES`] of the pack.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl Message for PackChunk {
    const KIND: &'static str = "hubd.pack-chunk";
}

/// One branch move a push asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefUpdate {
    /// The full ref name: the agent's work branch or persona branch.
    pub refname: String,
    /// The tip the caller last fetched, as hex.
    pub old: String,
    /// The commit to move to, a descendant of `old` (or, moving `back`, an ancestor), as hex.
    pub new: String,
    /// Whether the branch moves back along its own history, to an ancestor of `old`: how a
    /// rewind undoes commits. Such a move brings no objects.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub back: bool,
}

/// Part of a push: ref updates and a chunk of the pack they need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushPack {
    /// The caller's session: the agent's own sequencer.
    pub capability: Capability,
    /// Whose branches.
    pub agent: String,
    /// The moves, the same in every chunk of one push.
    pub updates: Vec<RefUpdate>,
    /// The whole pack's length in bytes.
    pub total: u64,
    /// Where `bytes` start in the pack.
    pub offset: u64,
    /// At most [`CHUNK_BYTES`] of the pack.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl Message for PushPack {
    const KIND: &'static str = "hubd.push-pack";
}

/// How far a push got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pushed {
    /// Pack bytes hubd holds for this push.
    pub received: u64,
    /// Whether the pack was admitted and every ref moved.
    pub done: bool,
}

impl Message for Pushed {
    const KIND: &'static str = "hubd.pushed";
}
