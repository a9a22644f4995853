//! The session's [`HubOutlet`]: how the ring's mail, spawn, build and run tools reach hubd,
//! the builder and the runner.
//!
//! A program's driven children are retired through it, and their answers taken from the
//! agent's own inbox (the first unread letter from the child, marked read as it is taken),
//! polled until the program's deadline; every driven child is noted in the session's
//! [`Driven`] set before its task is sent, so the inbox watcher never shows its letters.
//!
//! The ring checks the agent's tokens first (an uncovered address, a spawn level of `off` or a
//! build of a folder outside the write roots never gets here); hubd then runs the real gates
//! again. Tool bodies run on a blocking thread, so the outlet enters the runtime with
//! `Handle::block_on` for the calls it makes.
//!
//! A build or a run asks hubd for a voucher with this session (hubd signs only what the agent's
//! grant covers), then sends the request with the voucher to the builder or the runner over
//! NATS, waiting at most the stages' deadlines plus [`STAGE_MARGIN`]. A build first sends its
//! source: the bundle of its source and lockfile folders (`l3m_wire::build::bundle`, links kept,
//! never followed, the folders resolved inside the ACR), in chunks under the same voucher, so
//! the builder needs no path to this host's forest. A service that is not
//! running, refuses, or does not answer in time comes back as a typed [`StageError`] the model
//! reads; nothing here panics or retries (a retried build could run twice).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use l3m_core::build::{ArtifactDigest, Blessing, Cover, Stage};
use l3m_core::duty::Duty;
use l3m_core::grant::SpawnRequest;
use l3m_core::mail::{Address, Inbox};
use l3m_core::names::{AgentName, Entity};
use l3m_core::vigil::Watch;
use l3m_ring::effects::{BuildAsk, Built, HubOutlet, OutletError, Ran, StageError};
use l3m_wire::WireError;
use l3m_wire::build::bundle::{BundleError, pack, under_acr};
use l3m_wire::build::{BuildReply, BuildRequest, OP_BUILD, OP_RUN, RunReply, RunRequest, upload};
use l3m_wire::client::{ClientError, HubClient};
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::build_voucher::{BuildPolicy, ReadBuildPolicy};
use l3m_wire::subjects::{Operation, Service};
use tokio::runtime::Handle;

use crate::drive::Driven;

/// How long boot waits for hubd's build policy (the pinned images the prompt names).
const POLICY_TIMEOUT: Duration = Duration::from_secs(5);

/// The image ids the hub's settings pin (`[builds] images`, from hubd's build policy), for the
/// prompt of an agent offered a build or run tool, so its model can name one. Empty when none
/// are pinned, or when hubd does not tell (logged; the builder's refusal of an unpinned image
/// names the pinned ones then).
pub async fn pinned_images(client: &HubClient) -> Vec<String> {
    let subject = Op::ReadBuildPolicy.subject(client.subjects());
    let policy = l3m_wire::typed::call::<_, BuildPolicy>(
        client.bus().as_ref(),
        &subject,
        &ReadBuildPolicy {},
        POLICY_TIMEOUT,
        &Limits::default(),
    )
    .await;
    match policy {
        Ok(Ok(policy)) => policy.images,
        Ok(Err(e)) => {
            tracing::warn!(error = %e.message, "hubd refused its build policy; the prompt names no image");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "hubd's build policy did not come; the prompt names no image");
            Vec::new()
        }
    }
}

/// How long past the sum of its stages' deadlines a build or run is waited for: creating and
/// removing containers, hashing and storing the artifact.
pub const STAGE_MARGIN: Duration = Duration::from_secs(30);

/// Mail, spawn, builds and runs for one session, over its own hubd client and bus.
#[derive(Debug, Clone)]
pub struct SessionOutlet {
    client: HubClient,
    runtime: Handle,
    /// The agent's driven children: each driven spawn is noted here before its task is sent.
    driven: Driven,
    /// The agent's ACR: a build's source and lockfile folders are bundled from it and sent to
    /// the builder, which may run on any host.
    acr: PathBuf,
}

/// How often a program waiting for a driven child's answer reads the inbox again.
const ANSWER_POLL: Duration = Duration::from_millis(100);

impl SessionOutlet {
    /// An outlet that sends with `client` on `runtime` (the session's runtime), noting the
    /// driven children it spawns in `driven`, bundling builds' sources from the ACR at `acr`.
    pub fn new(client: HubClient, runtime: Handle, driven: Driven, acr: PathBuf) -> SessionOutlet {
        SessionOutlet {
            client,
            runtime,
            driven,
            acr,
        }
    }

    /// The bundle of `ask`'s source and lockfile folders from the ACR.
    fn bundle(&self, ask: &BuildAsk) -> Result<Vec<u8>, StageError> {
        let refused = |e: BundleError| StageError::Refused {
            service: "builder",
            code: "invalid".into(),
            reason: format!("the build's source could not be sent: {e}"),
        };
        let source = under_acr(&self.acr, ask.source.as_str(), "source").map_err(refused)?;
        let lockfile = (ask.lockfile.as_ref())
            .map(|l| under_acr(&self.acr, l.as_str(), "lockfile"))
            .transpose()
            .map_err(refused)?;
        pack(&source, lockfile.as_deref()).map_err(refused)
    }

    /// Asks `service`'s `op` with `request`, waiting for `stages`' deadlines plus the margin.
    async fn ask<Req: Message, Resp: Message>(
        &self,
        service: Service,
        op: &str,
        request: &Req,
        stages: &[&Stage],
    ) -> Result<Resp, StageError> {
        let name = service.as_str();
        let op = Operation::parse(op).map_err(|e| StageError::Unreachable {
            service: name,
            reason: e.to_string(),
        })?;
        let subject = self.client.subjects().request(service, &op);
        let deadline: u64 = stages.iter().map(|s| s.limits.deadline_ms).sum();
        let timeout = Duration::from_millis(deadline).saturating_add(STAGE_MARGIN);
        let reply = l3m_wire::typed::call(
            self.client.bus().as_ref(),
            &subject,
            request,
            timeout,
            &Limits::default(),
        )
        .await
        .map_err(|e| StageError::Unreachable {
            service: name,
            reason: match e {
                WireError::Timeout { after, .. } => {
                    format!(
                        "no answer within {}s; the stages may still be running",
                        after.as_secs()
                    )
                }
                other => other.to_string(),
            },
        })?;
        reply.map_err(|e| StageError::Refused {
            service: name,
            code: e.code.as_str().to_owned(),
            reason: e.message,
        })
    }

    /// hubd's voucher for `cover`, asked with this session.
    async fn voucher(
        &self,
        cover: Cover,
    ) -> Result<l3m_wire::hubd::build_voucher::BuildVouched, StageError> {
        self.client
            .vouch_build(cover)
            .await
            .map_err(|e| StageError::Hub(outlet_error(e)))
    }
}

impl SessionOutlet {
    /// `on`, or the session's own agent.
    fn on(&self, on: Option<&AgentName>) -> Result<AgentName, OutletError> {
        match (on, self.client.duty()) {
            (Some(on), _) => Ok(on.clone()),
            (None, Duty::Sequencer { agent }) => Ok(agent.clone()),
            (None, _) => Err(OutletError::Refused {
                code: "invalid".into(),
                reason: "vigils are kept with an agent's sequencer session".into(),
                axis: None,
            }),
        }
    }
}

fn outlet_error(error: ClientError) -> OutletError {
    match error {
        ClientError::Refused { error, .. } => OutletError::Refused {
            code: error.code.as_str().to_owned(),
            reason: error.message,
            axis: error.axis,
        },
        other => OutletError::Unreachable {
            reason: other.to_string(),
        },
    }
}

impl HubOutlet for SessionOutlet {
    fn send_letter(
        &self,
        to: &Address,
        subject: Option<&str>,
        body: &str,
    ) -> Result<String, OutletError> {
        // A letter for another hub is staged on the agent's outbox for the postman; hubd
        // checks the airmail axis there.
        let to_text = to.to_string();
        let letter = if to.office().is_some() {
            self.runtime
                .block_on(self.client.stage_airmail(&to_text, subject, body))
                .map_err(outlet_error)?
                .letter
        } else {
            self.runtime
                .block_on(self.client.send_letter(&to_text, subject, body))
                .map_err(outlet_error)?
                .letter
        };
        Ok(letter)
    }

    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, OutletError> {
        self.runtime.block_on(async {
            let spawned = self
                .client
                .spawn(request.clone())
                .await
                .map_err(outlet_error)?;
            if request.driven {
                // Noted before the task wakes the child, so no letter of its is shown as mail.
                self.driven.note(request.child.clone());
            }
            if !task.trim().is_empty() {
                // The task is the child's first letter: it wakes the child, and it is durable
                // in the child's inbox before the spawn tool reports success.
                self.client
                    .send_letter(&spawned.child, Some("task"), task)
                    .await
                    .map_err(outlet_error)?;
            }
            Ok(spawned.child)
        })
    }

    fn retire(&self, child: &AgentName) -> Result<(), OutletError> {
        self.runtime
            .block_on(self.client.retire(child))
            .map(|_| ())
            .map_err(outlet_error)
    }

    fn take_letter(
        &self,
        child: &AgentName,
        until: Instant,
    ) -> Result<Option<String>, OutletError> {
        let Duty::Sequencer { agent } = self.client.duty() else {
            return Err(OutletError::Refused {
                code: "invalid".into(),
                reason: "a driven child's answer is taken from an agent's inbox with its sequencer session".into(),
                axis: None,
            });
        };
        self.runtime
            .block_on(take_letter(&self.client, agent, child, until))
            .map_err(outlet_error)
    }

    fn build(&self, ask: &BuildAsk) -> Result<Built, StageError> {
        self.runtime.block_on(async {
            let cover = Cover::of_build(ask.source.clone(), ask.lockfile.clone(), &ask.plan);
            let bundle = self.bundle(ask)?;
            let vouched = self.voucher(cover).await?;
            let bus = self.client.bus().as_ref();
            let uploaded = upload(bus, self.client.subjects(), &vouched, &bundle).await;
            match uploaded {
                Ok(Ok(())) => {}
                Ok(Err(refused)) => {
                    return Err(StageError::Refused {
                        service: "builder",
                        code: refused.code.as_str().to_owned(),
                        reason: refused.message,
                    });
                }
                Err(e) => {
                    return Err(StageError::Unreachable {
                        service: "builder",
                        reason: format!("sending the source: {e}"),
                    });
                }
            }
            let request = BuildRequest {
                plan: ask.plan.clone(),
                source: ask.source.to_string(),
                lockfile: ask.lockfile.as_ref().map(ToString::to_string),
                vouched: Some(vouched),
            };
            let stages: Vec<&Stage> = ask.plan.stages.iter().collect();
            let reply: BuildReply = self
                .ask(Service::Builder, OP_BUILD, &request, &stages)
                .await?;
            Ok(Built {
                stages: reply.stages,
                artifact: reply.artifact,
            })
        })
    }

    fn run(&self, artifact: &ArtifactDigest, stage: &Stage) -> Result<Ran, StageError> {
        self.runtime.block_on(async {
            let cover = Cover::Run {
                artifact: artifact.clone(),
            };
            let request = RunRequest {
                artifact: artifact.clone(),
                stage: stage.clone(),
                vouched: Some(self.voucher(cover).await?),
            };
            let reply: RunReply = self
                .ask(Service::Runner, OP_RUN, &request, &[stage])
                .await?;
            Ok(Ran {
                outcome: reply.outcome,
                out: reply.out,
                listing: reply.listing,
            })
        })
    }

    fn blessing(&self, target: &str) -> Result<Option<Blessing>, StageError> {
        let Duty::Sequencer { agent } = self.client.duty() else {
            return Err(StageError::Hub(OutletError::Refused {
                code: "invalid".into(),
                reason: "blessings are read with an agent's sequencer session".into(),
                axis: None,
            }));
        };
        self.runtime
            .block_on(self.client.read_blessing(agent, target))
            .map(|view| view.blessing)
            .map_err(|e| StageError::Hub(outlet_error(e)))
    }

    fn arm_vigil(
        &self,
        on: Option<&AgentName>,
        watch: Watch,
        until_ms: u64,
    ) -> Result<String, OutletError> {
        let on = self.on(on)?;
        self.runtime
            .block_on(self.client.arm_vigil(&on, watch, until_ms))
            .map(|armed| armed.id)
            .map_err(outlet_error)
    }

    fn cancel_vigil(&self, on: Option<&AgentName>, id: &str) -> Result<(), OutletError> {
        let on = self.on(on)?;
        self.runtime
            .block_on(self.client.cancel_vigil(&on, id))
            .map(|_| ())
            .map_err(outlet_error)
    }

    fn read_letter(&self, id: &str) -> Result<Option<l3m_core::mail::Letter>, OutletError> {
        let agent = self.on(None)?;
        let read = self.runtime.block_on(self.client.read_inbox(&agent, 0));
        Ok(read
            .map_err(outlet_error)?
            .entries
            .into_iter()
            .filter_map(l3m_core::mail::InboxEntry::into_letter)
            .find(|letter| letter.id.as_str() == id))
    }
}

/// Reads `agent`'s inbox until `until` for the first letter from `child` that `agent` has not
/// marked read; marks it read and returns its body.
async fn take_letter(
    client: &HubClient,
    agent: &AgentName,
    child: &AgentName,
    until: Instant,
) -> Result<Option<String>, ClientError> {
    let me = Entity::Agent(agent.clone());
    let (mut entries, mut from) = (Vec::new(), 0);
    loop {
        let read = client.read_inbox(agent, from).await?;
        from = read.from + read.entries.len() as u64;
        entries.extend(read.entries);
        let answer = Inbox::unread_in_order(&entries, &me)
            .find(|l| l.from.local_agent() == Some(child))
            .map(|l| (l.id.clone(), l.body.clone()));
        if let Some((id, body)) = answer {
            client.mark_read(id.as_str()).await?;
            return Ok(Some(body));
        }
        let now = Instant::now();
        if now >= until {
            return Ok(None);
        }
        tokio::time::sleep(ANSWER_POLL.min(until - now)).await;
    }
}
