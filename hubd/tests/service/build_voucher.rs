//! Build and run vouchers: hubd signs one only for an agent's own sequencer and only for what
//! the agent's grant covers, with the key it tells the builder and the runner.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::*;
use l3m_core::axis::Axis;
use l3m_core::build::{ArtifactDigest, Cover};
use l3m_core::duty::Duty;
use l3m_core::grant::{AcrPath, Grant, HostPattern, SpawnLevel};
use l3m_wire::envelope::Limits;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::build_voucher::{BuildPolicy, ReadBuildPolicy};
use l3m_wire::reply::ErrorCode;

fn build_of(source: &str, hosts: &[&str]) -> Cover {
    Cover::Build {
        source: AcrPath::parse(source).unwrap(),
        lockfile: None,
        hosts: hosts
            .iter()
            .map(|h| HostPattern::parse(h).unwrap())
            .collect(),
    }
}

fn run_of(byte: u8) -> Cover {
    Cover::Run {
        artifact: ArtifactDigest::from_bytes([byte; 32]),
    }
}

/// What a human may hand out here: files, one host, build and run (a human may grant both).
fn bound() -> Grant {
    Grant {
        spawn: SpawnLevel::Persist,
        files: BTreeSet::from([AcrPath::parse("workspace").unwrap()]),
        net: BTreeSet::from([HostPattern::parse("pkgs.test").unwrap()]),
        build: true,
        run: true,
        ..Grant::default()
    }
}

async fn policy(f: &Fixture) -> BuildPolicy {
    let subject = Op::ReadBuildPolicy.subject(&f.subjects);
    l3m_wire::typed::call(
        f.bus.as_ref(),
        &subject,
        &ReadBuildPolicy {},
        Duration::from_secs(10),
        &Limits::default(),
    )
    .await
    .unwrap()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubd_vouches_only_for_the_agents_own_sequencer_and_only_what_its_grant_covers() {
    let f = Fixture::start_granted("", bound()).await;
    let human = f.human().await;
    let maker_grant = Grant {
        run: false,
        spawn: SpawnLevel::Off,
        ..bound()
    };
    f.spawn(&human, "maker", maker_grant).await.unwrap();
    let player_grant = Grant {
        run: true,
        ..Grant::default()
    };
    f.spawn(&human, "player", player_grant).await.unwrap();
    let maker = f
        .client(Duty::Sequencer {
            agent: agent("maker"),
        })
        .await;
    let player = f
        .client(Duty::Sequencer {
            agent: agent("player"),
        })
        .await;

    let cover = build_of("workspace/app", &["pkgs.test"]);
    let first = maker.vouch_build(cover.clone()).await.unwrap();
    let second = maker.vouch_build(cover.clone()).await.unwrap();
    assert_eq!(first.voucher.agent, "maker");
    assert_eq!(first.voucher.cover, cover);
    assert_ne!(
        first.voucher.nonce, second.voucher.nonce,
        "each is good once"
    );
    let key = policy(&f).await.voucher_key;
    assert!(
        first.signed_by(&key),
        "signed with the key the builder is told"
    );

    // What the grant does not cover is refused, naming it.
    for (cover, needle) in [
        (
            build_of("agent/app", &[]),
            "`agent/app` lies outside maker's write roots",
        ),
        (
            build_of("workspace", &["evil.test"]),
            "`evil.test` is not on maker's `net` axis",
        ),
        (run_of(1), "does not confer `run`"),
    ] {
        let refused = maker.vouch_build(cover).await.unwrap_err();
        assert_eq!(refused.code(), Some(ErrorCode::Refused), "{refused}");
        assert!(refused.to_string().contains(needle), "{refused}");
    }
    let refused = player
        .vouch_build(build_of("workspace", &[]))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("does not confer `build`"),
        "{refused}"
    );
    let l3m_wire::client::ClientError::Refused { error, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        error.axis,
        Some(Axis::Build),
        "the refusal names the axis as data"
    );
    assert_eq!(
        player.vouch_build(run_of(1)).await.unwrap().voucher.agent,
        "player"
    );

    // A human holds no grant to vouch for, and no agent vouches for another.
    let human = f.human_client().await;
    let refused = human.vouch_build(run_of(1)).await.unwrap_err();
    assert!(refused.to_string().contains("own sequencer"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_build_policy_tells_the_images_the_settings_pin() {
    let f = Fixture::start_granted("", bound()).await;
    assert!(policy(&f).await.images.is_empty());
    let human = f.human_client().await;
    let seen = human.read_settings().await.unwrap();
    let id = format!("sha256:{}", "c0".repeat(32));
    let text = format!("{}\n[builds]\nimages = [\"{id}\"]\n", seen.text);
    human.update_settings(&text, &seen.tip).await.unwrap();
    assert_eq!(policy(&f).await.images, vec![id]);
    let bad = format!("{}\n[builds]\nimages = [\"l3m/busybox\"]\n", seen.text);
    let tip = human.read_settings().await.unwrap().tip;
    let refused = human.update_settings(&bad, &tip).await.unwrap_err();
    assert!(
        refused.to_string().contains("not an engine id"),
        "{refused}"
    );
}
