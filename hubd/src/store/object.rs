//! Git objects the store writes, encoded in memory with gix: ids and compressed loose bytes. Pure.
//!
//! Encoding happens before any file is touched, so a write knows every object id (and the new
//! tip) before it takes the ref lock, and the disk layer only places bytes.

use std::io::Write as _;

use gix::ObjectId;
use gix::objs::WriteTo;
use gix::objs::tree::{Entry, EntryKind};

use super::input::{Dir, Node};
use super::{StoreError, Tip};

/// Name of the one blob in a chain commit's tree.
pub const RECORDS_FILE: &str = "records.jsonl";
/// Name of the store's commit author and committer.
pub const IDENTITY_NAME: &str = "l3m hubd";
/// Email of the store's commit author and committer.
pub const IDENTITY_EMAIL: &str = "hubd@l3m.invalid";

/// Objects smaller than this are stored uncompressed in their zlib stream (see `zlib`): for
/// them, a compressor's setup costs more than compression saves.
const DEFLATE_FROM: usize = 4096;

/// An object ready to be placed under `objects/`: its id and its zlib-compressed loose form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LooseObject {
    /// The object id.
    pub(crate) id: ObjectId,
    /// Header and content, compressed as a loose object file holds them.
    pub(crate) compressed: Vec<u8>,
}

/// Encodes, hashes and compresses one object.
pub(crate) fn encode(object: &dyn WriteTo) -> Result<LooseObject, StoreError> {
    let encode_err = |source| StoreError::Encode {
        kind: object.kind(),
        source,
    };
    let mut data = Vec::with_capacity(256);
    object.write_to(&mut data).map_err(encode_err)?;
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, object.kind(), &data)
        .map_err(StoreError::git("hash an object"))?;
    let header = gix::objs::encode::loose_header(object.kind(), data.len() as u64);
    if data.len() < DEFLATE_FROM {
        return Ok(LooseObject {
            id,
            compressed: super::zlib::stored(&[&header, &data]),
        });
    }
    let mut zlib = gix::zlib::stream::deflate::Write::new(
        Vec::with_capacity(data.len() + 32),
        gix::zlib::Compression::BEST_SPEED,
    );
    zlib.write_all(&header)
        .and_then(|()| zlib.write_all(&data))
        .and_then(|()| zlib.flush())
        .map_err(encode_err)?;
    Ok(LooseObject {
        id,
        compressed: zlib.into_inner(),
    })
}

/// The objects of one new commit, in the order they must reach the disk (the commit last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewCommit {
    /// The commit's id, the ref's new value.
    pub(crate) commit: ObjectId,
    /// Every object the commit adds, the commit itself included.
    pub(crate) objects: Vec<LooseObject>,
}

/// The commit of one chain append: a tree with only `records` as `records.jsonl`.
///
/// Returns the commit and the id of the `records.jsonl` blob.
pub(crate) fn chain_commit(
    parent: Tip,
    records: &[u8],
    message: String,
    time: gix::date::Time,
) -> Result<(NewCommit, ObjectId), StoreError> {
    let blob = encode(&gix::objs::Blob {
        data: records.to_vec(),
    })?;
    let records_id = blob.id;
    let tree = encode(&gix::objs::Tree {
        entries: vec![Entry {
            mode: EntryKind::Blob.into(),
            filename: RECORDS_FILE.into(),
            oid: records_id,
        }],
    })?;
    let mut objects = vec![blob];
    let tree_id = tree.id;
    objects.push(tree);
    Ok((
        finish(
            parent.id().into_iter().collect(),
            tree_id,
            objects,
            message,
            time,
        )?,
        records_id,
    ))
}

/// The commit of a whole tree of files (settings, grants, persona files).
pub(crate) fn files_commit(
    parent: Tip,
    root: &Dir,
    message: String,
    time: gix::date::Time,
) -> Result<NewCommit, StoreError> {
    let mut objects = Vec::new();
    let tree_id = encode_dir(root, &mut objects)?;
    finish(
        parent.id().into_iter().collect(),
        tree_id,
        objects,
        message,
        time,
    )
}

/// A merge commit of a whole tree of files: first parent `parent` (the ref's tip), second
/// parent `other` (an existing commit whose history it brings in).
pub(crate) fn merge_files_commit(
    parent: ObjectId,
    other: ObjectId,
    root: &Dir,
    message: String,
    time: gix::date::Time,
) -> Result<NewCommit, StoreError> {
    let mut objects = Vec::new();
    let tree_id = encode_dir(root, &mut objects)?;
    finish(vec![parent, other], tree_id, objects, message, time)
}

/// Appends the objects of `dir` (children first) to `objects` and returns the tree's id.
fn encode_dir(dir: &Dir, objects: &mut Vec<LooseObject>) -> Result<ObjectId, StoreError> {
    let mut entries = Vec::with_capacity(dir.entries.len());
    for (name, node) in &dir.entries {
        let (mode, oid) = match node {
            Node::File(bytes) => {
                let blob = encode(&gix::objs::Blob {
                    data: bytes.clone(),
                })?;
                let id = blob.id;
                objects.push(blob);
                (EntryKind::Blob, id)
            }
            Node::Dir(sub) => (EntryKind::Tree, encode_dir(sub, objects)?),
        };
        entries.push(Entry {
            mode: mode.into(),
            filename: name.as_str().into(),
            oid,
        });
    }
    entries.sort();
    let tree = encode(&gix::objs::Tree { entries })?;
    let id = tree.id;
    objects.push(tree);
    Ok(id)
}

/// Adds the commit object on `tree` to `objects`.
fn finish(
    parents: Vec<ObjectId>,
    tree: ObjectId,
    mut objects: Vec<LooseObject>,
    message: String,
    time: gix::date::Time,
) -> Result<NewCommit, StoreError> {
    let signature = gix::actor::Signature {
        name: IDENTITY_NAME.into(),
        email: IDENTITY_EMAIL.into(),
        time,
    };
    let commit = encode(&gix::objs::Commit {
        tree,
        parents: parents.into(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    })?;
    let commit_id = commit.id;
    objects.push(commit);
    Ok(NewCommit {
        commit: commit_id,
        objects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::input::file_tree;

    fn time() -> gix::date::Time {
        gix::date::Time {
            seconds: 1_700_000_000,
            offset: 0,
        }
    }

    fn inflate(compressed: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut inflate = gix::zlib::Inflate::default();
        let mut buf = vec![0u8; 64 * 1024];
        let (_, _, written) = inflate
            .once(compressed, &mut buf)
            .expect("our own zlib stream inflates");
        out.extend_from_slice(&buf[..written]);
        out
    }

    #[test]
    fn blob_id_matches_git() {
        // `printf 'hello\n' | git hash-object --stdin`
        let blob = encode(&gix::objs::Blob {
            data: b"hello\n".to_vec(),
        })
        .unwrap();
        assert_eq!(
            blob.id.to_string(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(inflate(&blob.compressed), b"blob 6\0hello\n");
    }

    #[test]
    fn chain_commit_is_blob_tree_commit() {
        let (commit, records) =
            chain_commit(Tip::Absent, b"{}\n", "first\n".into(), time()).unwrap();
        assert_eq!(commit.objects.len(), 3);
        assert_eq!(commit.objects[0].id, records);
        assert_eq!(commit.objects[2].id, commit.commit);
        let text = inflate(&commit.objects[2].compressed);
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains("author l3m hubd <hubd@l3m.invalid> 1700000000 +0000"));
        assert!(
            !text.contains("parent"),
            "a first commit has no parent: {text}"
        );
        assert!(text.ends_with("\n\nfirst\n"), "{text}");
    }

    #[test]
    fn files_commit_orders_children_before_parents() {
        let dir = file_tree(&[("a/b", b"1"), ("c", b"2")]).unwrap();
        let commit = files_commit(Tip::Absent, &dir, "files\n".into(), time()).unwrap();
        // blob b, tree a, blob c, root tree, commit
        assert_eq!(commit.objects.len(), 5);
        assert_eq!(commit.objects.last().unwrap().id, commit.commit);
    }
}
