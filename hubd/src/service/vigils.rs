//! The daemon's clock duties off the request path: firing vigils and retiring agents whose
//! lifetime is over. One task sweeps vigils when a watched ref moves, every second for
//! deadlines, bounds and lifetimes, and now and then over everything (a move whose poke was
//! lost, a fact that came true while hubd was down).
//!
//! A request never waits for a sweep: an announcement that touches a watched ref only pokes
//! this task ([`State::poke_vigils`]), through a bounded queue; a full queue drops the poke,
//! and the next full sweep finds the fact. Each sweep runs on a blocking thread (it reads and
//! appends chains) and its firings are announced like any ref move, so the agent's sequencer,
//! or its host's supervisor when it is asleep, hears them.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::state::State;
use super::state::vigils::Sweep;

/// How often deadlines and bounds are checked.
const TICK: Duration = Duration::from_secs(1);

/// Every how many ticks every vigil is observed afresh.
const FULL_EVERY: u32 = 30;

/// How many pokes wait at most.
pub(super) const POKES: usize = 256;

/// Sweeps until `shutdown` or until hubd's state is gone.
pub(super) async fn watch(
    state: Weak<State>,
    mut pokes: mpsc::Receiver<Sweep>,
    shutdown: CancellationToken,
) {
    let mut ticks = 0u32;
    let mut next = Some(Sweep::All);
    loop {
        if let Some(sweep) = next.take() {
            let Some(state) = state.upgrade() else { return };
            run(state, sweep).await;
        }
        next = tokio::select! {
            () = shutdown.cancelled() => return,
            poke = pokes.recv() => match poke {
                Some(sweep) => Some(sweep),
                None => return,
            },
            () = tokio::time::sleep(TICK) => {
                ticks = ticks.wrapping_add(1);
                Some(if ticks.is_multiple_of(FULL_EVERY) { Sweep::All } else { Sweep::Clock })
            }
        };
    }
}

async fn run(state: Arc<State>, sweep: Sweep) {
    let sweeping = Arc::clone(&state);
    let swept = tokio::task::spawn_blocking(move || {
        let mut moved = match sweep {
            Sweep::Moved(_) => Vec::new(),
            Sweep::Clock | Sweep::All => sweeping.retire_lifetimes_over(),
        };
        moved.extend(sweeping.sweep_vigils(&sweep));
        moved
    });
    match swept.await {
        Ok(moved) if !moved.is_empty() => state.announce(&moved),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "a vigil sweep failed"),
    }
}
