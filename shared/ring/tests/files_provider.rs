//! The tame file provider's ordinary behaviour and the rewind semantics it supports.

use l3m_ring::test_support::files_hub as support;

use std::os::unix::fs::PermissionsExt;

use l3m_ring::files::{self, FilesError, ListEntry, NodeKind};
use l3m_ring::undo::{Prior, UndoStore};
use proptest::prelude::*;
use support::{Hub, snapshot};

#[test]
fn reads_range_over_the_acr_but_writes_only_under_roots() {
    let hub = Hub::new();
    assert_eq!(
        files::read(&hub.token, "workspace/README.md").unwrap(),
        b"# readme\n"
    );
    assert_eq!(
        files::read(&hub.token, "./agent//persona.md").unwrap(),
        b"be kind\n"
    );
    std::fs::create_dir(hub.acr.join("other-repo")).unwrap();
    std::fs::write(hub.acr.join("other-repo/x"), b"x").unwrap();
    assert_eq!(files::read(&hub.token, "other-repo/x").unwrap(), b"x");
    let err = files::write(&hub.token, "other-repo/x", b"y", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    assert_eq!(std::fs::read(hub.acr.join("other-repo/x")).unwrap(), b"x");
}

#[test]
fn write_creates_and_replaces_keeping_the_mode() {
    let hub = Hub::new();
    files::write(&hub.token, "workspace/new.txt", b"one", hub.journal()).unwrap();
    assert_eq!(std::fs::read(hub.ws("new.txt")).unwrap(), b"one");
    std::fs::set_permissions(hub.ws("new.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    files::write(&hub.token, "workspace/new.txt", b"two", hub.journal()).unwrap();
    assert_eq!(std::fs::read(hub.ws("new.txt")).unwrap(), b"two");
    let mode = std::fs::metadata(hub.ws("new.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let entries = hub.journal.entries().unwrap();
    let path = l3m_ring::path::RelPath::parse("workspace/new.txt").unwrap();
    let undo = |prior| l3m_ring::undo::Undo::Path {
        path: path.clone(),
        prior,
    };
    assert_eq!(entries[0].undo, undo(Prior::Absent));
    assert_eq!(
        entries[1].undo,
        undo(Prior::File {
            bytes: b"one".to_vec(),
            mode: 0o600
        })
    );
    assert!(entries[0].id < entries[1].id);
}

#[test]
fn write_needs_an_existing_parent_and_refuses_directories() {
    let hub = Hub::new();
    let err = files::write(&hub.token, "workspace/no/such/f", b"x", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
    let err = files::write(&hub.token, "workspace/src", b"x", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::NotAFile { .. }), "{err}");
    let err = files::write(&hub.token, "workspace/README.md/x", b"x", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::NotADirectory { .. }), "{err}");
    assert_eq!(hub.journal_len(), 0, "a refused write journals nothing");
}

#[test]
fn list_reports_kinds_sorted_and_hides_the_harness() {
    let hub = Hub::new();
    std::os::unix::fs::symlink("src", hub.ws("link")).unwrap();
    let names: Vec<_> = files::list(&hub.token, "")
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["agent", "workspace"]);
    let ws = files::list(&hub.token, "workspace").unwrap();
    assert_eq!(
        ws.entries,
        [
            ListEntry {
                name: "README.md".into(),
                kind: NodeKind::File
            },
            ListEntry {
                name: "link".into(),
                kind: NodeKind::Symlink
            },
            ListEntry {
                name: "src".into(),
                kind: NodeKind::Dir
            },
        ]
    );
    assert_eq!(ws.unaddressable, 0);
}

#[test]
fn list_counts_names_it_cannot_address() {
    use std::os::unix::ffi::OsStrExt;
    let hub = Hub::new();
    let odd = std::ffi::OsStr::from_bytes(b"bad\xffname");
    std::fs::write(hub.ws("").join(odd), b"x").unwrap();
    let ws = files::list(&hub.token, "workspace").unwrap();
    assert_eq!(ws.unaddressable, 1);
    assert_eq!(ws.entries.len(), 2);
}

#[test]
fn a_name_with_a_bidi_override_or_a_control_character_is_refused_and_not_listed() {
    use l3m_ring::path::PathError;
    let hub = Hub::new();
    for bad in [
        "workspace/invoice\u{202E}fdp.exe",
        "workspace/a\x1b[2Jb",
        "workspace/c\u{9b}d",
    ] {
        let err = files::write(&hub.token, bad, b"x", hub.journal()).unwrap_err();
        assert!(
            matches!(err, FilesError::Path(PathError::Unprintable { .. })),
            "{bad:?}: {err}"
        );
        let err = files::read(&hub.token, bad).unwrap_err();
        assert!(
            matches!(err, FilesError::Path(PathError::Unprintable { .. })),
            "{err}"
        );
    }
    // One already on disk (put there by a build, a clone) is left out of listings, counted.
    std::fs::write(hub.ws("").join("invoice\u{202E}fdp.exe"), b"x").unwrap();
    let ws = files::list(&hub.token, "workspace").unwrap();
    assert_eq!(ws.unaddressable, 1);
    assert!(ws.entries.iter().all(|e| !e.name.contains('\u{202E}')));
}

#[test]
fn remove_takes_files_and_empty_directories_only() {
    let hub = Hub::new();
    let err = files::remove(&hub.token, "workspace/src", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::DirNotEmpty { .. }), "{err}");
    files::remove(&hub.token, "workspace/src/lib.rs", hub.journal()).unwrap();
    files::remove(&hub.token, "workspace/src", hub.journal()).unwrap();
    assert!(!hub.ws("src").exists());
    let err = files::remove(&hub.token, "workspace/src", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
    assert_eq!(hub.journal_len(), 2);
}

#[test]
fn mkdir_creates_one_level_and_refuses_existing() {
    let hub = Hub::new();
    files::mkdir(&hub.token, "workspace/docs", hub.journal()).unwrap();
    assert!(hub.ws("docs").is_dir());
    let err = files::mkdir(&hub.token, "workspace/docs", hub.journal()).unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::AlreadyExists {
                kind: NodeKind::Dir,
                ..
            }
        ),
        "{err}"
    );
    let err = files::mkdir(&hub.token, "workspace/a/b", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
}

#[test]
fn a_narrowed_token_writes_only_under_its_narrower_root() {
    let hub = Hub::new();
    let narrow = hub.token.narrow(&["workspace/src"]).unwrap();
    files::write(&narrow, "workspace/src/new.rs", b"x", hub.journal()).unwrap();
    let err = files::write(&narrow, "workspace/README.md", b"x", hub.journal()).unwrap_err();
    assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    assert_eq!(
        files::read(&narrow, "agent/persona.md").unwrap(),
        b"be kind\n"
    );
}

#[test]
fn restore_refuses_entries_outside_the_token_before_touching_anything() {
    let hub = Hub::new();
    files::write(&hub.token, "workspace/src/a", b"a", hub.journal()).unwrap();
    files::write(&hub.token, "workspace/README.md", b"changed", hub.journal()).unwrap();
    let entries = hub.journal.entries().unwrap();
    let narrow = hub.token.narrow(&["workspace/src"]).unwrap();
    let before = snapshot(&hub.acr.join("workspace"));
    let err = files::restore(&narrow, &entries).unwrap_err();
    assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    assert_eq!(snapshot(&hub.acr.join("workspace")), before);
}

/// The fixture of the brief: write a, write b, overwrite a, remove b, restore — the tree is
/// byte-identical (content and permission bits) to what it was before the first write.
#[test]
fn rewind_restores_the_tree_byte_identically() {
    let hub = Hub::new();
    std::fs::set_permissions(hub.ws("README.md"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = snapshot(&hub.acr.join("workspace"));
    let j = hub.journal();
    files::write(&hub.token, "workspace/a", b"first a", j).unwrap();
    files::write(&hub.token, "workspace/b", b"b", j).unwrap();
    files::write(&hub.token, "workspace/a", b"second a", j).unwrap();
    files::remove(&hub.token, "workspace/b", j).unwrap();
    // and edits to what existed before: an overwrite, a removal, a new directory with a file
    files::write(&hub.token, "workspace/README.md", b"# changed\n", j).unwrap();
    files::remove(&hub.token, "workspace/src/lib.rs", j).unwrap();
    files::remove(&hub.token, "workspace/src", j).unwrap();
    files::mkdir(&hub.token, "workspace/docs", j).unwrap();
    files::write(&hub.token, "workspace/docs/c", b"c", j).unwrap();
    assert_ne!(snapshot(&hub.acr.join("workspace")), before);

    files::restore(&hub.token, &hub.journal.entries().unwrap()).unwrap();
    assert_eq!(snapshot(&hub.acr.join("workspace")), before);
}

#[test]
fn restore_removes_a_temporary_file_an_interrupted_write_left() {
    let hub = Hub::new();
    let id = hub.journal.next_id().unwrap();
    let entry = l3m_ring::undo::UndoEntry {
        id,
        undo: l3m_ring::undo::Undo::Path {
            path: l3m_ring::path::RelPath::parse("workspace/a").unwrap(),
            prior: Prior::Absent,
        },
        at_ms: 0,
    };
    hub.journal.record(&entry).unwrap();
    let before = snapshot(&hub.acr.join("workspace"));
    // the crash: the entry is durable, the temporary file written, the rename never happened
    std::fs::write(hub.ws(&format!(".l3m-tmp-{id}")), b"half").unwrap();
    files::restore(&hub.token, &[entry]).unwrap();
    assert_eq!(snapshot(&hub.acr.join("workspace")), before);
}

/// One edit a model might ask for, on a small namespace so edits collide.
#[derive(Debug, Clone)]
enum Edit {
    Write(&'static str, Vec<u8>),
    Remove(&'static str),
    Mkdir(&'static str),
}

const NAMES: [&str; 5] = [
    "workspace/a",
    "workspace/d",
    "workspace/d/b",
    "workspace/README.md",
    "workspace/src/lib.rs",
];

fn edit() -> impl Strategy<Value = Edit> {
    let name = proptest::sample::select(&NAMES[..]);
    prop_oneof![
        (name.clone(), proptest::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(n, b)| Edit::Write(n, b)),
        name.clone().prop_map(Edit::Remove),
        name.prop_map(Edit::Mkdir),
    ]
}

/// Applies an edit; refusals (a missing parent, a full directory) are part of the law too: a
/// refused edit journals nothing and changes nothing.
fn apply(hub: &Hub, e: &Edit) {
    let _refused_or_done = match e {
        Edit::Write(n, b) => files::write(&hub.token, n, b, hub.journal()),
        Edit::Remove(n) => files::remove(&hub.token, n, hub.journal()),
        Edit::Mkdir(n) => files::mkdir(&hub.token, n, hub.journal()),
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn restoring_a_suffix_of_the_journal_yields_the_tree_at_its_start(
        edits in proptest::collection::vec(edit(), 1..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let hub = Hub::new();
        let ws = hub.acr.join("workspace");
        // the tree as it stood before each journal entry was made
        let mut at_entry = Vec::new();
        for e in &edits {
            let before = snapshot(&ws);
            let len = hub.journal_len();
            apply(&hub, e);
            if hub.journal_len() > len {
                at_entry.push(before);
            } else {
                prop_assert_eq!(snapshot(&ws), before, "a refused edit changed the tree");
            }
        }
        let entries = hub.journal.entries().unwrap();
        prop_assert_eq!(entries.len(), at_entry.len());
        prop_assume!(!entries.is_empty());
        let k = cut.index(entries.len());
        files::restore(&hub.token, &entries[k..]).unwrap();
        prop_assert_eq!(&snapshot(&ws), &at_entry[k]);
    }
}
