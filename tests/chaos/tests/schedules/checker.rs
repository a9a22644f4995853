//! The checker, independent of the code under test: it reads the hub with plain `git`
//! (`for-each-ref`, `log`, `cat-file --batch`, `fsck --strict`) and serde_json, never with
//! hubd's or core's readers, and holds what it finds against the history.
//!
//! Per inbox it reports the workload's letters acknowledged but absent (lost), present more
//! than once (doubled), and present though never sent to that inbox (fabricated).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::workload::{Op, Outcome, op_of};

/// What the checker found in one inbox.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InboxVerdict {
    /// The workload's letters it holds, each once.
    pub held: usize,
    pub lost: BTreeSet<u64>,
    pub doubled: BTreeSet<u64>,
    pub fabricated: BTreeSet<u64>,
}

/// The checker's verdict over the hub.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Per agent inbox (the agent's name).
    pub inboxes: BTreeMap<String, InboxVerdict>,
    /// `git fsck --strict`'s complaints; empty when clean.
    pub fsck: String,
}

impl Verdict {
    /// Lost, doubled and fabricated letters over every inbox.
    pub fn totals(&self) -> (usize, usize, usize) {
        self.inboxes.values().fold((0, 0, 0), |(l, d, f), v| {
            (
                l + v.lost.len(),
                d + v.doubled.len(),
                f + v.fabricated.len(),
            )
        })
    }

    /// Whether nothing was lost, doubled or invented and fsck is clean.
    pub fn clean(&self) -> bool {
        self.totals() == (0, 0, 0) && self.fsck.is_empty()
    }

    /// The verdict as text a person reads.
    pub fn render(&self) -> String {
        let (lost, doubled, fabricated) = self.totals();
        let mut out = format!(
            "verdict: {}\nlost {lost}, doubled {doubled}, fabricated {fabricated}\n",
            if self.clean() { "clean" } else { "FAILED" }
        );
        for (inbox, v) in &self.inboxes {
            out.push_str(&format!(
                "inbox {inbox}: holds {} of the workload's letters; lost {:?} doubled {:?} \
                 fabricated {:?}\n",
                v.held, v.lost, v.doubled, v.fabricated
            ));
        }
        out.push_str(&format!(
            "git fsck --strict: {}\n",
            if self.fsck.is_empty() {
                "clean"
            } else {
                &self.fsck
            }
        ));
        out
    }
}

/// `git --git-dir GIT ARGS`, its stdout; panics naming it when it fails.
fn git(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every line of every `records.jsonl` along the chain `refname`, oldest first.
fn chain_lines(git_dir: &Path, refname: &str) -> Vec<String> {
    let commits = git(git_dir, &["log", "--reverse", "--format=%H", refname]);
    let mut batch = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = batch.stdin.take().unwrap();
    for commit in commits.lines() {
        writeln!(stdin, "{commit}:records.jsonl").unwrap();
    }
    drop(stdin);
    let out = batch.wait_with_output().unwrap();
    assert!(out.status.success(), "git cat-file --batch failed");
    // Each answer: "<oid> blob <size>\n<size bytes>\n" (or "<name> missing\n").
    let mut lines = Vec::new();
    let mut rest = &out.stdout[..];
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap();
        let header = String::from_utf8_lossy(&rest[..end]).to_string();
        rest = &rest[end + 1..];
        let size: usize = match header.split(' ').collect::<Vec<_>>()[..] {
            [_, "blob", size] => size.parse().unwrap(),
            _ => panic!("a commit of {refname} holds no records.jsonl: {header}"),
        };
        let blob = String::from_utf8_lossy(&rest[..size]).to_string();
        rest = &rest[size + 1..];
        lines.extend(blob.lines().map(str::to_owned));
    }
    lines
}

/// How many times each of the workload's letters is in each agent inbox of the hub.
fn letters(git_dir: &Path) -> BTreeMap<String, BTreeMap<u64, usize>> {
    let refs = git(
        git_dir,
        &["for-each-ref", "--format=%(refname)", "refs/l3m/a/"],
    );
    let mut found = BTreeMap::new();
    for refname in refs.lines().filter(|r| r.ends_with("/_/inbox")) {
        let agent = refname
            .trim_start_matches("refs/l3m/a/")
            .trim_end_matches("/_/inbox")
            .to_owned();
        let counts: &mut BTreeMap<u64, usize> = found.entry(agent).or_default();
        for line in chain_lines(git_dir, refname) {
            let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("{refname} holds a line that is not JSON ({e}): {line}")
            });
            if entry["kind"] != "letter" {
                continue;
            }
            if let Some(n) = entry["body"].as_str().and_then(op_of) {
                *counts.entry(n).or_default() += 1;
            }
        }
    }
    found
}

/// `git fsck --strict`'s complaints about `git_dir` (dangling objects aside); empty if none.
fn fsck(git_dir: &Path) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["fsck", "--strict", "--no-dangling", "--no-progress"])
        .output()
        .unwrap();
    // A notice (HEAD unborn: a hub has no main branch) is not a complaint.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let complaints: Vec<&str> = said
        .lines()
        .filter(|line| !line.starts_with("notice:"))
        .collect();
    if out.status.success() && complaints.is_empty() {
        return String::new();
    }
    format!("{}: {}", out.status, complaints.join("\n"))
}

/// Checks the hub at `hub` (its folder) against `history`.
pub fn check(hub: &Path, history: &[Op]) -> Verdict {
    let git_dir = hub.join("hub.git");
    let found = letters(&git_dir);
    let mut verdict = Verdict {
        fsck: fsck(&git_dir),
        ..Verdict::default()
    };
    for (agent, counts) in &found {
        let v = verdict.inboxes.entry(agent.clone()).or_default();
        v.held = counts.len();
        for (&n, &count) in counts {
            if count > 1 {
                v.doubled.insert(n);
            }
            if !history.iter().any(|op| op.n == n && &op.to == agent) {
                v.fabricated.insert(n);
            }
        }
    }
    for op in history.iter().filter(|op| op.outcome == Outcome::Ok) {
        let held = found.get(&op.to).is_some_and(|c| c.contains_key(&op.n));
        if !held {
            verdict
                .inboxes
                .entry(op.to.clone())
                .or_default()
                .lost
                .insert(op.n);
        }
    }
    verdict
}
