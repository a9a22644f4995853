//! A hubd over a real nats-server, and typed calls to it, for the service tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use hubd::init::{init_hub, read_secret};
use hubd::service;
use hubd::store::{Durability, Hub, HubOptions};
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest};
use l3m_core::log::{Record, RecordBody};
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::session::{Capability, OpenSession, SessionOpened};
use l3m_wire::hubd::tree::{Spawn, Spawned};
use l3m_wire::reply::Reply;
use l3m_wire::subjects::{HubId, Subjects};
use l3m_wire::test_support::NatsServer;
use tokio_util::sync::CancellationToken;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub nats: NatsServer,
    pub bus: Arc<dyn Bus>,
    pub subjects: Subjects,
    pub shutdown: CancellationToken,
    pub secret: String,
}

pub fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

pub fn root_grant() -> Grant {
    Grant {
        spawn: SpawnLevel::Persist,
        ..Grant::default()
    }
}

pub fn record(seq: u64) -> String {
    Record {
        seq,
        at_ms: 7,
        body: RecordBody::TurnEnd,
    }
    .to_line()
    .unwrap()
}

impl Fixture {
    pub async fn start() -> Fixture {
        Fixture::start_with("").await
    }

    /// A fixture whose nats-server has `config` added to its configuration.
    pub async fn start_with(config: &str) -> Fixture {
        Fixture::start_granted(config, root_grant()).await
    }

    /// A fixture whose human `alice` is registered with `human_grant`, the bound of her roots.
    pub async fn start_granted(config: &str, human_grant: Grant) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let options = || HubOptions {
            durability: Durability::Relaxed,
            ..HubOptions::default()
        };
        let root = dir.path().join("HUB");
        drop(
            init_hub(
                &root,
                options(),
                HumanName::parse("alice").unwrap(),
                human_grant,
                1,
            )
            .unwrap(),
        );
        let secret = read_secret(&root).unwrap();
        let nats = NatsServer::start_with(config).unwrap();
        let bus: Arc<dyn Bus> = Arc::new(
            NatsBus::connect(nats.url(), NatsAuth::Anonymous)
                .await
                .unwrap(),
        );
        let shutdown = CancellationToken::new();
        let hub_id = HubId::parse("t").unwrap();
        let started = service::start(
            Arc::clone(&bus),
            Hub::open(&root, options()).unwrap(),
            hub_id.clone(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        tokio::spawn(started.serve());
        Fixture {
            dir,
            nats,
            bus,
            subjects: Subjects::new(hub_id),
            shutdown,
            secret,
        }
    }

    pub fn git_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("HUB").join("hub.git")
    }

    pub async fn call<Req: Message, Resp: Message>(&self, op: Op, req: &Req) -> Reply<Resp> {
        l3m_wire::typed::call(
            self.bus.as_ref(),
            &op.subject(&self.subjects),
            req,
            Duration::from_secs(20),
            &Limits::default(),
        )
        .await
        .unwrap()
    }

    pub async fn session(&self, duty: Duty) -> Capability {
        let opened: SessionOpened = self
            .call(
                Op::OpenSession,
                &OpenSession {
                    secret: self.secret.clone(),
                    duty,
                },
            )
            .await
            .unwrap();
        opened.capability
    }

    pub async fn human(&self) -> Capability {
        self.session(Duty::Human {
            human: HumanName::parse("alice").unwrap(),
        })
        .await
    }

    pub async fn sequencer(&self, name: &str) -> Capability {
        self.session(Duty::Sequencer { agent: agent(name) }).await
    }

    pub async fn spawn(&self, by: &Capability, child: &str, grant: Grant) -> Reply<Spawned> {
        self.call(
            Op::Spawn,
            &Spawn {
                capability: by.clone(),
                request: SpawnRequest {
                    child: agent(child),
                    grant,
                    loan: Default::default(),
                    driven: false,
                    persona: None,
                },
            },
        )
        .await
    }

    /// A ref's tip as git sees it; `None` if absent.
    pub fn tip(&self, refname: &str) -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(self.git_dir())
            .args(["rev-parse", "--verify", "-q", refname])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
    }

    /// Every ref and its commit, as git sees them.
    pub fn refs(&self) -> String {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(self.git_dir())
            .args(["for-each-ref", "--format=%(refname) %(objectname)"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn fsck(&self) {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(self.git_dir())
            .args(["fsck", "--strict"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
