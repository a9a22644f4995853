//! The demo's W^X build: `maker`, granted `build` and `run` by the human, builds a small
//! project with its `build` tool (the builder mounts the source read-only, no network, and
//! stores the artifact under its blake3 digest) and runs the artifact by that digest with its
//! `run` tool (the runner re-hashes the bytes, mounts them read-only, no network, and gives
//! the run one fresh `out/`).
//!
//! The builder and the runner are the real libraries, serving in this process on the hub's
//! bus against the local Docker engine. The `l3m/busybox:dev` image they run is made on the
//! spot when the engine lacks it ([`super::image`] runs `deploy/images/build`, which takes
//! Debian's busybox-static). Without an engine, when the image cannot be made, or with the
//! human's own model, this part is skipped and says why in one line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use l3m_containers::{ArtifactStore, Driver, Identity};
use l3m_core::build::{ArtifactDigest, StageOwner};
use l3m_core::clock::SystemClock;
use l3m_core::grant::Grant;
use l3m_core::log::{Record, RecordBody};
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::bus::Bus;
use l3m_wire::client::HubClient;
use l3m_wire::subjects::{HubId, Subjects};
use tokio_util::sync::CancellationToken;

use super::credentials::Seen;
use super::{assign, name, runtime, until_turn_end};
use crate::error::CliError;

/// The agent that builds and runs.
pub const AGENT: &str = "maker";

/// The image both stages run in, as `deploy/images/build` tags it.
pub const IMAGE: &str = "l3m/busybox:dev";

/// Its grant: its workspace, and both halves of a build (a human may write both).
const GRANT: &str = "files = [\"workspace\"]\nbuild = true\nrun = true";

/// The project's folder in maker's ACR.
const PROJECT: &str = "workspace/hello";

/// The project's one source file: what the artifact prints.
const SOURCE: &str = "#!/bin/sh\necho 'built without a network, run by its digest'\n";

/// The file the run writes into its `out/`.
const RESULT: &str = "greeting.txt";

/// maker's scripted model; `DIGEST` becomes the artifact's digest, known in advance because
/// the artifact is content-addressed.
const SCRIPT: &str = include_str!("maker.toml");

/// Adds `build` and `run` to the demo root's bound, so `maker` may be granted them.
pub fn widen(grant: &mut Grant) {
    grant.build = true;
    grant.run = true;
}

/// maker's script, with the digest its build will report.
pub fn script() -> Result<String, CliError> {
    Ok(SCRIPT
        .replace("DIGEST", expected_digest()?.as_str())
        .replace("IMAGE", IMAGE))
}

/// The digest of the artifact the build stage makes: `app`, the source made executable.
fn expected_digest() -> Result<ArtifactDigest, CliError> {
    let dir = tempfile::tempdir().map_err(runtime)?;
    let app = dir.path().join("app");
    std::fs::write(&app, SOURCE).map_err(|e| CliError::io("write", &app, e))?;
    std::fs::set_permissions(&app, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| CliError::io("chmod", &app, e))?;
    l3m_containers::hash_tree(dir.path()).map_err(runtime)
}

/// The demo's builder and runner, serving on the hub's bus, or why this part is skipped.
pub enum Building {
    /// Both serve until `stop`; artifacts and outs are stored in `store`.
    Running {
        /// Stops both.
        stop: CancellationToken,
        /// The hub's artifact cache.
        store: ArtifactStore,
    },
    /// This part is not shown; the reason is printed.
    Skipped(String),
}

impl Building {
    /// Starts the builder and the runner on `bus` for the hub at `root`, making the image first
    /// when the engine lacks it (its progress on `bar`); with the human's own model (`scripted`
    /// false), without an engine, or when the image cannot be made, it starts nothing.
    pub async fn start(
        bus: Arc<dyn Bus>,
        hub: &HubId,
        root: &Path,
        scripted: bool,
        bar: &indicatif::ProgressBar,
    ) -> Result<Building, CliError> {
        if !scripted {
            return Ok(Building::Skipped(
                "the W^X build is shown only with the scripted model".into(),
            ));
        }
        let connect = |owner| Driver::connect(Identity::of_this_process(owner, hub.as_str()));
        let builder_driver = match connect(StageOwner::Builder).await {
            Ok(driver) => driver,
            Err(e) => {
                return Ok(Building::Skipped(format!(
                    "it needs a Docker engine, and none answers: {e}"
                )));
            }
        };
        if builder_driver.docker().inspect_image(IMAGE).await.is_err() {
            bar.set_message(format!(
                "W^X build: making the image {IMAGE} from Debian's busybox-static (once)"
            ));
            if let Err(why) = super::image::make(bar).await {
                return Ok(Building::Skipped(format!(
                    "it needs the image {IMAGE}, and making it failed: {why}"
                )));
            }
            if let Err(e) = builder_driver.docker().inspect_image(IMAGE).await {
                return Ok(Building::Skipped(format!(
                    "deploy/images/build ran, yet the engine has no {IMAGE}: {e}"
                )));
            }
        }
        let runner_driver = connect(StageOwner::Runner).await.map_err(runtime)?;
        for driver in [&builder_driver, &runner_driver] {
            driver.reap().await.map_err(runtime)?;
        }
        let store = ArtifactStore::open(root.join("cache/artifacts")).map_err(runtime)?;
        let subjects = Subjects::new(hub.clone());
        let gate = || {
            Arc::new(VoucherGate::new(
                Arc::clone(&bus),
                subjects.clone(),
                Arc::new(SystemClock),
            ))
        };
        let (builder_gate, runner_gate) = (gate(), gate());
        for gate in [&builder_gate, &runner_gate] {
            gate.policy().await.map_err(runtime)?;
        }
        let stop = CancellationToken::new();
        let config = builder::Config {
            store: store.clone(),
            resolve: Arc::new(HashMap::new()),
        };
        builder::serve(
            bus.as_ref(),
            &subjects,
            builder_driver,
            config,
            builder_gate,
            None,
            stop.clone(),
        )
        .await
        .map_err(runtime)?;
        runner::serve(
            bus.as_ref(),
            &subjects,
            runner_driver,
            store.clone(),
            runner_gate,
            None,
            stop.clone(),
        )
        .await
        .map_err(runtime)?;
        Ok(Building::Running { stop, store })
    }

    /// Stops the builder and the runner.
    pub fn stop(&self) {
        if let Building::Running { stop, .. } = self {
            stop.cancel();
        }
    }
}

/// Spawns `maker`, writes its project, gives it its task, waits until its turn ends, and
/// checks what the Log and the artifact cache show.
pub async fn step(
    me: &HubClient,
    building: &Building,
    root: &Path,
    within: Duration,
) -> Result<Seen, CliError> {
    let store = match building {
        Building::Skipped(why) => {
            return Ok(Seen {
                checks: Vec::new(),
                text: format!("\nW^X build: skipped, {why}\n"),
            });
        }
        Building::Running { store, .. } => store,
    };
    let maker = name(AGENT)?;
    let project: PathBuf = root.join(l3m_core::refs::paths::acr(&maker)).join(PROJECT);
    let write_project = || {
        std::fs::create_dir_all(&project).map_err(|e| CliError::io("make", &project, e))?;
        let source = project.join("app.sh");
        std::fs::write(&source, SOURCE).map_err(|e| CliError::io("write", &source, e))
    };
    let task = "Build workspace/hello and run what you built.";
    assign(me, &maker, GRANT, async || write_project(), task).await?;
    let log = until_turn_end(me, &maker, "build", within).await?;
    let expected = expected_digest()?;
    Ok(judge(&log, &expected, |out| {
        std::fs::read_to_string(store.path_of(out).join(RESULT)).unwrap_or_default()
    }))
}

/// The checks and the report of `maker`'s Log; `result` reads the file the run wrote into an
/// `out/` of the cache.
fn judge(
    log: &[Record],
    expected: &ArtifactDigest,
    result: impl Fn(&ArtifactDigest) -> String,
) -> Seen {
    let outputs: Vec<(&str, bool)> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    let built = outputs.iter().find(|(o, _)| o.contains("stage build:"));
    let ran = outputs.iter().find(|(o, _)| o.contains("stage run:"));
    let built_ok = built.is_some_and(|(o, err)| {
        !err && o.contains("stage build: exited 0")
            && o.contains(&format!("artifact: {}", expected.as_str()))
    });
    let out = ran.and_then(|(o, _)| {
        o.lines()
            .find_map(|l| l.strip_prefix("out: "))
            .and_then(|d| ArtifactDigest::parse(d).ok())
    });
    let written = out.as_ref().map(&result).unwrap_or_default();
    let ran_ok = ran.is_some_and(|(o, err)| !err && o.contains("stage run: exited 0"))
        && written == "built without a network, run by its digest\n";
    let line = |o: Option<&(&str, bool)>| {
        o.map_or("(no result)".to_owned(), |(o, _)| {
            o.lines()
                .filter(|l| {
                    l.starts_with("stage ") || l.starts_with("artifact:") || l.starts_with("out")
                })
                .collect::<Vec<_>>()
                .join(" | ")
        })
    };
    let text = format!(
        "\nW^X build: {AGENT} (granted build and run by the human) built {PROJECT} in a container \
         with its source read-only and no network, then ran the artifact by its digest in \
         another, with a fresh out/ as its only writable place:\n  build: {}\n  run:   {}\n  \
         out/{RESULT}: {:?}\n",
        line(built),
        line(ran),
        written.trim_end()
    );
    Seen {
        checks: vec![
            (
                "the build ran with no network and journaled the artifact's digest",
                built_ok,
            ),
            (
                "the run, by that digest only, wrote its result into a fresh out/",
                ran_ok,
            ),
        ],
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::ToolUseId;

    fn result(seq: u64, output: &str, is_error: bool) -> Record {
        Record {
            seq,
            at_ms: 0,
            body: RecordBody::ToolResult {
                id: ToolUseId::new(format!("u{seq}")).unwrap(),
                output: output.into(),
                is_error,
                effects: vec![],
                refusal: None,
            },
        }
    }

    #[test]
    fn the_checks_hold_only_for_the_expected_artifact_run_with_its_result() {
        let expected = ArtifactDigest::from_bytes([1; 32]);
        let out = ArtifactDigest::from_bytes([2; 32]);
        let build = format!(
            "stage build: exited 0 in 9 ms\nartifact: {}\n",
            expected.as_str()
        );
        let run = format!("stage run: exited 0 in 9 ms\nout: {}\n", out.as_str());
        let good = vec![result(1, &build, false), result(2, &run, false)];
        let wrote = |d: &ArtifactDigest| {
            if *d == out {
                "built without a network, run by its digest\n".to_owned()
            } else {
                String::new()
            }
        };
        let seen = judge(&good, &expected, wrote);
        assert!(seen.checks.iter().all(|(_, ok)| *ok), "{:?}", seen.checks);
        // Another artifact than the source makes: not the build the demo shows.
        let other = ArtifactDigest::from_bytes([3; 32]);
        assert!(!judge(&good, &other, wrote).checks[0].1);
        // A run that failed, or whose out/ holds something else.
        let failed = vec![result(1, &build, false), result(2, &run, true)];
        assert!(!judge(&failed, &expected, wrote).checks[1].1);
        assert!(!judge(&good, &expected, |_| "else\n".to_owned()).checks[1].1);
    }

    #[test]
    fn the_script_names_the_digest_the_source_builds_to() {
        let script = script().unwrap();
        assert!(script.contains(expected_digest().unwrap().as_str()));
        assert!(!script.contains("DIGEST") && script.contains(IMAGE));
    }
}
