//! The nemesis: a schedule of faults drawn from a seed, run one at a time against hubd and the
//! sequencer host, each healed before the next; so at the end everything is healed.

use l3m_wire::test_support::docker;
use std::collections::BTreeMap;
use std::time::Duration;

use super::site::{Service, Site};

/// A fault, and how it is healed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `docker kill` (SIGKILL to the whole container), then `docker start`.
    Kill,
    /// `docker pause` (the cgroup frozen), then `docker unpause`.
    Pause,
    /// `docker network disconnect` from the site's network, then `docker network connect`.
    Disconnect,
}

/// One fault of a schedule: after a spell of quiet, `kind` on `target` for `lasts`.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub after: Duration,
    pub kind: Kind,
    pub target: Service,
    pub lasts: Duration,
}

pub use l3m_wire::test_support::Rng;

/// A schedule of faults filling about `span`: a fault every 3–7 s, each lasting 1–4 s.
pub fn plan(rng: &mut Rng, span: Duration) -> Vec<Fault> {
    let mut faults = Vec::new();
    let mut used = Duration::ZERO;
    loop {
        let after = Duration::from_millis(2000) + rng.millis(3000);
        let lasts = Duration::from_millis(1000) + rng.millis(3000);
        if used + after + lasts > span {
            return faults;
        }
        used += after + lasts;
        let kind = [Kind::Kill, Kind::Pause, Kind::Disconnect][rng.below(3) as usize];
        let target = [Service::Hubd, Service::Seqhost][rng.below(2) as usize];
        faults.push(Fault {
            after,
            kind,
            target,
            lasts,
        });
    }
}

/// Runs `faults` against `site` in order, healing each before the next; returns how many of
/// each kind ran.
pub async fn run(site: &Site, faults: &[Fault]) -> BTreeMap<Kind, usize> {
    let mut counts = BTreeMap::new();
    for fault in faults {
        tokio::time::sleep(fault.after).await;
        let container = site.container(fault.target);
        let id = container.id();
        match fault.kind {
            Kind::Kill => {
                docker(&["kill", "--signal", "KILL", id]).await;
                tokio::time::sleep(fault.lasts).await;
                container.start().await.unwrap();
            }
            Kind::Pause => {
                container.pause().await.unwrap();
                tokio::time::sleep(fault.lasts).await;
                container.unpause().await.unwrap();
            }
            Kind::Disconnect => {
                docker(&["network", "disconnect", &site.network, id]).await;
                tokio::time::sleep(fault.lasts).await;
                docker(&["network", "connect", &site.network, id]).await;
            }
        }
        eprintln!("nemesis: {fault:?} done");
        *counts.entry(fault.kind).or_default() += 1;
    }
    counts
}
