//! A hub folder on this machine served by a hubd elsewhere (a container of the compose site),
//! reached through its nats-server with deploy/nats.conf's users: a test's sessions go over the
//! NATS user a real one of its duty would use, so the site's permissions are exercised too.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hubd::init::local_key;
use l3m_core::duty::Duty;
use l3m_wire::bus::{Bus, NatsAuth, NatsBus, NatsTls};
use l3m_wire::client::HubClient;
use l3m_wire::subjects::HubId;

use super::Hub;

/// A hub served elsewhere: its folder here, and one bus per NATS user its sessions use.
pub struct ServedHub {
    root: PathBuf,
    hub_id: HubId,
    /// As the `cli` user: the human's sessions.
    cli: Arc<dyn Bus>,
    /// As the `sequencer` user: an agent's sequencer's sessions (and a host's).
    sequencer: Arc<dyn Bus>,
    /// As the `postman` user: the postman's sessions (reading its cursors).
    postman: Arc<dyn Bus>,
}

impl ServedHub {
    /// Connects to `nats` as each user (`password` gives a user's password), over `tls`, and
    /// waits, up to `within`, until hubd answers the human's session there: the hub is served
    /// once this returns.
    pub async fn connect(
        root: PathBuf,
        hub_id: &str,
        nats: &str,
        tls: &NatsTls,
        password: impl Fn(&str) -> String,
        within: Duration,
    ) -> ServedHub {
        let deadline = tokio::time::Instant::now() + within;
        let bus = async |user: &str| -> Arc<dyn Bus> {
            loop {
                let auth = NatsAuth::UserPassword {
                    user: user.to_owned(),
                    password: password(user),
                };
                match NatsBus::connect_with(nats, auth, tls).await {
                    Ok(bus) => return Arc::new(bus) as Arc<dyn Bus>,
                    Err(e) if tokio::time::Instant::now() > deadline => {
                        panic!("NATS at {nats} did not take user {user} within {within:?}: {e}")
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        };
        let hub = ServedHub {
            root,
            hub_id: HubId::parse(hub_id).unwrap(),
            cli: bus("cli").await,
            sequencer: bus("sequencer").await,
            postman: bus("postman").await,
        };
        let human = Duty::Human {
            human: hubd::test_support::human(),
        };
        loop {
            match hub.open(human.clone()).await {
                Ok(_) => return hub,
                Err(e) if tokio::time::Instant::now() > deadline => {
                    panic!("hubd {hub_id} did not answer within {within:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    async fn open(&self, duty: Duty) -> Result<HubClient, l3m_wire::client::ClientError> {
        let bus = match duty {
            Duty::Human { .. } => &self.cli,
            Duty::Sequencer { .. } | Duty::Host { .. } => &self.sequencer,
            Duty::Postman { .. } => &self.postman,
        };
        let key = local_key(&self.root, &duty).unwrap();
        HubClient::open(Arc::clone(bus), self.hub_id.clone(), &key, duty).await
    }
}

impl Hub for ServedHub {
    fn root(&self) -> PathBuf {
        self.root.clone()
    }

    async fn client(&self, duty: Duty) -> HubClient {
        self.open(duty).await.unwrap()
    }
}
