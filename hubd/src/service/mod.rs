//! The hubd service: every request served over a [`Bus`], checked, written, announced.
//!
//! Each request passes, in order: its reply subject (hubd answers only on an inbox, never on an
//! announcement's or a service's subject: anything else is dropped unread), the envelope
//! layer (size, version, kind), the session check on the envelope before its body is decoded
//! (the capability beside the seal names a live session, the seal was made with that
//! session's key over the body's bytes, its number is fresh, its answer goes home:
//! [`crate::capability`]), then the body, which must name the same session, then the duty
//! table ([`l3m_core::duty::may_write`]) for
//! every ref it would write, the fine gates (the ledger's fold, a grant's mail axis), and only
//! then the store. A refusal anywhere writes nothing. Once the request's seal verified, its
//! answer, a refusal included, is sealed to the session for that request
//! ([`l3m_wire::sealed_reply`]); only a refusal of a request that proved no session goes in
//! clear. After a ref moves, a
//! [`RefMoved`](l3m_wire::hubd::notify::RefMoved) is published: Git first, then the reply, then
//! the announcement.
//!
//! # Layout
//! - `error`: [`ServiceError`] and its reply codes.
//! - `gate`: the pure checks on request content.
//! - `state`: what one hubd holds in memory (the replayed ledger and credentials, the sessions)
//!   and its shared helpers; its children hold the operations by concern: `credentials`
//!   (sessions, vouchers, issuing and revoking), `log`, `tree` (spawn, retire, collect, list,
//!   read-grant), `acr` (branches and worktrees of an agent), `pack` (fetching and pushing an
//!   agent's branches as packs), `mail`, `regrant`, `airmail`, `vigils` (arming, cancelling,
//!   firing).
//! - `lease`: the session leases (who runs which agent), their pure table and their operations.
//! - `handlers`: one function per operation.
//! - `health`: the health answer and the per-operation counts behind it and the metrics.
//! - `announce`: the ref-move announcements, published in order after the replies.
//! - `vigils`: the task that fires vigils when a watched ref moves, a deadline or bound passes.
//! - `persona`: publishing an upstream persona and pulling it into a wearer.
//! - `settings`: reading and replacing the hub's settings; the push URLs read-grant serves.

mod announce;
mod blessing;
mod error;
mod gate;
mod handlers;
mod health;
pub(crate) mod lease;
mod persona;
mod settings;
mod state;
mod vigils;

use std::future::Future;
use std::sync::Arc;

use l3m_wire::WireError;
use l3m_wire::bus::Bus;
use l3m_wire::envelope::Message;
use l3m_wire::health::HealthRequest;
use l3m_wire::hubd::build_voucher::ReadBuildPolicy;
use l3m_wire::hubd::session::OpenSession;
use l3m_wire::hubd::{InSession, Op};
use l3m_wire::subjects::{HubId, Service, Subjects};
use l3m_wire::typed::{Precheck, ServeOptions, TypedRequest, TypedServer};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

pub use error::ServiceError;
pub use health::{Gauges, OpCount};
pub use lease::MAX_HOLDER;
pub use state::State;

use crate::init::InitError;
use crate::store::Hub;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The hub's ledger could not be loaded.
    #[error(transparent)]
    Init(#[from] InitError),
    /// A subject could not be served.
    #[error("serving {subject} failed: {source}")]
    Bind {
        /// The subject.
        subject: String,
        /// The cause.
        #[source]
        source: WireError,
    },
    /// The agents' vigils chains could not be read.
    #[error("loading the vigils failed: {0}")]
    Vigils(ServiceError),
}

/// A hubd whose subscriptions are all live, not yet serving.
///
/// Starting and serving are separate so that a caller (a test, the CLI's embedded mode) knows
/// that a request sent after [`start`] returns will be answered.
#[derive(Debug)]
pub struct Started {
    state: Arc<State>,
    servers: JoinSet<()>,
    /// Publishes the announcements; ends once the servers (and so the state) are gone.
    announcing: JoinHandle<()>,
    shutdown: CancellationToken,
}

impl Started {
    /// The state served, for what reads its gauges (the metrics endpoint).
    pub fn state(&self) -> Arc<State> {
        Arc::clone(&self.state)
    }

    /// Serves until `shutdown` (given to [`start`]) is cancelled, then waits for the requests in
    /// flight to be answered.
    pub async fn serve(mut self) {
        while self.servers.join_next().await.is_some() {}
        self.shutdown.cancel();
        // The announcer ends once every holder of the state is gone: this one too.
        drop(self.state);
        // The last answers' announcements still go out.
        if let Err(error) = self.announcing.await {
            tracing::warn!(%error, "the announcing task failed");
        }
    }
}

/// Loads the hub's ledger and binds every operation's subject on `bus`.
pub async fn start(
    bus: Arc<dyn Bus>,
    hub: Hub,
    hub_id: HubId,
    shutdown: CancellationToken,
) -> Result<Started, RunError> {
    let (announcer, announcing) = announce::Announcer::start(Arc::clone(&bus));
    let state = State::load(hub, Arc::clone(&bus), Subjects::new(hub_id), announcer)?;
    let state = Arc::new(state);
    tokio::spawn(lease::lapse::watch(
        Arc::downgrade(&state),
        shutdown.clone(),
    ));
    // Read once at start, like the ledger: a few ref reads per live agent.
    let armed = state.load_vigils().map_err(RunError::Vigils)?;
    tracing::info!(armed, "vigils loaded");
    let (pokes, poked) = tokio::sync::mpsc::channel(vigils::POKES);
    state.set_vigil_pokes(pokes);
    tokio::spawn(vigils::watch(
        Arc::downgrade(&state),
        poked,
        shutdown.clone(),
    ));
    let mut binder = Binder {
        state,
        servers: JoinSet::new(),
        shutdown: shutdown.clone(),
    };
    binder.bind(Op::AppendLog, handlers::append_log).await?;
    binder.bind(Op::ReadLog, handlers::read_log).await?;
    binder.bind(Op::AppendUndo, handlers::append_undo).await?;
    binder.bind(Op::ReadUndo, handlers::read_undo).await?;
    binder.bind(Op::AppendCard, handlers::append_card).await?;
    binder.bind(Op::ReadCards, handlers::read_cards).await?;
    binder.bind(Op::ArmVigil, handlers::arm_vigil).await?;
    binder.bind(Op::CancelVigil, handlers::cancel_vigil).await?;
    binder.bind(Op::ReadVigils, handlers::read_vigils).await?;
    binder.bind(Op::FetchPack, handlers::fetch_pack).await?;
    binder.bind(Op::PushPack, handlers::push_pack).await?;
    binder
        .bind(Op::DeliverAirmail, handlers::deliver_airmail)
        .await?;
    binder
        .bind(Op::ReturnBounces, handlers::return_bounces)
        .await?;
    binder.bind(Op::ReadOutbox, handlers::read_outbox).await?;
    binder.bind(Op::ReadCursor, handlers::read_cursor).await?;
    binder.bind(Op::MoveCursor, handlers::move_cursor).await?;
    binder.bind(Op::ReadGrant, handlers::read_grant).await?;
    binder.bind(Op::Spawn, handlers::spawn).await?;
    binder.bind(Op::Retire, handlers::retire).await?;
    binder.bind(Op::Collect, handlers::collect).await?;
    binder.bind(Op::ListAgents, handlers::list_agents).await?;
    binder.bind(Op::ListTree, handlers::list_tree).await?;
    binder.bind(Op::SendLetter, handlers::send_letter).await?;
    binder.bind(Op::ReadInbox, handlers::read_inbox).await?;
    binder.bind(Op::MarkRead, handlers::mark_read).await?;
    binder
        .bind(Op::AcquireLease, handlers::acquire_lease)
        .await?;
    binder.bind(Op::RenewLease, handlers::renew_lease).await?;
    binder
        .bind(Op::ReleaseLease, handlers::release_lease)
        .await?;
    binder.bind(Op::Regrant, handlers::regrant).await?;
    binder
        .bind(Op::StageAirmail, handlers::stage_airmail)
        .await?;
    binder
        .bind(Op::PublishPersona, persona::publish_persona)
        .await?;
    binder.bind(Op::PullPersona, persona::pull_persona).await?;
    binder
        .bind(Op::ReadSettings, settings::read_settings)
        .await?;
    binder
        .bind(Op::UpdateSettings, settings::update_settings)
        .await?;
    binder.bind(Op::Bless, blessing::bless_target).await?;
    binder
        .bind(Op::ReadBlessing, blessing::read_blessing)
        .await?;
    binder
        .bind(Op::IssueCredential, handlers::issue_credential)
        .await?;
    binder
        .bind(Op::RevokeCredential, handlers::revoke_credential)
        .await?;
    binder
        .bind(Op::ListCredentials, handlers::list_credentials)
        .await?;
    binder.bind(Op::Vouch, handlers::vouch).await?;
    binder
        .bind(Op::SpendVoucher, handlers::spend_voucher)
        .await?;
    binder.bind(Op::VouchBuild, handlers::vouch_build).await?;
    binder.bind_build_policy().await?;
    binder.bind_health().await?;
    // Last: a client whose session opens finds every other op served.
    binder.bind_open().await?;
    bus.flush().await.map_err(|source| RunError::Bind {
        subject: "(flush)".into(),
        source,
    })?;
    Ok(Started {
        state: binder.state,
        servers: binder.servers,
        announcing,
        shutdown,
    })
}

/// Starts hubd on `bus` and serves until `shutdown` is cancelled.
pub async fn run(
    bus: Arc<dyn Bus>,
    hub: Hub,
    hub_id: HubId,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    start(bus, hub, hub_id, shutdown).await?.serve().await;
    Ok(())
}

struct Binder {
    state: Arc<State>,
    servers: JoinSet<()>,
    shutdown: CancellationToken,
}

impl Binder {
    /// Serves `op` with `handler`, once the request proved it comes from its session's holder:
    /// checked on its envelope before the body is decoded, and the body naming the same
    /// session.
    async fn bind<Req, Resp, H, Fut>(&mut self, op: Op, handler: H) -> Result<(), RunError>
    where
        Req: Message + InSession + Send + 'static,
        Resp: Message + Send + 'static,
        H: Fn(Arc<State>, Req) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, ServiceError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let checking = Arc::clone(&self.state);
        let precheck = Precheck(Arc::new(move |envelope, reply| {
            checking.check_envelope(Req::KIND, envelope, reply)
        }));
        let options = ServeOptions {
            precheck: Some(precheck),
            ..inbox_only()
        };
        let subject = op.subject(self.state.subjects());
        let handler = move |state: Arc<State>, request: TypedRequest<Req>| {
            let named = request
                .sealed
                .as_ref()
                .and_then(|s| s.capability.as_deref());
            let same = named == Some(request.body.capability().0.as_str());
            let handler = Arc::clone(&handler);
            async move {
                if !same {
                    return Err(ServiceError::from(crate::capability::Closed::BadSeal));
                }
                handler(state, request.body).await
            }
        };
        self.serve_at(subject, op.as_str(), options, handler).await
    }

    /// Serves `hubd.open-session`, the one request outside a session.
    async fn bind_open(&mut self) -> Result<(), RunError> {
        self.serve(
            Op::OpenSession,
            |state: Arc<State>, request: TypedRequest<OpenSession>| async move {
                state.open_session(request.body, request.reply.as_deref())
            },
        )
        .await
    }

    /// Serves `hubd.read-build-policy` outside any session: the builder and the runner hold
    /// none, and it tells only a public key and image ids.
    async fn bind_build_policy(&mut self) -> Result<(), RunError> {
        self.serve(
            Op::ReadBuildPolicy,
            |state: Arc<State>, _: TypedRequest<ReadBuildPolicy>| async move {
                Ok::<_, ServiceError>(state.build_policy())
            },
        )
        .await
    }

    /// Serves hubd's health ([`l3m_wire::health`]), outside any session: it tells counts,
    /// never a capability or a record.
    async fn bind_health(&mut self) -> Result<(), RunError> {
        let subject =
            l3m_wire::health::subject(self.state.subjects(), Service::Hubd).map_err(|source| {
                RunError::Bind {
                    subject: "health".into(),
                    source,
                }
            })?;
        self.serve_at(
            subject,
            "health",
            inbox_only(),
            |state: Arc<State>, _: TypedRequest<HealthRequest>| async move { Ok(state.health()) },
        )
        .await
    }

    async fn serve<Req, Resp, H, Fut>(&mut self, op: Op, handler: H) -> Result<(), RunError>
    where
        Req: Message + Send + 'static,
        Resp: Message + Send + 'static,
        H: Fn(Arc<State>, TypedRequest<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, ServiceError>> + Send + 'static,
    {
        let subject = op.subject(self.state.subjects());
        self.serve_at(subject, op.as_str(), inbox_only(), handler)
            .await
    }

    /// Serves `subject` with `handler`, counting each answer under `name`.
    async fn serve_at<Req, Resp, H, Fut>(
        &mut self,
        subject: String,
        name: &'static str,
        options: ServeOptions,
        handler: H,
    ) -> Result<(), RunError>
    where
        Req: Message + Send + 'static,
        Resp: Message + Send + 'static,
        H: Fn(Arc<State>, TypedRequest<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, ServiceError>> + Send + 'static,
    {
        let server = TypedServer::<Req, Resp>::bind(self.state.bus().as_ref(), &subject, options)
            .await
            .map_err(|source| RunError::Bind {
                subject: subject.clone(),
                source,
            })?;
        let state = Arc::clone(&self.state);
        let serve = server.run(
            move |request| {
                let began = std::time::Instant::now();
                let state = Arc::clone(&state);
                let reply = handler(Arc::clone(&state), request);
                async move {
                    let reply = reply.await;
                    state.meter().record(name, began.elapsed(), reply.is_err());
                    reply.map_err(|error| {
                        tracing::debug!(kind = Req::KIND, %error, "refused a request");
                        error.to_remote()
                    })
                }
            },
            self.shutdown.clone(),
        );
        self.servers.spawn(serve);
        Ok(())
    }
}

/// hubd's serving options: it answers only on an inbox ([`l3m_wire::typed::is_inbox`]), so a
/// request naming an announcement's, a control or a service's subject as its reply gets no
/// answer at all.
fn inbox_only() -> ServeOptions {
    ServeOptions {
        inbox_only: true,
        ..ServeOptions::default()
    }
}
