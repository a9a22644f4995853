//! Reading what the store wrote: walking a chain once to index it, and reading objects back.
//!
//! The walk also checks that a chain has the shape the store writes — a line of commits, each
//! with a tree holding only `records.jsonl`, a non-empty blob of whole UTF-8 lines — so a chain
//! edited by hand is reported by commit instead of being misread later.

use gix::ObjectId;
use gix::objs::Find as _;
use gix::objs::tree::EntryKind;

use super::index::ChainIndex;
use super::object::RECORDS_FILE;
use super::{StoreError, Tip};

/// The index of the chain whose tip is now `tip`, given what was known before (`known`).
///
/// Walks back from `tip` reading each commit, tree and blob once, and stops early where it
/// meets `known`'s tip: a chain that only grew costs just its new commits. A chain that was
/// rewritten or deleted is indexed from scratch.
pub(crate) fn resync_chain(
    repo: &gix::Repository,
    refname: &str,
    known: &ChainIndex,
    tip: Tip,
) -> Result<ChainIndex, StoreError> {
    let stop_at = known.tip().id();
    let mut newest_first = Vec::new();
    let mut next = tip.id();
    let mut buf = Vec::new();
    while let Some(commit) = next {
        if Some(commit) == stop_at {
            break;
        }
        let malformed = |problem: String| StoreError::MalformedChain {
            refname: refname.to_owned(),
            commit,
            problem,
        };
        let (tree, parent) = {
            let data =
                read_object(repo, commit, gix::objs::Kind::Commit, &mut buf).map_err(&malformed)?;
            let decoded = gix::objs::CommitRef::from_bytes(data, gix::hash::Kind::Sha1)
                .map_err(|err| malformed(format!("the commit does not parse ({err})")))?;
            let mut parents = decoded.parents();
            let parent = parents.next();
            if parents.next().is_some() {
                return Err(malformed("a chain commit has at most one parent".into()));
            }
            (decoded.tree(), parent)
        };
        let records = records_blob_of(repo, tree, &mut buf).map_err(&malformed)?;
        let data =
            read_object(repo, records, gix::objs::Kind::Blob, &mut buf).map_err(&malformed)?;
        let count = count_lines(data).map_err(|problem| malformed(problem.into()))?;
        newest_first.push((commit, records, count));
        next = parent;
    }
    let mut index = if next.is_some() {
        known.clone()
    } else {
        ChainIndex::empty()
    };
    for (commit, records, count) in newest_first.into_iter().rev() {
        index.push(commit, records, count);
    }
    Ok(index)
}

/// The id of the one `records.jsonl` blob in a chain commit's tree.
fn records_blob_of(
    repo: &gix::Repository,
    tree: ObjectId,
    buf: &mut Vec<u8>,
) -> Result<ObjectId, String> {
    let data = read_object(repo, tree, gix::objs::Kind::Tree, buf)?;
    let decoded = gix::objs::TreeRef::from_bytes(data, gix::hash::Kind::Sha1)
        .map_err(|err| format!("its tree does not parse ({err})"))?;
    match decoded.entries.as_slice() {
        [entry] if entry.filename == RECORDS_FILE && entry.mode.kind() == EntryKind::Blob => {
            Ok(entry.oid.to_owned())
        }
        _ => Err(format!(
            "its tree must hold exactly one file, {RECORDS_FILE}, and holds {} entries",
            decoded.entries.len()
        )),
    }
}

/// Number of entries in a `records.jsonl` blob: whole, non-empty, UTF-8 lines.
pub(crate) fn count_lines(data: &[u8]) -> Result<u64, &'static str> {
    if data.is_empty() || data.last() != Some(&b'\n') {
        return Err("its records.jsonl must be non-empty and end with a newline");
    }
    if std::str::from_utf8(data).is_err() {
        return Err("its records.jsonl is not UTF-8");
    }
    if data.windows(2).any(|pair| pair == b"\n\n") || data.first() == Some(&b'\n') {
        return Err("its records.jsonl has an empty line");
    }
    Ok(data.iter().filter(|&&b| b == b'\n').count() as u64)
}

/// Reads an object of a known kind into `buf`; the error says what was wrong.
pub(crate) fn read_object<'b>(
    repo: &gix::Repository,
    id: ObjectId,
    kind: gix::objs::Kind,
    buf: &'b mut Vec<u8>,
) -> Result<&'b [u8], String> {
    match repo.objects.try_find(&id, buf) {
        Ok(Some(data)) if data.kind == kind => Ok(data.data),
        Ok(Some(data)) => Err(format!("{id} is a {}, not a {kind}", data.kind)),
        Ok(None) => Err(format!("the {kind} {id} is missing from hub.git")),
        Err(err) => Err(format!("the {kind} {id} cannot be read ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::count_lines;

    #[test]
    fn records_blobs_are_whole_lines() {
        assert_eq!(count_lines(b"{}\n[]\n"), Ok(2));
        assert!(count_lines(b"").is_err());
        assert!(count_lines(b"{}").is_err());
        assert!(count_lines(b"{}\n\n").is_err());
        assert!(count_lines(b"\n{}\n").is_err());
        assert!(count_lines(b"\xff\n").is_err());
    }
}
