//! The announcement hubd publishes after every ref write, on `Subjects::ref_changed`.
//!
//! Git first, announcement second: a subscriber that misses one re-reads the ref.
//!
//! # Format
//! `hubd.ref-moved` `{ refname: str, tip: str|nil, len: u64|nil }`: the ref's new tip (`None`
//! once deleted) and, for a chain, its new length.

use serde::{Deserialize, Serialize};

use crate::envelope::Message;

/// A ref moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefMoved {
    /// The full ref name.
    pub refname: String,
    /// Its new tip; `None` if it was deleted.
    pub tip: Option<String>,
    /// A chain's new length; `None` for a plain ref or a deleted one.
    pub len: Option<u64>,
}

impl Message for RefMoved {
    const KIND: &'static str = "hubd.ref-moved";
}
