//! Capability tokens: values only the ring can make, each carrying its scope.
//!
//! A tool body reaches the world only through a provider, and every provider method takes a
//! token. A token's fields are private and its constructor is `pub(crate)`, so outside this
//! crate a token can be neither written as a struct literal, nor built by calling its
//! constructor, nor deserialised, defaulted or cloned (the compile-fail tests in
//! `tests/compile_fail/` pin each of these). The one way to obtain tokens is [`mint`], which the
//! sequencer calls at boot from the agent's grant; it mints one token per conferred axis and none
//! for the rest. A token can be *narrowed* (each `narrow` checks the new scope lies within the
//! old), never widened: no method adds to a scope.
//!
//! `mint` takes a [`MintInput`] because the grant type (`l3m_core::grant::Grant`) is still being
//! written; the input will be filled from the grant once it lands. It also takes cap-std's
//! [`AmbientAuthority`]: opening the ACR is the ambient act that roots everything else, and the
//! marker is what the sealing linter forbids outside the harness.

mod files;
mod git;
mod mail;
mod net;
mod spawn;
mod wild;

use std::collections::BTreeSet;
use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;

use cap_std::AmbientAuthority;
use cap_std::fs::Dir;
use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, Reversibility};
use l3m_core::names::AgentName;

use crate::path::PathError;

pub use files::FilesToken;
pub use git::GitToken;
pub use mail::MailToken;
pub use net::NetToken;
pub use spawn::{SpawnLevel, SpawnToken};
pub use wild::WildToken;

/// What a grant confers, axis by axis, in the shape the ring mints from. `None` on an axis means
/// the axis is not conferred, and no token is minted for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MintInput {
    /// The ACR on disk (`HUB/forest/<agent>/self`); opened once, here, if files are conferred.
    pub acr: PathBuf,
    /// Write roots, relative to the ACR (`workspace`, `agent`, `<repo>`). Reads range over the
    /// whole ACR except `.l3m/` whenever the files axis is conferred.
    pub files: Option<Vec<String>>,
    /// Hosts the agent may reach (`example.org`, `example.org:8443`).
    pub net: Option<Vec<String>>,
    /// Ref prefixes and remotes for the git axes.
    pub git: Option<GitInput>,
    /// The mail axis: whose inboxes the agent may write.
    pub mail: Option<MailInput>,
    /// The spawn axis; `None` is `off`.
    pub spawn: Option<SpawnLevel>,
    /// Wild effect classes the agent may propose (each reviewed before it runs).
    pub wild: Option<Vec<EffectClass>>,
}

/// The git axes of a [`MintInput`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitInput {
    /// Ref prefixes readable (`refs/heads/l3m/alice/`); a prefix not ending in `/` is one ref.
    pub read_prefixes: Vec<String>,
    /// Ref prefixes writable.
    pub write_prefixes: Vec<String>,
    /// Remotes the agent may push to, by name.
    pub push_remotes: Vec<String>,
}

/// The mail axis of a [`MintInput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailInput {
    /// The sender; it may always write to its own subtree and to each ancestor's inbox.
    pub agent: AgentName,
    /// Further agents whose inboxes the grant opens (e.g. a sibling).
    pub also: Vec<AgentName>,
}

/// The tokens minted for one session: one per conferred axis, `None` for the rest. The fields
/// are public because a bundle confers nothing by itself; each token inside is unforgeable.
#[derive(Debug)]
pub struct Tokens {
    /// File read over the ACR (except `.l3m/`), file write under the write roots.
    pub files: Option<FilesToken>,
    /// HTTP to listed hosts.
    pub net: Option<NetToken>,
    /// Git reads, writes and pushes under listed prefixes and remotes.
    pub git: Option<GitToken>,
    /// Letters to covered inboxes.
    pub mail: Option<MailToken>,
    /// Spawning children through the spawn gate.
    pub spawn: Option<SpawnToken>,
    /// Proposing wild classes.
    pub wild: Option<WildToken>,
}

/// Why tokens could not be minted or narrowed.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A write root is not an ACR-relative path.
    #[error("write root `{root}` refused: {source}")]
    Root {
        /// The root as given.
        root: String,
        /// What is wrong with it.
        source: PathError,
    },
    /// A write root of `.` would cover the harness's `.l3m/`.
    #[error(
        "write root `{root}` is the whole ACR, which holds `.l3m/`; name a subdirectory such as `workspace`"
    )]
    RootIsAcr {
        /// The root as given.
        root: String,
    },
    /// A write root lies in the harness's `.l3m/`, which agents can never write.
    #[error(
        "write root `{root}` lies in `.l3m/`, the harness's own directory; agents can never write there"
    )]
    RootIsHarness {
        /// The root as given.
        root: String,
    },
    /// The ACR could not be opened.
    #[error("cannot open the ACR `{}`: {source}", path.display())]
    OpenAcr {
        /// The ACR path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A host is not a plain lowercase host name with an optional port.
    #[error("host `{host}` refused: {reason}")]
    Host {
        /// The host as given.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A ref prefix is not under `refs/` or is not a valid ref name.
    #[error("ref prefix `{prefix}` refused: {reason}")]
    RefPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A remote name is not a plain name.
    #[error("remote `{remote}` refused: names are [A-Za-z0-9._-]+")]
    Remote {
        /// The remote as given.
        remote: String,
    },
    /// A class named on the wild axis is not wild; tame classes need no wild token.
    #[error("class `{class:?}` is {ceiling}, not wild; it belongs on its own axis")]
    NotWild {
        /// The class.
        class: EffectClass,
        /// Its declared ceiling.
        ceiling: Reversibility,
    },
    /// A narrowing asked for more than the token holds.
    #[error("narrowing the {axis} token to `{asked}` would widen it; it holds {held:?}")]
    Widening {
        /// The axis of the token.
        axis: Axis,
        /// The scope element asked for that the token does not cover.
        asked: String,
        /// What the token holds.
        held: Vec<String>,
    },
}

/// Mints the session's tokens: validates every axis first (nothing is opened if any axis is
/// malformed), then opens the ACR once if files are conferred.
pub fn mint(input: &MintInput, ambient: AmbientAuthority) -> Result<Tokens, TokenError> {
    let write_roots = input
        .files
        .as_ref()
        .map(|roots| files::parse_roots(roots))
        .transpose()?;
    let net = input
        .net
        .as_ref()
        .map(|h| net::parse_hosts(h))
        .transpose()?;
    let git = input.git.as_ref().map(git::GitToken::parse).transpose()?;
    let mail = input.mail.as_ref().map(mail::MailToken::from_input);
    let spawn = input.spawn.map(SpawnToken::new);
    let wild = input
        .wild
        .as_ref()
        .map(|c| wild::parse_classes(c))
        .transpose()?;

    let files = match write_roots {
        None => None,
        Some(roots) => {
            let dir = Dir::open_ambient_dir(&input.acr, ambient).map_err(|source| {
                TokenError::OpenAcr {
                    path: input.acr.clone(),
                    source,
                }
            })?;
            Some(FilesToken::new(Arc::new(dir), input.acr.clone(), roots))
        }
    };
    Ok(Tokens {
        files,
        net: net.map(NetToken::new),
        git,
        mail,
        spawn,
        wild: wild.map(WildToken::new),
    })
}

/// The one narrowing rule shared by every token: each element asked for must be covered by an
/// element held. Returns the asked set, or the first element that would widen the token.
fn narrow_set<T: Ord + Display>(
    axis: Axis,
    held: &BTreeSet<T>,
    asked: BTreeSet<T>,
    covers: impl Fn(&T, &T) -> bool,
) -> Result<BTreeSet<T>, TokenError> {
    match asked.iter().find(|a| !held.iter().any(|h| covers(h, a))) {
        None => Ok(asked),
        Some(a) => Err(TokenError::Widening {
            axis,
            asked: a.to_string(),
            held: held.iter().map(ToString::to_string).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    #[test]
    fn mints_only_conferred_axes() {
        let dir = tempfile::tempdir().unwrap();
        let input = MintInput {
            acr: dir.path().into(),
            files: Some(vec!["workspace".into()]),
            spawn: Some(SpawnLevel::Drive),
            ..MintInput::default()
        };
        let t = mint(&input, ambient_authority()).unwrap();
        assert!(t.files.is_some() && t.spawn.is_some());
        assert!(t.net.is_none() && t.git.is_none() && t.mail.is_none() && t.wild.is_none());
    }

    #[test]
    fn refuses_bad_axes_before_opening_anything() {
        let input = MintInput {
            acr: "/nonexistent/acr".into(),
            files: Some(vec!["workspace".into()]),
            net: Some(vec!["http://x".into()]),
            ..MintInput::default()
        };
        assert!(matches!(
            mint(&input, ambient_authority()),
            Err(TokenError::Host { .. })
        ));
        let missing = MintInput { net: None, ..input };
        assert!(matches!(
            mint(&missing, ambient_authority()),
            Err(TokenError::OpenAcr { .. })
        ));
    }

    #[test]
    fn refuses_roots_that_climb_cover_or_enter_the_harness() {
        for (root, ok) in [
            ("../x", false),
            ("/abs", false),
            (".", false),
            ("", false),
            (".l3m", false),
            (".l3m/x", false),
            ("workspace", true),
            ("./agent/", true),
        ] {
            let got = files::parse_roots(&[root.to_string()]);
            assert_eq!(got.is_ok(), ok, "root {root:?}: {got:?}");
        }
    }
}
