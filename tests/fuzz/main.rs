//! Fuzz targets for every parser of foreign input, run by `bolero` as ordinary tests: the NATS
//! envelope and every message body, airmail frames and hellos, the fetch proxy's request head,
//! model replies of both dialects, settings, grant and config TOML, Starlark program sources,
//! and pushed packs. Each asserts no panic, a typed error for every refusal, and a result
//! bounded by its input where that can be checked.
//!
//! `cargo test -p l3m-tests --test fuzz` runs each target for its CI count (a few seconds in
//! all); `L3M_FUZZ_ITERATIONS=N` runs every target for N inputs (the long run), and
//! `BOLERO_RANDOM_SEED=S` replays the input a failure names. Each target prints its inputs per
//! second (`--nocapture`). The same harnesses run under a coverage-guided engine with
//! `cargo bolero test --all-features -p l3m-tests --test fuzz TARGET`.

// Fixture helpers outside `#[test]` functions may fail loudly, as the tests themselves may.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod airmail;
mod harness;
mod models;
mod packs;
mod programs;
mod proxy;
mod toml_files;
mod wire;
