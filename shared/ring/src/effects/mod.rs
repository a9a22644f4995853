//! The effect-class traits: the only way a tool body reaches the world.
//!
//! A tool body lives outside the ring (in `l3m-tools`, sealed by its linter) and is written over
//! these traits, one per effect class that has a provider: [`FsRead`], [`FsWrite`], [`Clock`],
//! [`GitRead`], [`GitWrite`], [`GitPush`], [`Net`], [`Mail`], [`Spawn`], [`Build`], [`Run`],
//! [`Shell`], and [`Vigils`] and [`Inbox`] (the `tree-view` class). The ring implements each over its tokens; mail, spawn, build and run go on through
//! a [`HubOutlet`] the sequencer plugs in, after the ring has checked the token. At boot the
//! sequencer builds one [`Effects`] bundle from the minted [`Tokens`], the undo chain, a clock
//! and the outlet; for each call it asks [`Effects::for_footprint`] for a [`Granted`] holding
//! exactly the trait objects the tool's footprint names, so a body cannot reach a class it did
//! not declare (asking [`Granted`] for one is an [`EffectsError::Undeclared`]). Git is three classes, so a tool that declares only
//! `git-read` cannot commit or push.
//!
//! A footprint naming a class whose token was not minted is refused with
//! [`EffectsError::MissingAxis`]; one naming a class with no provider yet (blob, airmail, wild
//! classes other than `shell`) with [`EffectsError::NoProvider`],
//! rather than granted something empty.
//!
//! # Layout
//! - this file: the traits, [`Effects`], [`Granted`], [`EffectsError`].
//! - `providers`: the traits' implementations over files, git, net and shell tokens.
//! - `hub`: [`HubOutlet`] and the mail and spawn providers that check tokens before using it.
//! - `stages`: the build and run providers, their requests, results and [`StageError`].

mod hub;
mod providers;
mod stages;

use std::collections::BTreeSet;
use std::sync::Arc;

use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::grant::SpawnRequest;
use l3m_core::log::Refusal;
use l3m_core::mail::Address;
use l3m_core::names::AgentName;
use l3m_core::vigil::Watch;

use crate::files::{FilesError, Listing};
use crate::git::{CommitInfo, Committed, FileDiff, GitError, Pushed, Status};
use crate::net::{FetchRequest, FetchResponse, NetError};
use crate::shell::{ShellError, ShellOutcome, ShellRequest};
use crate::tokens::Tokens;
use crate::undo::UndoStore;

pub use hub::{HubOutlet, MailError, OutletError, SpawnError};
use hub::{MailProvider, SpawnProvider, VigilProvider};
/// Reading the time (the `clock` class): core's one clock trait.
pub use l3m_core::clock::Clock;
use providers::{FileProvider, GitProvider, NetProvider, ShellProvider};
pub use stages::{Build, BuildAsk, Built, Ran, Run, StageError};
use stages::{BuildProvider, RunProvider};

/// Reading files anywhere in the ACR except `.l3m/` (the `fs-read` class).
pub trait FsRead: Send + Sync {
    /// The whole content of a regular file.
    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError>;
    /// A directory's entries, sorted by name (`""` is the ACR root, which omits `.l3m/`).
    fn list(&self, path: &str) -> Result<Listing, FilesError>;
}

/// Writing under the write roots, each edit journaled before it happens (the `fs-write` class).
pub trait FsWrite: Send + Sync {
    /// Creates or replaces a file with `bytes` (its parent must exist).
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), FilesError>;
    /// Removes a file or an empty directory.
    fn remove(&self, path: &str) -> Result<(), FilesError>;
    /// Creates one directory (its parent must exist).
    fn mkdir(&self, path: &str) -> Result<(), FilesError>;
}

/// Reading a worktree against its HEAD (the `git-read` class). Worktrees are ACR-relative.
pub trait GitRead: Send + Sync {
    /// The worktree's changes against HEAD.
    fn status(&self, worktree: &str) -> Result<Status, GitError>;
    /// The worktree's text diff against HEAD.
    fn diff(&self, worktree: &str) -> Result<Vec<FileDiff>, GitError>;
    /// The `n` most recent commits of HEAD, newest first.
    fn log(&self, worktree: &str, n: usize) -> Result<Vec<CommitInfo>, GitError>;
}

/// Committing a worktree onto its granted branch (the `git-write` class).
pub trait GitWrite: Send + Sync {
    /// Commits every change, as the agent, at `time_ms` (from [`Clock`]).
    fn commit(&self, worktree: &str, message: &str, time_ms: u64) -> Result<Committed, GitError>;
}

/// Pushing a granted branch to a granted remote (the `git-push` class).
pub trait GitPush: Send + Sync {
    /// Pushes `branch` of the worktree's repository to `remote` (name or exact granted URL).
    fn push(&self, worktree: &str, remote: &str, branch: &str) -> Result<Pushed, GitError>;
}

/// HTTP GET and HEAD to the token's hosts (the `net` class).
pub trait Net: Send + Sync {
    /// Fetches `request.url`, checked before the request, at connect and at each redirect.
    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, NetError>;
}

/// Letters to covered addresses (the `mail` class).
pub trait Mail: Send + Sync {
    /// Sends a letter to `to`, if the mail token covers it; returns the letter's id.
    fn send(&self, to: &Address, subject: Option<&str>, body: &str) -> Result<String, MailError>;
}

/// Asking hubd for a child (the `spawn` class).
pub trait Spawn: Send + Sync {
    /// Asks for `request` with `task` as the child's first instruction; returns its name.
    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, SpawnError>;
    /// Retires `child` (and its subtree): how a program's call ends the children it drove.
    fn retire(&self, child: &AgentName) -> Result<(), SpawnError>;
    /// Waits until `until` for the first unread letter from `child` in the agent's own inbox,
    /// marks it read, and returns its body (`None` when none came in time): how a program
    /// takes a driven child's answer without the letter reaching the model as mail.
    fn take_answer(
        &self,
        child: &AgentName,
        until: std::time::Instant,
    ) -> Result<Option<String>, SpawnError>;
}

/// Vigils: asking hubd to tell the agent when a hub fact it may already see comes true (the
/// `tree-view` class). Arming one changes nothing but when the agent is told, so the class
/// stays read-only; hubd's gate bounds how many and how long.
pub trait Vigils: Send + Sync {
    /// Arms `watch` on `on` (the agent itself when `None`; a descendant, pinned) until
    /// `until_ms`; returns the vigil's id.
    fn arm(
        &self,
        on: Option<&AgentName>,
        watch: Watch,
        until_ms: u64,
    ) -> Result<String, OutletError>;
    /// Cancels the vigil `id` on `on` (the agent itself when `None`).
    fn cancel(&self, on: Option<&AgentName>, id: &str) -> Result<(), OutletError>;
}

/// Reading the agent's own inbox (the `tree-view` class): a letter it was sent, whole, so a
/// letter too long to show in its event can be read on past the cut.
pub trait Inbox: Send + Sync {
    /// The letter `id` of the agent's own inbox (`None`: the inbox holds no such letter).
    fn letter(&self, id: &str) -> Result<Option<l3m_core::mail::Letter>, OutletError>;
}

/// A listed program in the bubblewrap sandbox (the `shell` class, wild: reviewed first).
pub trait Shell: Send + Sync {
    /// Runs `request` with no network, read-only outside the write roots, under a deadline.
    fn run(&self, request: &ShellRequest) -> Result<ShellOutcome, ShellError>;
}

/// The session's providers, built once at boot; the source of every [`Granted`].
pub struct Effects {
    /// Files, if the files axis was conferred.
    files: Option<FileProvider>,
    /// Git, if any git axis was conferred.
    git: Option<GitProvider>,
    /// Which of git-read, git-write and git-push the git token confers.
    git_axes: BTreeSet<Axis>,
    /// HTTP, if the net axis was conferred.
    net: Option<NetProvider>,
    /// Mail (every agent holds its default reach).
    mail: Option<MailProvider>,
    /// Spawn, if the spawn level is not `off`.
    spawn: Option<SpawnProvider>,
    /// Builds, if the build axis was conferred.
    build: Option<BuildProvider>,
    /// Runs, if the run axis was conferred.
    run: Option<RunProvider>,
    /// The shell, if the wild axis and files were conferred.
    shell: Option<ShellProvider>,
    /// The clock every agent holds.
    clock: Arc<dyn Clock>,
    /// Vigils, which every agent may keep (hubd bounds them).
    vigils: VigilProvider,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("files", &self.files.as_ref().map(|p| &p.token))
            .field("git", &self.git.as_ref().map(|p| &p.token))
            .field("net", &self.net.as_ref().map(|p| &p.0))
            .field("mail", &self.mail.as_ref().map(|p| &p.token))
            .field("spawn", &self.spawn.as_ref().map(|p| &p.token))
            .field("build", &self.build.as_ref().map(|p| &p.token))
            .field("run", &self.run.as_ref().map(|p| &p.token))
            .field("shell", &self.shell.as_ref().map(|p| &p.wild))
            .finish_non_exhaustive()
    }
}

impl EffectsError {
    /// The refusal as data: the effects boundary, on the missing axis when one is missing.
    pub fn refusal(&self) -> Refusal {
        let axis = match self {
            EffectsError::MissingAxis { axis, .. } => Some(*axis),
            EffectsError::NoProvider { .. } | EffectsError::Undeclared { .. } => None,
        };
        Refusal::new("effects", axis)
    }
}

/// Why a footprint could not be granted, or a class was asked of a [`Granted`] that lacks it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectsError {
    /// The class needs a token the session was not minted.
    #[error("class {class} needs the {axis} axis, which this agent's grant does not confer")]
    MissingAxis {
        /// The class asked for.
        class: EffectClass,
        /// The axis whose token is missing.
        axis: Axis,
    },
    /// The class has no provider in the ring yet, so nothing can be granted for it.
    #[error("class {class} has no provider in the ring yet; no tool may use it")]
    NoProvider {
        /// The class asked for.
        class: EffectClass,
    },
    /// A tool body reached for a class its footprint does not name.
    #[error("class {class} is not in the tool's footprint; declare it to use it")]
    Undeclared {
        /// The class reached for.
        class: EffectClass,
    },
}

impl Effects {
    /// The bundle for one session. `outlet` is how mail and spawn reach hubd; without one, those
    /// calls fail with [`OutletError::Absent`] after their token checks.
    pub fn new(
        tokens: Tokens,
        journal: Arc<dyn UndoStore>,
        clock: Arc<dyn Clock>,
        outlet: Option<Arc<dyn HubOutlet>>,
    ) -> Self {
        let Tokens {
            files,
            net,
            git,
            mail,
            spawn,
            wild,
            build,
            run,
        } = tokens;
        let git_axes = Tokens::git_axes(git.as_ref());
        let files = files.map(Arc::new);
        let shell = wild
            .zip(files.clone())
            .map(|(wild, files)| ShellProvider { wild, files });
        Self {
            files: files.map(|token| FileProvider {
                token,
                journal: journal.clone(),
            }),
            git: git.map(|token| GitProvider { token, journal }),
            git_axes,
            net: net.map(NetProvider),
            mail: mail.map(|token| MailProvider {
                token,
                outlet: outlet.clone(),
            }),
            spawn: spawn.map(|token| SpawnProvider {
                token,
                outlet: outlet.clone(),
            }),
            build: build.map(|token| BuildProvider {
                token,
                outlet: outlet.clone(),
            }),
            run: run.map(|token| RunProvider {
                token,
                outlet: outlet.clone(),
            }),
            shell,
            clock,
            vigils: VigilProvider { outlet },
        }
    }

    /// Exactly the trait objects `footprint` names, or the first class that cannot be granted.
    pub fn for_footprint(&self, footprint: &Footprint) -> Result<Granted<'_>, EffectsError> {
        let mut granted = Granted::default();
        for class in &footprint.0 {
            let missing = |axis| EffectsError::MissingAxis {
                class: class.clone(),
                axis,
            };
            let git = || {
                let axis = class_axis(class);
                self.git
                    .as_ref()
                    .filter(|_| self.git_axes.contains(&axis))
                    .ok_or_else(|| missing(axis))
            };
            match class {
                EffectClass::FsRead => granted.fs_read = Some(self.files(class)?),
                EffectClass::FsWrite => granted.fs_write = Some(self.files(class)?),
                EffectClass::Clock => granted.clock = Some(self.clock.as_ref()),
                EffectClass::TreeView => {
                    granted.vigils = Some(&self.vigils);
                    granted.inbox = Some(&self.vigils);
                }
                EffectClass::GitRead => granted.git_read = Some(git()?),
                EffectClass::GitWrite => granted.git_write = Some(git()?),
                EffectClass::GitPush => granted.git_push = Some(git()?),
                EffectClass::Net => {
                    granted.net = Some(self.net.as_ref().ok_or_else(|| missing(Axis::Net))?);
                }
                EffectClass::Mail => {
                    granted.mail = Some(self.mail.as_ref().ok_or_else(|| missing(Axis::Mail))?);
                }
                EffectClass::Spawn => {
                    granted.spawn = Some(self.spawn.as_ref().ok_or_else(|| missing(Axis::Spawn))?);
                }
                EffectClass::Build => {
                    granted.build = Some(self.build.as_ref().ok_or_else(|| missing(Axis::Build))?);
                }
                EffectClass::Run => {
                    granted.run = Some(self.run.as_ref().ok_or_else(|| missing(Axis::Run))?);
                }
                EffectClass::Shell => {
                    let axis = if self.files.is_none() {
                        Axis::Files
                    } else {
                        Axis::Wild
                    };
                    granted.shell = Some(self.shell.as_ref().ok_or_else(|| missing(axis))?);
                }
                other => {
                    return Err(EffectsError::NoProvider {
                        class: other.clone(),
                    });
                }
            }
        }
        Ok(granted)
    }

    fn files(&self, class: &EffectClass) -> Result<&FileProvider, EffectsError> {
        self.files
            .as_ref()
            .ok_or_else(|| EffectsError::MissingAxis {
                class: class.clone(),
                axis: Axis::Files,
            })
    }
}

/// The axis a class needs, for messages (`Wild` for classes that name none).
fn class_axis(class: &EffectClass) -> Axis {
    class.axis().unwrap_or(Axis::Wild)
}

/// What one tool call may use: the classes of its footprint, and no others.
#[derive(Default)]
pub struct Granted<'a> {
    fs_read: Option<&'a dyn FsRead>,
    fs_write: Option<&'a dyn FsWrite>,
    clock: Option<&'a dyn Clock>,
    git_read: Option<&'a dyn GitRead>,
    git_write: Option<&'a dyn GitWrite>,
    git_push: Option<&'a dyn GitPush>,
    net: Option<&'a dyn Net>,
    mail: Option<&'a dyn Mail>,
    spawn: Option<&'a dyn Spawn>,
    build: Option<&'a dyn Build>,
    run: Option<&'a dyn Run>,
    shell: Option<&'a dyn Shell>,
    vigils: Option<&'a dyn Vigils>,
    inbox: Option<&'a dyn Inbox>,
}

impl std::fmt::Debug for Granted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("fs_read", &self.fs_read.is_some())
            .field("fs_write", &self.fs_write.is_some())
            .field("clock", &self.clock.is_some())
            .field("git_read", &self.git_read.is_some())
            .field("git_write", &self.git_write.is_some())
            .field("git_push", &self.git_push.is_some())
            .field("net", &self.net.is_some())
            .field("mail", &self.mail.is_some())
            .field("spawn", &self.spawn.is_some())
            .field("build", &self.build.is_some())
            .field("run", &self.run.is_some())
            .field("shell", &self.shell.is_some())
            .field("vigils", &self.vigils.is_some())
            .field("inbox", &self.inbox.is_some())
            .finish()
    }
}

/// One getter per class: the granted trait object, or [`EffectsError::Undeclared`].
macro_rules! getters {
    ($($(#[$doc:meta])* $name:ident: $trait:ident = $class:ident;)*) => {
        impl<'a> Granted<'a> {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> Result<&'a dyn $trait, EffectsError> {
                    self.$name.ok_or(EffectsError::Undeclared {
                        class: EffectClass::$class,
                    })
                }
            )*
        }
    };
}

getters! {
    /// File reads, if the footprint names `fs-read`.
    fs_read: FsRead = FsRead;
    /// Journaled file edits, if the footprint names `fs-write`.
    fs_write: FsWrite = FsWrite;
    /// The clock, if the footprint names `clock`.
    clock: Clock = Clock;
    /// Worktree status, diff and log, if the footprint names `git-read`.
    git_read: GitRead = GitRead;
    /// Commits, if the footprint names `git-write`.
    git_write: GitWrite = GitWrite;
    /// Pushes, if the footprint names `git-push`.
    git_push: GitPush = GitPush;
    /// HTTP fetches, if the footprint names `net`.
    net: Net = Net;
    /// Letters, if the footprint names `mail`.
    mail: Mail = Mail;
    /// Spawn requests, if the footprint names `spawn`.
    spawn: Spawn = Spawn;
    /// Builds through the builder, if the footprint names `build`.
    build: Build = Build;
    /// Runs through the runner, if the footprint names `run`.
    run: Run = Run;
    /// The sandboxed shell, if the footprint names `shell`.
    shell: Shell = Shell;
    /// Vigils, if the footprint names `tree-view`.
    vigils: Vigils = TreeView;
    /// The agent's own inbox, if the footprint names `tree-view`.
    inbox: Inbox = TreeView;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::outlet::Recorder;
    use crate::tokens::{MintInput, mint};
    use crate::undo::MemoryUndo;
    use cap_std::ambient_authority;

    use l3m_core::clock::FixedClock;

    fn effects(files: bool) -> (tempfile::TempDir, Effects) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("workspace")).unwrap();
        let input = MintInput {
            acr: dir.path().into(),
            files: files.then(|| vec!["workspace".into()]),
            ..MintInput::default()
        };
        let tokens = mint(&input, ambient_authority()).unwrap();
        let journal = MemoryUndo::default();
        let fx = Effects::new(tokens, Arc::new(journal), Arc::new(FixedClock(7)), None);
        (dir, fx)
    }

    #[test]
    fn a_grant_holds_exactly_the_declared_classes() {
        let (dir, fx) = effects(true);
        let read_only = fx
            .for_footprint(&Footprint::of([EffectClass::FsRead]))
            .unwrap();
        assert!(read_only.fs_read().is_ok());
        assert_eq!(
            read_only.fs_write().err(),
            Some(EffectsError::Undeclared {
                class: EffectClass::FsWrite
            })
        );
        assert!(read_only.clock().is_err());

        let all = Footprint::of([
            EffectClass::FsRead,
            EffectClass::FsWrite,
            EffectClass::Clock,
        ]);
        let granted = fx.for_footprint(&all).unwrap();
        granted
            .fs_write()
            .unwrap()
            .write("workspace/a", b"hi")
            .unwrap();
        assert_eq!(
            granted.fs_read().unwrap().read("workspace/a").unwrap(),
            b"hi"
        );
        assert_eq!(granted.clock().unwrap().now_ms(), 7);
        assert_eq!(
            std::fs::read(dir.path().join("workspace/a")).unwrap(),
            b"hi"
        );
    }

    #[test]
    fn files_without_a_files_token_name_the_missing_axis() {
        let (_dir, fx) = effects(false);
        let err = fx
            .for_footprint(&Footprint::of([EffectClass::Clock, EffectClass::FsRead]))
            .unwrap_err();
        assert_eq!(
            err,
            EffectsError::MissingAxis {
                class: EffectClass::FsRead,
                axis: Axis::Files
            }
        );
        assert!(
            fx.for_footprint(&Footprint::of([EffectClass::Clock]))
                .is_ok()
        );
    }

    #[test]
    fn a_class_without_a_token_or_a_provider_is_refused_not_granted_empty() {
        let (_dir, fx) = effects(true);
        for (class, axis) in [
            (EffectClass::Net, Axis::Net),
            (EffectClass::Shell, Axis::Wild),
            (EffectClass::GitRead, Axis::GitRead),
            (EffectClass::Spawn, Axis::Spawn),
            (EffectClass::Build, Axis::Build),
            (EffectClass::Run, Axis::Run),
        ] {
            let err = fx
                .for_footprint(&Footprint::of([EffectClass::FsRead, class.clone()]))
                .unwrap_err();
            assert_eq!(err, EffectsError::MissingAxis { class, axis });
        }
        for class in [
            EffectClass::Blob,
            EffectClass::Airmail,
            EffectClass::Other("aws".into()),
        ] {
            let err = fx
                .for_footprint(&Footprint::of([class.clone()]))
                .unwrap_err();
            assert_eq!(err, EffectsError::NoProvider { class });
        }
    }

    fn hub_effects(
        spawn: l3m_core::grant::SpawnLevel,
        outlet: Option<Arc<Recorder>>,
    ) -> (tempfile::TempDir, Effects) {
        let dir = tempfile::tempdir().unwrap();
        let grant = l3m_core::grant::Grant {
            spawn,
            ..Default::default()
        };
        let alice = l3m_core::names::AgentName::parse("alice").unwrap();
        let tokens = crate::tokens::mint_from_grant(
            &grant,
            &alice,
            dir.path().into(),
            &Default::default(),
            ambient_authority(),
        )
        .unwrap();
        let journal = MemoryUndo::default();
        let outlet = outlet.map(|o| o as Arc<dyn HubOutlet>);
        let fx = Effects::new(tokens, Arc::new(journal), Arc::new(FixedClock(7)), outlet);
        (dir, fx)
    }

    fn request(child: &str, driven: bool) -> SpawnRequest {
        SpawnRequest {
            child: l3m_core::names::AgentName::parse(child).unwrap(),
            grant: Default::default(),
            loan: Default::default(),
            driven,
            persona: None,
            fork: None,
        }
    }

    #[test]
    fn mail_and_spawn_check_their_tokens_before_the_outlet() {
        use l3m_core::grant::SpawnLevel;
        let outlet = Arc::new(Recorder::default());
        let (_dir, fx) = hub_effects(SpawnLevel::Drive, Some(Arc::clone(&outlet)));
        let granted = fx
            .for_footprint(&Footprint::of([EffectClass::Mail, EffectClass::Spawn]))
            .unwrap();
        let mail = granted.mail().unwrap();
        let to = |s| Address::parse(s).unwrap();
        assert_eq!(mail.send(&to("alice/kid"), None, "hi").unwrap(), "l-1");
        assert!(matches!(
            mail.send(&to("bob"), None, "hi"),
            Err(MailError::NotCovered { ref address, .. }) if address.contains("bob")
        ));
        let spawn = granted.spawn().unwrap();
        assert_eq!(
            spawn.spawn(&request("alice/kid", true), "t").unwrap(),
            "alice/kid"
        );
        assert!(matches!(
            spawn.spawn(&request("alice/kid", false), "t"),
            Err(SpawnError::NeedsPersist { .. })
        ));
        let calls = outlet.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0], "letter to agent:alice/kid* | None | hi");
        assert!(
            calls[1].starts_with("spawn alice/kid driven=true"),
            "{calls:?}"
        );
    }

    #[test]
    fn a_spawn_token_narrowed_to_off_refuses_before_the_outlet() {
        use l3m_core::grant::SpawnLevel;
        let outlet = Arc::new(Recorder::default());
        let token = crate::tokens::SpawnToken::new(SpawnLevel::Persist)
            .narrow(SpawnLevel::Off)
            .unwrap();
        let provider = SpawnProvider {
            token,
            outlet: Some(Arc::clone(&outlet) as Arc<dyn HubOutlet>),
        };
        assert_eq!(
            Spawn::spawn(&provider, &request("alice/kid", true), "t"),
            Err(SpawnError::Off)
        );
        assert!(outlet.calls().is_empty());
    }

    #[test]
    fn spawn_off_mints_nothing_and_no_outlet_is_a_typed_error() {
        use l3m_core::grant::SpawnLevel;
        let (_dir, fx) = hub_effects(SpawnLevel::Off, None);
        assert_eq!(
            fx.for_footprint(&Footprint::of([EffectClass::Spawn]))
                .unwrap_err(),
            EffectsError::MissingAxis {
                class: EffectClass::Spawn,
                axis: Axis::Spawn
            }
        );
        let granted = fx
            .for_footprint(&Footprint::of([EffectClass::Mail]))
            .unwrap();
        let to = Address::parse("alice").unwrap();
        assert_eq!(
            granted.mail().unwrap().send(&to, None, "hi"),
            Err(MailError::Outlet(OutletError::Absent))
        );
    }
}
