//! Appending to and reading an agent's Log.
//!
//! # Format
//! - `hubd.append-log` `{ capability, agent: str, expected_tip: str|nil, records: [str] }` →
//!   `hubd.log-appended` `{ tip: str, first_seq: u64, len: u64 }`. Each record is one
//!   versioned JSON line of `l3m_core::log::Record`; their `seq`s must continue the chain
//!   (`first_seq` = its length before). A chain not at `expected_tip` is a `conflict` whose
//!   message names the actual tip.
//! - `hubd.read-log` `{ capability, agent: str, from: u64, to: u64 }` → `hubd.log-range`
//!   `{ records: [str], from: u64, len: u64, tip: str|nil }`: records `from..min(to, len)`, cut
//!   to one page (`l3m_core::record_format::PAGE_BYTES` beyond the first record, at most
//!   `PAGE_LINES` records), the chain's
//!   length, and the tip that length belongs to (what the next append expects). A record over
//!   `l3m_core::record_format::MAX_STORED_LINE` bytes is refused at append as `invalid`.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Appends records to an agent's Log if it is at the expected tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendLog {
    /// The caller's session.
    pub capability: Capability,
    /// Whose Log.
    pub agent: String,
    /// The tip the caller last saw; `None` for a Log not yet started.
    pub expected_tip: Option<String>,
    /// The records, one JSON line each, without newlines.
    pub records: Vec<String>,
}

impl Message for AppendLog {
    const KIND: &'static str = "hubd.append-log";
}

/// An append that won: the new tip and which sequence numbers it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogAppended {
    /// The Log's new tip.
    pub tip: String,
    /// The seq of the first record appended.
    pub first_seq: u64,
    /// The Log's length after the append (one past the last seq).
    pub len: u64,
}

impl Message for LogAppended {
    const KIND: &'static str = "hubd.log-appended";
}

/// Reads a range of an agent's Log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadLog {
    /// The caller's session.
    pub capability: Capability,
    /// Whose Log.
    pub agent: String,
    /// The first seq wanted.
    pub from: u64,
    /// One past the last seq wanted (cut to the Log's length).
    pub to: u64,
}

impl Message for ReadLog {
    const KIND: &'static str = "hubd.read-log";
}

/// Records of a Log, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRange {
    /// The records' JSON lines, oldest first.
    pub records: Vec<String>,
    /// The seq of the first one.
    pub from: u64,
    /// The Log's whole length.
    pub len: u64,
    /// The commit that length belongs to: what the next append expects (`None`: no Log yet).
    pub tip: Option<String>,
}

impl Message for LogRange {
    const KIND: &'static str = "hubd.log-range";
}
