//! What the append benchmarks share: their configuration, the records appended, the two
//! reference measurements (the git CLI and a raw `write + fsync`) and the statistics printed.
//!
//! Each bench times its own subject next to [`GitChain`] and [`RawFile`] in the same run and
//! prints the subject's ratios against both. The run goes in [`ROUNDS`] rounds, each timing
//! every variant for a block of iterations in turn: a slow change in the machine's load hits
//! every variant alike, while what one variant disturbs for the next (the git CLI forks four
//! processes per append, faulting pages and evicting caches) stays at the start of the next
//! block, whose first [`BLOCK_WARMUP`] iterations are not kept. Interleaving single iterations
//! instead measured hubd's request hop at 2.5× its undisturbed time.
//!
//! # Layout
//! - [`Config`]: iterations and working folder, from the environment.
//! - [`records`]: Log records as the hub stores them.
//! - [`StoreChains`]: chains appended straight to a [`Hub`].
//! - [`GitChain`], [`RawFile`]: the references.
//! - [`Samples`]: timings per variant, their percentiles and the ratio line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hubd::store::{CommitTime, Durability, Hub, HubOptions, Tip};
use l3m_core::log::{Record, RecordBody};
use l3m_core::names::{Entity, HumanName};

/// How many blocks each variant's iterations are split into.
pub const ROUNDS: usize = 5;
/// Iterations at the start of each block that are run but not kept.
pub const BLOCK_WARMUP: usize = 4;
/// The batch sizes measured.
pub const BATCHES: [usize; 2] = [1, 16];
/// The name of the git CLI reference.
pub const GIT_CLI: &str = "git cli (fsync)";
/// The name of the raw `write + fsync` reference.
pub const RAW: &str = "raw write+fsync";

/// How long a bench runs and where: `L3M_BENCH_ITERS` iterations per batch size (default
/// given by the bench), in a temporary folder under `L3M_BENCH_DIR` (default: the temp dir),
/// made by [`l3m_wire::test_support::bench_dir`].
pub struct Config {
    /// Measured iterations per batch size.
    pub iters: usize,
    /// The folder the bench works in; removed when dropped.
    pub dir: tempfile::TempDir,
    /// The machine's CPU times when the bench started.
    started: Option<CpuTimes>,
}

/// The machine's CPU time counters (`/proc/stat`, in clock ticks, all CPUs): all of it, and
/// the part the hypervisor gave to someone else while this machine wanted to run (steal).
#[derive(Clone, Copy)]
struct CpuTimes {
    total: u64,
    steal: u64,
}

impl CpuTimes {
    /// `None` where `/proc/stat` is missing or its `cpu` line has no steal column.
    fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal; guest times are inside user.
        let counted = fields.get(..8)?;
        Some(CpuTimes {
            total: counted.iter().sum(),
            steal: counted[7],
        })
    }
}

impl Config {
    /// Reads the environment and makes the working folder.
    pub fn from_env(bench: &str, default_iters: usize) -> Config {
        let iters = l3m_wire::test_support::env_number("L3M_BENCH_ITERS", default_iters);
        let base: PathBuf = std::env::var_os("L3M_BENCH_DIR")
            .map(Into::into)
            .unwrap_or_else(std::env::temp_dir);
        let dir = l3m_wire::test_support::bench_dir(&base).unwrap();
        println!(
            "{bench}: {iters} iterations per batch size, in {}",
            base.display()
        );
        Config {
            iters,
            dir,
            started: CpuTimes::now(),
        }
    }

    /// Prints the share of CPU time the hypervisor took during the run. Each append here is a
    /// chain of wake-ups across threads and processes, and every one of them waits while the
    /// machine's CPU is taken away; a lone `write + fsync` has few. So the ratios mean little
    /// when this share is more than a few percent: run again when the host is quieter.
    pub fn print_steal(&self) {
        let (Some(start), Some(end)) = (self.started, CpuTimes::now()) else {
            return;
        };
        let total = end.total.saturating_sub(start.total).max(1);
        let steal = end.steal.saturating_sub(start.steal);
        println!();
        println!(
            "cpu steal during the run: {:.1}% of this machine's CPU time (ratios are reliable \
             only near 0%)",
            steal as f64 * 100.0 / total as f64
        );
    }
}

/// `n` Log records continuing a chain at `first_seq`, each a real [`Record`] line of a typical
/// size, valid for hubd's record gate.
pub fn records(n: usize, first_seq: u64) -> Vec<String> {
    (first_seq..)
        .take(n)
        .map(|seq| {
            Record {
                seq,
                at_ms: 1_767_225_600_000 + seq,
                body: RecordBody::UserLine {
                    from: Entity::Human(HumanName::parse("alice").unwrap()),
                    text: format!("The tool finished; reading its output next (step {seq})."),
                },
            }
            .to_line()
            .unwrap()
        })
        .collect()
}

/// The entries as one `records.jsonl` blob.
pub fn jsonl(entries: &[String]) -> String {
    entries.iter().map(|e| format!("{e}\n")).collect()
}

/// The Log of batch slot `slot`.
pub fn refname(slot: usize) -> String {
    format!("refs/l3m/a/bench{slot}/_/log")
}

/// Store options with `durability` and the system clock.
pub fn options(durability: Durability) -> HubOptions {
    HubOptions {
        durability,
        commit_time: CommitTime::System,
    }
}

/// A store's chains, one per batch size, appended with `Hub::append` by CAS on the last tip.
pub struct StoreChains {
    hub: Hub,
    tips: [Tip; BATCHES.len()],
}

impl StoreChains {
    /// A fresh hub at `root`.
    pub fn create(root: &Path, durability: Durability) -> StoreChains {
        StoreChains {
            hub: Hub::create(root, options(durability)).unwrap(),
            tips: [Tip::Absent; BATCHES.len()],
        }
    }

    /// Appends `entries` as one commit to the chain of batch slot `slot`.
    pub fn append(&mut self, slot: usize, entries: &[String]) {
        let appended = self
            .hub
            .append(&refname(slot), self.tips[slot], entries, "bench append");
        self.tips[slot] = appended.unwrap().tip();
    }
}

/// Commit chains appended with the git CLI, one per batch size: `hash-object -w`, `mktree`,
/// `commit-tree`, `update-ref` with the old value, fsyncing objects and refs so that git is
/// as durable as the hub.
pub struct GitChain {
    git_dir: PathBuf,
    tips: [Option<String>; BATCHES.len()],
}

impl GitChain {
    /// A fresh bare repository in `dir`.
    pub fn new(dir: &Path) -> GitChain {
        let git_dir = dir.join("git-cli.git");
        let out = l3m_git::command(dir)
            .args(["init", "--bare", "-q"])
            .arg(&git_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git init failed");
        GitChain {
            git_dir,
            tips: Default::default(),
        }
    }

    /// Appends `entries` as one commit to the chain of batch slot `slot`.
    pub fn append(&mut self, slot: usize, entries: &[String]) {
        let refname = refname(slot);
        let g = &self.git_dir;
        let blob = git(g, &["hash-object", "-w", "--stdin"], &jsonl(entries));
        let tree = git(
            g,
            &["mktree"],
            &format!("100644 blob {blob}\trecords.jsonl\n"),
        );
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "bench append"];
        if let Some(parent) = &self.tips[slot] {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = git(g, &args, "");
        let old = self.tips[slot].clone().unwrap_or_else(|| "0".repeat(40));
        git(g, &["update-ref", &refname, &commit, &old], "");
        self.tips[slot] = Some(commit);
    }
}

/// Runs git on `git_dir`, fsyncing objects and refs, without user config; returns stdout.
fn git(git_dir: &Path, args: &[&str], stdin: &str) -> String {
    let dir = git_dir.display().to_string();
    let fsync = [
        "-c",
        "core.fsync=loose-object,reference",
        "-c",
        "core.fsyncMethod=fsync",
        "--git-dir",
        dir.as_str(),
    ];
    hubd::test_support::git_with_input(git_dir, &[&fsync[..], args].concat(), stdin)
        .trim()
        .to_owned()
}

/// The floor: the same `records.jsonl` bytes appended to one open file, then `fsync`.
pub struct RawFile(File);

impl RawFile {
    /// A fresh file in `dir`.
    pub fn new(dir: &Path) -> RawFile {
        RawFile(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("raw.jsonl"))
                .unwrap(),
        )
    }

    /// Appends and fsyncs.
    pub fn append(&mut self, entries: &[String]) {
        self.0.write_all(jsonl(entries).as_bytes()).unwrap();
        self.0.sync_all().unwrap();
    }
}

/// Timings of one batch size, per variant, in the order variants were first timed.
#[derive(Default)]
pub struct Samples {
    order: Vec<&'static str>,
    taken: BTreeMap<&'static str, Vec<Duration>>,
    /// How many times each variant has run, kept or not.
    runs: BTreeMap<&'static str, usize>,
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

impl Samples {
    /// Runs `variant` [`BLOCK_WARMUP`] times and then `iters` times timed, in a row. `run` is
    /// told how many times the variant ran before, so each can number its records on.
    pub fn block(&mut self, variant: &'static str, iters: usize, mut run: impl FnMut(usize)) {
        for i in 0..BLOCK_WARMUP + iters {
            let before = *self.runs.entry(variant).or_default();
            self.time(i >= BLOCK_WARMUP, variant, || run(before));
            self.runs.insert(variant, before + 1);
        }
    }

    /// Times `run` as `variant`; the timing is kept only if `keep` (past the warm-up).
    fn time(&mut self, keep: bool, variant: &'static str, run: impl FnOnce()) {
        let start = Instant::now();
        run();
        let took = start.elapsed();
        if !self.taken.contains_key(variant) {
            self.order.push(variant);
        }
        let taken = self.taken.entry(variant).or_default();
        if keep {
            taken.push(took);
        }
    }

    fn stats(&self, variant: &str) -> Stats {
        let mut took = self.taken[variant].clone();
        took.sort();
        let total: Duration = took.iter().sum();
        Stats {
            p50: took[took.len() / 2],
            p99: took[(took.len() * 99 / 100).min(took.len() - 1)],
            per_second: took.len() as f64 / total.as_secs_f64(),
        }
    }

    /// Prints every variant's p50, p99 and rates, then `subject`'s rate against the git CLI's
    /// and its p50 against the raw fsync's.
    pub fn print(&self, batch: usize, subject: &str) {
        self.print_table(&format!("batch of {batch}"), batch);
        let (it, git) = (self.stats(subject), self.stats(GIT_CLI));
        println!(
            "{subject} rate / git cli rate: {:.1}x (target >= 10x)    {subject} p50 / raw \
             write+fsync p50: {:.2}x (target <= 3x)",
            it.per_second / git.per_second,
            self.p50_ratio(subject, RAW)
        );
    }

    /// `a`'s p50 over `b`'s.
    pub fn p50_ratio(&self, a: &str, b: &str) -> f64 {
        micros(self.stats(a).p50) / micros(self.stats(b).p50)
    }

    /// Prints every variant's p50, p99 and rates under `title`.
    pub fn print_table(&self, title: &str, batch: usize) {
        println!();
        println!("{title}");
        println!(
            "{:<24} {:>10} {:>10} {:>12} {:>12}",
            "variant", "p50 µs", "p99 µs", "appends/s", "records/s"
        );
        for variant in &self.order {
            let s = self.stats(variant);
            println!(
                "{:<24} {:>10.0} {:>10.0} {:>12.0} {:>12.0}",
                variant,
                micros(s.p50),
                micros(s.p99),
                s.per_second,
                s.per_second * batch as f64
            );
        }
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
