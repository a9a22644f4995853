//! Durable append latency: `Hub::append` against the git CLI and a raw `write + fsync`.
//!
//! The same append is run every way, in blocks taking turns (see [`common`]):
//! - `hub (fsync)`: `Hub::append` with `Durability::Fsync` (the write-ahead log);
//! - `hub (barriers)`: the same with `Durability::Barriers`, the WAL's predecessor;
//! - `hub (relaxed)`: the same without fsync (the CPU and syscall cost alone);
//! - `git cli (fsync)` and `raw write+fsync`: the references of [`common`].
//!
//! Run: `cargo bench -p hubd --bench store_append`. `L3M_BENCH_ITERS` sets the iterations per
//! batch size (default 300); `L3M_BENCH_DIR` the folder to work in (default: the temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use hubd::store::Durability;

use common::{
    BATCHES, Config, GIT_CLI, GitChain, RAW, ROUNDS, RawFile, Samples, StoreChains, records,
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
    let per_block = config.iters.div_ceil(ROUNDS);
    for (slot, batch) in BATCHES.into_iter().enumerate() {
        let entries = |n: usize| records(batch, (n * batch) as u64);
        let mut samples = Samples::default();
        for _ in 0..ROUNDS {
            samples.block(HUB, per_block, |n| hub.append(slot, &entries(n)));
            samples.block(BARRIERS, per_block, |n| barriers.append(slot, &entries(n)));
            samples.block(RELAXED, per_block, |n| relaxed.append(slot, &entries(n)));
            samples.block(GIT_CLI, per_block, |n| git.append(slot, &entries(n)));
            samples.block(RAW, per_block, |n| raw.append(&entries(n)));
        }
        samples.print(batch, HUB);
    }
    config.print_steal();
}
