//! Rewind's restore: the files and the branches a set of undo entries recorded, put back
//! together, after checking both.
//!
//! Both take the whole journal and the ids of the entries to undo (those the tool results after
//! the rewind's target name). [`plan`] decides what a restore would do and changes nothing:
//! every path must be writable under the files token, every branch writable under the git token
//! and standing where its last journaled move left it (see [`crate::git::plan_restore`]).
//! [`restore`] makes the same plan and, only if it holds whole, carries it out: path entries
//! newest first, then each branch straight back to where the oldest undone move found it
//! (journaled first, like every move), then each moved worktree's index. Files and branches are
//! independent — a commit records the worktree, it does not change it — so the order between the
//! two kinds does not matter.

use std::collections::BTreeSet;

use crate::files::{self, FilesError};
use crate::git::{self, GitError, RefStep};
use crate::tokens::Tokens;
use crate::undo::{EntryId, Undo, UndoEntry, UndoStore};

/// What a restore puts back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restore {
    /// How many file edits are undone.
    pub edits: usize,
    /// The distinct paths they touched, sorted.
    pub paths: Vec<String>,
    /// The branches moved back.
    pub refs: Vec<RefStep>,
}

/// Why a restore was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A file entry could not be checked or put back.
    #[error("restoring files: {0}")]
    Files(#[from] FilesError),
    /// A branch move could not be checked or put back.
    #[error("restoring branches: {0}")]
    Git(#[from] GitError),
    /// Entries of a kind the agent's grant no longer holds a token for.
    #[error(
        "the undo chain holds {what} to restore, but the agent's grant no longer confers the {axis} axis; \
         regrant it to rewind across them"
    )]
    NoToken {
        /// What waits to be restored.
        what: &'static str,
        /// The axis whose token is missing.
        axis: &'static str,
    },
}

/// Decides what undoing the entries of `journal` (oldest first) whose ids are in `undo` would
/// put back, changing nothing.
pub fn plan(
    tokens: &Tokens,
    journal: &[UndoEntry],
    undo: &BTreeSet<EntryId>,
) -> Result<Restore, RestoreError> {
    plan_of(tokens, journal, &chosen(journal, undo))
}

/// Plans undoing the entries of `journal` whose ids are in `undo` and, if the plan holds whole,
/// carries it out, journaling each branch move in `into` first, at `time_ms` (the caller's
/// clock). Returns what was put back.
pub fn restore(
    tokens: &Tokens,
    journal: &[UndoEntry],
    undo: &BTreeSet<EntryId>,
    into: &dyn UndoStore,
    time_ms: u64,
) -> Result<Restore, RestoreError> {
    let entries = chosen(journal, undo);
    let planned = plan_of(tokens, journal, &entries)?;
    if planned.edits > 0 {
        files::restore(files_token(tokens)?, &entries)?;
    }
    if !planned.refs.is_empty() {
        git::restore(git_token(tokens)?, &planned.refs, into, time_ms)?;
    }
    Ok(planned)
}

/// The plan for `entries` (the chosen entries of `journal`).
fn plan_of(
    tokens: &Tokens,
    journal: &[UndoEntry],
    entries: &[UndoEntry],
) -> Result<Restore, RestoreError> {
    let refs = if entries.iter().any(|e| matches!(e.undo, Undo::Ref(_))) {
        git::plan_restore(git_token(tokens)?, journal, entries)?
    } else {
        Vec::new()
    };
    let paths: Vec<&str> = entries
        .iter()
        .filter(|e| matches!(e.undo, Undo::Path { .. }))
        .map(UndoEntry::target)
        .collect();
    if !paths.is_empty() {
        files::check_restorable(files_token(tokens)?, entries)?;
    }
    Ok(Restore {
        edits: paths.len(),
        paths: paths
            .into_iter()
            .map(str::to_owned)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        refs,
    })
}

/// The entries of `journal` whose ids are in `undo`, oldest first.
fn chosen(journal: &[UndoEntry], undo: &BTreeSet<EntryId>) -> Vec<UndoEntry> {
    journal
        .iter()
        .filter(|e| undo.contains(&e.id))
        .cloned()
        .collect()
}

fn files_token(tokens: &Tokens) -> Result<&crate::tokens::FilesToken, RestoreError> {
    tokens.files.as_ref().ok_or(RestoreError::NoToken {
        what: "file edits",
        axis: "files",
    })
}

fn git_token(tokens: &Tokens) -> Result<&crate::tokens::GitToken, RestoreError> {
    tokens.git.as_ref().ok_or(RestoreError::NoToken {
        what: "branch moves",
        axis: "git write",
    })
}
