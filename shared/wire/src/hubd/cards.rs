//! Raising, answering and reading an agent's review cards (`refs/l3m/a/<agent>/_/cards`).
//!
//! A card is a wild call at a stalemate, put before a human (core's
//! [`l3m_core::review::card`]). hubd checks each line with
//! [`admit_card_line`](l3m_core::review::card::admit_card_line): the agent's own sequencer
//! raises, a human answers (once; hubd writes the answering human itself), nobody else appends.
//!
//! # Format
//! - `hubd.append-card` `{ capability, agent: str, line: str }` → `hubd.card-appended`
//!   `{ len: u64 }`; a line the gate refuses is `refused` (an agent answering, a second answer)
//!   or `invalid` (not a card line).
//! - `hubd.read-cards` `{ capability, agent: str, from: u64, to: u64 }` → `hubd.card-range`
//!   `{ lines: [str], from: u64, len: u64, tip: str|nil }`, one page like `hubd.read-log`. Read
//!   by the agent's own sequencer, its host, or a human.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Appends one card line to an agent's cards chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendCard {
    /// The caller's session.
    pub capability: Capability,
    /// Whose cards.
    pub agent: String,
    /// The line: one JSON card line.
    pub line: String,
}

impl Message for AppendCard {
    const KIND: &'static str = "hubd.append-card";
}

/// A card line appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardAppended {
    /// The chain's length after the append.
    pub len: u64,
}

impl Message for CardAppended {
    const KIND: &'static str = "hubd.card-appended";
}

/// Reads a range of an agent's cards chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCards {
    /// The caller's session.
    pub capability: Capability,
    /// Whose cards.
    pub agent: String,
    /// The first line wanted.
    pub from: u64,
    /// One past the last line wanted (cut to the chain's length).
    pub to: u64,
}

impl Message for ReadCards {
    const KIND: &'static str = "hubd.read-cards";
}

/// Lines of a cards chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardRange {
    /// The lines, oldest first.
    pub lines: Vec<String>,
    /// The number of the first one.
    pub from: u64,
    /// The chain's whole length.
    pub len: u64,
    /// The commit that length belongs to.
    pub tip: Option<String>,
}

impl Message for CardRange {
    const KIND: &'static str = "hubd.card-range";
}
