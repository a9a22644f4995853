//! The evaluator's system-call filter: the last wall around the interpreter. The `starlark`
//! crate is not hardened against malicious code, so an exploit of it must find, inside the
//! sandbox's namespaces ([`crate::sandbox`]) and under the rlimits ([`crate::limits`]), a
//! kernel that answers almost nothing. Once its limits are set and before it reads a program,
//! the evaluator keeps only what an interpreter that talks to its parent over three pipes
//! needs: reading and writing them, memory that is never executable, its clocks, its own CPU
//! limit, and ending (also by `abort`). Opening a file, a socket or a process, signalling
//! another process, raising a limit, or any other system call kills it with `SIGSYS`, which its
//! parent names (`Rule::Syscall`).
//!
//! The filter is an allowlist built once per architecture with seccompiler (no `unsafe` code
//! here); a call made under another ABI than the binary's (x32, i386) is refused by the
//! filter's architecture check.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Why the filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[error("installing the evaluator's system-call filter: {0}")]
pub struct FilterError(String);

/// Confines this process for good: any system call outside the allowlist kills it with
/// `SIGSYS`. Call it once, after the rlimits and before reading a program. The process must
/// be single-threaded (the filter binds the calling thread and whatever it starts after).
pub fn confine() -> Result<(), FilterError> {
    let program = allowlist(SeccompAction::KillProcess)?;
    seccompiler::apply_filter(&program).map_err(|e| FilterError(e.to_string()))
}

/// The allowlist as a BPF program whose verdict for any other call is `otherwise`: the
/// evaluator kills itself; a test answers `EPERM` instead, to probe one thread and live.
pub(crate) fn allowlist(otherwise: SeccompAction) -> Result<BpfProgram, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(error)?;
    let filter =
        SeccompFilter::new(rules()?, otherwise, SeccompAction::Allow, arch).map_err(error)?;
    filter.try_into().map_err(error)
}

fn error(e: impl std::fmt::Display) -> FilterError {
    FilterError(e.to_string())
}

/// The allowed calls, each with the conditions (all of one rule, any rule) its arguments meet.
fn rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, FilterError> {
    let own = i64::from(std::process::id());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [
        // The three pipes (std writes whole buffers; `readv`/`writev` for vectored writes).
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_close,
        // The allocator: moving the break, unmapping, resizing and advising about mappings
        // (mappings themselves: `mmap` below, never executable).
        libc::SYS_brk,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_madvise,
        // Locks (one thread, but the allocator and std may wait on a futex) and yielding.
        libc::SYS_futex,
        libc::SYS_sched_yield,
        // The clocks a call's CPU share and the deadlines read; hash seeds.
        libc::SYS_clock_gettime,
        libc::SYS_getrandom,
        // Signals arriving (the CPU limit's SIGXCPU, a stack overflow's SIGSEGV handler) and
        // `abort` on an exhausted heap (it unblocks SIGABRT and signals itself, below).
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_getpid,
        libc::SYS_gettid,
        // Ending.
        libc::SYS_exit,
        libc::SYS_exit_group,
    ]
    .into_iter()
    .map(|call| (call, Vec::new()))
    .collect();
    let no_exec = |arg| condition(arg, SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64), 0);
    // Memory that is never executable: an exploit cannot place code of its own and run it.
    rules.insert(libc::SYS_mmap, vec![rule(vec![no_exec(2)?])?]);
    rules.insert(libc::SYS_mprotect, vec![rule(vec![no_exec(2)?])?]);
    // Its own CPU limit only (`limits::renew_cpu` moves the soft one before each call): never
    // another process's, and no other limit (a root evaluator could raise them).
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![
            condition(0, SeccompCmpOp::Eq, 0)?,
            condition(1, SeccompCmpOp::Eq, libc::RLIMIT_CPU as u64)?,
        ])?],
    );
    // `abort` signals its own process only.
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![condition(0, SeccompCmpOp::Eq, own as u64)?])?],
    );
    // rustix finds the vDSO through the auxiliary vector: reading it is all prctl may do.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![condition(0, SeccompCmpOp::Eq, PR_GET_AUXV)?])?],
    );
    Ok(rules)
}

/// `prctl(PR_GET_AUXV)` (Linux 6.4); libc 0.2 does not name it on every target.
const PR_GET_AUXV: u64 = 0x4155_5856;

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    SeccompRule::new(conditions).map_err(error)
}

#[cfg(test)]
mod tests {
    use std::io::{PipeReader, PipeWriter, Read, Write};
    use std::net::{SocketAddr, TcpListener};

    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    use super::*;

    /// What the probes reach: a listener's address, a pipe, the limits as they are, the
    /// parent process.
    struct World {
        address: SocketAddr,
        pipe: (PipeReader, PipeWriter),
        address_space: Rlimit,
        cpu: Rlimit,
        parent: rustix::process::Pid,
    }

    impl World {
        fn new(listener: &TcpListener) -> World {
            World {
                address: listener.local_addr().unwrap(),
                pipe: std::io::pipe().unwrap(),
                address_space: getrlimit(Resource::As),
                cpu: getrlimit(Resource::Cpu),
                parent: rustix::process::getppid().unwrap(),
            }
        }
    }

    /// What each probe managed, in order: open a file, connect to a listener, start a
    /// process, signal the parent process, set the address-space limit, move the CPU limit,
    /// allocate 64 MiB, write and read a pipe.
    /// Everything a probe needs is made before the filter, as the evaluator's pipes are.
    fn probes(world: World) -> Vec<(&'static str, bool)> {
        let World {
            address,
            pipe: (mut reader, mut writer),
            address_space,
            cpu,
            parent,
        } = world;
        vec![
            ("open", std::fs::File::open("Cargo.toml").is_ok()),
            ("connect", std::net::TcpStream::connect(address).is_ok()),
            ("spawn", std::process::Command::new("true").status().is_ok()),
            ("signal", rustix::process::test_kill_process(parent).is_ok()),
            (
                "other-limit",
                setrlimit(Resource::As, address_space).is_ok(),
            ),
            ("cpu-limit", setrlimit(Resource::Cpu, cpu).is_ok()),
            ("allocate", {
                let block = vec![7u8; 64 << 20];
                block[block.len() - 1] == 7
            }),
            ("pipe", {
                let wrote = writer.write_all(b"x").is_ok();
                let mut byte = [0u8];
                wrote && reader.read_exact(&mut byte).is_ok() && byte == *b"x"
            }),
        ]
    }

    /// The allowlist, installed on one thread (answering `EPERM` instead of killing, so the
    /// test lives), refuses every probe but memory, the pipes and the CPU limit; the same
    /// probes on a thread with no filter all succeed, so each refusal is the filter's.
    #[test]
    fn the_filter_refuses_files_sockets_processes_signals_and_limits() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let bare = probes(World::new(&listener));
        assert!(bare.iter().all(|(_, ok)| *ok), "{bare:?}");
        let program = allowlist(SeccompAction::Errno(libc::EPERM as u32)).unwrap();
        let world = World::new(&listener);
        let filtered = std::thread::scope(|s| {
            s.spawn(|| {
                seccompiler::apply_filter(&program).unwrap();
                probes(world)
            })
            .join()
            .unwrap()
        });
        let managed: Vec<&str> = filtered
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(managed, ["cpu-limit", "allocate", "pipe"]);
    }
}
