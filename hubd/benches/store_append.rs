//! Durable append latency: `Hub::append` against the git CLI and a raw `write + fsync`.
//!
//! Each iteration runs the same append every way, interleaved so that load from other processes
//! on the machine hits every variant alike:
//! - `hub (fsync)`: `Hub::append` with `Durability::Fsync` (the write-ahead journal on ext4);
//! - `hub (barriers)`: the same with `Durability::Barriers`, the journal's predecessor;
//! - `hub (relaxed)`: the same without fsync (the CPU and syscall cost alone);
//! - `git cli (fsync)` and `raw write+fsync`: the references of [`common`].
//!
//! Run: `cargo bench -p hubd --bench store_append`. `L3M_BENCH_ITERS` sets the iterations per
//! batch size (default 300); `L3M_BENCH_DIR` the folder to work in (default: the temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use hubd::store::Durability;

use common::{
    BATCHES, Config, GIT_CLI, GitChain, RAW, RawFile, Samples, StoreChains, WARMUP, records,
};

const HUB: &str = "hub (fsync)";
const BARRIERS: &str = "hub (barriers)";
const RELAXED: &str = "hub (relaxed)";

fn main() {
    let config = Config::from_env("store_append", 300);
    let dir = config.dir.path();
    let mut hub = StoreChains::create(&dir.join("HUB"), Durability::Fsync);
    let mut barriers = StoreChains::create(&dir.join("HUB-barriers"), Durability::Barriers);
    let mut relaxed = StoreChains::create(&dir.join("HUB-relaxed"), Durability::Relaxed);
    let mut git = GitChain::new(dir);
    let mut raw = RawFile::new(dir);
    for (slot, batch) in BATCHES.into_iter().enumerate() {
        let mut samples = Samples::default();
        for i in 0..WARMUP + config.iters {
            let entries = records(batch, (i * batch) as u64);
            let keep = i >= WARMUP;
            samples.time(keep, HUB, || hub.append(slot, &entries));
            samples.time(keep, BARRIERS, || barriers.append(slot, &entries));
            samples.time(keep, RELAXED, || relaxed.append(slot, &entries));
            samples.time(keep, GIT_CLI, || git.append(slot, &entries));
            samples.time(keep, RAW, || raw.append(&entries));
        }
        samples.print(batch, HUB);
    }
}
