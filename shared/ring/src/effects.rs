//! The effect-class traits: the only way a tool body reaches the world.
//!
//! A tool body lives outside the ring (in `l3m-tools`, sealed by its linter) and is written over
//! these traits, one per effect class that has a real provider: [`FsRead`], [`FsWrite`] and
//! [`Clock`]. The ring implements each over its tokens. At boot the sequencer builds one
//! [`Effects`] bundle from the minted [`Tokens`], the undo journal and a clock; for each call it
//! asks [`Effects::for_footprint`] for a [`Granted`] holding exactly the trait objects the tool's
//! footprint names, so a body cannot reach a class it did not declare (asking [`Granted`] for one
//! is an [`EffectsError::Undeclared`]).
//!
//! Adding a class (net, git, mail, shell) is one trait, one impl over its token, one field of
//! [`Granted`] and one arm of [`Effects::for_footprint`]. Until then a footprint naming such a
//! class is refused with [`EffectsError::NoProvider`] rather than granted something empty.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use l3m_core::axis::Axis;
use l3m_core::effects::{EffectClass, Footprint};

use crate::files::{self, FilesError, Listing};
use crate::journal::UndoJournal;
use crate::tokens::{FilesToken, Tokens};

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

/// Reading the time (the `clock` class). A trait so that tests and replays can fix it.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The operating system's clock; a clock set before 1970 reads as the epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The file provider bound to its token and journal: what [`FsRead`] and [`FsWrite`] run on.
struct FileProvider {
    /// The session's files token.
    token: FilesToken,
    /// Where every edit is journaled first.
    journal: Arc<dyn UndoJournal>,
}

impl FsRead for FileProvider {
    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError> {
        files::read(&self.token, path)
    }

    fn list(&self, path: &str) -> Result<Listing, FilesError> {
        files::list(&self.token, path)
    }
}

impl FsWrite for FileProvider {
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), FilesError> {
        files::write(&self.token, path, bytes, self.journal.as_ref())
    }

    fn remove(&self, path: &str) -> Result<(), FilesError> {
        files::remove(&self.token, path, self.journal.as_ref())
    }

    fn mkdir(&self, path: &str) -> Result<(), FilesError> {
        files::mkdir(&self.token, path, self.journal.as_ref())
    }
}

/// The session's providers, built once at boot; the source of every [`Granted`].
pub struct Effects {
    /// Files, if the files axis was conferred (a files token was minted).
    files: Option<FileProvider>,
    /// The clock every agent holds.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("files", &self.files.as_ref().map(|p| &p.token))
            .finish_non_exhaustive()
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
    /// The bundle for one session. Tokens of classes without a provider yet (net, git, mail,
    /// spawn, wild) are dropped here; their providers will take them when they land.
    pub fn new(tokens: Tokens, journal: Arc<dyn UndoJournal>, clock: Arc<dyn Clock>) -> Self {
        let Tokens { files, .. } = tokens;
        Self {
            files: files.map(|token| FileProvider { token, journal }),
            clock,
        }
    }

    /// Exactly the trait objects `footprint` names, or the first class that cannot be granted.
    pub fn for_footprint(&self, footprint: &Footprint) -> Result<Granted<'_>, EffectsError> {
        let mut granted = Granted::default();
        for class in &footprint.0 {
            match class {
                EffectClass::FsRead => granted.fs_read = Some(self.files(class)?),
                EffectClass::FsWrite => granted.fs_write = Some(self.files(class)?),
                EffectClass::Clock => granted.clock = Some(self.clock.as_ref()),
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

/// What one tool call may use: the classes of its footprint, and no others.
#[derive(Default)]
pub struct Granted<'a> {
    /// `fs-read`, if declared.
    fs_read: Option<&'a dyn FsRead>,
    /// `fs-write`, if declared.
    fs_write: Option<&'a dyn FsWrite>,
    /// `clock`, if declared.
    clock: Option<&'a dyn Clock>,
}

impl std::fmt::Debug for Granted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("fs_read", &self.fs_read.is_some())
            .field("fs_write", &self.fs_write.is_some())
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

impl<'a> Granted<'a> {
    /// File reads, if the footprint names `fs-read`.
    pub fn fs_read(&self) -> Result<&'a dyn FsRead, EffectsError> {
        self.fs_read.ok_or_else(|| undeclared(EffectClass::FsRead))
    }

    /// Journaled file edits, if the footprint names `fs-write`.
    pub fn fs_write(&self) -> Result<&'a dyn FsWrite, EffectsError> {
        self.fs_write
            .ok_or_else(|| undeclared(EffectClass::FsWrite))
    }

    /// The clock, if the footprint names `clock`.
    pub fn clock(&self) -> Result<&'a dyn Clock, EffectsError> {
        self.clock.ok_or_else(|| undeclared(EffectClass::Clock))
    }
}

fn undeclared(class: EffectClass) -> EffectsError {
    EffectsError::Undeclared { class }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::LocalJournal;
    use crate::tokens::{MintInput, mint};
    use cap_std::ambient_authority;

    struct FixedClock(u64);

    impl Clock for FixedClock {
        fn now_ms(&self) -> u64 {
            self.0
        }
    }

    fn effects(files: bool) -> (tempfile::TempDir, Effects) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("workspace")).unwrap();
        let input = MintInput {
            acr: dir.path().into(),
            files: files.then(|| vec!["workspace".into()]),
            ..MintInput::default()
        };
        let tokens = mint(&input, ambient_authority()).unwrap();
        let journal = LocalJournal::open(dir.path(), ambient_authority()).unwrap();
        let fx = Effects::new(tokens, Arc::new(journal), Arc::new(FixedClock(7)));
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
    fn a_class_without_a_provider_is_refused_not_granted_empty() {
        let (_dir, fx) = effects(true);
        for class in [EffectClass::Net, EffectClass::Shell, EffectClass::GitRead] {
            let err = fx
                .for_footprint(&Footprint::of([EffectClass::FsRead, class.clone()]))
                .unwrap_err();
            assert_eq!(err, EffectsError::NoProvider { class });
        }
    }
}
