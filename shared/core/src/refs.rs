//! The hub's ref layout and the on-disk layout around it (DESIGN §3), derived in one place.
//!
//! Every ref name in l3m comes from a function here, so no other code spells a ref by hand.
//! Agent segments never start with `_`, so the `_` segment separates an agent's own refs from its
//! children's: `refs/l3m/a/alice/_/log` is alice's Log, `refs/l3m/a/alice/main/_/log` is her
//! child's, and no ref is both a file and a folder. A parent reads all its descendants' refs
//! through the one prefix [`subtree_prefix`].

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::names::{AgentName, OfficeName, PersonaName};

/// Who exists and who is whose parent (append-only).
pub const LEDGER: &str = "refs/l3m/ledger";
/// The hub's settings (humans only).
pub const SETTINGS: &str = "refs/l3m/settings";
/// The hub's credentials: issue and revoke rows, written only by hubd's credential gate.
pub const CREDENTIALS: &str = "refs/l3m/credentials";
/// Prefix of all upstream personas.
pub const PERSONAS_PREFIX: &str = "refs/l3m/personas/";
/// Prefix of every agent's refs.
pub const AGENTS_PREFIX: &str = "refs/l3m/a/";
/// Prefix of human blessings of build files.
pub const BLESSINGS_PREFIX: &str = "refs/l3m/blessings/";
/// Prefix of fetched office outboxes.
pub const MIRROR_PREFIX: &str = "refs/l3m/mirror/";
/// Prefix of agents' work branches.
pub const WORK_PREFIX: &str = "refs/heads/l3m/";

/// One of the refs an agent owns under `refs/l3m/a/<agent>/_/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentRef {
    /// Grant and budget; written by the issuer only.
    Grants,
    /// The Log; written by that agent's sequencer only, by compare-and-swap.
    Log,
    /// Letters and read marks; append, set-union merge.
    Inbox,
    /// Staged airmail.
    Outbox,
    /// The undo chain for tame file edits.
    Undo,
    /// Repositories the agent has claimed.
    Claims,
    /// The agent's own copy of its persona.
    Persona,
    /// Review cards waiting for a human.
    Cards,
    /// Vigils armed on the agent, and their firings; written by hubd only.
    Vigils,
}

impl AgentRef {
    /// Every agent ref, in a fixed order.
    pub const ALL: [AgentRef; 9] = [
        AgentRef::Grants,
        AgentRef::Log,
        AgentRef::Inbox,
        AgentRef::Outbox,
        AgentRef::Undo,
        AgentRef::Claims,
        AgentRef::Persona,
        AgentRef::Cards,
        AgentRef::Vigils,
    ];

    /// The last component of the ref name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentRef::Grants => "grants",
            AgentRef::Log => "log",
            AgentRef::Inbox => "inbox",
            AgentRef::Outbox => "outbox",
            AgentRef::Undo => "undo",
            AgentRef::Claims => "claims",
            AgentRef::Persona => "persona",
            AgentRef::Cards => "cards",
            AgentRef::Vigils => "vigils",
        }
    }

    /// The refs that make up an agent's memory, removed when it is collected (DESIGN §9).
    pub fn is_memory(self) -> bool {
        matches!(self, AgentRef::Inbox | AgentRef::Persona | AgentRef::Claims)
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The full name of one of an agent's refs, e.g. `refs/l3m/a/alice/main/_/log`.
pub fn agent_ref(agent: &AgentName, which: AgentRef) -> String {
    format!("{AGENTS_PREFIX}{agent}/_/{which}")
}

/// The prefix under which an agent's own refs and all its descendants' refs live.
///
/// It ends with `/`, so `refs/l3m/a/alice/` never matches `refs/l3m/a/alicex/...`.
pub fn subtree_prefix(agent: &AgentName) -> String {
    format!("{AGENTS_PREFIX}{agent}/")
}

/// The prefix of an agent's own refs (excluding its descendants').
pub fn own_prefix(agent: &AgentName) -> String {
    format!("{AGENTS_PREFIX}{agent}/_/")
}

/// The upstream ref of a persona.
pub fn persona(name: &PersonaName) -> String {
    format!("{PERSONAS_PREFIX}{name}")
}

/// A human's pin of a build target's files, by content hash. The `_` separates the agent from
/// its targets as in agent refs, so a target never collides with a child agent's folder.
pub fn blessing(agent: &AgentName, target: &str) -> String {
    format!("{BLESSINGS_PREFIX}{agent}/_/{target}")
}

/// Where an office's outbox is mirrored by the postman.
pub fn mirror_prefix(office: &OfficeName) -> String {
    format!("{MIRROR_PREFIX}{office}/")
}

/// The agent's work branch.
pub fn work_branch(agent: &AgentName) -> String {
    agent_branch(agent, "work")
}

/// The prefix of every branch of an agent and of its descendants.
///
/// An agent's own branches are `<prefix>_/<branch>` (see [`agent_branch`]); its children's lie
/// under the same prefix, which is why a grant of this prefix reaches the whole subtree.
pub fn branch_prefix(agent: &AgentName) -> String {
    format!("{WORK_PREFIX}{agent}/")
}

/// One of an agent's own branches, `refs/heads/l3m/<agent>/_/<branch>`.
pub fn agent_branch(agent: &AgentName, branch: &str) -> String {
    format!("{WORK_PREFIX}{agent}/_/{branch}")
}

/// Reads an agent ref name back into its owner and kind; `None` for any other ref.
pub fn parse_agent_ref(full: &str) -> Option<(AgentName, AgentRef)> {
    let rest = full.strip_prefix(AGENTS_PREFIX)?;
    let (agent, which) = rest.rsplit_once("/_/")?;
    Some((AgentName::parse(agent).ok()?, AgentRef::parse(which)?))
}

/// The chain of letters office `office` carried to this hub, written by the postman before
/// each is relayed into its recipient's inbox: `refs/l3m/mirror/<office>/inbound`.
pub fn mirror_inbound(office: &crate::names::OfficeName) -> String {
    format!("{MIRROR_PREFIX}{office}/inbound")
}

/// How far the postman has carried this hub's outboxes to office `office`: a plain ref whose
/// `positions.json` maps each agent to the first outbox line not yet held by the office.
pub fn mirror_sent(office: &crate::names::OfficeName) -> String {
    format!("{MIRROR_PREFIX}{office}/sent")
}

/// Paths inside a hub folder (`HUB/`), relative to it. Pure: nothing here touches the disk.
pub mod paths {
    use super::*;

    /// The bare repository holding all durable state.
    pub const HUB_GIT: &str = "hub.git";
    /// The checkout of the hub's settings.
    pub const SETTINGS_DIR: &str = "settings";
    /// Content-addressed blobs and artifacts.
    pub const CACHE_DIR: &str = "cache";
    /// Root of the ACRs.
    pub const FOREST_DIR: &str = "forest";
    /// Where `hubd init` keeps the private keys of the credentials it issued (mode 0700).
    pub const CREDENTIALS_DIR: &str = ".hubd/credentials";

    /// Where the postman keeps the hub's identity between hubs (its certificate, and its key
    /// only the postman reads; mode 0700).
    pub const IDENTITY_DIR: &str = ".postman/identity";
    /// The hub's certificate (DER) inside [`IDENTITY_DIR`]; its SHA-256 is what peers pin.
    pub const IDENTITY_CERT: &str = "cert.der";
    /// The hub's private key (PKCS#8 DER, mode 0600) inside [`IDENTITY_DIR`].
    pub const IDENTITY_KEY: &str = "key.der";

    /// The private key of `human`'s credential as init issued it.
    pub fn human_key(human: &crate::names::HumanName) -> PathBuf {
        PathBuf::from(CREDENTIALS_DIR).join(format!("human-{human}.key"))
    }

    /// The name the hub's postman service is registered under at init.
    pub const POSTMAN_SERVICE: &str = "postman";

    /// The private key of the postman's credential init issued.
    pub fn postman_key() -> PathBuf {
        PathBuf::from(CREDENTIALS_DIR).join("postman.key")
    }

    /// The private key of the whole-hub host credential init issued.
    pub fn host_key() -> PathBuf {
        PathBuf::from(CREDENTIALS_DIR).join("host.key")
    }

    /// The agent context root: `forest/<a>/<b>/self/`, nested by name.
    pub fn acr(agent: &AgentName) -> PathBuf {
        PathBuf::from(FOREST_DIR).join(acr_in_forest(agent))
    }

    /// The agent context root relative to the forest, `<a>/<b>/self`: where the builder finds an
    /// agent's source under its source root (a host's forest).
    pub fn acr_in_forest(agent: &AgentName) -> PathBuf {
        let mut p: PathBuf = agent.segments().collect();
        p.push("self");
        p
    }

    /// The repository holding the ACR's checkouts, relative to the forest: `<a>/<b>/self.git`,
    /// beside the ACR and outside it, so the agent can write nothing of it (its config, its
    /// hooks, its refs). No agent's name has a `.` in a segment, so no ACR lies here.
    pub fn repository_in_forest(agent: &AgentName) -> PathBuf {
        let mut p: PathBuf = agent.segments().collect();
        p.push("self.git");
        p
    }

    /// The worktree on the agent's work branch.
    pub fn workspace(agent: &AgentName) -> PathBuf {
        acr(agent).join("workspace")
    }

    /// The worktree on the agent's persona branch.
    pub fn persona_worktree(agent: &AgentName) -> PathBuf {
        acr(agent).join("agent")
    }

    /// The harness's own directory inside the ACR; agents can read or write nothing here.
    pub fn harness_dir(agent: &AgentName) -> PathBuf {
        acr(agent).join(".l3m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn layout_matches_design() {
        let a = name("alice/main");
        assert_eq!(agent_ref(&a, AgentRef::Log), "refs/l3m/a/alice/main/_/log");
        assert_eq!(
            agent_ref(&a, AgentRef::Grants),
            "refs/l3m/a/alice/main/_/grants"
        );
        assert_eq!(work_branch(&a), "refs/heads/l3m/alice/main/_/work");
        assert_eq!(subtree_prefix(&a), "refs/l3m/a/alice/main/");
        assert_eq!(paths::acr(&a), PathBuf::from("forest/alice/main/self"));
        assert_eq!(
            persona(&PersonaName::parse("coder").unwrap()),
            "refs/l3m/personas/coder"
        );
    }

    fn agent_name() -> impl Strategy<Value = AgentName> {
        proptest::collection::vec("[a-z][a-z0-9-]{0,6}", 1..5)
            .prop_map(|segs| AgentName::parse(&segs.join("/")).unwrap())
    }

    fn agent_ref_kind() -> impl Strategy<Value = AgentRef> {
        proptest::sample::select(AgentRef::ALL.to_vec())
    }

    proptest! {
        /// Every agent ref parses back to its owner and kind, and lies under the subtree prefix of
        /// exactly the owner and its ancestors.
        #[test]
        fn agent_refs_round_trip_and_nest(a in agent_name(), b in agent_name(), which in agent_ref_kind()) {
            let full = agent_ref(&a, which);
            prop_assert_eq!(parse_agent_ref(&full), Some((a.clone(), which)));
            prop_assert!(full.starts_with(&own_prefix(&a)));
            prop_assert_eq!(full.starts_with(&subtree_prefix(&b)), a.is_within(&b));
            // A ref is never both a file and a folder: no agent ref is a prefix of another.
            let other = agent_ref(&b, which);
            if full != other {
                let folder = format!("{full}/");
                prop_assert!(!other.starts_with(&folder));
            }
        }
    }
}
