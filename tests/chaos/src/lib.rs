//! The fault harness of issue 39: a site of l3m containers (NATS, hubd, a sequencer host)
//! started through testcontainers on a network of its own, a workload recording a history of
//! letters, a nemesis drawn from a seed (kill -9 and restart, pause, network cuts), and a
//! checker that reads the hub with plain `git` and reports what was lost, doubled or invented.
//!
//! Everything lives in the test target `schedules` (tests/schedules/): this library holds
//! nothing, so no other crate builds testcontainers. See tests/schedules/main.rs for the
//! environment (`L3M_SEED`, `L3M_CHAOS_SCHEDULES`, `L3M_CHAOS_SECS`).
