//! Letters flow from north to south while the link between the postmen is cut and healed
//! several times (a UDP relay sits between them both ways), some cuts longer than the answer
//! timeout so links are dropped and made again, some shorter so the link rides them out, some
//! holding datagrams to release them late in a burst; and meanwhile either postman is killed
//! with SIGKILL at random moments and started again. At the end every staged letter is in
//! bob's inbox exactly once, and none is there that was not staged; and bob, reading letters
//! as they arrive, has every read back in lead's inbox as exactly one receipt.
//!
//! CI runs a short version (`L3M_PARTITION_LETTERS`, default 24; `L3M_PARTITION_CUTS`, default
//! 3; `L3M_PARTITION_KILLS`, default one per cut); raise them for the long one. `L3M_SEED`
//! replays a run's random choices.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::relay::Mode;
use common::{Pair, env_or, kill};
use l3m_wire::test_support::Rng;
use postman::link::Limits;
use tokio::time::Instant;

/// One thing the chaos does, at its moment.
#[derive(Debug, Clone, Copy)]
enum Event {
    Cut(Mode),
    Heal,
    Kill { north: bool },
    Restart { north: bool },
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_arrive_exactly_once_through_cuts_and_sigkills() {
    let letters = env_or("L3M_PARTITION_LETTERS", 24);
    let cuts = env_or("L3M_PARTITION_CUTS", 3);
    let kills = env_or("L3M_PARTITION_KILLS", cuts);
    let mut rng = Rng::from_env();
    let answer = Limits::default().answer_within;

    // The plan, as offsets from the start: each cut comes after a spell of passing, and lasts
    // either past the answer timeout (every other cut, the first included) or well under it.
    let mut plan: Vec<(Duration, Event)> = Vec::new();
    let mut at = Duration::ZERO;
    for c in 0..cuts {
        at += Duration::from_millis(300) + rng.millis(1500);
        let lasts = if c % 2 == 0 {
            answer + Duration::from_millis(500) + rng.millis(2500)
        } else {
            Duration::from_millis(100) + rng.millis(answer.as_millis() as u64 * 3 / 5)
        };
        let mode = if rng.below(3) == 0 {
            Mode::Hold
        } else {
            Mode::Drop
        };
        plan.push((at, Event::Cut(mode)));
        plan.push((at + lasts, Event::Heal));
        at += lasts;
    }
    let span = at;
    for _ in 0..kills {
        let north = rng.below(2) == 0;
        let when = rng.millis(span.as_millis() as u64);
        plan.push((when, Event::Kill { north }));
        plan.push((when + rng.millis(300), Event::Restart { north }));
    }
    // A restart sorts after its kill even at the same moment (the sort is stable).
    plan.sort_by_key(|(when, _)| *when);
    eprintln!("plan over {span:?}: {plan:?}");

    let pair = Pair::start_via_relays().await;
    let mut north = pair.serve(true);
    let mut south = pair.serve(false);
    let start = Instant::now();

    let staging = async {
        // Letters keep coming across the whole plan.
        let mut rng = Rng::seeded(rng.next());
        let gap = span.as_millis() as u64 / letters.max(1) as u64;
        let mut staged = BTreeSet::new();
        for i in 0..letters {
            staged.insert(pair.stage(&format!("letter {i}")).await);
            tokio::time::sleep(rng.millis(2 * gap)).await;
        }
        staged
    };
    let chaos = async {
        // A kill of a postman already down (two kills overlapping) waits for its restart.
        let (mut north_down, mut south_down) = (false, false);
        for (when, event) in &plan {
            tokio::time::sleep_until(start + *when).await;
            match *event {
                Event::Cut(mode) => pair.link(mode),
                Event::Heal => pair.link(Mode::Pass),
                Event::Kill { north: is_north } => {
                    let (victim, down) = if is_north {
                        (&mut north, &mut north_down)
                    } else {
                        (&mut south, &mut south_down)
                    };
                    if !*down {
                        kill(victim).await;
                        *down = true;
                    }
                }
                Event::Restart { north: is_north } => {
                    let (victim, down) = if is_north {
                        (&mut north, &mut north_down)
                    } else {
                        (&mut south, &mut south_down)
                    };
                    if *down {
                        *victim = pair.serve(is_north);
                        *down = false;
                    }
                }
            }
        }
        assert!(!north_down && !south_down, "every kill has its restart");
    };
    // bob reads what has arrived as it arrives, so receipts travel back through the chaos too.
    let mut marked = BTreeSet::new();
    let reading = async {
        let mut marked = BTreeSet::new();
        while start.elapsed() < span {
            pair.read_arrived(&mut marked).await;
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        marked
    };
    let (staged, (), read) = tokio::join!(staging, chaos, reading);
    marked.extend(read);
    pair.link(Mode::Pass);
    eprintln!(
        "{} letters staged over {:?}; the relays dropped {} datagrams",
        staged.len(),
        start.elapsed(),
        pair.dropped()
    );
    assert_eq!(staged.len(), letters);
    pair.assert_exactly_once(&staged, 120).await;
    eprintln!("all delivered after {:?}", start.elapsed());
    pair.read_arrived(&mut marked).await;
    assert_eq!(marked, staged, "bob read every letter");
    pair.assert_receipts_back(&marked, 60).await;
    eprintln!("every receipt back after {:?}", start.elapsed());
    for postman in [&mut north, &mut south] {
        assert!(postman.try_wait().unwrap().is_none(), "a postman exited");
    }
}
