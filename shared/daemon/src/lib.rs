//! `l3m-daemon`: how every l3m service process starts and shows itself to an operator.
//!
//! Postfix gives each duty its own daemon and every daemon the same conventions; so does l3m.
//! This crate holds those conventions once, so hubd, the sequencer, the postman, the reviewer,
//! the builder and the runner cannot drift apart on them:
//!
//! - [`logs`]: logs go to stderr through `tracing`, filtered by `RUST_LOG` (default `info`),
//!   as JSON lines when `L3M_LOG_FORMAT=json` (for a log collector), coloured only on a terminal.
//! - [`run`]: a multi-threaded runtime, the service's work, and its exit code: 0 after a clean
//!   shutdown, 1 with `NAME: error` on stderr when it cannot start or fails.
//! - [`metrics`]: `--metrics ADDR` serves the service's health answer ([`l3m_wire::health`])
//!   as Prometheus text on `/metrics` and as JSON on `/healthz`, on a local port.
//!
//! **Must never** decide anything about a service's duty: it only starts processes the same way.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod logs;
pub mod metrics;

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

/// Why a service stopped badly, and so the exit code an operator's tools see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    code: u8,
    why: String,
}

impl Stop {
    /// Its arguments or configuration are wrong (exit 2, like clap's own usage errors): fix
    /// them before starting it again.
    pub fn usage(why: impl Into<String>) -> Stop {
        Stop::with_code(2, why)
    }

    /// It could not start or failed while serving (exit 1): its log says more.
    pub fn failed(why: impl Into<String>) -> Stop {
        Stop::with_code(1, why)
    }

    /// A stop a service names with a code of its own (documented in its `--help`).
    pub fn with_code(code: u8, why: impl Into<String>) -> Stop {
        Stop {
            code,
            why: why.into(),
        }
    }
}

impl From<String> for Stop {
    fn from(why: String) -> Stop {
        Stop::failed(why)
    }
}

impl Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Runs a service's `work` to its end on a fresh multi-threaded runtime, after setting up its
/// logs: exit 0 when it ends well; otherwise `name: why` on stderr and the [`Stop`]'s code
/// (clap has already exited 2 on bad flags).
pub fn run<E: Into<Stop>>(name: &str, work: impl Future<Output = Result<(), E>>) -> ExitCode {
    logs::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let stop = e.into();
            eprintln!("{name}: {stop}");
            ExitCode::from(stop.code)
        }
    }
}

/// Waits until the process is asked to stop: SIGINT (Ctrl-C) or SIGTERM (what `docker stop`,
/// systemd and `l3m down` send).
pub async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops this process");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
