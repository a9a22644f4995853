//! Adversarial tests of the file provider. Each test is named for the boundary that stops the
//! attack, and each checks the world is unchanged afterwards: the directory outside the hub, the
//! sibling agent's ACR and the harness's `.l3m/` are snapshotted before and compared after, and
//! the undo chain holds no entry for a refused call.

use crate::support;

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use l3m_ring::files::{self, FilesError, NodeKind};
use l3m_ring::path::PathError;
use support::{Hub, SECRET};

/// Every provider call an attacker might aim at `path`, with the error each returned.
fn every_call(hub: &Hub, path: &str) -> Vec<(&'static str, FilesError)> {
    let j = hub.journal();
    let t = &hub.token;
    let calls: [(&str, Result<(), FilesError>); 5] = [
        ("read", files::read(t, path).map(drop)),
        ("list", files::list(t, path).map(drop)),
        ("write", files::write(t, path, b"pwned", j)),
        ("remove", files::remove(t, path, j)),
        ("mkdir", files::mkdir(t, path, j)),
    ];
    calls
        .into_iter()
        .map(|(name, r)| match r {
            Err(e) => (name, e),
            Ok(()) => panic!("{name} of {path:?} was allowed"),
        })
        .collect()
}

/// Asserts every call on `path` is refused as `expected` says, and nothing changed.
fn refused_everywhere(hub: &Hub, path: &str, expected: impl Fn(&str, &FilesError) -> bool) {
    let world = hub.world();
    for (call, err) in every_call(hub, path) {
        assert!(
            expected(call, &err),
            "{call} of {path:?}: unexpected refusal {err}"
        );
    }
    assert_eq!(
        hub.world(),
        world,
        "a refused call on {path:?} changed the world"
    );
    assert_eq!(
        hub.journal_len(),
        0,
        "a refused call on {path:?} was journaled"
    );
}

#[test]
fn files_boundary_path_refuses_dotdot() {
    let hub = Hub::new();
    for path in [
        "../x",
        "a/../../x",
        "workspace/../../../../../outside/secret",
        "workspace/../.l3m/grants.toml",
        "workspace/src/..",
    ] {
        refused_everywhere(&hub, path, |_, e| {
            matches!(e, FilesError::Path(PathError::DotDot { .. }))
        });
    }
}

#[test]
fn files_boundary_path_refuses_absolute() {
    let hub = Hub::new();
    let secret = hub.outside.join("secret");
    let inside = hub.ws("README.md");
    for path in [secret.to_str().unwrap(), inside.to_str().unwrap(), "/"] {
        refused_everywhere(&hub, path, |_, e| {
            matches!(e, FilesError::Path(PathError::Absolute { .. }))
        });
    }
}

#[test]
fn files_boundary_symlink_refuses_an_escape_made_before_the_call() {
    let hub = Hub::new();
    symlink(&hub.outside, hub.ws("escape")).unwrap();
    symlink(hub.outside.join("secret"), hub.ws("secret-link")).unwrap();
    symlink(hub.outside.join("not-yet"), hub.ws("dangling")).unwrap();
    for path in [
        "workspace/escape",
        "workspace/escape/secret",
        "workspace/escape/new",
        "workspace/secret-link",
        "workspace/dangling",
    ] {
        refused_everywhere(&hub, path, |call, e| match e {
            FilesError::Symlink { .. } => true,
            // mkdir reports what is already at the leaf rather than following it
            FilesError::AlreadyExists { kind, .. } => call == "mkdir" && *kind == NodeKind::Symlink,
            _ => false,
        });
    }
    assert!(!hub.outside.join("not-yet").exists());
    assert!(!hub.outside.join("new").exists());
}

#[test]
fn files_boundary_symlink_refuses_links_that_stay_inside_the_acr() {
    let hub = Hub::new();
    // A link that cap-std alone would follow (it stays under the ACR), into the harness's dir.
    symlink("../.l3m", hub.ws("harness")).unwrap();
    symlink("../agent", hub.ws("persona")).unwrap();
    for path in [
        "workspace/harness/grants.toml",
        "workspace/persona/persona.md",
    ] {
        refused_everywhere(&hub, path, |call, e| match e {
            FilesError::Symlink { at, .. } => at.starts_with("workspace/"),
            FilesError::NotFound { .. } => call == "mkdir",
            _ => false,
        });
    }
}

/// The swaps of the directory that must happen while the writes run, and the writes the swaps
/// must have refused, for the race to count as exercised: a swapper that never ran (or ran only
/// before or after the writes) would leave the boundary untested, and the test says so.
const MIN_SWAPS: u64 = 100;

/// How long the writes go on waiting for the race to happen before the test fails.
const RACE_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

#[test]
fn files_boundary_symlink_holds_while_a_directory_is_swapped_for_a_link_during_writes() {
    let hub = Arc::new(Hub::new());
    let dir = hub.ws("d");
    let away = hub.ws("d.away");
    std::fs::create_dir(&dir).unwrap();
    let before = hub.beyond();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, outside) = (Arc::clone(&stop), Arc::clone(&swaps), hub.outside.clone());
        let (dir, away) = (dir.clone(), away.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&dir, &away).unwrap();
                symlink(&outside, &dir).unwrap();
                std::thread::yield_now();
                std::fs::remove_file(&dir).unwrap();
                std::fs::rename(&away, &dir).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let (mut landed, mut refused) = (0u32, 0u32);
    let started = std::time::Instant::now();
    let swaps_before = swaps.load(Ordering::Relaxed);
    let mut i = 0u32;
    // At least 2000 writes, and on until the race has happened (bounded by RACE_WITHIN).
    while i < 2000
        || (started.elapsed() < RACE_WITHIN
            && (swaps.load(Ordering::Relaxed) - swaps_before < MIN_SWAPS || refused == 0))
    {
        let path = format!("workspace/d/f{}", i % 50);
        match files::write(&hub.token, &path, b"pwned", hub.journal()) {
            Ok(()) => landed += 1,
            Err(FilesError::Symlink { .. } | FilesError::NotFound { .. }) => refused += 1,
            // the directory moved between the kernel's refusal and the diagnosis of it
            Err(FilesError::Io { .. }) => refused += 1,
            Err(other) => panic!("unexpected refusal {other}"),
        }
        i += 1;
    }
    let during = swaps.load(Ordering::Relaxed) - swaps_before;
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(hub.beyond(), before, "a write landed outside the ACR");
    assert_eq!(std::fs::read(hub.outside.join("secret")).unwrap(), SECRET);
    assert!(std::fs::read_dir(&hub.outside).unwrap().count() == 1);
    eprintln!("{during} swaps during {i} writes; {landed} landed inside, {refused} refused");
    assert!(
        during >= MIN_SWAPS,
        "only {during} swaps happened during the writes: the race was not exercised"
    );
    assert!(
        refused > 0,
        "no write met a swapped directory: the race was not exercised"
    );
}

#[test]
fn files_boundary_symlink_holds_while_the_target_file_is_swapped_for_a_link_during_writes() {
    let hub = Arc::new(Hub::new());
    let target = hub.ws("target");
    std::fs::write(&target, b"mine").unwrap();
    let before = hub.beyond();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, secret) = (Arc::clone(&stop), hub.outside.join("secret"));
        let target = target.clone();
        std::thread::spawn(move || {
            let staged = target.with_file_name("staged-link");
            while !stop.load(Ordering::Relaxed) {
                let _gone = std::fs::remove_file(&staged);
                symlink(&secret, &staged).unwrap();
                // atomically replace whatever the provider left with a link to the secret
                std::fs::rename(&staged, &target).unwrap();
                std::thread::yield_now();
            }
        })
    };
    for _ in 0..2000 {
        let _refused_or_replaced =
            files::write(&hub.token, "workspace/target", b"pwned", hub.journal());
        let _refused_or_read = files::read(&hub.token, "workspace/target");
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(hub.beyond(), before, "a write went through the link");
    assert_eq!(std::fs::read(hub.outside.join("secret")).unwrap(), SECRET);
}

#[test]
fn files_boundary_harness_refuses_dot_l3m() {
    let hub = Hub::new();
    for path in [
        ".l3m",
        ".l3m/grants.toml",
        "./.l3m/undo.journal",
        ".l3m//new",
    ] {
        refused_everywhere(&hub, path, |_, e| matches!(e, FilesError::Harness { .. }));
    }
    let top = files::list(&hub.token, ".").unwrap();
    assert!(top.entries.iter().all(|e| e.name != ".l3m"));
}

#[test]
fn files_boundary_write_roots_refuse_another_agents_worktree() {
    let hub = Hub::new();
    let before = hub.world();
    let theirs = hub.sibling.join("workspace/theirs.txt");
    let j = hub.journal();
    // by climbing, by absolute path, by a link, and by a name that is simply not ours
    let climb = "workspace/../../../other/self/workspace/theirs.txt";
    let err = files::write(&hub.token, climb, b"pwned", j).unwrap_err();
    assert!(
        matches!(err, FilesError::Path(PathError::DotDot { .. })),
        "{err}"
    );
    let err = files::write(&hub.token, theirs.to_str().unwrap(), b"pwned", j).unwrap_err();
    assert!(
        matches!(err, FilesError::Path(PathError::Absolute { .. })),
        "{err}"
    );
    symlink(hub.sibling.join("workspace"), hub.ws("sibling")).unwrap();
    let err = files::write(&hub.token, "workspace/sibling/theirs.txt", b"pwned", j).unwrap_err();
    assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
    let err = files::read(&hub.token, "workspace/sibling/theirs.txt").unwrap_err();
    assert!(matches!(err, FilesError::Symlink { .. }), "{err}");
    for not_ours in [
        "other/self/workspace/theirs.txt",
        "notes.txt",
        "workspace2/x",
    ] {
        let err = files::write(&hub.token, not_ours, b"pwned", j).unwrap_err();
        assert!(matches!(err, FilesError::OutsideWriteRoots { .. }), "{err}");
    }
    assert_eq!(hub.world(), before);
    assert_eq!(hub.journal_len(), 0);
}

#[test]
fn files_boundary_file_type_refuses_a_fifo() {
    let hub = Hub::new();
    let status = std::process::Command::new("mkfifo")
        .arg(hub.ws("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    // Neither call may block waiting for the other end, nor succeed.
    for (call, err) in [
        (
            "read",
            files::read(&hub.token, "workspace/pipe").unwrap_err(),
        ),
        (
            "write",
            files::write(&hub.token, "workspace/pipe", b"x", hub.journal()).unwrap_err(),
        ),
        (
            "remove",
            files::remove(&hub.token, "workspace/pipe", hub.journal()).unwrap_err(),
        ),
    ] {
        assert!(
            matches!(
                err,
                FilesError::SpecialFile {
                    kind: NodeKind::Fifo,
                    ..
                }
            ),
            "{call}: {err}"
        );
    }
    assert_eq!(hub.journal_len(), 0);
}

#[test]
fn files_boundary_file_type_refuses_a_socket() {
    let hub = Hub::new();
    let _listener = std::os::unix::net::UnixListener::bind(hub.ws("sock")).unwrap();
    let err = files::read(&hub.token, "workspace/sock").unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::SpecialFile {
                kind: NodeKind::Socket,
                ..
            }
        ),
        "{err}"
    );
    let err = files::write(&hub.token, "workspace/sock", b"x", hub.journal()).unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::SpecialFile {
                kind: NodeKind::Socket,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(hub.journal_len(), 0);
}

#[test]
fn files_boundary_symlink_refuses_a_link_to_dev_null() {
    let hub = Hub::new();
    symlink("/dev/null", hub.ws("null")).unwrap();
    refused_everywhere(&hub, "workspace/null", |call, e| match e {
        FilesError::Symlink { .. } => true,
        FilesError::AlreadyExists { kind, .. } => call == "mkdir" && *kind == NodeKind::Symlink,
        _ => false,
    });
}

/// A device node inside the workspace (made with `mknod`, which needs CAP_MKNOD: the test
/// machines run as root). Its type is seen before any byte is read or written.
#[test]
fn files_boundary_file_type_refuses_a_device_node() {
    let hub = Hub::new();
    let made = std::process::Command::new("mknod")
        .arg(hub.ws("null"))
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(
        made.success(),
        "mknod needs CAP_MKNOD (run the tests as root)"
    );
    let err = files::read(&hub.token, "workspace/null").unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::SpecialFile {
                kind: NodeKind::CharDevice,
                ..
            }
        ),
        "{err}"
    );
    let err = files::write(&hub.token, "workspace/null", b"x", hub.journal()).unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::SpecialFile {
                kind: NodeKind::CharDevice,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(hub.journal_len(), 0);
}

#[test]
fn files_boundary_journal_refuses_a_forged_entry_that_climbs() {
    // A tampered journal line naming `../` cannot even be decoded into an entry to restore.
    let line = r#"{"v":1,"id":9,"path":"workspace/../../outside/secret","prior":{"kind":"absent"},"at_ms":0}"#;
    let parsed = l3m_core::record_format::from_line::<l3m_ring::undo::UndoEntry>(line, 1);
    assert!(parsed.is_err());
    // And a decodable entry outside the write roots is refused by restore before any change.
    let hub = Hub::new();
    let world = hub.world();
    let entry = l3m_ring::undo::UndoEntry {
        id: l3m_ring::undo::EntryId(1),
        undo: l3m_ring::undo::Undo::Path {
            path: l3m_ring::path::RelPath::parse(".l3m/grants.toml").unwrap(),
            prior: l3m_ring::undo::Prior::Absent,
        },
        at_ms: 0,
    };
    let err = files::restore(&hub.token, &[entry]).unwrap_err();
    assert!(matches!(err, FilesError::Harness { .. }), "{err}");
    assert_eq!(hub.world(), world);
}

#[test]
fn files_boundary_hard_link_is_replaced_never_written_through() {
    let hub = Hub::new();
    // A hard link planted in the workspace to a file outside (same filesystem).
    std::fs::hard_link(hub.outside.join("secret"), hub.ws("linked")).unwrap();
    let before = hub.beyond();
    files::write(&hub.token, "workspace/linked", b"pwned", hub.journal()).unwrap();
    assert_eq!(hub.beyond(), before, "the write went through the hard link");
    assert_eq!(std::fs::read(hub.ws("linked")).unwrap(), b"pwned");
    // and rewinding it restores the workspace's name, still without touching the outside file
    files::restore(&hub.token, &hub.journal.entries().unwrap()).unwrap();
    assert_eq!(std::fs::read(hub.ws("linked")).unwrap(), SECRET);
    assert_eq!(hub.beyond(), before);
}

#[test]
fn files_boundary_symlink_refusal_names_the_path_and_the_link() {
    let hub = Hub::new();
    symlink(&hub.outside, hub.ws("escape")).unwrap();
    let err = files::write(&hub.token, "workspace/escape/deep/x", b"x", hub.journal()).unwrap_err();
    match err {
        FilesError::Symlink { path, at } => {
            assert_eq!(
                (path.as_str(), at.as_str()),
                ("workspace/escape/deep/x", "workspace/escape")
            );
        }
        other => panic!("unexpected refusal {other}"),
    }
}
