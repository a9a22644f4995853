//! Capability tokens: values only the ring can make, each carrying its scope.
//!
//! A tool body reaches the world only through a provider, and every provider method takes a
//! token. A token's fields are private and its constructor is `pub(crate)`, so outside this
//! crate a token can be neither written as a struct literal, nor built by calling its
//! constructor, nor deserialised, defaulted or cloned (the compile-fail tests in
//! `tests/compile_fail/` pin each of these). The one way to obtain tokens is minting, which the
//! sequencer does at boot from the agent's grant ([`mint_from_grant`]); it mints one token per
//! conferred axis and none for the rest. A token can be *narrowed* (each `narrow` checks the new
//! scope lies within the old), never widened: no method adds to a scope.
//!
//! Minting goes through a [`MintInput`], the grant in the shape the ring mints from:
//! [`MintInput::from_grant`] fills it from an `l3m_core::grant::Grant` without dropping or
//! widening any element, and [`mint`] validates and mints it. (The input can also be written
//! directly, which is how tests reach a host on an ephemeral port: a grant's host rules carry no
//! port.) Minting takes cap-std's [`AmbientAuthority`]: opening the ACR is the ambient act that
//! roots everything else, and the marker is what the sealing linter forbids outside the harness.

mod files;
mod git;
mod mail;
mod net;
mod spawn;
mod stages;
mod wild;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;

use cap_std::AmbientAuthority;
use cap_std::fs::Dir;
use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, Reversibility};
use l3m_core::grant::{Grant, MailCover, RemoteName, SpawnLevel};
use l3m_core::names::AgentName;

use crate::path::PathError;

pub use files::FilesToken;
pub use git::{GitToken, PushTarget};
pub use mail::MailToken;
pub use net::NetToken;
pub use spawn::SpawnToken;
pub use stages::{BuildInput, BuildToken, RunToken};
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
    /// The spawn axis; `None` and `Some(SpawnLevel::Off)` both mint no token.
    pub spawn: Option<SpawnLevel>,
    /// Wild effect classes the agent may propose (each reviewed before it runs).
    pub wild: Option<Vec<EffectClass>>,
    /// The build axis: builds of folders within the write roots, fetching from the net hosts.
    pub build: Option<BuildInput>,
    /// The run axis: runs of artifacts by digest, as this agent.
    pub run: Option<AgentName>,
}

/// The git axes of a [`MintInput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitInput {
    /// The agent, who is the author and committer of every commit made through the token.
    pub author: AgentName,
    /// Ref prefixes readable (`refs/heads/l3m/alice/`); a prefix not ending in `/` is one ref.
    pub read_prefixes: Vec<String>,
    /// Ref prefixes writable.
    pub write_prefixes: Vec<String>,
    /// Remotes the agent may push to, each with its URL and the refs it may push there.
    pub push: Vec<PushInput>,
}

/// One remote of the git-push axis: the grant names it, the hub's settings give its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushInput {
    /// The remote's name, as the grant writes it (`origin`).
    pub remote: String,
    /// The one URL pushes to this remote go to, exactly as the hub's settings give it.
    pub url: String,
    /// The ref prefixes that may be pushed there.
    pub prefixes: Vec<String>,
}

/// The mail axis of a [`MintInput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailInput {
    /// The sender; it may always write to its own subtree and to each ancestor's inbox.
    pub agent: AgentName,
    /// The grant's mail covers beyond that default (a sibling, a human, an office).
    pub covers: Vec<MailCover>,
}

impl MintInput {
    /// The grant of `agent`, whose ACR is `acr`, in the shape [`mint`] takes. `remotes` gives the
    /// URL of each remote the grant's git-push axis names (from the hub's settings, which only
    /// humans write); a granted remote without a URL is refused rather than dropped, so a grant
    /// never mints less than it says without saying so.
    ///
    /// Each axis maps one to one: files → write roots, git-read/git-write/git-push → the git
    /// token (minted if any of the three is non-empty), net → hosts on their default ports, mail
    /// → the mail token (always minted: every agent may mail its subtree and ancestors), spawn →
    /// the spawn token unless `off`, wild → the wild token if non-empty, build → the build token
    /// (over the write roots and net hosts), run → the run token.
    pub fn from_grant(
        grant: &Grant,
        agent: &AgentName,
        acr: PathBuf,
        remotes: &BTreeMap<RemoteName, String>,
    ) -> Result<Self, TokenError> {
        let strings = |set: &BTreeSet<_>| -> Vec<String> {
            set.iter()
                .map(|e: &l3m_core::grant::RefPrefix| e.to_string())
                .collect()
        };
        let push = grant
            .git_push
            .iter()
            .map(|(remote, prefixes)| {
                let url = remotes
                    .get(remote)
                    .ok_or_else(|| TokenError::RemoteUrlUnknown {
                        remote: remote.to_string(),
                    })?;
                Ok(PushInput {
                    remote: remote.to_string(),
                    url: url.clone(),
                    prefixes: strings(prefixes),
                })
            })
            .collect::<Result<Vec<_>, TokenError>>()?;
        let git_conferred =
            !(grant.git_read.is_empty() && grant.git_write.is_empty() && push.is_empty());
        let nonempty = |v: Vec<String>| (!v.is_empty()).then_some(v);
        Ok(Self {
            acr,
            files: nonempty(grant.files.iter().map(ToString::to_string).collect()),
            net: nonempty(grant.net.iter().map(ToString::to_string).collect()),
            git: git_conferred.then(|| GitInput {
                author: agent.clone(),
                read_prefixes: strings(&grant.git_read),
                write_prefixes: strings(&grant.git_write),
                push,
            }),
            mail: Some(MailInput {
                agent: agent.clone(),
                covers: grant.mail.iter().cloned().collect(),
            }),
            spawn: Some(grant.spawn),
            wild: (!grant.wild.is_empty()).then(|| {
                grant
                    .wild
                    .iter()
                    .map(|c| wild::class_of(c.as_str()))
                    .collect()
            }),
            build: grant.build.then(|| BuildInput {
                agent: agent.clone(),
                sources: grant.files.clone(),
                hosts: grant.net.clone(),
            }),
            run: grant.run.then(|| agent.clone()),
        })
    }
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
    /// Asking the builder for builds.
    pub build: Option<BuildToken>,
    /// Asking the runner for runs.
    pub run: Option<RunToken>,
}

impl Tokens {
    /// The grant axes these tokens confer, for `ToolTable::build`: a tool is offered only if
    /// every axis its footprint requires is in this set. The git token confers each of
    /// git-read, git-write and git-push only if it holds a prefix or remote for it.
    pub fn conferred(&self) -> BTreeSet<Axis> {
        let mut axes = BTreeSet::new();
        let mut confer = |on: bool, axis: Axis| {
            if on {
                axes.insert(axis);
            }
        };
        confer(self.files.is_some(), Axis::Files);
        confer(self.net.is_some(), Axis::Net);
        confer(self.mail.is_some(), Axis::Mail);
        confer(self.spawn.is_some(), Axis::Spawn);
        confer(self.wild.is_some(), Axis::Wild);
        confer(self.build.is_some(), Axis::Build);
        confer(self.run.is_some(), Axis::Run);
        axes.extend(Self::git_axes(self.git.as_ref()));
        axes
    }

    /// Which of git-read, git-write and git-push `git` confers: each only if the token holds a
    /// prefix or remote for it.
    pub(crate) fn git_axes(git: Option<&GitToken>) -> BTreeSet<Axis> {
        let Some(git) = git else {
            return BTreeSet::new();
        };
        [
            (!git.read_prefixes().is_empty(), Axis::GitRead),
            (!git.write_prefixes().is_empty(), Axis::GitWrite),
            (!git.push_targets().is_empty(), Axis::GitPush),
        ]
        .into_iter()
        .filter_map(|(on, axis)| on.then_some(axis))
        .collect()
    }
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
    /// A host is not a grant host rule with an optional port.
    #[error("host `{host}` refused: {reason}")]
    Host {
        /// The host as given.
        host: String,
        /// What is wrong with it: the grant's own host-rule reason, or the port's.
        reason: String,
    },
    /// A ref prefix is not under `refs/` or is not a valid ref name.
    #[error("ref prefix `{prefix}` refused: {reason}")]
    RefPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote name is not a plain name.
    #[error("remote `{remote}` refused: {reason}")]
    Remote {
        /// The remote as given.
        remote: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote's URL could be mistaken for an option or carries a transport that runs commands.
    #[error("the URL `{url}` of remote `{remote}` refused: {reason}")]
    RemoteUrl {
        /// The remote.
        remote: String,
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The grant lets the agent push to a remote whose URL the hub's settings do not give.
    #[error(
        "the grant allows pushing to remote `{remote}`, but no URL is known for it; name its URL \
         in the hub's settings or drop it from the grant"
    )]
    RemoteUrlUnknown {
        /// The remote.
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

/// Mints the session's tokens from the agent's grant: [`MintInput::from_grant`], then [`mint`].
/// This is what the sequencer calls at boot with the grant it read from hubd.
pub fn mint_from_grant(
    grant: &Grant,
    agent: &AgentName,
    acr: PathBuf,
    remotes: &BTreeMap<RemoteName, String>,
    ambient: AmbientAuthority,
) -> Result<Tokens, TokenError> {
    mint(&MintInput::from_grant(grant, agent, acr, remotes)?, ambient)
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
    let git = input
        .git
        .as_ref()
        .map(|g| git::GitToken::parse(g, &input.acr, write_roots.clone().unwrap_or_default()))
        .transpose()?;
    let mail = input.mail.as_ref().map(mail::MailToken::from_input);
    let spawn = input
        .spawn
        .filter(|level| *level != SpawnLevel::Off)
        .map(SpawnToken::new);
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
        build: input.build.as_ref().map(BuildToken::new),
        run: input.run.clone().map(RunToken::new),
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

    fn grant(json: serde_json::Value) -> Grant {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn mints_from_a_grant_axis_for_axis() {
        let dir = tempfile::tempdir().unwrap();
        let alice = AgentName::parse("alice/main").unwrap();
        let g = grant(serde_json::json!({
            "files": ["workspace"],
            "git-write": ["refs/heads/l3m/alice/main/"],
            "net": ["example.org"],
            "mail": ["human:bob"],
            "spawn": "drive",
            "wild": ["shell"],
            "git-push": {"origin": ["refs/heads/l3m/alice/main/"]},
            "build": true,
            "run": true,
        }));
        let remotes = BTreeMap::from([(
            RemoteName::parse("origin").unwrap(),
            "file:///srv/up.git".to_owned(),
        )]);
        let t =
            mint_from_grant(&g, &alice, dir.path().into(), &remotes, ambient_authority()).unwrap();
        assert_eq!(
            t.conferred(),
            BTreeSet::from([
                Axis::Files,
                Axis::GitWrite,
                Axis::GitPush,
                Axis::Net,
                Axis::Mail,
                Axis::Spawn,
                Axis::Wild,
                Axis::Build,
                Axis::Run
            ])
        );
        let build = t.build.as_ref().unwrap();
        let cover = |source: &str| l3m_core::build::Cover::Build {
            source: l3m_core::grant::AcrPath::parse(source).unwrap(),
            lockfile: None,
            hosts: [l3m_core::grant::HostPattern::parse("example.org").unwrap()].into(),
        };
        assert!(build.check(&cover("workspace/app")).is_ok());
        assert!(
            build.check(&cover("agent")).is_err(),
            "outside the write roots"
        );
        assert_eq!(t.run.as_ref().unwrap().agent(), &alice);
        let git = t.git.as_ref().unwrap();
        assert!(git.may_write("refs/heads/l3m/alice/main/_/work") && !git.may_read("refs/x"));
        assert_eq!(
            git.push_target("origin").unwrap().1.url(),
            "file:///srv/up.git"
        );
        assert!(t.net.as_ref().unwrap().allows("example.org", None));
        let mail = t.mail.as_ref().unwrap();
        let to = |s| l3m_core::mail::Address::parse(s).unwrap();
        assert!(mail.covers_address(&to("human:bob*")) && mail.covers_address(&to("alice")));
        assert!(!mail.covers_address(&to("alice/other")));
        assert_eq!(t.spawn.as_ref().unwrap().level(), SpawnLevel::Drive);
        assert!(t.wild.as_ref().unwrap().allows(&EffectClass::Shell));
    }

    #[test]
    fn an_empty_grant_confers_only_mail_and_an_unknown_remote_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let alice = AgentName::parse("alice").unwrap();
        let none = BTreeMap::new();
        let t = mint_from_grant(
            &Grant::default(),
            &alice,
            dir.path().into(),
            &none,
            ambient_authority(),
        )
        .unwrap();
        assert_eq!(t.conferred(), BTreeSet::from([Axis::Mail]));
        assert!(t.spawn.is_none() && t.git.is_none());
        let g = grant(serde_json::json!({"git-push": {"origin": ["refs/heads/l3m/alice/"]}}));
        assert!(matches!(
            mint_from_grant(&g, &alice, dir.path().into(), &none, ambient_authority()),
            Err(TokenError::RemoteUrlUnknown { remote }) if remote == "origin"
        ));
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
            Err(TokenError::Host { ref reason, .. }) if reason.contains("port")
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
