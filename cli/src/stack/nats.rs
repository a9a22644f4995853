//! A nats-server child for a hub that names no NATS server: a generated configuration under
//! `HUB/.l3m-run/`, a free loopback port chosen by the server itself (`listen:
//! 127.0.0.1:-1`, read back from its ports file, so there is no race for the port), and a wait
//! until it accepts connections.
//!
//! The server listens on loopback only, and with deploy/nats.conf's users and permissions even
//! so: any process on this machine can reach it, so each duty connects as its own user with a
//! password generated for this start ([`super::users`]), and replies reach only their user.

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::process::{self, Started};
use super::users::Users;
use crate::error::CliError;

/// The site's users and their permissions; nats-server reads the passwords from its environment.
const SITE_PERMISSIONS: &str = include_str!("../../../deploy/nats.conf");

/// How long the server may take to listen.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// The generated configuration for a server whose files live in `dir`.
pub fn config_text(dir: &Path) -> String {
    format!(
        "# written by `l3m up`; regenerated on every start\nlisten: \"127.0.0.1:-1\"\nports_file_dir: {:?}\n{SITE_PERMISSIONS}",
        dir.display().to_string()
    )
}

/// Starts nats-server for the run folder `dir` with `users`' passwords and returns it with its
/// client URL once it accepts connections.
pub fn start(binary: &Path, dir: &Path, users: &Users) -> Result<(Started, String), CliError> {
    let config = dir.join("nats.conf");
    std::fs::write(&config, config_text(dir)).map_err(|e| CliError::io("write", &config, e))?;
    let args = vec!["-c".to_owned(), config.display().to_string()];
    let mut started = process::start(
        "nats-server",
        binary,
        &args,
        process::Inherit::Minimal,
        &users.server_env(),
        dir.join("nats-server.log"),
    )?;
    let begun = Instant::now();
    loop {
        if let Ok(Some(status)) = started.child.try_wait() {
            return Err(CliError::Runtime(format!(
                "nats-server exited with {status} before it listened; its log:\n{}",
                process::log_tail(&started.entry.log, 20)
            )));
        }
        if let Some(url) = listening_url(dir, started.entry.pid)
            && TcpStream::connect(url.trim_start_matches("nats://")).is_ok()
        {
            return Ok((started, url));
        }
        if begun.elapsed() > READY_WITHIN {
            let _ = started.child.kill();
            return Err(CliError::Runtime(format!(
                "nats-server did not listen within {READY_WITHIN:?}; its log:\n{}",
                process::log_tail(&started.entry.log, 20)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client URL from the ports file nats-server writes (`<exe>_<pid>.ports`).
fn listening_url(dir: &Path, pid: u32) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Ports {
        nats: Vec<String>,
    }
    let suffix = format!("_{pid}.ports");
    let path = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
        })?;
    let ports: Ports = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    ports.nats.into_iter().next()
}
