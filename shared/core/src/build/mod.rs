//! Build plans: what the builder and the runner may start, decided before anything starts.
//!
//! A build is where an agent's writes become code that something executes, so l3m keeps the two
//! apart the way W^X keeps a page from being both writable and executable (DESIGN §8). A
//! [`Plan`] is plain data — stages, each with an image, mounts, a network and limits — and
//! [`check_plan`] is the gate every plan passes before a container exists. A refused plan names
//! the stage and the [`PlanRule`] it broke, so the caller can fix exactly that.
//!
//! # Layout
//! - [`authority`]: what a build or run voucher covers, and the checks on both sides of it.
//! - [`bless`]: a human's pin of a Makefile target's inputs, and the check before a blessed run.
//! - [`tame`]: tame make, a restricted Makefile lowered to commands the harness writes.
//! - [`plan`]: stages, mounts, networks and limits as data.
//! - [`check`]: the rules, each a pure predicate, and the gate that applies them in order.
//! - [`outcome`]: how a stage ended.
//! - [`digest`]: the content address of an artifact and the canonical listing it hashes.

pub mod authority;
pub mod bless;
pub mod check;
pub mod digest;
pub mod outcome;
pub mod plan;
pub mod tame;

pub use authority::{Cover, Uncovered, build_within, grant_covers, run_within};
pub use bless::{BlessError, Blessing, blessed_inputs, check_blessing, check_target};
pub use check::{
    PlanRefusal, PlanRule, check_plan, docker_plan_rw_mount_is_its_out_dir,
    net_forbidden_after_private_touch, stage_allowed_for,
};
pub use digest::{ArtifactDigest, DigestError, TreeEntry, tree_manifest};
pub use outcome::{StageExit, StageOutcome};
pub use plan::{Limits, Mount, MountRole, Network, Plan, Stage, StageKind, StageOwner};
pub use tame::{TAME_TOOLS, TameError, TameStep, command_line, lower};
