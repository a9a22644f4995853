//! The image the demo's W^X build runs in, made on the spot when the engine lacks it.
//!
//! The demo runs `deploy/images/build` itself, the very script (compiled into this binary, so
//! an installed `l3m` needs no checkout): the image is made from Debian's busybox-static with
//! apt-get download, dpkg-deb and `docker import`, from no registry, and its id is the one the
//! tests and the compose site pin. Each line the script says is shown on the demo's spinner;
//! when it fails, its last line says why.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use indicatif::ProgressBar;

/// `deploy/images/build`, as this binary was built with it.
const SCRIPT: &str = include_str!("../../../../deploy/images/build");

/// The tag the script gives the image (`l3m/busybox:<tag>`).
const TAG: &str = "dev";

/// The last non-empty line of what the script said, for a one-line reason.
pub fn last_line(said: &[String]) -> Option<&str> {
    said.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty())
}

/// Runs the script, showing each line it writes to stderr on `bar`; `Err` is one line saying
/// why the image could not be made.
pub async fn make(bar: &ProgressBar) -> Result<(), String> {
    let bar = bar.clone();
    tokio::task::spawn_blocking(move || run(&bar))
        .await
        .map_err(|e| format!("the image build stopped: {e}"))?
}

fn run(bar: &ProgressBar) -> Result<(), String> {
    let mut child = Command::new("bash")
        .args(["-c", SCRIPT, "deploy/images/build"])
        .env("L3M_IMAGE_TAG", TAG)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run bash for deploy/images/build: {e}"))?;
    let mut said = Vec::new();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            bar.set_message(format!("W^X build: {}", line.trim()));
            said.push(line);
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("deploy/images/build: {e}"))?;
    if status.success() {
        return Ok(());
    }
    Err(match last_line(&said) {
        Some(line) => format!("deploy/images/build failed ({status}): {line}"),
        None => format!("deploy/images/build failed ({status})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_the_repositorys_and_makes_the_image_the_demo_runs() {
        assert!(SCRIPT.starts_with("#!/usr/bin/env bash"));
        assert!(SCRIPT.contains("busybox-static") && SCRIPT.contains("docker import"));
        assert_eq!(format!("l3m/busybox:{TAG}"), super::super::build::IMAGE);
    }

    #[test]
    fn the_reason_is_the_last_thing_said() {
        let said = vec!["images: making".into(), "E: no mirror".into(), "  ".into()];
        assert_eq!(last_line(&said), Some("E: no mirror"));
        assert_eq!(last_line(&[]), None);
    }
}
