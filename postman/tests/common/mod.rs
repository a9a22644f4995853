//! Two hubs, north and south, each served by hubd in this process over its own nats-server,
//! pinned to each other as offices, with `lead` on north (who may airmail south) and `bob` on
//! south; and the real `postman serve` processes that carry between them. Or the same two hubs
//! served elsewhere (containers, see `compose.rs`), reached through their NATS
//! ([`served::ServedHub`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod attack;
pub mod relay;
pub mod served;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use hubd::test_support::TestHub;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, MailCover, SpawnLevel, SpawnRequest};
use l3m_core::mail::{InboxEntry, Letter};
use l3m_core::names::{AgentName, OfficeName, ServiceName};
use l3m_wire::client::HubClient;
use relay::{Mode, Relay};

/// A count from the environment (`name`), or `default`: how tests take their short CI size or
/// a longer one.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// SIGKILLs a postman and reaps it.
pub async fn kill(postman: &mut tokio::process::Child) {
    postman.start_kill().unwrap();
    postman.wait().await.unwrap();
}

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

/// A hub a test talks to, whoever serves it: a [`TestHub`] served in this process, or a
/// [`served::ServedHub`] served by a hubd elsewhere; so [`Pair`]'s staging, reading and
/// counting are written once for both.
pub trait Hub {
    /// The hub folder (its credentials, its `hub.git`).
    fn root(&self) -> PathBuf;

    /// A session for `duty`, opened with the credential init issued for it.
    fn client(&self, duty: Duty) -> impl Future<Output = HubClient> + Send;

    /// The human's session.
    fn human_client(&self) -> impl Future<Output = HubClient> + Send {
        self.client(Duty::Human {
            human: hubd::test_support::human(),
        })
    }

    /// The hub's bare repository.
    fn git_dir(&self) -> PathBuf {
        self.root().join("hub.git")
    }
}

impl Hub for TestHub {
    fn root(&self) -> PathBuf {
        TestHub::root(self)
    }

    fn client(&self, duty: Duty) -> impl Future<Output = HubClient> + Send {
        TestHub::client(self, duty)
    }
}

/// The two hubs, pinned to each other, and the UDP ports their postmen listen on.
pub struct Pair<H = TestHub> {
    pub north: H,
    pub south: H,
    pub north_port: u16,
    pub south_port: u16,
    lead: HubClient,
    /// With [`Pair::start_via_relays`]: the relay in front of south's postman (the address
    /// north's settings pin) and the one in front of north's.
    relays: Vec<Relay>,
}

impl Pair {
    /// The two hubs, each pinning the other's postman at its own port.
    pub async fn start() -> Pair {
        Pair::start_with(false).await
    }

    /// The two hubs, each pinning the other's postman behind a [`Relay`], so a test can cut and
    /// heal the link between them ([`Pair::link`]).
    pub async fn start_via_relays() -> Pair {
        Pair::start_with(true).await
    }

    /// Switches both relays (both directions of the link); see [`Mode`].
    pub fn link(&self, mode: Mode) {
        assert!(!self.relays.is_empty(), "a pair started without relays");
        for relay in &self.relays {
            relay.set(mode);
        }
    }

    /// Datagrams the relays discarded so far.
    pub fn dropped(&self) -> u64 {
        self.relays.iter().map(Relay::dropped).sum()
    }

    async fn start_with(via_relays: bool) -> Pair {
        let north = TestHub::start(airmail_to("south"), "").await;
        let south = TestHub::start(Grant::default(), "").await;
        let (north_port, south_port) = (free_port(), free_port());
        let mut relays = Vec::new();
        let (to_south, to_north) = if via_relays {
            relays.push(Relay::start(loopback(south_port)).await);
            relays.push(Relay::start(loopback(north_port)).await);
            (relays[0].port, relays[1].port)
        } else {
            (south_port, north_port)
        };
        let mut pair = Pair::assemble(north, south, loopback(to_south), loopback(to_north)).await;
        (pair.north_port, pair.south_port, pair.relays) = (north_port, south_port, relays);
        pair
    }

    /// Starts north's postman (`north == true`) or south's, killed when dropped.
    pub fn serve(&self, north: bool) -> tokio::process::Child {
        self.serve_with(north, &[])
    }

    /// Starts a postman as [`Pair::serve`] does, with `extra` arguments (`--poll-ms`, say).
    pub fn serve_with(&self, north: bool, extra: &[&str]) -> tokio::process::Child {
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
            .args(extra)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }
}

impl<H: Hub> Pair<H> {
    /// Makes a pair of two hubs already served, whose settings pin no office yet: spawns
    /// `lead` on north (who may airmail south) and `bob` on south, pins south's postman at
    /// `to_south` in north's settings and north's at `to_north` in south's, and opens lead's
    /// session. The postmen are taken to listen on the ports they are pinned at; start them
    /// after this, as they read the offices when they start.
    pub async fn assemble(north: H, south: H, to_south: SocketAddr, to_north: SocketAddr) -> Self {
        spawn(&north, "lead", airmail_to("south")).await;
        spawn(&south, "bob", Grant::default()).await;
        pin_at(&north, "south", to_south, &fingerprint(&south)).await;
        pin_at(&south, "north", to_north, &fingerprint(&north)).await;
        let lead = north
            .client(Duty::Sequencer {
                agent: agent("lead"),
            })
            .await;
        Pair {
            north,
            south,
            north_port: to_north.port(),
            south_port: to_south.port(),
            lead,
            relays: Vec::new(),
        }
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

    /// Whether north's postman has carried all of lead's outbox: south acknowledged every
    /// letter, so the cursor is past them and nothing more will be sent.
    pub async fn carried_all(&self) -> bool {
        let postman = self
            .north
            .client(Duty::Postman {
                service: ServiceName::parse("postman").unwrap(),
            })
            .await;
        let staged = postman.read_outbox(&agent("lead"), 0).await.unwrap().len;
        let cursor = postman.read_cursor("south").await.unwrap();
        cursor.positions.get("lead").copied().unwrap_or(0) >= staged
    }

    /// Waits (up to `secs`) until bob holds as many letters as were `staged` and north's cursor
    /// says south acknowledged them all, then checks that bob holds every staged letter exactly
    /// once and nothing else, from lead on north, and that both hubs' repositories are sound.
    /// bob marks read every letter that arrived and he has not marked yet (`marked`); each
    /// read stages a receipt on bob's outbox for south's postman to carry back.
    pub async fn read_arrived(&self, marked: &mut BTreeSet<String>) {
        let bob = self
            .south
            .client(Duty::Sequencer {
                agent: agent("bob"),
            })
            .await;
        for letter in self.bob_letters().await {
            let id = letter.id.to_string();
            if !marked.contains(&id) {
                bob.mark_read(&id).await.unwrap();
                marked.insert(id);
            }
        }
    }

    /// Waits until lead's inbox on north holds a receipt for every letter in `read`, then
    /// checks it holds exactly one for each and none for anything else.
    pub async fn assert_receipts_back(&self, read: &BTreeSet<String>, secs: u64) {
        let receipts = async || {
            let human = self.north.human_client().await;
            let entries = human.read_inbox(&agent("lead"), 0).await.unwrap().entries;
            entries
                .into_iter()
                .filter_map(|e| match e {
                    InboxEntry::Receipt(r) => Some(r.letter.to_string()),
                    _ => None,
                })
                .collect::<Vec<String>>()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut got = receipts().await;
        while got.len() < read.len() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            got = receipts().await;
        }
        let unique: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(got.len(), unique.len(), "a receipt came back twice");
        assert_eq!(
            &unique, read,
            "a receipt for every read letter, and only those"
        );
    }

    pub async fn assert_exactly_once(&self, staged: &BTreeSet<String>, secs: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let held = self.bob_letters().await.len();
            if held >= staged.len() && self.carried_all().await {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Nothing is in flight now (the cursor is past every letter): this is the final count.
        let got = self.bob_letters().await;
        let ids: Vec<String> = got.iter().map(|l| l.id.to_string()).collect();
        let unique: BTreeSet<String> = ids.iter().cloned().collect();
        assert_eq!(ids.len(), unique.len(), "duplicates in bob's inbox");
        let missing: Vec<_> = staged.difference(&unique).collect();
        let stray: Vec<_> = unique.difference(staged).collect();
        assert!(
            missing.is_empty() && stray.is_empty(),
            "every staged letter, and only those: {} of {} missing {missing:?}, stray {stray:?}",
            missing.len(),
            staged.len()
        );
        assert!(
            self.carried_all().await,
            "all delivered but north's cursor is not past them"
        );
        for letter in &got {
            assert_eq!(letter.from.render(), "office:north agent:lead*");
        }
        for hub in [&self.north, &self.south] {
            hubd::test_support::git_bare(&hub.git_dir(), &["fsck", "--strict"]);
        }
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `postman identity` for `hub`: its fingerprint.
pub fn fingerprint(hub: &impl Hub) -> String {
    let out = postman(&["identity", "--hub", hub.root().to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["fingerprint"].as_str().unwrap().to_owned()
}

/// The human of `hub` spawns root `name` with `grant`.
pub async fn spawn(hub: &impl Hub, name: &str, grant: Grant) {
    let request = SpawnRequest::new(agent(name), grant);
    hub.human_client().await.spawn(request).await.unwrap();
}

/// The letters in `whose` inbox on `hub`.
pub async fn letters(hub: &impl Hub, whose: &str) -> Vec<Letter> {
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
pub async fn pin(hub: &impl Hub, office: &str, port: u16, fingerprint: &str) {
    pin_at(hub, office, loopback(port), fingerprint).await;
}

/// Pins `office` (its postman at `addr`, its certificate `fingerprint`) in `hub`, whose settings
/// pin no office yet.
pub async fn pin_at(hub: &impl Hub, office: &str, addr: SocketAddr, fingerprint: &str) {
    let hub = hub.human_client().await;
    let view = hub.read_settings().await.unwrap();
    assert!(view.text.contains("offices = []"), "{}", view.text);
    let text = view.text.replace(
        "offices = []",
        &format!(
            "offices = [{{ name = \"{office}\", addr = \"{addr}\", cert-sha256 = \"{fingerprint}\" }}]"
        ),
    );
    hub.update_settings(&text, &view.tip).await.unwrap();
}
