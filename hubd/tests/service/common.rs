//! A hubd over a real nats-server, and typed calls to it, for the service tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

pub use hubd::test_support::{self, TestHub, git_bare, git_with_input};
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest};
use l3m_core::log::{Record, RecordBody};
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::credential::{Ephemeral, KeyFile, SessionKey};
use l3m_wire::envelope::{Limits, Message};
use l3m_wire::hubd::session::{Capability, OpenSession, SessionOpened};
use l3m_wire::hubd::tree::{Spawn, Spawned};
use l3m_wire::hubd::{InSession, Op};
use l3m_wire::reply::Reply;

/// How long a test waits for hubd's answer.
const CALL_WITHIN: Duration = Duration::from_secs(20);

/// The shared hub fixture, with the sealing sessions these tests open by hand.
pub struct Fixture {
    /// The hub, hubd and nats-server.
    pub hub: TestHub,
    /// The credential init issued for the human `alice`.
    pub human_key: KeyFile,
    /// The whole-hub host credential init issued.
    pub host_key: KeyFile,
    /// The key and next request number of each session opened through [`Fixture::session`],
    /// so [`Fixture::call`] seals its requests.
    sessions: std::sync::Mutex<std::collections::HashMap<String, (SessionKey, u64)>>,
}

impl std::ops::Deref for Fixture {
    type Target = TestHub;

    fn deref(&self) -> &TestHub {
        &self.hub
    }
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
        let hub = TestHub::start(human_grant, config).await;
        let human_key = hub.key_for(&Duty::Human {
            human: test_support::human(),
        });
        let host_key = hub.key_for(&Duty::Host { subtree: None });
        Fixture {
            hub,
            human_key,
            host_key,
            sessions: Default::default(),
        }
    }

    /// The credential init issued that opens `duty`'s sessions: the human's or the host's.
    pub fn key_for(&self, duty: &Duty) -> &KeyFile {
        match duty {
            Duty::Human { .. } => &self.human_key,
            _ => &self.host_key,
        }
    }

    /// An open request for `duty` signed with `credential`, and the client's fresh key.
    pub fn open_request(&self, credential: &KeyFile, duty: Duty) -> (OpenSession, Ephemeral) {
        let ephemeral = Ephemeral::generate().unwrap();
        let signature = credential.sign_open("t", &duty, &ephemeral.public);
        let request = OpenSession {
            credential: credential.id.to_string(),
            duty,
            client_key: ephemeral.public,
            signature,
        };
        (request, ephemeral)
    }

    /// Sends `req` as `op`, sealed with its session's key when the session was opened through
    /// [`Fixture::session`]; a capability the fixture does not know goes unsealed.
    pub async fn call<Req: Message + InSession, Resp: Message>(
        &self,
        op: Op,
        req: &Req,
    ) -> Reply<Resp> {
        let sealing = {
            let mut sessions = self.sessions.lock().unwrap();
            sessions.get_mut(&req.capability().0).map(|(key, next)| {
                *next += 1;
                (key.clone(), *next - 1)
            })
        };
        let (subject, limits) = (op.subject(&self.subjects), Limits::default());
        let bus = self.bus.as_ref();
        match sealing {
            Some((key, n)) => {
                let cap = req.capability().0.as_str();
                l3m_wire::typed::call_sealed(
                    bus,
                    &subject,
                    req,
                    CALL_WITHIN,
                    &limits,
                    (&key, n, cap),
                    None,
                )
                .await
            }
            None => l3m_wire::typed::call(bus, &subject, req, CALL_WITHIN, &limits).await,
        }
        .unwrap()
    }

    /// Sends an open-session request (the one request outside a session, never sealed).
    pub async fn open(&self, req: &OpenSession) -> Reply<SessionOpened> {
        let subject = Op::OpenSession.subject(&self.subjects);
        l3m_wire::typed::call(
            self.bus.as_ref(),
            &subject,
            req,
            CALL_WITHIN,
            &Limits::default(),
        )
        .await
        .unwrap()
    }

    /// Opens a session for `duty` with the credential init issued for it.
    pub async fn session(&self, duty: Duty) -> Capability {
        self.session_with(self.key_for(&duty), duty).await.unwrap()
    }

    /// Opens a session for `duty` with `credential`; later calls naming it are sealed.
    pub async fn session_with(&self, credential: &KeyFile, duty: Duty) -> Reply<Capability> {
        let (request, ephemeral) = self.open_request(credential, duty);
        let opened = self.open(&request).await?;
        let key = ephemeral.with_hub(&opened.hub_key);
        self.sessions
            .lock()
            .unwrap()
            .insert(opened.capability.0.clone(), (key, 0));
        Ok(opened.capability)
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
                request: SpawnRequest::new(agent(child), grant),
            },
        )
        .await
    }

    /// A ref's tip as git sees it; `None` if absent.
    pub fn tip(&self, refname: &str) -> Option<String> {
        let out = l3m_git::repo_command(&self.git_dir())
            .args(["rev-parse", "--verify", "-q", refname])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
    }

    /// Every ref and its commit, as git sees them.
    pub fn refs(&self) -> String {
        let out = l3m_git::repo_command(&self.git_dir())
            .args(["for-each-ref", "--format=%(refname) %(objectname)"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn fsck(&self) {
        git_bare(&self.git_dir(), &["fsck", "--strict"]);
    }
}

/// Issues a credential for `scope` through hubd as `alice`, valid for `valid_ms`.
pub async fn issue(
    f: &Fixture,
    human: &Capability,
    scope: l3m_core::credential::Scope,
    valid_ms: u64,
) -> KeyFile {
    use l3m_wire::hubd::credential::{CredentialIssued, IssueCredential};
    let key = KeyFile::generate(KeyFile::random_id().unwrap(), scope.clone()).unwrap();
    let issued: CredentialIssued = f
        .call(
            Op::IssueCredential,
            &IssueCredential {
                capability: human.clone(),
                id: key.id.to_string(),
                scope,
                key: key.public_key().to_string(),
                expires_ms: l3m_core::clock::now_ms() + valid_ms,
                label: "test".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(issued.credential.id, key.id);
    key
}
