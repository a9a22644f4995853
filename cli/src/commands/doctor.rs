//! `l3m doctor`: what this machine has, what it lacks, and how to get it.

use std::process::Command;

use l3m_wire::postman::Probe;
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::stack::runfile::RunFile;
use crate::stack::{binaries, docker};

/// Check this machine and the configuration: nats-server, git, hubd and sequencer (required);
/// docker, a Docker engine that answers, and the builder and the runner (builds and runs), and
/// bwrap (the sandboxed shell), which are optional; whether the stack's builder and runner
/// run; the
/// l3m.toml document, the hub folder and its secret; whether the stack is up; and, when it is,
/// each office the hub pins (its postman dials it: reachable, certificate as pinned).
///
/// Each failed check says what to install or run. Exits 1 when a required check fails.
/// `--json` prints `{"ok", "checks": [{"name", "ok", "required", "detail", "fix"}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// Whether l3m cannot work without it.
    pub required: bool,
    /// What was found.
    pub detail: String,
    /// What to do when it failed.
    pub fix: Option<String>,
}

fn binary_check(name: &str, required: bool, version_arg: &str) -> Check {
    match binaries::find(name, binaries::install_hint(name)) {
        Ok(path) => {
            let version = Command::new(&path)
                .arg(version_arg)
                .output()
                .ok()
                .map(|o| {
                    let text = if o.stdout.is_empty() {
                        o.stderr
                    } else {
                        o.stdout
                    };
                    String::from_utf8_lossy(&text)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                })
                .unwrap_or_default();
            Check {
                name: name.into(),
                ok: true,
                required,
                detail: format!("{} {version}", path.display()).trim().to_owned(),
                fix: None,
            }
        }
        Err(_) => Check {
            name: name.into(),
            ok: false,
            required,
            detail: "not found".into(),
            fix: Some(binaries::install_hint(name).into()),
        },
    }
}

fn failed(name: &str, detail: String, fix: &str) -> Check {
    Check {
        name: name.into(),
        ok: false,
        required: true,
        detail,
        fix: Some(fix.into()),
    }
}

fn passed(name: &str, detail: String, required: bool) -> Check {
    Check {
        name: name.into(),
        ok: true,
        required,
        detail,
        fix: None,
    }
}

/// The document, hub and stack checks.
fn config_checks(cx: &Context) -> Vec<Check> {
    let path = cx.document_path();
    let document = match crate::config::Document::load(&path) {
        Ok(Some(d)) => d,
        Ok(None) => {
            return vec![failed(
                "config",
                format!("no {}", path.display()),
                "run `l3m init --human NAME`",
            )];
        }
        Err(e) => return vec![failed("config", e.to_string(), "fix the line it names")],
    };
    let mut checks = vec![passed("config", path.display().to_string(), true)];
    let hub = match cx.hub() {
        Ok(hub) => hub,
        Err(e) => {
            checks.push(failed(
                "hub",
                e.to_string(),
                "run `l3m init`, or pick a hub with --hub",
            ));
            return checks;
        }
    };
    drop(document);
    match hub.human_key() {
        Ok(_) => checks.push(passed(
            "hub",
            format!("`{}` at {}", hub.name, hub.root().display()),
            true,
        )),
        Err(e) => checks.push(failed(
            "hub",
            e.to_string(),
            "chmod 600 the credential, set `credential` in the hub's entry, or ask a human for one \
             (l3m credential issue --human NAME)",
        )),
    }
    let up = match (&hub.entry.nats, RunFile::read(hub.root())) {
        (Some(url), _) => format!("uses the NATS server {url}"),
        (None, Ok(Some(run))) => {
            let live = run
                .processes
                .iter()
                .filter(|p| crate::stack::process::alive(p))
                .count();
            format!(
                "{live} of {} processes alive on {}",
                run.processes.len(),
                run.nats
            )
        }
        (None, Ok(None)) => "not up (run `l3m up`)".into(),
        (None, Err(e)) => e.to_string(),
    };
    checks.push(passed("stack", up, false));
    if let Ok(Some(run)) = RunFile::read(hub.root()) {
        let alive: Vec<&str> = run
            .processes
            .iter()
            .filter(|p| crate::stack::process::alive(p))
            .map(|p| p.service.as_str())
            .collect();
        checks.push(builds_check(&alive));
    }
    checks.push(models_check(&hub.document));
    checks
}

/// Whether a Docker engine answers: the builder and the runner need one, and the `docker`
/// binary alone says nothing about it.
fn engine_check(ping: Result<(), String>) -> Check {
    match ping {
        Ok(()) => passed("engine", "a Docker engine answers".into(), false),
        Err(why) => Check {
            required: false,
            ..failed(
                "engine",
                why,
                "start a Docker engine (systemctl start docker), let this user use its socket,                  or set DOCKER_HOST; builds are off without one",
            )
        },
    }
}

/// Whether the running stack has its builder and runner, from the services alive in its run
/// file.
fn builds_check(alive: &[&str]) -> Check {
    let has = |s: &str| alive.contains(&s);
    if has("builder") && has("runner") {
        return passed("builds", "the builder and the runner run".into(), false);
    }
    Check {
        required: false,
        ..failed(
            "builds",
            "the stack runs no builder and runner: agents granted `build` or `run` cannot".into(),
            "with a Docker engine and both binaries (scripts/install), `l3m down && l3m up`              starts them; its output says why when it does not",
        )
    }
}

/// Whether agents have a model to run on: without `default_model` or an `[[agents]]` rule,
/// every agent sleeps with its letters unread.
fn models_check(document: &std::path::Path) -> Check {
    let setup = match crate::models::setup(document) {
        Ok(setup) => setup,
        Err(e) => return failed("models", e, "fix the file it names"),
    };
    match (&setup.default_model, setup.rules) {
        (None, 0) => Check {
            required: false,
            ..failed(
                "models",
                "no model for any agent: agents sleep with their letters unread".into(),
                "set `default_model` and a [models.NAME] table (or [[agents]] rules) in l3m.toml",
            )
        },
        (None, n) => passed(
            "models",
            format!("{n} [[agents]] rule(s); agents no rule matches have no model"),
            false,
        ),
        (Some(model), n) => passed(
            "models",
            format!("default_model {model}, {n} [[agents]] rule(s)"),
            false,
        ),
    }
}

/// Runs every check.
pub fn checks(cx: &Context) -> Vec<Check> {
    let mut checks = vec![
        binary_check("nats-server", true, "--version"),
        binary_check("git", true, "--version"),
        binary_check("hubd", true, "--version"),
        binary_check("sequencer", true, "--version"),
        binary_check("postman", false, "--version"),
        binary_check("reviewer", false, "--version"),
        binary_check("builder", false, "--version"),
        binary_check("runner", false, "--version"),
        binary_check("docker", false, "--version"),
        engine_check(docker::ping()),
        binary_check("bwrap", false, "--version"),
    ];
    checks.extend(config_checks(cx));
    checks
}

/// One check per office the hub's settings pin, when the hub is up: its postman dials each
/// now, so a check fails on an office that is unreachable or shows a certificate other than
/// its pin. Nothing when the hub is not up or pins no office.
async fn office_checks(cx: &Context) -> Vec<Check> {
    let Ok(session) = cx.connect().await else {
        return Vec::new();
    };
    let Ok(settings) = session.client.read_settings().await else {
        return Vec::new();
    };
    let Ok(settings) = l3m_core::settings::Settings::parse(&settings.text) else {
        return Vec::new();
    };
    if settings.offices.is_empty() {
        return Vec::new();
    }
    let status = match crate::commands::office::link_status(&session.client, true).await {
        Ok(Some(status)) => status,
        Ok(None) => {
            return vec![failed(
                "postman",
                format!(
                    "{} offices pinned, but no postman answers",
                    settings.offices.len()
                ),
                "run `l3m up` (with `postman_listen` in the hub's entry), or `postman serve`",
            )];
        }
        Err(e) => return vec![failed("postman", e.to_string(), "see the postman's log")],
    };
    settings
        .offices
        .iter()
        .map(|(name, office)| {
            let check = format!("office {name}");
            let seen = status.offices.iter().find(|o| o.name == name.as_str());
            match seen.and_then(|o| o.probe.as_ref()) {
                Some(Probe::Welcomed) => passed(
                    &check,
                    format!("{} answered; its certificate matches the pin", office.addr),
                    true,
                ),
                Some(Probe::Failed { reason }) => failed(
                    &check,
                    reason.clone(),
                    "check that its postman runs and listens there, and that the pinned \
                     fingerprint is what `l3m office show-identity` prints on that hub",
                ),
                None => failed(
                    &check,
                    "the running postman does not carry to it".into(),
                    "restart the postman (`l3m down && l3m up`): it reads offices at start",
                ),
            }
        })
        .collect()
}

/// Runs `l3m doctor`.
pub async fn cmd_doctor(args: Args, cx: Context) -> Result<(), CliError> {
    let offices = office_checks(&cx).await;
    let mut checks = tokio::task::spawn_blocking(move || checks(&cx))
        .await
        .map_err(|e| CliError::Runtime(format!("the checks failed: {e}")))?;
    checks.extend(offices);
    let ok = checks.iter().all(|c| c.ok || !c.required);
    if args.json {
        output::json(&serde_json::json!({ "ok": ok, "checks": checks }))?;
    } else {
        for c in &checks {
            let mark = match (c.ok, c.required) {
                (true, _) => "ok  ",
                (false, true) => "MISS",
                (false, false) => "opt ",
            };
            println!("[{mark}] {:<12} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("       {fix}");
            }
        }
    }
    if ok {
        Ok(())
    } else {
        let missing: Vec<&str> = checks
            .iter()
            .filter(|c| !c.ok && c.required)
            .map(|c| c.name.as_str())
            .collect();
        Err(CliError::Runtime(format!(
            "required checks failed: {}",
            missing.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_and_the_builds_are_optional_checks_with_a_fix() {
        assert!(engine_check(Ok(())).ok);
        let down = engine_check(Err("no Docker engine answers at unix:///x".into()));
        assert!(!down.ok && !down.required && down.fix.is_some());
        assert!(builds_check(&["hubd", "builder", "runner"]).ok);
        let half = builds_check(&["hubd", "builder"]);
        assert!(!half.ok && !half.required && half.fix.is_some());
    }
}
