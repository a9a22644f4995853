//! Fetching and pushing an agent's branches through hubd over a real nats-server: a good push
//! arrives in `hub.git` (also one of many chunks) and `git fsck --strict` stays clean; every
//! bad push — a non-fast-forward, another agent's branch, a corrupt object, an oversized pack
//! or object, a pack missing objects — is refused with nothing written: no ref moves and no
//! file appears under `hub.git/objects`.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::*;
use hubd::test_support::git;
use l3m_core::duty::Duty;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::pack::{
    CHUNK_BYTES, FetchPack, MAX_OBJECT_BYTES, MAX_PACK_BYTES, PackChunk, PushPack, Pushed,
    RefUpdate,
};
use l3m_wire::reply::ErrorCode;

/// Runs git in `dir` with binary `input`; returns its binary output, asserting success.
fn git_bytes(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = test_support::git_command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A clone of an agent's branches, made by fetching through hubd: `work` checked out.
struct LocalClone {
    dir: tempfile::TempDir,
    work: String,
    persona: String,
}

impl LocalClone {
    async fn fetch(by: &HubClient, agent: &str) -> LocalClone {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "scratch"]);
        let fetched = by.fetch_pack(&agent_name(agent), &[]).await.unwrap();
        git_bytes(dir.path(), &["index-pack", "--stdin"], &fetched.pack);
        let (work, persona) = (fetched.work.unwrap(), fetched.persona.unwrap());
        git(dir.path(), &["update-ref", "refs/heads/work", &work]);
        git(dir.path(), &["update-ref", "refs/heads/persona", &persona]);
        git(dir.path(), &["checkout", "-q", "work"]);
        LocalClone { dir, work, persona }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `files` and commits them on the checked-out branch; returns the commit.
    fn commit(&self, files: &[(&str, &[u8])], message: &str) -> String {
        for (name, bytes) in files {
            std::fs::write(self.path().join(name), bytes).unwrap();
            git(self.path(), &["add", name]);
        }
        git(self.path(), &["commit", "-q", "-m", message]);
        self.head()
    }

    fn head(&self) -> String {
        git(self.path(), &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// A pack of what `new` reaches and `old` does not, as a push sends it.
    fn pack(&self, new: &str, old: &str) -> Vec<u8> {
        let revs = format!("{new}\n^{old}\n");
        git_bytes(
            self.path(),
            &["pack-objects", "--stdout", "--revs", "-q"],
            revs.as_bytes(),
        )
    }

    /// A pack of exactly `objects`.
    fn pack_of(&self, objects: &[&str]) -> Vec<u8> {
        let list = objects.iter().map(|o| format!("{o}\n")).collect::<String>();
        git_bytes(
            self.path(),
            &["pack-objects", "--stdout", "-q"],
            list.as_bytes(),
        )
    }
}

fn agent_name(s: &str) -> l3m_core::names::AgentName {
    agent(s)
}

fn work(agent: &str) -> String {
    refs::work_branch(&agent_name(agent))
}

fn persona(agent: &str) -> String {
    refs::agent_ref(&agent_name(agent), AgentRef::Persona)
}

fn update(refname: String, old: &str, new: &str) -> RefUpdate {
    RefUpdate {
        refname,
        old: old.into(),
        new: new.into(),
        back: false,
    }
}

/// Commits on bob's work branch in `clone` and pushes it, from the tip `clone` fetched;
/// returns the new tip.
async fn push_ahead(s: &Scene, clone: &LocalClone) -> String {
    let ahead = clone.commit(&[("y", b"y\n")], "ahead");
    s.bob
        .push_pack(
            &agent("bob"),
            vec![update(work("bob"), &clone.work, &ahead)],
            &clone.pack(&ahead, &clone.work),
        )
        .await
        .unwrap();
    ahead
}

/// Bytes that do not compress, so a pack holding them spans several chunks.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Every ref and every file under `hub.git/objects`: what a refused push must leave alone.
fn written(f: &Fixture) -> (String, Vec<PathBuf>) {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else {
                into.push(path);
            }
        }
    }
    f.state().hub().settle();
    let mut files = Vec::new();
    walk(&f.git_dir().join("objects"), &mut files);
    files.sort();
    (f.refs(), files)
}

struct Scene {
    f: Fixture,
    bob: HubClient,
}

/// A hub with `bob` (and his child `bob/kid`) and `carol`, and bob's sequencer's client.
async fn scene() -> Scene {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f
        .client(Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    bob.spawn(l3m_core::grant::SpawnRequest::new(
        agent("bob/kid"),
        root_grant(),
    ))
    .await
    .unwrap();
    Scene { f, bob }
}

/// Pushes `pack` as bob's sequencer; asserts hubd refuses it with `code` and a message holding
/// `says`, and that nothing was written.
async fn refused(s: &Scene, updates: Vec<RefUpdate>, pack: &[u8], code: ErrorCode, says: &str) {
    refused_as(s, &s.bob, "bob", updates, pack, code, says).await;
}

async fn refused_as(
    s: &Scene,
    by: &HubClient,
    agent: &str,
    updates: Vec<RefUpdate>,
    pack: &[u8],
    code: ErrorCode,
    says: &str,
) {
    let before = written(&s.f);
    let error = by
        .push_pack(&agent_name(agent), updates, pack)
        .await
        .unwrap_err();
    let remote = match &error {
        l3m_wire::client::ClientError::Refused { error, .. } => error.clone(),
        other => panic!("not a refusal: {other}"),
    };
    assert_eq!(remote.code, code, "{}", remote.message);
    assert!(remote.message.contains(says), "{}", remote.message);
    assert_eq!(written(&s.f), before, "a refused push wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_push_of_many_chunks_arrives_in_hub_git_and_fsck_stays_clean() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    assert_eq!(Some(clone.work.clone()), s.f.tip(&work("bob")));
    assert_eq!(Some(clone.persona.clone()), s.f.tip(&persona("bob")));
    let big = noise(CHUNK_BYTES * 5 / 2);
    let new = clone.commit(&[("notes.md", b"hello\n"), ("big.bin", &big)], "work");
    let pack = clone.pack(&new, &clone.work);
    assert!(pack.len() > 2 * CHUNK_BYTES, "{} bytes", pack.len());
    git(clone.path(), &["checkout", "-q", "persona"]);
    let worn = clone.commit(&[("AGENT.md", b"be brief\n")], "persona");
    let persona_pack = clone.pack(&worn, &clone.persona);

    let pushed = s
        .bob
        .push_pack(
            &agent("bob"),
            vec![update(work("bob"), &clone.work, &new)],
            &pack,
        )
        .await
        .unwrap();
    assert_eq!((pushed.received, pushed.done), (pack.len() as u64, true));
    let pushed = s
        .bob
        .push_pack(
            &agent("bob"),
            vec![update(persona("bob"), &clone.persona, &worn)],
            &persona_pack,
        )
        .await
        .unwrap();
    assert!(pushed.done);
    assert_eq!(s.f.tip(&work("bob")), Some(new.clone()));
    assert_eq!(s.f.tip(&persona("bob")), Some(worn.clone()));
    s.f.fsck();

    // A fresh clone fetches it back whole (the pack again spans several chunks); a clone that
    // has the tips gets an empty pack.
    let again = LocalClone::fetch(&s.bob, "bob").await;
    assert_eq!(
        (again.work.as_str(), again.persona.as_str()),
        (new.as_str(), worn.as_str())
    );
    assert_eq!(std::fs::read(again.path().join("big.bin")).unwrap(), big);
    let nothing = s
        .bob
        .fetch_pack(&agent("bob"), &[new.clone(), worn.clone()])
        .await
        .unwrap();
    assert!(nothing.pack.is_empty());
    // Only what the clone lacks travels.
    let small = clone.commit(&[("AGENT.md", b"be briefer\n")], "persona again");
    s.bob
        .push_pack(
            &agent("bob"),
            vec![update(persona("bob"), &worn, &small)],
            &clone.pack(&small, &worn),
        )
        .await
        .unwrap();
    let delta = s
        .bob
        .fetch_pack(&agent("bob"), &[new.clone(), worn.clone()])
        .await
        .unwrap();
    assert!(!delta.pack.is_empty() && delta.pack.len() < CHUNK_BYTES);
    s.f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_fast_forward_or_a_stale_tip_is_refused_and_nothing_written() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    // A root commit on another history: not a descendant of the branch's tip.
    git(clone.path(), &["checkout", "-q", "--orphan", "elsewhere"]);
    let orphan = clone.commit(&[("x", b"x\n")], "another history");
    let pack = clone.pack_of(&[
        &orphan,
        git(clone.path(), &["rev-parse", "HEAD^{tree}"]).trim(),
        git(clone.path(), &["rev-parse", "HEAD:x"]).trim(),
    ]);
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &orphan)],
        &pack,
        ErrorCode::Refused,
        "only fast-forwards",
    )
    .await;
    // Going back to an ancestor is not a fast-forward either.
    git(clone.path(), &["checkout", "-q", "work"]);
    let ahead = push_ahead(&s, &clone).await;
    refused(
        &s,
        vec![update(work("bob"), &ahead, &clone.work)],
        &[],
        ErrorCode::Refused,
        "only fast-forwards",
    )
    .await;
    // A push from a tip the branch has left loses the compare-and-swap.
    let later = clone.commit(&[("z", b"z\n")], "later");
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &later)],
        &clone.pack(&later, &clone.work),
        ErrorCode::Conflict,
        "is not at",
    )
    .await;
    s.f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_back_goes_only_along_the_branchs_history_with_no_objects() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    let ahead = push_ahead(&s, &clone).await;
    let back = |old: &str, new: &str| RefUpdate {
        back: true,
        ..update(work("bob"), old, new)
    };
    // A commit off the branch's history is no place to go back to.
    git(clone.path(), &["checkout", "-q", "--orphan", "elsewhere"]);
    let orphan = clone.commit(&[("x", b"x\n")], "another history");
    let pack = clone.pack(&orphan, &ahead);
    refused(
        &s,
        vec![back(&ahead, &orphan)],
        &[],
        ErrorCode::Refused,
        "not one of its ancestors",
    )
    .await;
    // A move back brings no objects.
    refused(
        &s,
        vec![back(&ahead, &clone.work)],
        &pack,
        ErrorCode::Refused,
        "empty pack",
    )
    .await;
    // A move back from a tip the branch has left loses the compare-and-swap.
    refused(
        &s,
        vec![back(&clone.work, &clone.work)],
        &[],
        ErrorCode::Conflict,
        "is not at",
    )
    .await;
    // Back to the branch's own ancestor, with nothing else: it moves.
    let pushed = s
        .bob
        .push_pack(&agent("bob"), vec![back(&ahead, &clone.work)], &[])
        .await
        .unwrap();
    assert!(pushed.done);
    assert_eq!(s.f.tip(&work("bob")).unwrap(), clone.work);
    s.f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_another_agents_branch_or_by_another_session_is_refused() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    let new = clone.commit(&[("a", b"a\n")], "mine");
    let pack = clone.pack(&new, &clone.work);
    let carol_tip = s.f.tip(&work("carol")).unwrap();
    let kid_tip = s.f.tip(&work("bob/kid")).unwrap();
    // Bob's sequencer names carol's or its child's branch, under its own agent or theirs.
    for (agent, refname, old) in [
        ("bob", work("carol"), carol_tip.as_str()),
        ("carol", work("carol"), carol_tip.as_str()),
        ("bob/kid", work("bob/kid"), kid_tip.as_str()),
        ("bob", work("bob/kid"), kid_tip.as_str()),
        ("bob", "refs/heads/main".to_owned(), clone.work.as_str()),
        (
            "bob",
            refs::agent_ref(&agent_name("bob"), AgentRef::Log),
            clone.work.as_str(),
        ),
    ] {
        refused_as(
            &s,
            &s.bob,
            agent,
            vec![update(refname, old, &new)],
            &pack,
            ErrorCode::Refused,
            "may not push",
        )
        .await;
    }
    // A human's or a host's session does not push either: only the agent's own sequencer.
    let human = s.f.human_client().await;
    let host = s.f.client(Duty::Host { subtree: None }).await;
    for by in [&human, &host] {
        refused_as(
            &s,
            by,
            "bob",
            vec![update(work("bob"), &clone.work, &new)],
            &pack,
            ErrorCode::Refused,
            "only an agent's own sequencer pushes",
        )
        .await;
    }
    // Nor does carol's sequencer fetch bob's branches.
    let carol =
        s.f.client(Duty::Sequencer {
            agent: agent("carol"),
        })
        .await;
    let error = carol.fetch_pack(&agent("bob"), &[]).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::Refused), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_object_or_a_corrupt_pack_is_refused_and_nothing_written() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    // A commit with no author: `git fsck --strict` calls it an error.
    let tree = git(clone.path(), &["rev-parse", "HEAD^{tree}"]);
    let body = format!(
        "tree {}\nparent {}\ncommitter l3m test <test@l3m.invalid> 0 +0000\n\nno author\n",
        tree.trim(),
        clone.work
    );
    let bad = git_with_input(
        clone.path(),
        &[
            "hash-object",
            "--literally",
            "-t",
            "commit",
            "-w",
            "--stdin",
        ],
        &body,
    );
    let bad = bad.trim();
    refused(
        &s,
        vec![update(work("bob"), &clone.work, bad)],
        &clone.pack_of(&[bad]),
        ErrorCode::Invalid,
        "index-pack --strict",
    )
    .await;
    // A good pack with one byte flipped in an object's data.
    let new = clone.commit(&[("a", b"some text that is long enough\n")], "good");
    let mut pack = clone.pack(&new, &clone.work);
    let at = pack.len() - 30;
    pack[at] ^= 0x55;
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &new)],
        &pack,
        ErrorCode::Invalid,
        "index-pack --strict",
    )
    .await;
    s.f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_missing_objects_is_refused_and_nothing_written() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    let new = clone.commit(&[("a", b"a file the pack leaves out\n")], "incomplete");
    let tree = git(clone.path(), &["rev-parse", "HEAD^{tree}"]);
    // The commit and its tree, not the tree's new blob.
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &new)],
        &clone.pack_of(&[&new, tree.trim()]),
        ErrorCode::Invalid,
        "the pack was refused",
    )
    .await;
    // The commit alone, not its tree.
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &new)],
        &clone.pack_of(&[&new]),
        ErrorCode::Invalid,
        "the pack was refused",
    )
    .await;
    // No pack at all for a commit the hub does not hold.
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &new)],
        &[],
        ErrorCode::Invalid,
        "not a commit the push brings",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_pack_or_object_is_refused_and_nothing_written() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    // A pack declared over the limit is refused at its first chunk, before any byte is held.
    let before = written(&s.f);
    let error =
        s.f.call::<_, Pushed>(
            Op::PushPack,
            &PushPack {
                capability: s.f.sequencer("bob").await,
                agent: "bob".into(),
                updates: vec![update(work("bob"), &clone.work, &clone.work)],
                total: MAX_PACK_BYTES + 1,
                offset: 0,
                bytes: vec![0; 1024],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Invalid);
    assert!(
        error.message.contains("over the limit"),
        "{}",
        error.message
    );
    assert_eq!(written(&s.f), before);
    // The client refuses to send one at all.
    let huge = vec![0u8; MAX_PACK_BYTES as usize + 1];
    let error = s
        .bob
        .push_pack(
            &agent("bob"),
            vec![update(work("bob"), &clone.work, &clone.work)],
            &huge,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, l3m_wire::client::ClientError::PackTooLarge { .. }),
        "{error}"
    );
    // One object over the limit, in a pack that is small (zeros compress).
    let zeros = vec![0u8; MAX_OBJECT_BYTES as usize + 1];
    let new = clone.commit(&[("zeros.bin", &zeros)], "a big object");
    let pack = clone.pack(&new, &clone.work);
    assert!((pack.len() as u64) < MAX_PACK_BYTES);
    refused(
        &s,
        vec![update(work("bob"), &clone.work, &new)],
        &pack,
        ErrorCode::Invalid,
        "over the limit of",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_whose_branches_move_between_chunks_is_a_conflict() {
    let s = scene().await;
    let clone = LocalClone::fetch(&s.bob, "bob").await;
    let big = noise(CHUNK_BYTES * 3 / 2);
    let new = clone.commit(&[("big.bin", &big)], "big");
    s.bob
        .push_pack(
            &agent("bob"),
            vec![update(work("bob"), &clone.work, &new)],
            &clone.pack(&new, &clone.work),
        )
        .await
        .unwrap();
    let capability = s.f.sequencer("bob").await;
    let ask = |offset, pack: Option<String>| FetchPack {
        capability: capability.clone(),
        agent: "bob".into(),
        have: vec![],
        offset,
        pack,
    };
    let first: PackChunk = s.f.call(Op::FetchPack, &ask(0, None)).await.unwrap();
    assert!(first.total > first.bytes.len() as u64);
    let more = clone.commit(&[("more", b"more\n")], "more");
    s.bob
        .push_pack(
            &agent("bob"),
            vec![update(work("bob"), &new, &more)],
            &clone.pack(&more, &new),
        )
        .await
        .unwrap();
    let offset = first.bytes.len() as u64;
    let error =
        s.f.call::<_, PackChunk>(Op::FetchPack, &ask(offset, first.pack.clone()))
            .await
            .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict, "{}", error.message);
}
