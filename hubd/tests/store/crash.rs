//! Kill -9 during a storm of durable appends: every acknowledged entry survives exactly once.
//!
//! The test re-executes its own binary as a child (selected by `L3M_STORE_CRASH_CHILD`) that
//! appends to a few chains and prints `ack <chain> <id>` after each append returns. The parent
//! kills it with SIGKILL at pseudo-random moments, restarts it on the same hub, and finally
//! checks the hub with `git fsck --strict` and `Hub::open`.
//!
//! It runs twice: once with the write-ahead log (`Durability::Fsync`, where a killed
//! writer may leave a in the WAL move for the next open to replay) and once with the two fsync
//! barriers and no WAL (`Durability::Barriers`).
//!
//! `L3M_STORE_CRASH_ROUNDS` sets the number of kills per run (default 30);
//! `L3M_STORE_CRASH_SEED` the seed of the kill delays.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::assert_fsck_strict;
use hubd::store::{Durability, Hub, HubOptions, StoreError};

const CHILD_ENV: &str = "L3M_STORE_CRASH_CHILD";
const ROUND_ENV: &str = "L3M_STORE_CRASH_ROUND";
const ROUNDS_ENV: &str = "L3M_STORE_CRASH_ROUNDS";
const SEED_ENV: &str = "L3M_STORE_CRASH_SEED";
const CHAINS: [&str; 3] = [
    "refs/l3m/ledger",
    "refs/l3m/a/alice/_/log",
    "refs/l3m/a/alice/worker/_/inbox",
];
/// A child that is never killed stops by itself after this many appends.
const MAX_CHILD_APPENDS: usize = 100_000;

#[test]
fn acknowledged_appends_survive_sigkill_with_the_wal() {
    storm_and_kill(
        "acknowledged_appends_survive_sigkill_with_the_wal",
        Durability::Fsync,
    );
}

#[test]
fn acknowledged_appends_survive_sigkill_with_barriers() {
    storm_and_kill(
        "acknowledged_appends_survive_sigkill_with_barriers",
        Durability::Barriers,
    );
}

/// `test_name` as the test harness of this binary names it: with this module's path.
fn in_this_binary(test_name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test_name}"),
        None => test_name.to_owned(),
    }
}

/// The parent (or, in a re-executed child, the storm) of the test named `test_name`.
fn storm_and_kill(test_name: &str, durability: Durability) {
    let options = HubOptions {
        durability,
        ..HubOptions::default()
    };
    if let Ok(hub) = std::env::var(CHILD_ENV) {
        let round = std::env::var(ROUND_ENV).unwrap();
        write_storm(Path::new(&hub), &round, options);
        return;
    }
    let rounds: usize = env_or(ROUNDS_ENV, 30);
    let mut rng = XorShift(env_or(SEED_ENV, 0x5eed_1234_abcd_0042));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("HUB");
    drop(Hub::create(&root, options).unwrap());

    let mut acked: Vec<(String, String)> = Vec::new();
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                &in_this_binary(test_name),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &root)
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || complete_lines(BufReader::new(stdout)));
        std::thread::sleep(Duration::from_millis(20 + rng.next() % 180));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for line in reader.join().unwrap() {
            if let Some(rest) = line.strip_prefix("ack ") {
                let (chain, id) = rest.split_once(' ').unwrap();
                acked.push((chain.to_owned(), id.to_owned()));
            }
            assert!(
                !line.starts_with("err "),
                "round {round}: child failed: {line}"
            );
        }
    }
    eprintln!("{} entries acknowledged over {rounds} kills", acked.len());
    assert!(
        acked.len() >= rounds,
        "only {} appends were acknowledged in {rounds} rounds; the storm did not run",
        acked.len()
    );

    // Whole before any replay: a killed writer never leaves a ref on a missing object.
    assert_fsck_strict(&root.join("hub.git"));
    let hub = Hub::open(&root, options).unwrap();
    assert_fsck_strict(&root.join("hub.git"));
    let mut found: HashMap<String, Vec<String>> = HashMap::new();
    for chain in CHAINS {
        let len = match hub.len(chain) {
            Ok(len) => len,
            Err(StoreError::UnknownRef { .. }) => 0,
            Err(err) => panic!("{chain}: {err}"),
        };
        let ids = hub
            .read_range(chain, 0, len)
            .unwrap()
            .iter()
            .map(|entry| {
                let value: serde_json::Value = serde_json::from_str(entry).unwrap();
                value["id"].as_str().unwrap().to_owned()
            })
            .collect::<Vec<_>>();
        let unique: HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{chain} holds an entry twice");
        found.insert(chain.to_owned(), ids);
    }
    for (chain, id) in &acked {
        let count = found[chain].iter().filter(|f| *f == id).count();
        assert_eq!(
            count, 1,
            "acknowledged entry {id} is in {chain} {count} times"
        );
    }
}

/// The child: durable appends in a loop, acknowledging each entry after `append` returns.
fn write_storm(root: &Path, round: &str, options: HubOptions) {
    let mut out = std::io::stdout().lock();
    let hub = match Hub::open(root, options) {
        Ok(hub) => hub,
        Err(err) => {
            writeln!(out, "err open: {err}").unwrap();
            return;
        }
    };
    for i in 0..MAX_CHILD_APPENDS {
        let chain = CHAINS[i % CHAINS.len()];
        let ids: Vec<String> = (0..1 + i % 3)
            .map(|k| format!("r{round}-{i}-{k}"))
            .collect();
        let entries: Vec<String> = ids
            .iter()
            .map(|id| format!(r#"{{"v":1,"id":"{id}"}}"#))
            .collect();
        let outcome = hub
            .tip(chain)
            .and_then(|tip| hub.append(chain, tip, &entries, &format!("round {round} append {i}")));
        match outcome {
            Ok(_) => {
                for id in &ids {
                    writeln!(out, "ack {chain} {id}").unwrap();
                }
                out.flush().unwrap();
            }
            Err(err) => {
                writeln!(out, "err append: {err}").unwrap();
                return;
            }
        }
    }
}

/// Lines that ended with a newline; a line cut by the kill is dropped.
fn complete_lines(mut reader: impl std::io::BufRead) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
        if line.last() == Some(&b'\n') {
            lines.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        line.clear();
    }
    lines
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A tiny deterministic generator for kill delays.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
