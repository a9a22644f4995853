//! What the serving postman knows of its links, kept on a [`Board`] the carrier writes after
//! every round, and served on the bus for `l3m office ls` and `l3m doctor`
//! ([`l3m_wire::postman`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use l3m_core::clock::now_ms;
use l3m_wire::health::{Check, Health};
use l3m_wire::postman::{LinkState, OP_STATUS, OfficeStatus, PostmanStatus, Probe, StatusRequest};
use l3m_wire::reply::{ErrorCode, RemoteError};
use l3m_wire::subjects::{Operation, Service};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
use tokio_util::sync::CancellationToken;

use crate::carry::Carrier;

/// Each office's link as the last round left it.
#[derive(Debug, Default)]
pub struct Board {
    offices: Mutex<BTreeMap<String, OfficeStatus>>,
    started_ms: u64,
}

impl Board {
    /// A board with every peer of `carrier` idle.
    pub fn new(carrier: &Carrier) -> Board {
        let offices = carrier
            .peers
            .iter()
            .map(|peer| {
                let status = OfficeStatus {
                    name: peer.office.name.clone(),
                    addr: peer.addr.to_string(),
                    link: LinkState::Idle,
                    since_ms: None,
                    last_delivery_ms: None,
                    delivered: 0,
                    backlog: 0,
                    error: None,
                    probe: None,
                };
                (peer.office.name.clone(), status)
            })
            .collect();
        Board {
            offices: Mutex::new(offices),
            started_ms: now_ms(),
        }
    }

    /// The postman's health answer: one check per office (its link is not down), and the
    /// lines carried and waiting over all offices.
    pub fn health(&self) -> Health {
        let offices = self.offices();
        let checks = offices
            .iter()
            .map(|o| Check {
                name: format!("office {}", o.name),
                ok: o.link != LinkState::Down,
                detail: match &o.error {
                    Some(error) => format!("{:?}: {error}", o.link),
                    None => format!("{:?}, {} lines carried", o.link, o.delivered),
                },
            })
            .collect();
        let sum = |f: fn(&OfficeStatus) -> u64| offices.iter().map(f).sum::<u64>();
        let gauges = BTreeMap::from([
            ("offices".to_owned(), offices.len() as u64),
            (
                "links_up".to_owned(),
                sum(|o| u64::from(o.link == LinkState::Up)),
            ),
            ("lines_carried_total".to_owned(), sum(|o| o.delivered)),
            ("backlog".to_owned(), sum(|o| o.backlog)),
        ]);
        Health::of(Service::Postman, self.started_ms, checks, gauges)
    }

    fn with(&self, office: &str, change: impl FnOnce(&mut OfficeStatus)) {
        let mut offices = self.offices.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(status) = offices.get_mut(office) {
            change(status);
        }
    }

    /// `office` now holds `lines` more lines from here.
    pub fn carried(&self, office: &str, lines: u64) {
        let now = now_ms();
        self.with(office, |s| {
            if s.link != LinkState::Up {
                s.since_ms = Some(now);
            }
            s.link = LinkState::Up;
            s.last_delivery_ms = Some(now);
            s.delivered += lines;
            s.backlog = 0;
            s.error = None;
        });
    }

    /// Carrying `backlog` lines to `office` failed with `error`.
    pub fn failed(&self, office: &str, backlog: u64, error: &str) {
        let now = now_ms();
        self.with(office, |s| {
            if s.link != LinkState::Down {
                s.since_ms = Some(now);
            }
            s.link = LinkState::Down;
            s.backlog = backlog;
            s.error = Some(error.to_owned());
        });
    }

    /// Every office, as the board has it.
    pub fn offices(&self) -> Vec<OfficeStatus> {
        let offices = self.offices.lock().unwrap_or_else(PoisonError::into_inner);
        offices.values().cloned().collect()
    }
}

/// Serves the postman's status on the bus until `shutdown`. The subscription is live when this
/// returns `Ok`; the serving runs on a spawned task.
pub async fn serve(
    carrier: Arc<Carrier>,
    endpoint: quinn::Endpoint,
    board: Arc<Board>,
    shutdown: CancellationToken,
) -> Result<(), l3m_wire::error::WireError> {
    let op = Operation::parse(OP_STATUS)?;
    let subject = carrier.hub.subjects().request(Service::Postman, &op);
    let server = TypedServer::<StatusRequest, PostmanStatus>::bind(
        carrier.hub.bus().as_ref(),
        &subject,
        ServeOptions::default(),
    )
    .await?;
    let report = Arc::clone(&board);
    let (bus, subjects) = (
        Arc::clone(carrier.hub.bus()),
        carrier.hub.subjects().clone(),
    );
    let health_shutdown = shutdown.clone();
    tokio::spawn(async move {
        let served = l3m_wire::health::serve(
            bus.as_ref(),
            &subjects,
            Service::Postman,
            move || report.health(),
            health_shutdown,
        );
        if let Err(error) = served.await {
            tracing::warn!(%error, "the postman's health is not served");
        }
    });
    tokio::spawn(server.run(
        move |req: TypedRequest<StatusRequest>| {
            let (carrier, endpoint, board) =
                (Arc::clone(&carrier), endpoint.clone(), Arc::clone(&board));
            async move {
                let mut offices = board.offices();
                if req.body.probe {
                    let mut probes = tokio::task::JoinSet::new();
                    for (at, status) in offices.iter().enumerate() {
                        let (carrier, endpoint) = (Arc::clone(&carrier), endpoint.clone());
                        let name = status.name.clone();
                        probes.spawn(async move { (at, probe(&carrier, &endpoint, &name).await) });
                    }
                    while let Some(Ok((at, outcome))) = probes.join_next().await {
                        offices[at].probe = Some(outcome);
                    }
                }
                if offices.len() > MAX_LISTED {
                    return Err(RemoteError::new(
                        ErrorCode::Internal,
                        format!("{} offices do not fit one answer", offices.len()),
                    ));
                }
                Ok(PostmanStatus {
                    me: carrier.me.clone(),
                    fingerprint: carrier.identity.fingerprint().to_string(),
                    offices,
                })
            }
        },
        shutdown,
    ));
    Ok(())
}

/// The most offices one status answer lists (each is a few hundred bytes; the envelope limit
/// is far above this many).
const MAX_LISTED: usize = 1000;

/// Dials `office` now on a fresh link (handshake and hello), and closes it.
async fn probe(carrier: &Carrier, endpoint: &quinn::Endpoint, office: &str) -> Probe {
    let Some(peer) = carrier.peers.iter().find(|p| p.office.name == office) else {
        return Probe::Failed {
            reason: "not pinned".into(),
        };
    };
    match carrier.dial(endpoint, peer).await {
        Ok(link) => {
            link.connection.close(0u32.into(), b"probe done");
            Probe::Welcomed
        }
        Err(e) => Probe::Failed {
            reason: e.to_string(),
        },
    }
}
