//! The demo's second hub and the airmail between the two.
//!
//! `south` is a hub of its own: its own folder, its own hubd and sequencers on its own bus (as
//! if on another host), and its own identity. The two hubs pin each other as offices, and a
//! postman for each carries letters over real QUIC with mutual TLS on loopback. `lead` on the
//! demo hub (`north` to south) mails `bob` on south and someone who does not live there; the
//! demo checks that bob's letter arrives stamped with its true origin, that bob's read comes
//! back to lead as a receipt, and that the other letter comes back to lead as a bounce.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::mail::{InboxEntry, Letter, Receipt};
use l3m_core::names::{AgentName, HumanName, ServiceName};
use l3m_core::refs::paths;
use l3m_wire::bus::{Bus, LocalBus};
use l3m_wire::client::HubClient;
use l3m_wire::credential::KeyFile;
use l3m_wire::subjects::HubId;
use postman::carry::{Carrier, Peer};
use postman::identity::Identity;
use postman::link::{self, Limits, Office};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{human_session, make_hub, name, runtime};
use crate::embedded::{Embedded, Sequencers, start_sequencers};
use crate::error::CliError;

/// What the demo hub is called at south.
pub(super) const NORTH: &str = "north";
/// The second hub.
pub(super) const SOUTH: &str = "south";

/// The second hub running, and both hubs' postmen.
pub(super) struct South {
    /// Where south's hub folder is.
    pub(super) root: PathBuf,
    /// south's human, alice there too.
    pub(super) me: HubClient,
    hubd: Embedded,
    sequencers: Sequencers,
    postmen: CancellationToken,
    carrying: Vec<JoinHandle<()>>,
}

impl South {
    /// Stops both postmen, then south's sequencers and hubd.
    pub(super) async fn stop(self) {
        self.postmen.cancel();
        for carrying in self.carrying {
            let _ended = carrying.await;
        }
        self.sequencers.stop().await;
        self.hubd.stop().await;
    }
}

/// The demo hub's side of the pairing: its folder, its human and its bus.
pub(super) struct North<'a> {
    /// Its folder.
    pub(super) root: &'a Path,
    /// Its human's session.
    pub(super) me: &'a HubClient,
    /// Its bus and hub id.
    pub(super) bus: Arc<dyn Bus>,
    /// Its hub id.
    pub(super) hub_id: HubId,
}

/// Makes south at `root`, starts its hubd and sequencers (`config` from `config_dir`), pairs
/// it with `north`, starts a postman for each, and spawns bob there.
pub(super) async fn open_south(
    north: North<'_>,
    root: PathBuf,
    human: &HumanName,
    config: sequencer::Config,
    config_dir: &Path,
) -> Result<South, CliError> {
    let grant = crate::commands::init::root_grant(None, human)?;
    make_hub(&root, human, grant.grant)?;
    let bus: Arc<dyn Bus> = Arc::new(LocalBus::new());
    let hub_id = HubId::parse(SOUTH).map_err(runtime)?;
    let hubd = Embedded::start(Arc::clone(&bus), &root, hub_id.clone()).await?;
    let me = human_session(Arc::clone(&bus), &hub_id, &root, human).await?;

    let identity = |root: &Path, name: &str| {
        Identity::load_or_create(&root.join(paths::IDENTITY_DIR), name).map_err(runtime)
    };
    let (north_id, south_id) = (identity(north.root, NORTH)?, identity(&root, SOUTH)?);
    let office = |name: &str, id: &Identity| Office {
        name: name.into(),
        fingerprint: id.fingerprint(),
    };
    let limits = Limits::default();
    let loopback = "127.0.0.1:0".parse().map_err(runtime)?;
    let north_ep = link::endpoint(&north_id, vec![office(SOUTH, &south_id)], loopback, &limits)
        .map_err(runtime)?;
    let south_ep = link::endpoint(&south_id, vec![office(NORTH, &north_id)], loopback, &limits)
        .map_err(runtime)?;
    let (north_addr, south_addr) = (
        north_ep.local_addr().map_err(runtime)?,
        south_ep.local_addr().map_err(runtime)?,
    );
    let pin = crate::commands::office::pin;
    pin(
        north.me,
        SOUTH,
        &south_addr.to_string(),
        &south_id.fingerprint().to_string(),
    )
    .await?;
    pin(
        &me,
        NORTH,
        &north_addr.to_string(),
        &north_id.fingerprint().to_string(),
    )
    .await?;

    let postmen = CancellationToken::new();
    let mut carrying = Vec::new();
    for (hub_root, bus, hub_id, me_name, identity, endpoint, peer) in [
        (
            north.root.to_path_buf(),
            north.bus,
            north.hub_id,
            NORTH,
            north_id.clone(),
            north_ep,
            Peer {
                office: office(SOUTH, &south_id),
                addr: south_addr,
            },
        ),
        (
            root.clone(),
            Arc::clone(&bus),
            hub_id.clone(),
            SOUTH,
            south_id.clone(),
            south_ep,
            Peer {
                office: office(NORTH, &north_id),
                addr: north_addr,
            },
        ),
    ] {
        let key = KeyFile::read(&hub_root.join(paths::postman_key())).map_err(runtime)?;
        let service = ServiceName::parse(paths::POSTMAN_SERVICE).map_err(runtime)?;
        let session = HubClient::open(bus, hub_id, &key, Duty::Postman { service }).await?;
        let carrier = Arc::new(Carrier {
            hub: session,
            identity,
            me: me_name.into(),
            peers: vec![peer],
            limits,
            poll: Duration::from_millis(500),
        });
        let board = Arc::new(postman::status::Board::new(&carrier));
        carrying.push(tokio::spawn(postman::carry::serve(
            carrier,
            board,
            endpoint,
            postmen.clone(),
        )));
    }

    let sequencers = start_sequencers(bus, &root, &hub_id, config, config_dir).await?;
    me.spawn(SpawnRequest {
        child: name("bob")?,
        grant: Grant::default(),
        loan: Fuel {
            model_calls: 5,
            bytes: 200_000,
            wakes: 5,
        },
        driven: false,
        persona: None,
        fork: None,
    })
    .await?;
    Ok(South {
        root,
        me,
        hubd,
        sequencers,
        postmen,
        carrying,
    })
}

/// What the airmail came to, once it settled or the deadline passed.
pub(super) struct Seen {
    /// Lines for the report.
    pub(super) text: String,
    /// The checks, each with whether it held.
    pub(super) checks: Vec<(&'static str, bool)>,
}

/// Waits (until `within` passes) for bob's letter at south, its receipt and the bounce back
/// at north, and reports each.
pub(super) async fn settle(
    north: &HubClient,
    south: &South,
    lead: &AgentName,
    within: Duration,
) -> Result<Seen, CliError> {
    let bob = name("bob")?;
    let deadline = Instant::now() + within;
    let (arrived, receipt, bounce) = loop {
        let at_south = entries(&south.me, &bob).await?;
        let at_north = entries(north, lead).await?;
        let arrived = at_south.iter().find_map(|e| match e {
            InboxEntry::Letter(l) if l.from.office().is_some() => Some((**l).clone()),
            _ => None,
        });
        let receipt: Option<Receipt> = at_north.iter().find_map(|e| match e {
            InboxEntry::Receipt(r) => Some(r.clone()),
            _ => None,
        });
        let bounce: Option<Letter> = at_north.iter().find_map(|e| match e {
            InboxEntry::Letter(l) if l.id.as_str().starts_with("bounce:") => Some((**l).clone()),
            _ => None,
        });
        let done = arrived.is_some() && receipt.is_some() && bounce.is_some();
        if done || Instant::now() > deadline {
            break (arrived, receipt, bounce);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut text =
        String::from("\nairmail between two hubs (QUIC, mutual TLS, pinned certificates):\n");
    match &arrived {
        Some(l) => text.push_str(&format!(
            "  at south, bob holds {} from {}\n",
            l.id,
            l.from.render()
        )),
        None => text.push_str("  at south, bob holds no letter from north\n"),
    }
    match &receipt {
        Some(r) => text.push_str(&format!(
            "  at north, lead holds the receipt: {} read by {} at office {}\n",
            r.letter, r.by, r.office
        )),
        None => text.push_str("  at north, no receipt came back\n"),
    }
    match &bounce {
        Some(b) => text.push_str(&format!("  at north, lead holds a bounce: {}\n", b.body)),
        None => text.push_str("  at north, no bounce came back\n"),
    }
    text.push_str(&format!(
        "  south's hub is at {root}: git --git-dir {root}/hub.git log --oneline refs/l3m/mirror/north/inbound\n",
        root = south.root.display()
    ));
    let origin_true = arrived
        .as_ref()
        .is_some_and(|l| l.from.render() == format!("office:{NORTH} agent:{lead}*"));
    let checks = vec![
        (
            "lead's airmail reached bob at south, stamped office:north agent:lead*",
            origin_true,
        ),
        (
            "bob's read came back to lead at north as a receipt",
            receipt.is_some_and(|r| r.by.to_string() == bob.as_str()),
        ),
        (
            "the letter to an agent south does not have came back to lead as a bounce",
            bounce.is_some_and(|b| b.body.contains("nobody")),
        ),
    ];
    Ok(Seen { text, checks })
}

/// Every entry of `agent`'s inbox.
async fn entries(client: &HubClient, agent: &AgentName) -> Result<Vec<InboxEntry>, CliError> {
    Ok(client.read_inbox(agent, 0).await?.entries)
}
