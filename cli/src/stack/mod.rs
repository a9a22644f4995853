//! The local stack: nats-server (when the hub names none), hubd and the sequencer supervisor as
//! child processes, and the run file that lets later commands find them.
//!
//! `l3m up` starts each service in its own process group with its output in
//! `HUB/.l3m-run/<service>.log`, waits until each is ready (nats-server accepts connections,
//! hubd answers a session request, the supervisor is still alive after a settling pause), then
//! writes `HUB/.l3m-run/stack.toml`. `l3m down` reads it back and stops every process it lists,
//! SIGTERM first and SIGKILL after a grace period. A pid is signalled only while
//! `/proc/<pid>/cmdline` still names the binary the run file recorded, so a recycled pid is
//! never hit.
//!
//! **Must never** signal a process the run file does not list.
//!
//! # Layout
//! - [`runfile`]: the run file's format, reading and writing.
//! - [`binaries`]: finding `hubd`, `sequencer` and `nats-server`.
//! - [`builds`]: whether `l3m up` starts the builder and the runner, or why builds are off.
//! - [`docker`]: whether a Docker engine answers.
//! - [`nats`]: a nats-server child on a free loopback port.
//! - [`users`]: the stack's NATS users, one per duty, with passwords generated at each start.
//! - [`process`]: starting a service, checking on it, stopping it.

pub mod binaries;
pub mod builds;
pub mod docker;
pub mod nats;
pub mod process;
pub mod runfile;
pub mod users;

use std::path::{Path, PathBuf};

/// The folder under the hub that holds the run file, the logs and the generated NATS config.
pub const RUN_DIR: &str = ".l3m-run";

/// The run folder of the hub at `root`.
pub fn run_dir(root: &Path) -> PathBuf {
    root.join(RUN_DIR)
}

/// A service `l3m up` can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Service {
    /// The hub's storage and gatekeeper.
    Hubd,
    /// The sequencer supervisor (`sequencer supervise`), which starts a sequencer for each
    /// asleep agent with mail.
    Sequencer,
    /// The postman (`postman serve`), which carries airmail to and from the pinned offices.
    Postman,
    /// The reviewer, which deliberates over wild calls with a model of another family; started
    /// when l3m.toml has a `[review]` table.
    Reviewer,
    /// The builder (fetch and build stages in containers); started beside the sequencer when a
    /// Docker engine answers (see [`builds`]).
    Builder,
    /// The runner (runs a built artifact by digest in a container); started with the builder.
    Runner,
}

impl Service {
    /// Every service, in start order.
    pub const ALL: [Service; 6] = [
        Service::Hubd,
        Service::Sequencer,
        Service::Postman,
        Service::Reviewer,
        Service::Builder,
        Service::Runner,
    ];

    /// The service's name, as in the run file and its log file.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Hubd => "hubd",
            Service::Sequencer => "sequencer",
            Service::Postman => "postman",
            Service::Reviewer => "reviewer",
            Service::Builder => "builder",
            Service::Runner => "runner",
        }
    }

    /// The binary it runs.
    pub fn binary(self) -> &'static str {
        match self {
            Service::Hubd => "hubd",
            Service::Sequencer => "sequencer",
            Service::Postman => "postman",
            Service::Reviewer => "reviewer",
            Service::Builder => "builder",
            Service::Runner => "runner",
        }
    }
}
