//! Letters flow from north to south while either hub's postman is killed with SIGKILL at
//! random moments and started again. At the end every staged letter is in bob's inbox exactly
//! once, and none is there that was not staged.
//!
//! CI runs a short version (`L3M_AIRMAIL_LETTERS`, default 24; `L3M_AIRMAIL_KILLS`, default 4);
//! raise both for the long one. `L3M_SEED` replays a run's random choices.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::{Pair, env_or, kill};
use l3m_wire::test_support::Rng;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_arrive_exactly_once_through_postman_sigkills() {
    let letters = env_or("L3M_AIRMAIL_LETTERS", 24);
    let kills = env_or("L3M_AIRMAIL_KILLS", 4);
    let pair = Pair::start().await;
    let mut north = pair.serve(true);
    let mut south = pair.serve(false);
    let mut staged = BTreeSet::new();
    let mut rng = Rng::from_env();
    let kill_every = (letters / (kills + 1)).max(1);
    for i in 0..letters {
        staged.insert(pair.stage(&format!("letter {i}")).await);
        tokio::time::sleep(rng.millis(60)).await;
        if i % kill_every == kill_every - 1 && i / kill_every < kills {
            // SIGKILL one side's postman mid-flow, then start it again.
            let is_north = rng.below(2) == 0;
            let victim = if is_north { &mut north } else { &mut south };
            kill(victim).await;
            tokio::time::sleep(rng.millis(300)).await;
            *victim = pair.serve(is_north);
        }
    }
    pair.assert_exactly_once(&staged, 60).await;
    // The postmen outlived the last kill (a postman that died on its own would be a bug).
    for postman in [&mut north, &mut south] {
        assert!(postman.try_wait().unwrap().is_none(), "a postman exited");
    }
}
