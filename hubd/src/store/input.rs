//! Checks on what callers hand the store, before anything touches the disk. Pure.
//!
//! A chain entry must read back as exactly one entry, so it is one JSON value on one line. A
//! summary must read as one line of `git log --oneline`. A file path must name a plain file
//! inside a tree, never `..`, `.git` or an absolute path.

use std::collections::BTreeMap;

use super::StoreError;

/// The bytes of a chain commit's `records.jsonl`: each entry followed by a newline.
pub(crate) fn records_blob(refname: &str, entries: &[String]) -> Result<Vec<u8>, StoreError> {
    if entries.is_empty() {
        return Err(StoreError::NoEntries {
            refname: refname.to_owned(),
        });
    }
    let mut blob = Vec::with_capacity(entries.iter().map(|e| e.len() + 1).sum());
    for (index, entry) in entries.iter().enumerate() {
        if entry.contains(['\n', '\r']) {
            return Err(StoreError::EntryNotOneLine {
                index,
                entry: entry.clone(),
            });
        }
        if let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(entry) {
            return Err(StoreError::EntryNotJson {
                index,
                entry: entry.clone(),
                reason: err.to_string(),
            });
        }
        blob.extend_from_slice(entry.as_bytes());
        blob.push(b'\n');
    }
    Ok(blob)
}

/// The commit message for `summary`: the line itself and a final newline.
pub(crate) fn commit_message(summary: &str) -> Result<String, StoreError> {
    // The rule is core's, so the sequencer builds only records whose subject passes it.
    if !l3m_core::log_rule::is_one_line(summary) {
        return Err(StoreError::SummaryNotOneLine {
            summary: summary.to_owned(),
        });
    }
    Ok(format!("{summary}\n"))
}

/// A directory of a plain commit's tree, as given by [`file_tree`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Dir {
    /// Entries by name.
    pub(crate) entries: BTreeMap<String, Node>,
}

/// One entry of a [`Dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A regular, non-executable file.
    File(Vec<u8>),
    /// A subdirectory.
    Dir(Dir),
}

/// Builds the tree of `files`, refusing bad paths, duplicates and file/directory clashes.
pub(crate) fn file_tree(files: &[(&str, &[u8])]) -> Result<Dir, StoreError> {
    let mut root = Dir::default();
    for (path, bytes) in files {
        let bad = |reason| StoreError::BadFilePath {
            path: (*path).to_owned(),
            reason,
        };
        let components = path_components(path).map_err(bad)?;
        let Some((leaf, parents)) = components.split_last() else {
            return Err(bad("a path cannot be empty"));
        };
        let mut dir = &mut root;
        for component in parents {
            let node = dir
                .entries
                .entry((*component).to_owned())
                .or_insert_with(|| Node::Dir(Dir::default()));
            dir = match node {
                Node::Dir(sub) => sub,
                Node::File(_) => return Err(bad("a parent of this path is also given as a file")),
            };
        }
        if dir.entries.contains_key(*leaf) {
            return Err(bad("this path is given twice, or is also a directory"));
        }
        dir.entries
            .insert((*leaf).to_owned(), Node::File(bytes.to_vec()));
    }
    Ok(root)
}

/// Splits a relative path into its components, refusing anything that is not a plain path.
fn path_components(path: &str) -> Result<Vec<&str>, &'static str> {
    if path.is_empty() {
        return Err("a path cannot be empty");
    }
    if path.contains(['\0', '\\']) {
        return Err("a path cannot contain NUL or a backslash");
    }
    let components: Vec<&str> = path.split('/').collect();
    for component in &components {
        match *component {
            "" => return Err("a path is relative, without empty components or a trailing '/'"),
            "." | ".." => return Err("a path cannot contain '.' or '..'"),
            c if c.eq_ignore_ascii_case(".git") => return Err("a path cannot contain '.git'"),
            _ => {}
        }
    }
    Ok(components)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_blob_joins_entries_with_newlines() {
        let blob = records_blob("r", &[r#"{"a":1}"#.into(), "2".into()]).unwrap();
        assert_eq!(blob, b"{\"a\":1}\n2\n");
    }

    #[test]
    fn entries_must_be_one_json_line() {
        let r = "refs/l3m/ledger";
        assert!(matches!(
            records_blob(r, &[]),
            Err(StoreError::NoEntries { .. })
        ));
        assert!(matches!(
            records_blob(r, &["{}".into(), "{\n}".into()]),
            Err(StoreError::EntryNotOneLine { index: 1, .. })
        ));
        assert!(matches!(
            records_blob(r, &["{}\r".into()]),
            Err(StoreError::EntryNotOneLine { index: 0, .. })
        ));
        assert!(matches!(
            records_blob(r, &["{".into()]),
            Err(StoreError::EntryNotJson { index: 0, .. })
        ));
        assert!(matches!(
            records_blob(r, &["{} {}".into()]),
            Err(StoreError::EntryNotJson { index: 0, .. })
        ));
    }

    #[test]
    fn summaries_are_one_line() {
        assert_eq!(
            commit_message("boot: 3 records").unwrap(),
            "boot: 3 records\n"
        );
        for bad in ["", "  ", "two\nlines", "cr\r", "nul\0"] {
            assert!(
                matches!(
                    commit_message(bad),
                    Err(StoreError::SummaryNotOneLine { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn file_tree_nests_paths() {
        let tree = file_tree(&[("a/b.md", b"1"), ("a/c.md", b"2"), ("d", b"3")]).unwrap();
        let Some(Node::Dir(a)) = tree.entries.get("a") else {
            panic!("a is not a directory: {tree:?}");
        };
        assert_eq!(a.entries.get("b.md"), Some(&Node::File(b"1".to_vec())));
        assert_eq!(tree.entries.get("d"), Some(&Node::File(b"3".to_vec())));
    }

    #[test]
    fn bad_file_paths_are_refused() {
        for files in [
            vec![("", &b""[..])],
            vec![("/abs", b"")],
            vec![("a//b", b"")],
            vec![("a/", b"")],
            vec![("../up", b"")],
            vec![("a/./b", b"")],
            vec![(".git/config", b"")],
            vec![("x/.GIT", b"")],
            vec![("back\\slash", b"")],
            vec![("a", b""), ("a", b"")],
            vec![("a", b""), ("a/b", b"")],
            vec![("a/b", b""), ("a", b"")],
        ] {
            assert!(
                matches!(file_tree(&files), Err(StoreError::BadFilePath { .. })),
                "{files:?} was accepted"
            );
        }
    }
}
