//! Appending to and reading an agent's undo chain (`refs/l3m/a/<agent>/_/undo`).
//!
//! The undo chain holds what each tame edit replaced, written by the agent's sequencer before the
//! edit, so that a rewind restores files and branches even after the ACR was deleted and rebuilt
//! (the lines' format is `l3m_ring::undo::lines`; hubd stores them and checks only that each is
//! one versioned JSON object within the stored limit).
//!
//! # Format
//! - `hubd.append-undo` `{ capability, agent: str, expected_tip: str|nil, lines: [str] }` →
//!   `hubd.undo-appended` `{ tip: str, len: u64 }`; a chain not at `expected_tip` is a
//!   `conflict` naming the actual tip. Only the agent's own sequencer appends.
//! - `hubd.read-undo` `{ capability, agent: str, from: u64, to: u64 }` → `hubd.undo-range`
//!   `{ lines: [str], from: u64, len: u64, tip: str|nil }`, one page like `hubd.read-log`.
//!   Read by the agent's own sequencer, its host, or a human: the lines hold file contents.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Appends lines to an agent's undo chain if it is at the expected tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendUndo {
    /// The caller's session.
    pub capability: Capability,
    /// Whose chain.
    pub agent: String,
    /// The tip the caller last saw; `None` for a chain not yet started.
    pub expected_tip: Option<String>,
    /// The lines, one JSON object each, without newlines.
    pub lines: Vec<String>,
}

impl Message for AppendUndo {
    const KIND: &'static str = "hubd.append-undo";
}

/// An append that won: the new tip and the chain's length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoAppended {
    /// The chain's new tip.
    pub tip: String,
    /// Its length in lines after the append.
    pub len: u64,
}

impl Message for UndoAppended {
    const KIND: &'static str = "hubd.undo-appended";
}

/// Reads a range of an agent's undo chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadUndo {
    /// The caller's session.
    pub capability: Capability,
    /// Whose chain.
    pub agent: String,
    /// The first line wanted.
    pub from: u64,
    /// One past the last line wanted (cut to the chain's length).
    pub to: u64,
}

impl Message for ReadUndo {
    const KIND: &'static str = "hubd.read-undo";
}

/// Lines of an undo chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoRange {
    /// The lines, oldest first.
    pub lines: Vec<String>,
    /// The number of the first one.
    pub from: u64,
    /// The chain's whole length.
    pub len: u64,
    /// The commit that length belongs to: what the next append expects (`None`: none yet).
    pub tip: Option<String>,
}

impl Message for UndoRange {
    const KIND: &'static str = "hubd.undo-range";
}
