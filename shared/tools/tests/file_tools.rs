//! Each file tool end to end through the real ring provider over an ACR on disk: what it does,
//! what it refuses (as a `ToolError` carrying the provider's boundary), and that rewind undoes it.

mod support;

use std::collections::BTreeSet;

use l3m_ring::effects::Effects;
use l3m_ring::files::{self, FilesError};
use l3m_tools::{ToolError, ToolOutput, ToolTable, builtin};
use serde_json::{Value, json};
use support::{Acr, NOW_MS, run};

struct Session {
    acr: Acr,
    fx: Effects,
    table: ToolTable,
}

// A session that cannot start, or a call meant to succeed that fails, is a failed test.
#[allow(clippy::unwrap_used)]
impl Session {
    fn new() -> Self {
        let acr = Acr::new();
        let fx = acr.effects(true);
        let table = ToolTable::build(builtin(), &BTreeSet::new()).unwrap();
        Self { acr, fx, table }
    }

    fn call(&self, name: &str, input: Value) -> Result<ToolOutput, ToolError> {
        run(&self.table, &self.fx, name, input)
    }

    fn text(&self, name: &str, input: Value) -> String {
        self.call(name, input).unwrap().text
    }
}

fn files_error(result: Result<ToolOutput, ToolError>) -> FilesError {
    match result {
        Err(ToolError::Files(e)) => e,
        other => panic!("expected a file provider refusal, got {other:?}"),
    }
}

fn bad_field(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::BadInput { field, .. }) => field,
        other => panic!("expected bad input, got {other:?}"),
    }
}

#[test]
fn read_file_reads_text_anywhere_but_the_harness() {
    let s = Session::new();
    assert_eq!(
        s.text("read_file", json!({"path": "workspace/README.md"})),
        "# readme\nhello world\n"
    );
    assert_eq!(
        s.text("read_file", json!({"path": "other-repo/notes.txt"})),
        "hello from elsewhere\n"
    );
    let err = files_error(s.call("read_file", json!({"path": ".l3m/grants.toml"})));
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    let err = files_error(s.call("read_file", json!({"path": "../self/workspace/README.md"})));
    assert!(matches!(err, FilesError::Path(_)), "{err}");
    let err = files_error(s.call("read_file", json!({"path": "workspace/missing"})));
    assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
    s.acr.symlink("README.md", "workspace/link");
    let err = files_error(s.call("read_file", json!({"path": "workspace/link"})));
    assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
    s.acr.put("workspace/blob.bin", &[0xff, 0xfe, 0]);
    let err = s
        .call("read_file", json!({"path": "workspace/blob.bin"}))
        .unwrap_err();
    assert!(matches!(err, ToolError::NotText { len: 3, .. }), "{err}");
}

#[test]
fn write_file_writes_under_the_roots_journaled_and_refuses_the_harness() {
    let s = Session::new();
    let out = s.text(
        "write_file",
        json!({"path": "workspace/new.txt", "content": "fresh\n"}),
    );
    assert_eq!(out, "wrote 6 bytes to `workspace/new.txt`");
    assert_eq!(s.acr.read("workspace/new.txt"), b"fresh\n");
    assert_eq!(s.acr.entries().len(), 1);

    let before = s.acr.snapshot();
    let refusal = s.call(
        "write_file",
        json!({"path": ".l3m/grants.toml", "content": "files = [\".\"]"}),
    );
    let err = files_error(refusal);
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    assert!(err.to_string().contains(".l3m"), "{err}");
    let outside = s.call(
        "write_file",
        json!({"path": "other-repo/notes.txt", "content": "x"}),
    );
    // The refusal as data: the boundary and the axis, for readers that must not match text.
    let typed = outside.as_ref().err().and_then(ToolError::refusal);
    assert_eq!(
        typed,
        Some(l3m_core::log::Refusal::new(
            "write-root",
            Some(l3m_core::axis::Axis::Files)
        ))
    );
    let err = files_error(outside);
    assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    let err = files_error(s.call("write_file", json!({"path": "/etc/passwd", "content": "x"})));
    assert!(matches!(err, FilesError::Path(_)), "{err}");
    assert_eq!(s.acr.snapshot(), before, "a refused write changes nothing");
}

#[test]
fn list_dir_lists_sorted_marks_kinds_and_hides_the_harness() {
    let s = Session::new();
    assert_eq!(
        s.text("list_dir", json!({})),
        "agent/\nother-repo/\nworkspace/"
    );
    s.acr.symlink("README.md", "workspace/link");
    assert_eq!(
        s.text("list_dir", json!({"path": "workspace"})),
        "README.md\nlink (symbolic link)\nsrc/"
    );
    let err = files_error(s.call("list_dir", json!({"path": ".l3m"})));
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    s.call("make_dir", json!({"path": "workspace/empty"}))
        .unwrap();
    assert_eq!(
        s.text("list_dir", json!({"path": "workspace/empty"})),
        "(empty directory)"
    );
}

#[test]
fn make_dir_and_remove_file_edit_the_tree_and_refuse_what_is_not_theirs() {
    let s = Session::new();
    assert_eq!(
        s.text("make_dir", json!({"path": "workspace/new"})),
        "created directory `workspace/new`"
    );
    assert!(s.acr.is_dir("workspace/new"));
    let err = files_error(s.call("make_dir", json!({"path": "workspace/new"})));
    assert!(matches!(err, FilesError::AlreadyExists { .. }), "{err}");
    s.text("remove_file", json!({"path": "workspace/new"}));
    s.text("remove_file", json!({"path": "workspace/README.md"}));
    assert!(!s.acr.exists("workspace/new") && !s.acr.exists("workspace/README.md"));
    let err = files_error(s.call("remove_file", json!({"path": "workspace/README.md"})));
    assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
    let err = files_error(s.call("remove_file", json!({"path": "workspace/src"})));
    assert!(matches!(err, FilesError::DirNotEmpty { .. }), "{err}");
    let err = files_error(s.call("remove_file", json!({"path": ".l3m/grants.toml"})));
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    assert!(s.acr.exists(".l3m/grants.toml"));
    assert_eq!(s.acr.entries().len(), 3);
}

#[test]
fn edit_file_replaces_one_exact_match_and_refuses_missing_or_ambiguous_ones() {
    let s = Session::new();
    s.acr.put("workspace/a.rs", b"let x = 1;\nlet y = 1;\n");
    let path = "workspace/a.rs";
    let out = s.text(
        "edit_file",
        json!({"path": path, "old": "let y = 1", "new": "let y = 2"}),
    );
    assert_eq!(out, "replaced 1 occurrence in `workspace/a.rs`");
    assert_eq!(s.acr.read(path), b"let x = 1;\nlet y = 2;\n");

    let before = s.acr.snapshot();
    let err = s
        .call(
            "edit_file",
            json!({"path": path, "old": "let", "new": "const"}),
        )
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Ambiguous { count: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("2 times"), "{err}");
    let err = s
        .call(
            "edit_file",
            json!({"path": path, "old": "let z", "new": "_"}),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::NoMatch { .. }), "{err}");
    assert_eq!(
        bad_field(s.call("edit_file", json!({"path": path, "old": "", "new": "x"}))),
        "old"
    );
    let err = files_error(s.call(
        "edit_file",
        json!({"path": "other-repo/notes.txt", "old": "hello", "new": "bye"}),
    ));
    assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    let err = files_error(s.call(
        "edit_file",
        json!({"path": ".l3m/grants.toml", "old": "workspace", "new": "."}),
    ));
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    assert_eq!(s.acr.snapshot(), before, "a refused edit changes nothing");
}

#[test]
fn search_files_finds_lines_in_name_order_and_is_bounded() {
    let s = Session::new();
    let out = s.text("search_files", json!({"pattern": "hello"}));
    assert_eq!(
        out,
        "other-repo/notes.txt:1: hello from elsewhere\n\
         workspace/README.md:2: hello world\n\
         workspace/src/lib.rs:2: // hello again\n\
         3 matching lines in 4 files searched under `.`"
    );
    assert!(!out.contains(".l3m"), "the harness is never searched");
    let out = s.text(
        "search_files",
        json!({"pattern": "hello", "path": "workspace", "max_results": 1}),
    );
    assert_eq!(
        out,
        "workspace/README.md:2: hello world\n\
         1 matching lines in 1 files searched under `workspace`; stopped at max_results = 1, there may be more"
    );
    s.acr.put("workspace/blob.bin", &[0xff, b'h']);
    let out = s.text(
        "search_files",
        json!({"pattern": "nowhere", "path": "workspace"}),
    );
    assert_eq!(
        out,
        "0 matching lines in 3 files searched under `workspace`; 1 entries skipped (unreadable or not UTF-8 text)"
    );
    let err = files_error(s.call("search_files", json!({"pattern": "files", "path": ".l3m"})));
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    assert_eq!(
        bad_field(s.call("search_files", json!({"pattern": ""}))),
        "pattern"
    );
    assert_eq!(
        bad_field(s.call("search_files", json!({"pattern": "x", "max_results": 501}))),
        "max_results"
    );
}

#[test]
fn now_reads_the_granted_clock() {
    let s = Session::new();
    assert_eq!(
        s.text("now", json!({})),
        format!("2025-12-01T20:38:58.123Z ({NOW_MS} ms since the Unix epoch)")
    );
}

#[test]
fn bad_inputs_name_the_field() {
    let s = Session::new();
    assert_eq!(bad_field(s.call("read_file", json!({}))), "path");
    assert_eq!(bad_field(s.call("read_file", json!({"path": 7}))), "path");
    assert_eq!(
        bad_field(s.call("write_file", json!({"path": "workspace/x", "content": 3}))),
        "content"
    );
    assert_eq!(
        bad_field(s.call("write_file", json!({"path": "workspace/x"}))),
        "content"
    );
    assert_eq!(bad_field(s.call("list_dir", json!("workspace"))), "input");
    assert_eq!(bad_field(s.call("now", json!({"tz": "utc"}))), "tz");
    assert_eq!(
        bad_field(s.call("make_dir", json!({"path": "workspace/x", "mode": 7}))),
        "mode"
    );
    assert!(!s.acr.exists("workspace/x"));
}

#[test]
fn rewind_restores_everything_the_file_tools_changed() {
    let s = Session::new();
    let before = s.acr.snapshot();
    s.text(
        "write_file",
        json!({"path": "workspace/new.txt", "content": "n"}),
    );
    s.text(
        "edit_file",
        json!({"path": "workspace/README.md", "old": "world", "new": "there"}),
    );
    s.text("make_dir", json!({"path": "agent/notes"}));
    s.text("remove_file", json!({"path": "workspace/src/lib.rs"}));
    assert_ne!(s.acr.snapshot(), before);
    files::restore(&s.acr.files_token(), &s.acr.entries()).unwrap();
    // The undo entries live outside the ACR, so everything in it is back as it was.
    assert_eq!(s.acr.snapshot(), before);
}

#[test]
fn search_files_stops_at_the_file_limit_and_says_so() {
    let s = Session::new();
    s.text("make_dir", json!({"path": "workspace/many"}));
    for i in 0..=l3m_tools::search::MAX_FILES {
        s.acr
            .put(&format!("workspace/many/{i:05}.txt"), b"needle\n");
    }
    let out = s.text(
        "search_files",
        json!({"pattern": "absent", "path": "workspace/many"}),
    );
    assert_eq!(
        out,
        format!(
            "0 matching lines in {max} files searched under `workspace/many`; stopped after {max} files, narrow `path` to search the rest",
            max = l3m_tools::search::MAX_FILES
        )
    );
}

/// A cut inside one long line can be read past: `from_byte` skips that many bytes of what is
/// read (moving on to a character boundary), alone or after a line range.
#[test]
fn read_file_reads_on_from_a_byte() {
    let s = Session::new();
    assert_eq!(
        s.text(
            "read_file",
            json!({"path": "workspace/README.md", "from_byte": 9})
        ),
        "hello world\n"
    );
    assert_eq!(
        s.text(
            "read_file",
            json!({"path": "workspace/README.md", "from_line": 2, "from_byte": 6})
        ),
        "world\n"
    );
    assert_eq!(
        s.text(
            "read_file",
            json!({"path": "workspace/README.md", "from_byte": 999})
        ),
        ""
    );
    assert_eq!(
        bad_field(s.call(
            "read_file",
            json!({"path": "workspace/README.md", "from_byte": -1})
        )),
        "from_byte"
    );
}
