//! The OS limits the evaluator puts on itself before it reads a program: an address-space cap
//! (the heap limit, enforced by the kernel at every allocation rather than now and then by the
//! interpreter), a CPU-time cap, no files written, no processes started and no descriptors
//! opened beyond its three pipes.
//!
//! The evaluator applies them to itself, first thing, because a parent cannot without `unsafe`
//! code between fork and exec; nothing of the program has been read at that point.

use rustix::process::{Resource, Rlimit, setrlimit};
use serde::{Deserialize, Serialize};

/// The limits of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The address space, in MiB (heap, stacks and the binary itself).
    pub memory_mib: u64,
    /// CPU seconds before the kernel stops the process.
    pub cpu_secs: u64,
}

/// Why a limit could not be set.
#[derive(Debug, thiserror::Error)]
#[error("setting the {resource} limit: {source}")]
pub struct LimitError {
    /// Which limit.
    pub resource: &'static str,
    /// What the kernel said.
    #[source]
    pub source: std::io::Error,
}

/// Applies `limits` (and the fixed ones) to this process, for good.
pub fn apply(limits: Limits) -> Result<(), LimitError> {
    let bytes = limits.memory_mib.saturating_mul(1 << 20);
    let cpu = limits.cpu_secs.max(1);
    let table: [(&'static str, Resource, u64, u64); 5] = [
        ("address-space", Resource::As, bytes, bytes),
        // The soft limit sends SIGXCPU; the hard one, a second later, SIGKILL.
        ("cpu", Resource::Cpu, cpu, cpu + 1),
        ("file-size", Resource::Fsize, 0, 0),
        ("processes", Resource::Nproc, 0, 0),
        // stdin, stdout and stderr only.
        ("open-files", Resource::Nofile, 3, 3),
    ];
    for (resource, which, current, maximum) in table {
        setrlimit(
            which,
            Rlimit {
                current: Some(current),
                maximum: Some(maximum),
            },
        )
        .map_err(|e| LimitError {
            resource,
            source: e.into(),
        })?;
    }
    Ok(())
}
