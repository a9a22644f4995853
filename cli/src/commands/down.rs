//! `l3m down`: stop the local stack.

use crate::context::Context;
use crate::error::CliError;
use crate::stack::process::{self, GRACE};
use crate::stack::runfile::RunFile;

/// Stop the stack `l3m up` started: every process its run file lists, last started first,
/// SIGTERM then SIGKILL after a grace period. A process is signalled only while it still runs
/// the binary the run file recorded.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `l3m down`.
pub async fn cmd_down(_args: Args, cx: Context) -> Result<(), CliError> {
    let hub = cx.hub()?;
    let Some(run) = RunFile::read(hub.root())? else {
        return Err(CliError::StackDown {
            why: format!("no run file at {}", RunFile::path(hub.root()).display()),
        });
    };
    let processes = run.processes.clone();
    let killed = tokio::task::spawn_blocking(move || process::stop(&processes, GRACE))
        .await
        .map_err(|e| CliError::Runtime(format!("stopping the stack failed: {e}")))?;
    // An embedded `l3m up` removes the run file itself as it stops; either way it goes.
    RunFile::remove(hub.root())?;
    for p in &run.processes {
        let how = if killed.contains(&p.service) {
            "killed"
        } else {
            "stopped"
        };
        outln!("{how} {} (pid {})", p.service, p.pid);
    }
    Ok(())
}
