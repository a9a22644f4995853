//! Blessings: only a human pins a build target's inputs; every session reads the pin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use crate::common::*;
use l3m_core::build::{ArtifactDigest, Blessing};
use l3m_core::duty::Duty;
use l3m_wire::reply::ErrorCode;

fn alice() -> Duty {
    Duty::Human {
        human: l3m_core::names::HumanName::parse("alice").unwrap(),
    }
}

fn pin(target: &str, byte: u8) -> Blessing {
    Blessing {
        makefile: "Makefile".into(),
        target: target.into(),
        files: BTreeMap::from([
            (
                "Makefile".to_owned(),
                ArtifactDigest::from_bytes([byte; 32]),
            ),
            (
                "scripts/gen.sh".to_owned(),
                ArtifactDigest::from_bytes([2; 32]),
            ),
        ]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_pins_a_blessing_and_the_agent_reads_it_but_cannot_write_one() {
    let f = Fixture::start().await;
    let human = f.client(alice()).await;
    f.spawn(&f.human().await, "bob", root_grant())
        .await
        .unwrap();
    let bob = f
        .client(Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    assert_eq!(
        bob.read_blessing(&agent("bob"), "all")
            .await
            .unwrap()
            .blessing,
        None
    );

    human.bless(&agent("bob"), pin("all", 1)).await.unwrap();
    let seen = bob.read_blessing(&agent("bob"), "all").await.unwrap();
    assert_eq!(seen.blessing, Some(pin("all", 1)));
    // A second blessing replaces the first.
    human.bless(&agent("bob"), pin("all", 3)).await.unwrap();
    let again = bob.read_blessing(&agent("bob"), "all").await.unwrap();
    assert_eq!(again.blessing, Some(pin("all", 3)));
    assert_ne!(again.tip, seen.tip);

    // The agent cannot bless itself, nor replace the human's pin.
    let refused = bob.bless(&agent("bob"), pin("all", 9)).await.unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::Refused), "{refused}");
    assert!(refused.to_string().contains("humans only"), "{refused}");
    let after = bob.read_blessing(&agent("bob"), "all").await.unwrap();
    assert_eq!(after, again, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blessing_of_an_argument_or_a_path_outside_the_repo_is_invalid() {
    let f = Fixture::start().await;
    let human = f.client(alice()).await;
    f.spawn(&f.human().await, "bob", root_grant())
        .await
        .unwrap();
    let mut outside = pin("all", 1);
    outside
        .files
        .insert("../etc/passwd".into(), ArtifactDigest::from_bytes([0; 32]));
    for bad in [
        pin("CC=evil", 1),
        pin("-j64", 1),
        pin(".hidden", 1),
        outside,
    ] {
        let err = human.bless(&agent("bob"), bad.clone()).await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Invalid), "{bad:?}: {err}");
    }
}
