//! Telling the site when a lease lapses: its holder stopped renewing (its host died, or lost
//! the bus), so the agent is asleep now whatever it was doing.
//!
//! A lapse is announced as a move of the agent's inbox (to where it is now, like every
//! announcement): the supervisors already watch inbox moves and wake an asleep agent with
//! unread mail, so a host that may run the agent takes it over — and the sequencer it starts
//! boots as after any crash, closing what the dead one left open.

use std::collections::HashSet;
use std::sync::Weak;
use std::time::{Duration, Instant};

use l3m_core::refs::AgentRef;
use tokio_util::sync::CancellationToken;

use super::super::state::State;

/// How often the lease table is looked at: well under the shortest lease hubd grants.
const EVERY: Duration = Duration::from_millis(200);

/// Announces each lapse once, until `shutdown` or until hubd's state is gone.
pub(in crate::service) async fn watch(state: Weak<State>, shutdown: CancellationToken) {
    let mut told = HashSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
        let Some(state) = state.upgrade() else { return };
        let lapsed = state
            .leases()
            .read(|t| t.newly_lapsed(Instant::now(), &mut told));
        if lapsed.is_empty() {
            continue;
        }
        tracing::info!(agents = ?lapsed, "leases lapsed: their holders stopped renewing");
        let moved: Vec<_> = lapsed.into_iter().map(|a| (AgentRef::Inbox, a)).collect();
        state.announce(&moved);
    }
}
