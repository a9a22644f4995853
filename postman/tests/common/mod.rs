//! Two hubs, north and south, each served by hubd in this process over its own nats-server,
//! pinned to each other as offices, with `lead` on north (who may airmail south) and `bob` on
//! south; and the real `postman serve` processes that carry between them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use hubd::test_support::TestHub;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, MailCover, SpawnLevel, SpawnRequest};
use l3m_core::mail::{InboxEntry, Letter};
use l3m_core::names::{AgentName, OfficeName};
use l3m_wire::client::HubClient;

/// Runs the postman binary to its end.
pub fn postman(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postman"))
        .args(args)
        .output()
        .unwrap()
}

/// A grant that may spawn, and mail and airmail `office`.
pub fn airmail_to(office: &str) -> Grant {
    let office = OfficeName::parse(office).unwrap();
    Grant {
        spawn: SpawnLevel::Persist,
        airmail: [office.clone()].into(),
        mail: [MailCover::Office(office)].into(),
        ..Grant::default()
    }
}

pub fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}

/// The two hubs, pinned to each other, and the UDP ports their postmen listen on.
pub struct Pair {
    pub north: TestHub,
    pub south: TestHub,
    pub north_port: u16,
    pub south_port: u16,
    lead: HubClient,
}

impl Pair {
    pub async fn start() -> Pair {
        let north = TestHub::start(airmail_to("south"), "").await;
        let south = TestHub::start(Grant::default(), "").await;
        let spawn = |name: &str, grant: Grant| SpawnRequest {
            child: agent(name),
            grant,
            loan: Default::default(),
            driven: false,
            persona: None,
            fork: None,
        };
        let human = north.human_client().await;
        human
            .spawn(spawn("lead", airmail_to("south")))
            .await
            .unwrap();
        let human = south.human_client().await;
        human.spawn(spawn("bob", Grant::default())).await.unwrap();
        let (north_port, south_port) = (free_port(), free_port());
        pin(&north, "south", south_port, &fingerprint(&south)).await;
        pin(&south, "north", north_port, &fingerprint(&north)).await;
        let lead = north
            .client(Duty::Sequencer {
                agent: agent("lead"),
            })
            .await;
        Pair {
            north,
            south,
            north_port,
            south_port,
            lead,
        }
    }

    /// Starts north's postman (`north == true`) or south's, killed when dropped.
    pub fn serve(&self, north: bool) -> tokio::process::Child {
        let (hub, name, port) = if north {
            (&self.north, "north", self.north_port)
        } else {
            (&self.south, "south", self.south_port)
        };
        tokio::process::Command::new(env!("CARGO_BIN_EXE_postman"))
            .args([
                "serve",
                "--hub",
                hub.root().to_str().unwrap(),
                "--hub-id",
                "t",
            ])
            .args(["--nats", hub.nats.url(), "--name", name])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    /// Lead stages a letter for bob on south; returns its id.
    pub async fn stage(&self, body: &str) -> String {
        self.stage_to("office:south agent:bob*", body).await
    }

    /// Lead stages a letter for `to`; returns its id.
    pub async fn stage_to(&self, to: &str, body: &str) -> String {
        self.lead
            .stage_airmail(to, None, body)
            .await
            .unwrap()
            .letter
    }

    /// The letters in bob's inbox on south.
    pub async fn bob_letters(&self) -> Vec<Letter> {
        letters(&self.south, "bob").await
    }

    /// Waits until bob holds at least `n` letters, or `secs` pass; returns them.
    pub async fn wait_for(&self, n: usize, secs: u64) -> Vec<Letter> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let got = self.bob_letters().await;
            if got.len() >= n || tokio::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `postman identity` for `hub`: its fingerprint.
fn fingerprint(hub: &TestHub) -> String {
    let out = postman(&["identity", "--hub", hub.root().to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["fingerprint"].as_str().unwrap().to_owned()
}

/// The human of `hub` spawns root `name` with `grant`.
pub async fn spawn(hub: &TestHub, name: &str, grant: Grant) {
    let request = SpawnRequest {
        child: agent(name),
        grant,
        loan: Default::default(),
        driven: false,
        persona: None,
        fork: None,
    };
    hub.human_client().await.spawn(request).await.unwrap();
}

/// The letters in `whose` inbox on `hub`.
pub async fn letters(hub: &TestHub, whose: &str) -> Vec<Letter> {
    let read = hub
        .human_client()
        .await
        .read_inbox(&agent(whose), 0)
        .await
        .unwrap();
    read.entries
        .into_iter()
        .filter_map(|e| match e {
            InboxEntry::Letter(l) => Some(*l),
            _ => None,
        })
        .collect()
}

/// Pins `office` (its postman on loopback `port`, its certificate `fingerprint`) in `hub`.
pub async fn pin(hub: &TestHub, office: &str, port: u16, fingerprint: &str) {
    let hub = hub.human_client().await;
    let view = hub.read_settings().await.unwrap();
    let text = view.text.replace(
        "offices = []",
        &format!(
            "offices = [{{ name = \"{office}\", addr = \"127.0.0.1:{port}\", cert-sha256 = \"{fingerprint}\" }}]"
        ),
    );
    hub.update_settings(&text, &view.tip).await.unwrap();
}
