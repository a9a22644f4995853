//! A deliberate durability bug, compiled only with the `fault-drop-acked-on-restart` feature:
//! the fault harness (`tests/chaos`) turns it on to show that its checker catches a lost
//! acknowledged write. Never in a release build or an image an operator runs.
//!
//! Opening the hub (after the WAL's replay, before the chains are indexed) moves the first
//! agent inbox whose tip has a parent back by one commit: the newest letter of that inbox,
//! acknowledged to its sender before the restart, is gone after it. The commit stays in the
//! object store (dangling), as a real lost ref update would leave it.

use gix::refs::transaction::PreviousValue;

use super::error::StoreError;

/// Drops the newest entry of one agent inbox, as described in the module's documentation;
/// returns the inbox's ref name, or `None` when no inbox holds two entries or more.
pub(super) fn drop_one_acked_letter(repo: &gix::Repository) -> Result<Option<String>, StoreError> {
    let git = |op: &'static str| {
        move |e: gix::Error| StoreError::Git {
            op: op.into(),
            source: e,
        }
    };
    let platform = repo.references().map_err(git("list the hub's refs"))?;
    let refs = platform
        .prefixed("refs/l3m/a/")
        .map_err(git("list agent refs"))?;
    for reference in refs {
        let reference = reference.map_err(git("read an agent ref"))?;
        let name = reference.name().as_bstr().to_string();
        if !name.ends_with("/_/inbox") {
            continue;
        }
        let Some(tip) = reference.target().try_id().map(|id| id.to_owned()) else {
            continue;
        };
        let commit = repo.find_commit(tip).map_err(git("read an inbox's tip"))?;
        let Some(parent) = commit.parent_ids().next() else {
            continue;
        };
        repo.reference(
            name.as_str(),
            parent.detach(),
            PreviousValue::MustExistAndMatch(gix::refs::Target::Object(tip)),
            "fault: drop one acknowledged letter",
        )
        .map_err(git("move an inbox back"))?;
        tracing::warn!(inbox = %name, "FAULT SWITCH ON: dropped the newest acknowledged letter");
        return Ok(Some(name));
    }
    Ok(None)
}
