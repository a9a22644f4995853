//! Packs in and out of `hub.git`: the objects a clone of an agent's branches lacks, and a
//! pushed pack checked in a quarantine before its objects join the hub.
//!
//! A pushed pack is checked the way `git receive-pack` checks one, with git's own machinery:
//! `git index-pack --strict` indexes it into a quarantine directory beside `hub.git`'s
//! objects (every object well-formed as `git fsck --strict` wants it, every object an object
//! of the pack names present in the pack or the hub), each object's size is checked, and only
//! an accepted pack is moved into `objects/pack/` — pack first, index last, so git sees it
//! whole or not at all. A refused pack leaves nothing behind: dropping a [`Quarantine`]
//! removes it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::barrier::sync_dir;
use super::error::StoreError;
use super::git_cli::{self, Ran};
use super::hub::Hub;

/// The most bytes git's answers about a quarantine may take (object lists, ids).
const ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// A pushed pack, indexed and checked in a directory beside `hub.git`'s objects, not yet part
/// of the hub. Only [`Hub::admit`] makes it part of the hub; dropping it removes it.
#[must_use = "a quarantined pack joins the hub only through Hub::admit"]
#[derive(Debug)]
pub struct Quarantine {
    /// `hub.git/objects/incoming-<random>`, git's object directory layout.
    dir: PathBuf,
    /// `pack-<checksum>`, the name index-pack gave the pack and its index.
    name: String,
}

impl Drop for Quarantine {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), %error, "could not remove a quarantine");
        }
    }
}

impl Quarantine {
    /// The environment under which git sees the quarantine's objects and the hub's.
    fn env<'a>(&'a self, hub_objects: &'a Path) -> [(&'static str, &'a Path); 2] {
        [
            ("GIT_OBJECT_DIRECTORY", self.dir.as_path()),
            ("GIT_ALTERNATE_OBJECT_DIRECTORIES", hub_objects),
        ]
    }
}

impl Hub {
    /// A pack of every object reachable from `wants` and not from `haves` (each `have` must be
    /// a commit the hub holds; others are the caller's to drop). Empty when nothing is
    /// missing. A pack over `limit` bytes is [`StoreError::PackTooLarge`].
    ///
    /// One thread, so that the same request makes the same pack byte for byte.
    pub fn pack_of(
        &self,
        wants: &[ObjectId],
        haves: &[ObjectId],
        limit: u64,
    ) -> Result<Vec<u8>, StoreError> {
        if wants.is_empty() {
            return Ok(Vec::new());
        }
        self.settle();
        let mut input = String::new();
        for want in wants {
            input.push_str(&format!("{want}\n"));
        }
        for have in haves {
            input.push_str(&format!("^{have}\n"));
        }
        let args = ["pack-objects", "--stdout", "--revs", "--threads=1", "-q"].map(OsStr::new);
        let ran = git_cli::run(&self.git_dir(), &args, &[], bounds(input.as_bytes(), limit))?;
        if ran.over {
            return Err(StoreError::PackTooLarge {
                what: wants
                    .iter()
                    .map(ObjectId::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                limit,
            });
        }
        let pack = checked(ran, &args)?.stdout;
        // A pack with no object is a header and a checksum: the caller has everything.
        Ok(if pack_is_empty(&pack) {
            Vec::new()
        } else {
            pack
        })
    }

    /// Whether `id` names a commit the hub holds.
    pub fn has_commit(&self, id: ObjectId) -> Result<bool, StoreError> {
        self.settle();
        let hex = id.to_string();
        let spec = format!("{hex}^{{commit}}");
        let args = ["cat-file", "-e", spec.as_str()].map(OsStr::new);
        Ok(git_cli::run(&self.git_dir(), &args, &[], bounds(&[], 0))?.success)
    }

    /// Indexes `pack` into a fresh quarantine with `git index-pack --strict` and checks that
    /// no object in it is over `object_limit` bytes. A pack that breaks a rule is
    /// [`StoreError::PackRefused`] naming it, and nothing is left behind.
    pub fn quarantine(&self, pack: &[u8], object_limit: u64) -> Result<Quarantine, StoreError> {
        // git reads the hub's objects: it must find every acknowledged write there.
        self.settle();
        let objects = self.git_dir().join("objects");
        let mut suffix = [0u8; 8];
        getrandom::getrandom(&mut suffix).map_err(|e| StoreError::GitCli {
            args: "index-pack".into(),
            detail: format!("no randomness for a quarantine's name: {e}"),
        })?;
        let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let mut quarantine = Quarantine {
            dir: objects.join(format!("incoming-{hex}")),
            name: String::new(),
        };
        let pack_dir = quarantine.dir.join("pack");
        std::fs::create_dir_all(&pack_dir).map_err(StoreError::io("creating", &pack_dir))?;
        let args = ["index-pack", "--strict", "--stdin"].map(OsStr::new);
        let ran = git_cli::run(
            &self.git_dir(),
            &args,
            &quarantine.env(&objects),
            bounds(pack, ANSWER_BYTES),
        )?;
        if !ran.success {
            return Err(refused(format!(
                "git index-pack --strict: {}",
                cut(&ran.stderr)
            )));
        }
        let answer = String::from_utf8_lossy(&ran.stdout);
        let checksum = answer
            .trim()
            .strip_prefix("pack\t")
            .filter(|hex| hex.len() >= 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| refused(format!("git index-pack answered {:?}", cut(&answer))))?;
        quarantine.name = format!("pack-{checksum}");
        self.check_sizes(&quarantine, object_limit)?;
        Ok(quarantine)
    }

    /// Refuses a quarantine holding an object over `limit` bytes, naming it.
    fn check_sizes(&self, quarantine: &Quarantine, limit: u64) -> Result<(), StoreError> {
        // Without the hub as an alternate, git lists the pack's own objects only.
        let env = [("GIT_OBJECT_DIRECTORY", quarantine.dir.as_path())];
        let args = [
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname) %(objectsize)",
        ]
        .map(OsStr::new);
        let ran = checked(
            git_cli::run(&self.git_dir(), &args, &env, bounds(&[], ANSWER_BYTES))?,
            &args,
        )?;
        for line in String::from_utf8_lossy(&ran.stdout).lines() {
            let (id, size) = line.split_once(' ').unwrap_or((line, ""));
            let size: u64 = size.parse().map_err(|_| StoreError::GitCli {
                args: "cat-file --batch-check".into(),
                detail: format!("an answer line {line:?} does not end in a size"),
            })?;
            if size > limit {
                return Err(refused(format!(
                    "object {id} is {size} bytes, over the limit of {limit} bytes for one object"
                )));
            }
        }
        Ok(())
    }

    /// Whether `new` is a commit whose every object is in the hub or `quarantine`, and a
    /// descendant of `old` (or `old` itself): a fast-forward with nothing missing.
    pub fn fast_forward(
        &self,
        quarantine: Option<&Quarantine>,
        old: ObjectId,
        new: ObjectId,
    ) -> Result<bool, StoreError> {
        self.settle();
        let objects = self.git_dir().join("objects");
        let env: Vec<(&str, &Path)> = quarantine
            .map(|q| q.env(&objects).to_vec())
            .unwrap_or_default();
        let (old_hex, new_hex) = (old.to_string(), new.to_string());
        let spec = format!("{new_hex}^{{commit}}");
        let is_commit = ["cat-file", "-e", spec.as_str()].map(OsStr::new);
        if !git_cli::run(&self.git_dir(), &is_commit, &env, bounds(&[], 0))?.success {
            return Err(refused(format!(
                "{new_hex} is not a commit the push brings"
            )));
        }
        let complete = [
            "rev-list",
            "--objects",
            "--quiet",
            new_hex.as_str(),
            "--not",
        ]
        .into_iter()
        .chain([old_hex.as_str()])
        .map(OsStr::new)
        .collect::<Vec<_>>();
        let ran = git_cli::run(&self.git_dir(), &complete, &env, bounds(&[], ANSWER_BYTES))?;
        if !ran.success {
            return Err(refused(format!(
                "{new_hex} reaches objects neither the pack nor the hub holds: {}",
                cut(&ran.stderr)
            )));
        }
        self.descends(&env, old, new)
    }

    /// Whether `ancestor` is `commit` or one of its ancestors, both in the hub: a branch moved
    /// from `commit` to `ancestor` goes back along its own history (a rewind) and needs no
    /// object.
    pub fn is_ancestor(&self, ancestor: ObjectId, commit: ObjectId) -> Result<bool, StoreError> {
        self.settle();
        self.descends(&[], ancestor, commit)
    }

    /// Whether `commit` is `ancestor` or descends from it, with `env` adding a quarantine's
    /// objects to the hub's.
    fn descends(
        &self,
        env: &[(&str, &Path)],
        ancestor: ObjectId,
        commit: ObjectId,
    ) -> Result<bool, StoreError> {
        let (ancestor, commit) = (ancestor.to_string(), commit.to_string());
        let args = ["merge-base", "--is-ancestor", &ancestor, &commit].map(OsStr::new);
        Ok(git_cli::run(&self.git_dir(), &args, env, bounds(&[], 0))?.success)
    }

    /// Moves a checked pack into `hub.git`'s objects: the pack, its reverse index, then its
    /// index (the index makes git see it), fsynced when the hub is durable.
    pub fn admit(&self, quarantine: Quarantine) -> Result<(), StoreError> {
        let into = self.git_dir().join("objects").join("pack");
        std::fs::create_dir_all(&into).map_err(StoreError::io("creating", &into))?;
        for ext in ["pack", "rev", "idx"] {
            let file = format!("{}.{ext}", quarantine.name);
            let from = quarantine.dir.join("pack").join(&file);
            if ext == "rev" && !from.exists() {
                continue;
            }
            let to = into.join(&file);
            std::fs::rename(&from, &to).map_err(StoreError::io("moving", &from))?;
        }
        if self.is_durable() {
            sync_dir(&into)?;
        }
        Ok(())
    }
}

/// A pack whose header counts no object.
fn pack_is_empty(pack: &[u8]) -> bool {
    pack.get(8..12) == Some(&[0, 0, 0, 0])
}

fn checked(ran: Ran, args: &[&OsStr]) -> Result<Ran, StoreError> {
    if ran.success {
        return Ok(ran);
    }
    Err(StoreError::GitCli {
        args: args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        detail: ran.stderr,
    })
}

fn refused(problem: String) -> StoreError {
    StoreError::PackRefused { problem }
}

/// git's words, cut to a length an error reply carries.
fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

/// What a pack operation feeds git and keeps of its output (no deadline: the store's own
/// operations are bounded by their input).
fn bounds(input: &[u8], limit: u64) -> git_cli::Bounds<'_> {
    git_cli::Bounds {
        input,
        limit,
        deadline: None,
    }
}
