//! Durable append latency: `Hub::append` against the git CLI and a raw `write + fsync`.
//!
//! Each iteration runs the same append every way, interleaved so that load from other processes
//! on the machine hits every variant alike:
//! - `hub (fsync)`: `Hub::append` with `Durability::Fsync`;
//! - `hub (relaxed)`: the same without fsync (the CPU and syscall cost alone);
//! - `git cli (fsync)`: `git hash-object -w --stdin`, `git mktree`, `git commit-tree`,
//!   `git update-ref` with the old value, with `core.fsync=loose-object,reference` so that git
//!   is as durable as the hub;
//! - `raw write+fsync`: the same `records.jsonl` bytes appended to one open file, then `fsync`.
//!
//! Run: `cargo bench -p hubd --bench store_append`. `L3M_BENCH_ITERS` sets the iterations per
//! batch size (default 300); `L3M_BENCH_DIR` the folder to work in (default: the temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hubd::store::{Clock, Durability, Hub, HubOptions, Tip};

/// Iterations run before measuring, per batch size.
const WARMUP: usize = 20;
/// The chains appended to, for single entries and for batches.
const REFS: [&str; 2] = ["refs/l3m/a/bench/_/log", "refs/l3m/a/bench16/_/log"];

fn main() {
    let iters: usize = std::env::var("L3M_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let base: PathBuf = std::env::var_os("L3M_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(&base).unwrap();
    println!(
        "store_append: {iters} iterations per batch size, in {}",
        base.display()
    );
    let mut bench = Bench::new(dir.path());
    for (slot, batch) in [1usize, 16].into_iter().enumerate() {
        let mut samples = Samples::default();
        for i in 0..WARMUP + iters {
            let entries = records(batch, i);
            let keep = i >= WARMUP;
            samples.time(keep, Variant::Hub, || bench.hub_append(slot, &entries));
            samples.time(keep, Variant::HubRelaxed, || {
                bench.relaxed_append(slot, &entries)
            });
            samples.time(keep, Variant::GitCli, || bench.git_append(slot, &entries));
            samples.time(keep, Variant::Raw, || bench.raw_append(&entries));
        }
        samples.print(batch);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Hub,
    HubRelaxed,
    GitCli,
    Raw,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Hub,
        Variant::HubRelaxed,
        Variant::GitCli,
        Variant::Raw,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Hub => "hub (fsync)",
            Variant::HubRelaxed => "hub (relaxed)",
            Variant::GitCli => "git cli (fsync)",
            Variant::Raw => "raw write+fsync",
        }
    }
}

#[derive(Debug, Default)]
struct Samples {
    taken: Vec<(Variant, Duration)>,
}

#[derive(Debug)]
struct Stats {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

impl Samples {
    fn time(&mut self, keep: bool, variant: Variant, run: impl FnOnce()) {
        let start = Instant::now();
        run();
        let took = start.elapsed();
        if keep {
            self.taken.push((variant, took));
        }
    }

    fn stats(&self, variant: Variant) -> Stats {
        let mut took: Vec<Duration> = self
            .taken
            .iter()
            .filter(|(v, _)| *v == variant)
            .map(|(_, d)| *d)
            .collect();
        took.sort();
        let total: Duration = took.iter().sum();
        Stats {
            p50: took[took.len() / 2],
            p99: took[(took.len() * 99 / 100).min(took.len() - 1)],
            per_second: took.len() as f64 / total.as_secs_f64(),
        }
    }

    fn print(&self, batch: usize) {
        println!();
        println!("batch of {batch}");
        println!(
            "{:<18} {:>10} {:>10} {:>12} {:>12}",
            "variant", "p50 µs", "p99 µs", "appends/s", "entries/s"
        );
        for variant in Variant::ALL {
            let s = self.stats(variant);
            println!(
                "{:<18} {:>10.0} {:>10.0} {:>12.0} {:>12.0}",
                variant.name(),
                micros(s.p50),
                micros(s.p99),
                s.per_second,
                s.per_second * batch as f64
            );
        }
        let (hub, git, raw) = (
            self.stats(Variant::Hub),
            self.stats(Variant::GitCli),
            self.stats(Variant::Raw),
        );
        println!(
            "hub rate / git cli rate: {:.1}x    hub p50 / raw write+fsync p50: {:.2}x",
            hub.per_second / git.per_second,
            micros(hub.p50) / micros(raw.p50)
        );
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `n` entries shaped like Log records.
fn records(n: usize, i: usize) -> Vec<String> {
    (0..n)
        .map(|k| {
            format!(
                r#"{{"v":1,"kind":"model-reply","seq":{},"call":"c-{i}","text":"The tool finished; reading its output next.","tokens":{{"in":1234,"out":56}}}}"#,
                i * n + k
            )
        })
        .collect()
}

fn jsonl(entries: &[String]) -> String {
    entries.iter().map(|e| format!("{e}\n")).collect()
}

struct Bench {
    hub: Hub,
    relaxed: Hub,
    tips: [Tip; 2],
    relaxed_tips: [Tip; 2],
    git_dir: PathBuf,
    git_tips: [Option<String>; 2],
    raw: File,
}

impl Bench {
    fn new(dir: &Path) -> Self {
        let options = |durability| HubOptions {
            durability,
            clock: Clock::System,
        };
        let git_dir = dir.join("git-cli.git");
        let out = Command::new("git")
            .args(["init", "--bare", "-q"])
            .arg(&git_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git init failed");
        Bench {
            hub: Hub::create(dir.join("HUB"), options(Durability::Fsync)).unwrap(),
            relaxed: Hub::create(dir.join("HUB-relaxed"), options(Durability::Relaxed)).unwrap(),
            tips: [Tip::Absent; 2],
            relaxed_tips: [Tip::Absent; 2],
            git_dir,
            git_tips: [None, None],
            raw: OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("raw.jsonl"))
                .unwrap(),
        }
    }

    fn hub_append(&mut self, slot: usize, entries: &[String]) {
        let appended = self
            .hub
            .append(REFS[slot], self.tips[slot], entries, "bench append");
        self.tips[slot] = appended.unwrap().tip();
    }

    fn relaxed_append(&mut self, slot: usize, entries: &[String]) {
        let tip = self.relaxed_tips[slot];
        let appended = self
            .relaxed
            .append(REFS[slot], tip, entries, "bench append");
        self.relaxed_tips[slot] = appended.unwrap().tip();
    }

    fn git_append(&mut self, slot: usize, entries: &[String]) {
        let g = &self.git_dir;
        let blob = git(g, &["hash-object", "-w", "--stdin"], &jsonl(entries));
        let tree = git(
            g,
            &["mktree"],
            &format!("100644 blob {blob}\trecords.jsonl\n"),
        );
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "bench append"];
        if let Some(parent) = &self.git_tips[slot] {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = git(g, &args, "");
        let old = self.git_tips[slot]
            .clone()
            .unwrap_or_else(|| "0".repeat(40));
        git(g, &["update-ref", REFS[slot], &commit, &old], "");
        self.git_tips[slot] = Some(commit);
    }

    fn raw_append(&mut self, entries: &[String]) {
        self.raw.write_all(jsonl(entries).as_bytes()).unwrap();
        self.raw.sync_all().unwrap();
    }
}

/// Runs git on `git_dir`, fsyncing objects and refs, without user config; returns stdout.
fn git(git_dir: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("git")
        .args(["-c", "core.fsync=loose-object,reference"])
        .args(["-c", "core.fsyncMethod=fsync"])
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "l3m hubd")
        .env("GIT_AUTHOR_EMAIL", "hubd@l3m.invalid")
        .env("GIT_COMMITTER_NAME", "l3m hubd")
        .env("GIT_COMMITTER_EMAIL", "hubd@l3m.invalid")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
