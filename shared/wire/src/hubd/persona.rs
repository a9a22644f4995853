//! Publishing an upstream persona: a human writes `refs/l3m/personas/<persona>`.
//!
//! DESIGN §9: only a human publishes, and publishing carries only the three persona files
//! (`instructions.md`, `personality.md`, `memories.md`), never an agent's hooks or programs.
//!
//! # Format
//! - `hubd.publish-persona` `{ capability, persona: str, source: PersonaSource }` →
//!   `hubd.persona-published` `{ persona: str, refname: str, commit: str, previous: str|nil }`.
//!   `source` is tagged by `from`: `{ from: "files", instructions, personality, memories }`
//!   (a new persona, or one written by hand) or `{ from: "agent", agent: str }` (the three
//!   files at the tip of that agent's persona branch). Each publish is a new commit on the
//!   persona's ref whose parent is the previous upstream version. Any duty but a human's is
//!   `refused`; an unknown agent is `not-found`; an agent without a persona branch, or a branch
//!   lacking one of the three files, is `invalid` naming it.
//! - `hubd.pull-persona` `{ capability, agent: str }` → `hubd.persona-pulled` `{ agent: str,
//!   persona: str, commit: str, upstream: str, updated: [str] }`: brings the upstream version
//!   of the persona the agent wears into its persona branch as a merge commit (first parent
//!   the branch, second the upstream tip). For each of the three files: upstream's version is
//!   taken when the wearer has not changed it since their common ancestor; the wearer's is
//!   kept when upstream has not; both changed differently is `conflict` naming the file and
//!   writes nothing. Every other file on the branch (hooks, programs) is kept. `updated`
//!   lists the files that changed; when upstream is already in the branch's history nothing
//!   is written and `commit` is the branch's tip. Allowed to whoever may write the branch (the
//!   wearer's sequencer or a human).

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// The three files a persona is made of, in publishing order.
pub const PERSONA_FILES: [&str; 3] = ["instructions.md", "personality.md", "memories.md"];

/// Where a published persona's three files come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum PersonaSource {
    /// Given in the request.
    Files {
        /// `instructions.md`.
        instructions: String,
        /// `personality.md`.
        personality: String,
        /// `memories.md`.
        memories: String,
    },
    /// Read from the tip of this agent's persona branch.
    Agent {
        /// The wearer whose improvements are published.
        agent: String,
    },
}

/// Asks to publish a persona upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishPersona {
    /// The caller's session: a human's.
    pub capability: Capability,
    /// The persona's name.
    pub persona: String,
    /// Where its files come from.
    pub source: PersonaSource,
}

impl Message for PublishPersona {
    const KIND: &'static str = "hubd.publish-persona";
}

/// A persona published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonaPublished {
    /// The persona.
    pub persona: String,
    /// Its upstream ref.
    pub refname: String,
    /// The new commit.
    pub commit: String,
    /// The version it replaced, if any.
    pub previous: Option<String>,
}

impl Message for PersonaPublished {
    const KIND: &'static str = "hubd.persona-published";
}

/// Asks to bring upstream persona changes into an agent's persona branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullPersona {
    /// The caller's session: a human's, or the wearer's sequencer.
    pub capability: Capability,
    /// The wearer.
    pub agent: String,
}

impl Message for PullPersona {
    const KIND: &'static str = "hubd.pull-persona";
}

/// A persona pulled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonaPulled {
    /// The wearer.
    pub agent: String,
    /// The persona it wears.
    pub persona: String,
    /// The persona branch's tip now.
    pub commit: String,
    /// The upstream version brought in.
    pub upstream: String,
    /// The persona files that changed, in publishing order.
    pub updated: Vec<String>,
}

impl Message for PersonaPulled {
    const KIND: &'static str = "hubd.persona-pulled";
}
