//! Pushed packs (`hubd::store::Hub::quarantine`): the bytes of a `hubd.push-pack`, once whole,
//! indexed and checked in a quarantine before anything of them joins the hub.

use std::path::Path;
use std::process::Stdio;

use hubd::store::{Hub, HubOptions, StoreError};
use l3m_wire::hubd::pack::MAX_OBJECT_BYTES;

use crate::harness::{self, Src};

/// Runs git in `dir` and returns its output; the fixture's own commands, not the code under test.
fn git(dir: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut child = l3m_git::command(dir)
        .args([
            "-c",
            "user.name=f",
            "-c",
            "user.email=f@f",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git starts");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin).expect("stdin");
    let out = child.wait_with_output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A valid pack of two commits, a tree and a blob: the seed the mutations start from.
fn seed_pack(dir: &Path) -> Vec<u8> {
    git(dir, &["init", "-q"], b"");
    std::fs::write(dir.join("a.txt"), "one\n").expect("write");
    git(dir, &["add", "a.txt"], b"");
    git(dir, &["commit", "-qm", "one"], b"");
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").expect("write");
    git(dir, &["commit", "-qam", "two"], b"");
    git(dir, &["pack-objects", "--stdout", "--revs"], b"HEAD\n")
}

/// The quarantines left under `hub.git/objects`.
fn leftovers(root: &Path) -> Vec<String> {
    let objects = root.join("hub.git").join("objects");
    std::fs::read_dir(&objects)
        .expect("objects")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("incoming-"))
        .collect()
}

/// `fuzz_pushed_pack_intake`: any pushed bytes, and mutations of a valid pack, are quarantined
/// whole or refused as `PackRefused`, and a refused or dropped quarantine leaves nothing in
/// the hub.
#[test]
fn fuzz_pushed_pack_intake() {
    let work = tempfile::tempdir().expect("tempdir");
    let seed = seed_pack(work.path());
    assert!(seed.starts_with(b"PACK"));
    let root = tempfile::tempdir().expect("tempdir");
    let hub = Hub::create(root.path(), HubOptions::default()).expect("hub");
    let hub = std::sync::Mutex::new(hub);
    let refused = std::sync::atomic::AtomicU64::new(0);
    harness::run("pushed-packs", 150, 2048, |input| {
        let mut src = Src::new(input);
        let pack = match src.below(4) {
            0 => input.to_vec(),
            _ => harness::mutate(&seed, &mut src, &["PACK", "\0\0\0\x02", "\0\0\0\0"]),
        };
        let hub = hub
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match hub.quarantine(&pack, MAX_OBJECT_BYTES) {
            Ok(quarantine) => drop(quarantine),
            Err(StoreError::PackRefused { problem }) => {
                assert!(!problem.is_empty());
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => panic!("a pack was answered {e:?}, not a refusal"),
        }
        assert_eq!(leftovers(root.path()), Vec::<String>::new());
    });
    assert!(
        refused.into_inner() > 0,
        "no input was refused: the mutations are too weak"
    );
    let hub = hub
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        hub.quarantine(&seed, MAX_OBJECT_BYTES).is_ok(),
        "the seed pack is valid"
    );
}
