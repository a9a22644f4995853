//! Compare-and-swap under contention: one winner per expected tip, no lost or interleaved batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::Barrier;

use crate::common::{assert_fsck_strict, entries, new_hub};
use hubd::store::{Hub, StoreError, Tip};

const LOG: &str = "refs/l3m/a/alice/_/log";

#[test]
fn hub_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Hub>();
}

#[test]
fn racing_appends_from_one_tip_have_exactly_one_winner() {
    let (_dir, hub) = new_hub();
    let racers = 4;
    let mut tip = Tip::Absent;
    for round in 0..40 {
        let barrier = Barrier::new(racers);
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..racers)
                .map(|r| {
                    let (hub, barrier) = (&hub, &barrier);
                    s.spawn(move || {
                        let batch = entries(&format!("round{round}-racer{r}"), 1);
                        barrier.wait();
                        hub.append(LOG, tip, &batch, &format!("round {round} racer {r}"))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        let winner = *winners[0];
        for outcome in &outcomes {
            match outcome {
                Ok(_) => {}
                Err(StoreError::Stale {
                    expected, actual, ..
                }) => {
                    assert_eq!(*expected, tip);
                    assert_eq!(*actual, winner.tip(), "the loser learns the winner's tip");
                }
                Err(other) => panic!("round {round}: unexpected {other:?}"),
            }
        }
        tip = winner.tip();
    }
    assert_eq!(hub.len(LOG).unwrap(), 40);
    assert_fsck_strict(&hub.git_dir());
}

#[test]
fn retrying_writers_land_every_batch_once_and_whole() {
    let (_dir, hub) = new_hub();
    let (writers, batches_each) = (6, 20);
    std::thread::scope(|s| {
        for w in 0..writers {
            let hub = &hub;
            s.spawn(move || {
                for b in 0..batches_each {
                    let batch = entries(&format!("w{w}-b{b}"), 1 + (w + b) % 4);
                    let mut tip = hub.tip(LOG).unwrap();
                    loop {
                        match hub.append(LOG, tip, &batch, &format!("writer {w} batch {b}")) {
                            Ok(_) => break,
                            Err(StoreError::Stale { actual, .. }) => tip = actual,
                            Err(other) => panic!("writer {w}: {other:?}"),
                        }
                    }
                }
            });
        }
    });
    let len = hub.len(LOG).unwrap();
    let all = hub.read_range(LOG, 0, len).unwrap();
    let expected: usize = (0..writers)
        .flat_map(|w| (0..batches_each).map(move |b| 1 + (w + b) % 4))
        .sum();
    assert_eq!(all.len(), expected);
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "an entry landed twice");
    // Each batch is contiguous and in order: entry i of batch (w, b) is followed by i + 1.
    let mut i = 0;
    while i < all.len() {
        let tag = batch_tag(&all[i]);
        let size = all[i..].iter().take_while(|e| batch_tag(e) == tag).count();
        assert_eq!(
            all[i..i + size],
            entries(&tag, size),
            "batch {tag} is not whole"
        );
        let (w, b) = parse_tag(&tag);
        assert_eq!(size, 1 + (w + b) % 4, "batch {tag} is split");
        i += size;
    }
    assert_eq!(
        hub.index_snapshot()[LOG].spans().len(),
        writers * batches_each
    );
}

#[test]
fn writers_on_different_chains_do_not_disturb_each_other() {
    let (_dir, hub) = new_hub();
    let chains: Vec<String> = (0..4)
        .map(|a| format!("refs/l3m/a/agent{a}/_/inbox"))
        .collect();
    std::thread::scope(|s| {
        for chain in &chains {
            let hub = &hub;
            s.spawn(move || {
                let mut tip = Tip::Absent;
                for b in 0..25 {
                    tip = hub
                        .append(chain, tip, &entries(&format!("b{b}"), 2), "batch")
                        .unwrap()
                        .tip();
                }
            });
        }
    });
    for chain in &chains {
        assert_eq!(hub.len(chain).unwrap(), 50);
        assert_eq!(hub.read_range(chain, 48, 50).unwrap(), entries("b24", 2));
    }
    assert_fsck_strict(&hub.git_dir());
}

fn batch_tag(entry: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(entry).unwrap();
    value["tag"].as_str().unwrap().to_owned()
}

fn parse_tag(tag: &str) -> (usize, usize) {
    let (w, b) = tag.trim_start_matches('w').split_once("-b").unwrap();
    (w.parse().unwrap(), b.parse().unwrap())
}
