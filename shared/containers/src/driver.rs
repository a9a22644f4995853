//! Connecting to the engine, reaping what a killed predecessor left, and running one stage.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
    WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use l3m_core::build::{Stage, StageExit, StageOutcome, StageOwner, stage_allowed_for};

use crate::spec::{
    Attachment, Binds, Identity, LABEL_OWNER, LABEL_SITE, SpecError, container_body,
};

/// What went wrong driving the engine (as opposed to a stage that ran and failed, which is a
/// [`StageOutcome`]).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The engine could not be reached or refused a request.
    #[error("container engine: {op}: {source}")]
    Engine {
        /// What the driver was doing.
        op: &'static str,
        /// The engine's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// The stage cannot be turned into a container request.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The stage names an image whose id is not among the pinned ones.
    #[error("stage {stage}: image {image} (id {id}) is not pinned; pinned: {pinned:?}")]
    ImageNotPinned {
        /// The stage.
        stage: String,
        /// The image as the plan names it.
        image: String,
        /// Its id on this engine.
        id: String,
        /// The ids allowed.
        pinned: Vec<String>,
    },
    /// This process does not own this kind of stage (the builder never runs; the runner never
    /// fetches or builds).
    #[error("the {owner} does not run {kind} stages (stage {stage})")]
    NotMyStage {
        /// Who was asked.
        owner: StageOwner,
        /// The stage kind asked for.
        kind: l3m_core::build::StageKind,
        /// The stage's name.
        stage: String,
    },
}

/// How long after the deadline the log stream may take to end once the container is killed.
const LOG_GRACE: Duration = Duration::from_secs(5);

fn engine(op: &'static str) -> impl FnOnce(bollard::errors::Error) -> DriverError {
    move |source| DriverError::Engine { op, source }
}

/// A connection to the engine on behalf of one owner.
#[derive(Debug, Clone)]
pub struct Driver {
    docker: Docker,
    who: Identity,
    /// The engine ids a stage's image must have (`None`: any local image). Shared by the
    /// driver's clones, so a [`Driver::repin`] reaches every request served with one.
    pinned: Arc<RwLock<Option<BTreeSet<String>>>>,
}

impl Driver {
    /// Connects to the local engine (`DOCKER_HOST` or the default socket) and negotiates the
    /// API version down to what the engine speaks.
    pub async fn connect(who: Identity) -> Result<Self, DriverError> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(engine("connect"))?
            .negotiate_version()
            .await
            .map_err(engine("negotiate version"))?;
        Ok(Driver {
            docker,
            who,
            pinned: Arc::default(),
        })
    }

    /// Allows only images whose engine id (`sha256:…`) is in `ids`: a plan, written by an agent,
    /// cannot pick any other image on the host.
    /// The driver's clones made before keep their own pins.
    pub fn pin_images(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.pinned = Arc::new(RwLock::new(Some(ids.into_iter().collect())));
        self
    }

    /// Replaces the pins of this driver and of its clones: the next stage any of them runs
    /// must use one of `ids`, or any local image if `ids` is empty (as at start with no pins).
    pub fn repin(&self, ids: BTreeSet<String>) {
        let pins = (!ids.is_empty()).then_some(ids);
        *self.pinned.write().unwrap_or_else(PoisonError::into_inner) = pins;
    }

    /// The pins now, as a stage would be checked against them.
    fn pins(&self) -> Option<BTreeSet<String>> {
        self.pinned
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The image the container is made from: with pins, the stage's image's id, refused unless
    /// pinned (the container is made from that id, so a retag in between changes nothing);
    /// without, the image as the plan names it.
    async fn resolve_image(&self, stage: &Stage) -> Result<String, DriverError> {
        let Some(pinned) = self.pins() else {
            return Ok(stage.image.clone());
        };
        let info = self
            .docker
            .inspect_image(&stage.image)
            .await
            .map_err(engine("inspect image"))?;
        let id = info.id.unwrap_or_default();
        if pinned.contains(&id) {
            return Ok(id);
        }
        Err(DriverError::ImageNotPinned {
            stage: stage.name.clone(),
            image: stage.image.clone(),
            id,
            pinned: pinned.iter().cloned().collect(),
        })
    }

    /// The bollard client, for the services' own requests (networks, images).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Who this driver starts containers for.
    pub fn identity(&self) -> &Identity {
        &self.who
    }

    /// Removes every container and network labelled with this owner and site: what a killed
    /// predecessor left. Called at start, before serving; returns how many it removed.
    pub async fn reap(&self) -> Result<usize, DriverError> {
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![
                format!("{LABEL_OWNER}={}", self.who.owner),
                format!("{LABEL_SITE}={}", self.who.site),
            ],
        )]);
        let list = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(engine("list containers"))?;
        let mut removed = 0;
        for c in list {
            if let Some(id) = c.id {
                self.remove(&id).await?;
                removed += 1;
            }
        }
        let opts = bollard::query_parameters::ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        let networks = self
            .docker
            .list_networks(Some(opts))
            .await
            .map_err(engine("list networks"))?;
        for n in networks.into_iter().filter_map(|n| n.id) {
            self.docker
                .remove_network(&n)
                .await
                .map_err(engine("remove network"))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Runs one stage to its end: create, start, stream logs (bounded), wait up to the
    /// deadline (then kill), inspect for an OOM kill, and always remove.
    pub async fn run_stage(
        &self,
        stage: &Stage,
        binds: &Binds,
        attach: Option<&Attachment>,
    ) -> Result<StageOutcome, DriverError> {
        if !stage_allowed_for(self.who.owner, stage.kind) {
            return Err(DriverError::NotMyStage {
                owner: self.who.owner,
                kind: stage.kind,
                stage: stage.name.clone(),
            });
        }
        let image = self.resolve_image(stage).await?;
        let mut body = container_body(stage, &self.who, binds, attach)?;
        body.image = Some(image);
        let started = Instant::now();
        let id = self
            .docker
            .create_container(Some(CreateContainerOptionsBuilder::default().build()), body)
            .await
            .map_err(engine("create container"))?
            .id;
        let outcome = self.drive(&id, stage, started).await;
        let removed = self.remove(&id).await;
        let outcome = outcome?;
        removed?;
        Ok(outcome)
    }

    async fn drive(
        &self,
        id: &str,
        stage: &Stage,
        started: Instant,
    ) -> Result<StageOutcome, DriverError> {
        self.docker
            .start_container(id, None)
            .await
            .map_err(engine("start container"))?;
        let limit = usize::try_from(stage.limits.log_bytes).unwrap_or(usize::MAX);
        let deadline = Duration::from_millis(stage.limits.deadline_ms);
        let (mut log, mut log_dropped) = (Vec::new(), 0u64);
        let waited = async {
            match tokio::time::timeout(deadline, self.wait(id)).await {
                Ok(exit) => exit,
                Err(_) => {
                    tracing::warn!(stage = %stage.name, "deadline passed: killing");
                    let kill = KillContainerOptionsBuilder::default()
                        .signal("KILL")
                        .build();
                    // A container that exited in the meantime cannot be killed; removal
                    // follows anyway.
                    let _ = self.docker.kill_container(id, Some(kill)).await;
                    Ok(StageExit::Deadline)
                }
            }
        };
        // The log stream ends when the container stops (after a kill too); what it delivered
        // until then is kept even if the engine never closes it.
        let logs = tokio::time::timeout(
            deadline + LOG_GRACE,
            self.collect_logs(id, limit, &mut log, &mut log_dropped),
        );
        let (exit, logs) = futures_util::future::join(waited, logs).await;
        let exit = exit?;
        if let Ok(read) = logs {
            read?;
        }
        let exit = if exit != StageExit::Deadline && self.oom_killed(id).await? {
            StageExit::OutOfMemory
        } else {
            exit
        };
        Ok(StageOutcome {
            stage: stage.name.clone(),
            exit,
            log,
            log_dropped,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Waits for exit; bollard reports a non-zero exit as an error, which here is an outcome.
    async fn wait(&self, id: &str) -> Result<StageExit, DriverError> {
        let opts = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let mut stream = self.docker.wait_container(id, Some(opts));
        match stream.next().await {
            Some(Ok(r)) => Ok(StageExit::Exited {
                code: r.status_code,
            }),
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                Ok(StageExit::Exited { code })
            }
            Some(Err(e)) => Err(DriverError::Engine {
                op: "wait container",
                source: e,
            }),
            None => Ok(StageExit::Exited { code: -1 }),
        }
    }

    /// Follows stdout and stderr until the container ends, keeping at most `limit` bytes in
    /// `kept` and counting the rest in `dropped` (both hold what was read if this is cut short).
    async fn collect_logs(
        &self,
        id: &str,
        limit: usize,
        kept: &mut Vec<u8>,
        dropped: &mut u64,
    ) -> Result<(), DriverError> {
        let opts = LogsOptionsBuilder::default()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut stream = self.docker.logs(id, Some(opts));
        while let Some(chunk) = stream.next().await {
            let bytes = match chunk.map_err(engine("read logs"))? {
                LogOutput::StdOut { message }
                | LogOutput::StdErr { message }
                | LogOutput::Console { message } => message,
                LogOutput::StdIn { .. } => continue,
            };
            let room = limit.saturating_sub(kept.len()).min(bytes.len());
            kept.extend_from_slice(&bytes[..room]);
            *dropped += (bytes.len() - room) as u64;
        }
        Ok(())
    }

    async fn oom_killed(&self, id: &str) -> Result<bool, DriverError> {
        let info = self
            .docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(engine("inspect container"))?;
        Ok(info.state.and_then(|s| s.oom_killed).unwrap_or(false))
    }

    async fn remove(&self, id: &str) -> Result<(), DriverError> {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            // Already gone (a concurrent reap): the goal is reached.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(DriverError::Engine {
                op: "remove container",
                source: e,
            }),
        }
    }
}
