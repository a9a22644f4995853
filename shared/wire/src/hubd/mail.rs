//! Mail inside one hub: sending a letter, reading an inbox, marking a letter read.
//!
//! # Format
//! - `hubd.send-letter` `{ capability, to: str, subject: str|nil, body: str }` →
//!   `hubd.letter-sent` `{ letter: str, inbox: str, seq: u64 }`. `to` is an address
//!   (`l3m_core::mail::Address`); the sender is the capability's entity, never the request's.
//! - `hubd.read-inbox` `{ capability, agent: str, from: u64 }` → `hubd.inbox-lines`
//!   `{ entries: [str], from: u64, len: u64 }`: the inbox's stored lines (letters and read
//!   marks, `l3m_core::mail::InboxEntry`) from `from` on, as many as fit one page
//!   (`l3m_core::record_format::PAGE_BYTES` beyond the first line, at most `PAGE_LINES` lines); `len` is the whole inbox's, so
//!   a reader asks again from where the page ended. A letter whose stored line would exceed
//!   `l3m_core::record_format::MAX_STORED_LINE` is refused as `invalid`, naming the limit.
//! - `hubd.mark-read` `{ capability, letter: str }` → `hubd.marked-read` `{ seq: u64 }`: a
//!   read mark on the caller's own inbox only.
//! - `hubd.stage-airmail` `{ capability, to: str, subject: str|nil, body: str }` →
//!   `hubd.airmail-staged` `{ letter: str, outbox: str, seq: u64 }`. `to` must name an office
//!   (another hub); the letter is stamped like `send-letter` and appended to the sender's own
//!   outbox, where the postman picks it up. Only an agent's sequencer stages airmail, and only
//!   if its grant covers the office on both its `mail` axis (`office:<name>`) and its
//!   `airmail` axis; otherwise `refused`, naming the axis.
//! - `hubd.read-outbox` `{ capability, agent: str, from: u64 }` → `hubd.inbox-lines`, paged
//!   like `read-inbox`: the letters an agent staged for other hubs. The postman reads any
//!   outbox; an agent's own sequencer and humans read theirs.
//! - `hubd.read-cursor` `{ capability, office: str }` → `hubd.cursor` `{ positions: {agent:
//!   u64}, tip: str|nil }` and `hubd.move-cursor` `{ capability, office, positions, expected:
//!   str|nil }` → `hubd.cursor-moved` `{ tip: str }`: how far the postman has carried the
//!   outboxes to `office` (`refs/l3m/mirror/<office>/sent`), moved by compare-and-swap and
//!   never backwards. The postman moves it; the postman and humans read it.
//! - `hubd.deliver-airmail` `{ capability, office: str, letters: [str] }` →
//!   `hubd.airmail-delivered` `{ delivered: [str], already: [str], bounced: [{ letter, reason }] }`:
//!   the postman hands over letters office `office` carried (each a stored letter line as the
//!   origin hub staged it). Each is appended to the mirror chain
//!   `refs/l3m/mirror/<office>/inbound` and then, by set union on its id, to its recipient's
//!   inbox, before hubd answers; a letter already there is `already`, never delivered twice.
//!   A letter is bounced, with the reason, when it claims an origin office, is not airmail, or
//!   stars a party this hub does not know. A line may also be a receipt
//!   (`l3m_core::mail::Receipt`) for a letter this hub sent to `office`: it is mirrored and kept
//!   in the sender's inbox by set union (`receipts` counts the new ones); a receipt for a letter
//!   the named sender never staged for that office is `refused`, with the reason, and nothing is
//!   written for it. Only the postman's duty, and only for an office the settings pin; a line
//!   that is neither a letter nor a receipt refuses the whole request, writing nothing.
//! - `hubd.return-bounces` `{ capability, office: str, bounces: [{ agent, letter, reason }] }` →
//!   `hubd.bounces-returned` `{ written: [str], already: [str] }`: the postman returns letters
//!   `office` bounced to their senders. Each must be on `agent`'s outbox, addressed to
//!   `office` (otherwise the whole request is `invalid`, writing nothing); its bounce letter
//!   (`l3m_core::mail::bounce`, id `bounce:<letter>`) goes into the sender's inbox by set union,
//!   so a retry writes nothing twice. The postman's duty only.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Sends a letter within the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendLetter {
    /// The sender's session.
    pub capability: Capability,
    /// The recipient's address.
    pub to: String,
    /// An optional subject.
    pub subject: Option<String>,
    /// The text.
    pub body: String,
    /// The letter this one answers: one in the sender's own inbox (hubd checks it), so the
    /// recipient's hook knows a reply when it sees one and never answers it automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
}

impl Message for SendLetter {
    const KIND: &'static str = "hubd.send-letter";
}

/// A letter delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LetterSent {
    /// The letter's id.
    pub letter: String,
    /// The inbox ref it was appended to.
    pub inbox: String,
    /// Its line number in that inbox.
    pub seq: u64,
}

impl Message for LetterSent {
    const KIND: &'static str = "hubd.letter-sent";
}

/// Reads an agent's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadInbox {
    /// The caller's session: the agent's own sequencer, or a human.
    pub capability: Capability,
    /// Whose inbox.
    pub agent: String,
    /// The first line wanted.
    pub from: u64,
}

impl Message for ReadInbox {
    const KIND: &'static str = "hubd.read-inbox";
}

/// Reads an agent's outbox (its staged airmail), a page at a time, like an inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOutbox {
    /// The caller's session: the postman, the agent's own sequencer, or a human.
    pub capability: Capability,
    /// Whose outbox.
    pub agent: String,
    /// The first line wanted.
    pub from: u64,
}

impl Message for ReadOutbox {
    const KIND: &'static str = "hubd.read-outbox";
}

/// Lines of an inbox, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxLines {
    /// The lines, oldest first.
    pub entries: Vec<String>,
    /// The number of the first one.
    pub from: u64,
    /// The inbox's whole length.
    pub len: u64,
}

impl Message for InboxLines {
    const KIND: &'static str = "hubd.inbox-lines";
}

/// Marks a letter of the caller's own inbox read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkRead {
    /// The reader's session (an agent's sequencer).
    pub capability: Capability,
    /// The letter's id.
    pub letter: String,
}

impl Message for MarkRead {
    const KIND: &'static str = "hubd.mark-read";
}

/// A read mark appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkedRead {
    /// The mark's line number in the inbox.
    pub seq: u64,
}

impl Message for MarkedRead {
    const KIND: &'static str = "hubd.marked-read";
}

/// Stages a letter for another hub on the sender's own outbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageAirmail {
    /// The sender's session (an agent's sequencer).
    pub capability: Capability,
    /// The recipient's address; it names an office.
    pub to: String,
    /// An optional subject.
    pub subject: Option<String>,
    /// The text.
    pub body: String,
}

impl Message for StageAirmail {
    const KIND: &'static str = "hubd.stage-airmail";
}

/// A letter staged for the postman.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AirmailStaged {
    /// The letter's id.
    pub letter: String,
    /// The outbox ref it was appended to.
    pub outbox: String,
    /// Its line number in that outbox.
    pub seq: u64,
}

impl Message for AirmailStaged {
    const KIND: &'static str = "hubd.airmail-staged";
}

/// Hands over letters an office carried to this hub (the postman's duty only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliverAirmail {
    /// The postman's session.
    pub capability: Capability,
    /// The office that carried them: the peer the postman authenticated.
    pub office: String,
    /// The letters, each a stored letter line as the origin hub staged it.
    pub letters: Vec<String>,
}

impl Message for DeliverAirmail {
    const KIND: &'static str = "hubd.deliver-airmail";
}

/// A letter this hub will not deliver, and why (the postman bounces it to its sender).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounced {
    /// The letter's id.
    pub letter: String,
    /// Why, for the sender.
    pub reason: String,
}

/// What became of delivered airmail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AirmailDelivered {
    /// Letters now in their recipients' inboxes.
    pub delivered: Vec<String>,
    /// Letters delivered before (a retry): nothing was written for them.
    pub already: Vec<String>,
    /// Letters refused, each with its reason.
    pub bounced: Vec<Bounced>,
    /// Receipts newly kept in their senders' inboxes.
    #[serde(default)]
    pub receipts: u64,
    /// Receipts refused (no such letter was sent to the office), each with its reason.
    #[serde(default)]
    pub refused: Vec<Bounced>,
}

impl Message for AirmailDelivered {
    const KIND: &'static str = "hubd.airmail-delivered";
}

/// Reads how far the outboxes were carried to an office (the postman's duty only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCursor {
    /// The postman's session.
    pub capability: Capability,
    /// The office.
    pub office: String,
}

impl Message for ReadCursor {
    const KIND: &'static str = "hubd.read-cursor";
}

/// How far the outboxes were carried to an office.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Per agent, the first outbox line the office does not hold yet.
    pub positions: std::collections::BTreeMap<String, u64>,
    /// The cursor ref's commit (`None`: nothing carried yet), for the next move.
    pub tip: Option<String>,
}

impl Message for Cursor {
    const KIND: &'static str = "hubd.cursor";
}

/// Moves an office's cursor forward, by compare-and-swap (the postman's duty only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveCursor {
    /// The postman's session.
    pub capability: Capability,
    /// The office.
    pub office: String,
    /// The new positions; none may be behind the stored one.
    pub positions: std::collections::BTreeMap<String, u64>,
    /// The tip read with the old positions.
    pub expected: Option<String>,
}

impl Message for MoveCursor {
    const KIND: &'static str = "hubd.move-cursor";
}

/// A cursor moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorMoved {
    /// Its new commit.
    pub tip: String,
}

impl Message for CursorMoved {
    const KIND: &'static str = "hubd.cursor-moved";
}

/// A letter an office bounced, as the postman returns it to its sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Returned {
    /// The agent whose outbox staged it.
    pub agent: String,
    /// The letter's id.
    pub letter: String,
    /// The office's reason.
    pub reason: String,
}

/// Returns bounced letters to their senders (the postman's duty only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReturnBounces {
    /// The postman's session.
    pub capability: Capability,
    /// The office that bounced them.
    pub office: String,
    /// The bounced letters.
    pub bounces: Vec<Returned>,
}

impl Message for ReturnBounces {
    const KIND: &'static str = "hubd.return-bounces";
}

/// What became of returned bounces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BouncesReturned {
    /// The ids of the letters whose bounce is now in the sender's inbox.
    pub written: Vec<String>,
    /// The ids of the letters whose bounce was there already (a retry).
    pub already: Vec<String>,
}

impl Message for BouncesReturned {
    const KIND: &'static str = "hubd.bounces-returned";
}
