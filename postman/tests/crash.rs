//! Letters flow from north to south while either hub's postman is killed with SIGKILL at
//! random moments and started again. At the end every staged letter is in bob's inbox exactly
//! once, and none is there that was not staged.
//!
//! CI runs a short version (`L3M_AIRMAIL_LETTERS`, default 24; `L3M_AIRMAIL_KILLS`, default 4);
//! raise both for the long one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Pair;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_arrive_exactly_once_through_postman_sigkills() {
    let letters = env_or("L3M_AIRMAIL_LETTERS", 24);
    let kills = env_or("L3M_AIRMAIL_KILLS", 4);
    let pair = Pair::start().await;
    let mut north = pair.serve(true);
    let mut south = pair.serve(false);
    let mut staged = BTreeSet::new();
    // A cheap random source: kill points vary between runs, the counts above do not.
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let kill_every = (letters / (kills + 1)).max(1);
    for i in 0..letters {
        staged.insert(pair.stage(&format!("letter {i}")).await);
        tokio::time::sleep(Duration::from_millis(next() % 60)).await;
        if i % kill_every == kill_every - 1 && i / kill_every < kills {
            // SIGKILL one side's postman mid-flow, then start it again.
            let is_north = next() % 2 == 0;
            let victim = if is_north { &mut north } else { &mut south };
            victim.start_kill().unwrap();
            victim.wait().await.unwrap();
            tokio::time::sleep(Duration::from_millis(next() % 300)).await;
            *victim = pair.serve(is_north);
        }
    }
    let got = pair.wait_for(staged.len(), 60).await;
    // Let any retry in flight land, then count again: nothing may arrive twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got_later = pair.bob_letters().await;
    assert_eq!(got.len(), got_later.len(), "a letter arrived twice");
    let ids: Vec<String> = got_later.iter().map(|l| l.id.to_string()).collect();
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(ids.len(), unique.len(), "duplicates in bob's inbox");
    assert_eq!(unique, staged, "every staged letter, and only those");
    for letter in &got_later {
        assert_eq!(letter.from.render(), "office:north agent:lead*");
    }
    for hub in [&pair.north, &pair.south] {
        hubd::test_support::git_bare(&hub.git_dir(), &["fsck", "--strict"]);
    }
}
