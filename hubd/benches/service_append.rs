//! Durable Log append through hubd over NATS, against the git CLI and a raw `write + fsync`.
//!
//! A real `nats-server` (started by the bench), a hubd service on a hub with
//! `Durability::Fsync`, and a sequencer session per Log: each append is an `append-log`
//! request with compare-and-swap on the tip the previous reply returned, timed from the
//! request to the reply. The same append is run every way, in blocks taking turns (see
//! [`common`]):
//! - `hubd over nats (fsync)`: the request round trip (envelope, capability, duty table,
//!   record gate, store append with fsync, the ref announcement queued, reply);
//! - `store only (fsync)`: `Hub::append` on a second hub, to show what the service adds;
//! - `round trip (read-grant)`: a request that writes nothing, to show what the transport and
//!   the envelope layers cost by themselves;
//! - `git cli (fsync)` and `raw write+fsync`: the references of [`common`].
//!
//! Then what credentials cost ([`session_costs`]): `open-session (proof)` against the
//! read-grant round trip, and the seal every request carries against the same round trip.
//!
//! Run: `cargo bench -p hubd --bench service_append`. `L3M_BENCH_ITERS` sets the iterations
//! per batch size (default 200: about 45 s on a loaded 2-core machine); `L3M_BENCH_DIR` the
//! folder to work in (default: the temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use hubd::init::{init_hub, local_key};
use hubd::service;
use hubd::store::Durability;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest};
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::credential::{Ephemeral, SessionKey};
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{GrantView, ReadGrant};
use l3m_wire::hubd::log::{AppendLog, LogAppended};
use l3m_wire::hubd::session::{Capability, OpenSession, SessionOpened};
use l3m_wire::hubd::tree::{Spawn, Spawned};
use l3m_wire::subjects::{HubId, Subjects};
use l3m_wire::test_support::NatsServer;
use tokio_util::sync::CancellationToken;

use common::{
    BATCHES, Config, GIT_CLI, GitChain, RAW, ROUNDS, RawFile, Samples, StoreChains, options,
    records,
};

const SERVICE: &str = "hubd over nats (fsync)";
const STORE: &str = "store only (fsync)";
const ROUND_TRIP: &str = "round trip (read-grant)";
const OPEN: &str = "open-session (proof)";
const SEAL: &str = "seal + check (in process)";

/// What credentials cost: opening a session (an Ed25519 signature, its check, two X25519
/// agreements, one round trip) against a request round trip; and the seal a request carries
/// (made by the client, checked by hubd) against the same round trip, which is what sealing
/// adds to every request.
fn session_costs(rt: &tokio::runtime::Runtime, service: &Service, per_block: usize) {
    let mut samples = Samples::default();
    let session = &service.sessions[0];
    let body = rmp_serde::to_vec_named(&ReadGrant {
        capability: session.capability.clone(),
        agent: agent(0).to_string(),
    })
    .unwrap();
    for _ in 0..ROUNDS {
        samples.block(OPEN, per_block, |_| {
            rt.block_on(service.open(&service.root, Duty::Sequencer { agent: agent(0) }));
        });
        samples.block(ROUND_TRIP, per_block, |_| {
            rt.block_on(service.read_grant(0))
        });
        samples.block(SEAL, per_block, |n| {
            let seal = session.key.seal(n as u64, ReadGrant::KIND, &body);
            assert!(session.key.verifies(&seal, ReadGrant::KIND, &body));
        });
    }
    samples.print_table("sessions", 1);
    println!(
        "open-session p50 / request p50: {:.2}x    a sealed request / the same request \
         unsealed: {:.3}x (target <= 1.05x)",
        samples.p50_ratio(OPEN, ROUND_TRIP),
        1.0 + samples.p50_ratio(SEAL, ROUND_TRIP)
    );
}

fn main() {
    let config = Config::from_env("service_append", 200);
    let dir = config.dir.path();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let nats = NatsServer::start().unwrap();
    let mut service = rt.block_on(Service::start(dir, nats.url()));
    let mut store = StoreChains::create(&dir.join("HUB-store"), Durability::Fsync);
    let mut git = GitChain::new(dir);
    let mut raw = RawFile::new(dir);
    let per_block = config.iters.div_ceil(ROUNDS);
    for (slot, batch) in BATCHES.into_iter().enumerate() {
        let entries = |n: usize| records(batch, (n * batch) as u64);
        let mut samples = Samples::default();
        for _ in 0..ROUNDS {
            samples.block(SERVICE, per_block, |n| {
                rt.block_on(service.append(slot, entries(n)));
            });
            samples.block(STORE, per_block, |n| store.append(slot, &entries(n)));
            samples.block(ROUND_TRIP, per_block, |_| {
                rt.block_on(service.read_grant(slot));
            });
            samples.block(GIT_CLI, per_block, |n| git.append(slot, &entries(n)));
            samples.block(RAW, per_block, |n| raw.append(&entries(n)));
        }
        samples.print(batch, SERVICE);
    }
    session_costs(&rt, &service, per_block);
    config.print_steal();
    service.shutdown.cancel();
    drop(nats);
}

fn agent(slot: usize) -> AgentName {
    AgentName::parse(&format!("bench{slot}")).unwrap()
}

/// A hubd serving a durable hub, and one sequencer session per batch size's agent.
struct Service {
    bus: Arc<dyn Bus>,
    subjects: Subjects,
    shutdown: CancellationToken,
    sessions: Vec<Session>,
    root: std::path::PathBuf,
    tips: [Option<String>; BATCHES.len()],
}

/// One open session: its capability, its key and its next request number.
struct Session {
    capability: Capability,
    key: SessionKey,
    next: std::cell::Cell<u64>,
}

impl Service {
    async fn start(dir: &std::path::Path, url: &str) -> Service {
        let root = dir.join("HUB");
        let alice = HumanName::parse("alice").unwrap();
        let root_grant = Grant {
            spawn: SpawnLevel::Persist,
            ..Grant::default()
        };
        let hub = init_hub(
            &root,
            options(Durability::Fsync),
            alice.clone(),
            root_grant,
            1,
        )
        .unwrap();
        let bus: Arc<dyn Bus> = Arc::new(NatsBus::connect(url, NatsAuth::Anonymous).await.unwrap());
        let hub_id = HubId::parse("bench").unwrap();
        let shutdown = CancellationToken::new();
        let started = service::start(Arc::clone(&bus), hub, hub_id.clone(), shutdown.clone())
            .await
            .unwrap();
        tokio::spawn(started.serve());
        let mut service = Service {
            bus,
            subjects: Subjects::new(hub_id),
            shutdown,
            sessions: Vec::new(),
            root: root.clone(),
            tips: Default::default(),
        };
        let human = service.open(&root, Duty::Human { human: alice }).await;
        for slot in 0..BATCHES.len() {
            let spawn = Spawn {
                capability: human.capability.clone(),
                request: SpawnRequest::new(agent(slot), Grant::default()),
            };
            let _: Spawned = service.call(Op::Spawn, &spawn, &human).await;
            let session = service
                .open(&root, Duty::Sequencer { agent: agent(slot) })
                .await;
            service.sessions.push(session);
        }
        service
    }

    /// Sends `req` as `op` in `session`, sealed as every session request is.
    async fn call<Req: Message, Resp: Message>(
        &self,
        op: Op,
        req: &Req,
        session: &Session,
    ) -> Resp {
        let n = session.next.replace(session.next.get() + 1);
        l3m_wire::typed::call_sealed(
            self.bus.as_ref(),
            &op.subject(&self.subjects),
            req,
            Duration::from_secs(20),
            &Limits::default(),
            (&session.key, n, &session.capability.0),
            None,
        )
        .await
        .unwrap()
        .unwrap()
    }

    /// Opens a session for `duty` with the credential init issued for it.
    async fn open(&self, root: &std::path::Path, duty: Duty) -> Session {
        let credential = local_key(root, &duty).unwrap();
        let ephemeral = Ephemeral::generate().unwrap();
        let req = OpenSession {
            credential: credential.id.to_string(),
            signature: credential.sign_open("bench", &duty, &ephemeral.public),
            client_key: ephemeral.public,
            duty,
        };
        let opened: SessionOpened = l3m_wire::typed::call(
            self.bus.as_ref(),
            &Op::OpenSession.subject(&self.subjects),
            &req,
            Duration::from_secs(20),
            &Limits::default(),
        )
        .await
        .unwrap()
        .unwrap();
        Session {
            capability: opened.capability,
            key: ephemeral.with_hub(&opened.hub_key),
            next: std::cell::Cell::new(0),
        }
    }

    /// One `read-grant` of the slot's agent by its own sequencer.
    async fn read_grant(&self, slot: usize) {
        let session = &self.sessions[slot];
        let req = ReadGrant {
            capability: session.capability.clone(),
            agent: agent(slot).to_string(),
        };
        let _: GrantView = self.call(Op::ReadGrant, &req, session).await;
    }

    /// One `append-log` with CAS on the tip the last reply returned.
    async fn append(&mut self, slot: usize, records: Vec<String>) {
        let req = AppendLog {
            capability: self.sessions[slot].capability.clone(),
            agent: agent(slot).to_string(),
            expected_tip: self.tips[slot].clone(),
            records,
        };
        let appended: LogAppended = self.call(Op::AppendLog, &req, &self.sessions[slot]).await;
        self.tips[slot] = Some(appended.tip);
    }
}
