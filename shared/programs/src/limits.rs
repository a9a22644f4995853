//! The OS limits the evaluator puts on itself before it reads a program: an address-space cap
//! (the heap limit, enforced by the kernel at every allocation rather than now and then by the
//! interpreter), a CPU-time cap, no files written, no processes started and no descriptors
//! opened beyond its three pipes.
//!
//! The evaluator applies them to itself, first thing, because a parent cannot without `unsafe`
//! code between fork and exec; nothing of the program has been read at that point.
//!
//! The kernel's CPU limit counts a process's whole life. A serving evaluator, which answers
//! up to [`SERVED_CALLS`] calls of one program, therefore starts with a hard CPU limit that
//! covers them all ([`apply_serving`]) and, before each call, moves its soft limit to the CPU
//! time it has used plus one call's share ([`renew_cpu`]): every call may use `cpu_secs`,
//! whatever the calls before it used, and none is stopped for CPU an earlier call spent.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use rustix::time::{ClockId, clock_gettime};
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

/// How many calls one serving evaluator answers before it ends; its parent then starts a fresh
/// one. It bounds the CPU time a serving evaluator may hold in all ([`apply_serving`]) and
/// whatever memory its allocator keeps between calls.
pub const SERVED_CALLS: u64 = 256;

/// Applies `limits` (and the fixed ones) to this process, for good: one evaluation, whose
/// `cpu_secs` is the process's whole life.
pub fn apply(limits: Limits) -> Result<(), LimitError> {
    set(limits, limits.cpu_secs.max(1) + 1)
}

/// Applies `limits` to a serving evaluator, for good: the same as [`apply`], but the hard CPU
/// limit lasts [`SERVED_CALLS`] calls of `cpu_secs` each (and the load), so that
/// [`renew_cpu`] can give each call its own soft limit.
pub fn apply_serving(limits: Limits) -> Result<(), LimitError> {
    let per_call = limits.cpu_secs.max(1) + 1;
    set(limits, per_call.saturating_mul(SERVED_CALLS + 1) + 1)
}

/// Moves the soft CPU limit to the CPU time this process has used, rounded up, plus
/// `limits.cpu_secs`: the next call may use its full share. Never past the hard limit.
pub fn renew_cpu(limits: Limits) -> Result<(), LimitError> {
    let used = clock_gettime(ClockId::ProcessCPUTime);
    let used = u64::try_from(used.tv_sec).unwrap_or(0) + u64::from(used.tv_nsec > 0);
    let maximum = getrlimit(Resource::Cpu).maximum;
    let current = used.saturating_add(limits.cpu_secs.max(1));
    let current = maximum.map_or(current, |hard| current.min(hard));
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(current),
            maximum,
        },
    )
    .map_err(|e| LimitError {
        resource: "cpu",
        source: e.into(),
    })
}

/// Sets the address-space, file, process and descriptor limits of `limits`, and the CPU
/// limit: soft at `limits.cpu_secs`, hard at `cpu_hard`.
fn set(limits: Limits, cpu_hard: u64) -> Result<(), LimitError> {
    let bytes = limits.memory_mib.saturating_mul(1 << 20);
    let cpu = limits.cpu_secs.max(1);
    let table: [(&'static str, Resource, u64, u64); 5] = [
        ("address-space", Resource::As, bytes, bytes),
        // The soft limit sends SIGXCPU; the hard one SIGKILL.
        ("cpu", Resource::Cpu, cpu, cpu_hard),
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
