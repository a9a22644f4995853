//! Session leases and the computed agent state, through `HubClient` over a real nats-server.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::*;
use l3m_core::duty::Duty;
use l3m_core::log::{Record, RecordBody};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;
use l3m_wire::reply::ErrorCode;

async fn client(f: &Fixture, duty: Duty) -> HubClient {
    f.client(duty).await
}

async fn life_of(c: &HubClient, name: &str) -> (AgentLife, Option<String>) {
    let tree = c.list_agents().await.unwrap();
    let a = tree.agents.into_iter().find(|a| a.name == name).unwrap();
    (a.life, a.holder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sequencer_is_refused_the_lease_and_told_who_holds_it() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let seq = || Duty::Sequencer {
        agent: agent("bob"),
    };
    let (one, two) = (client(&f, seq()).await, client(&f, seq()).await);
    let watcher = client(
        &f,
        Duty::Human {
            human: l3m_core::names::HumanName::parse("alice").unwrap(),
        },
    )
    .await;
    assert_eq!(life_of(&watcher, "bob").await, (AgentLife::Asleep, None));

    let held = one
        .acquire_lease(&agent("bob"), "host-a:11", Duration::from_secs(30))
        .await
        .unwrap();
    let refused = two
        .acquire_lease(&agent("bob"), "host-b:22", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::Conflict));
    assert!(refused.to_string().contains("host-a:11"), "{refused}");
    assert_eq!(
        life_of(&watcher, "bob").await,
        (AgentLife::Running, Some("host-a:11".into()))
    );

    // The loser cannot renew or release the winner's lease by guessing its token's neighbour.
    assert!(
        two.renew_lease(&agent("bob"), held.token + 1)
            .await
            .unwrap_err()
            .is_conflict()
    );
    one.renew_lease(&agent("bob"), held.token).await.unwrap();
    one.release_lease(&agent("bob"), held.token).await.unwrap();
    assert_eq!(life_of(&watcher, "bob").await, (AgentLife::Asleep, None));
    let taken = two
        .acquire_lease(&agent("bob"), "host-b:22", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(taken.token > held.token);
    let lost = one
        .renew_lease(&agent("bob"), held.token)
        .await
        .unwrap_err();
    assert!(lost.to_string().contains("host-b:22"), "{lost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_agents_own_sequencer_may_take_its_lease() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let carol = client(
        &f,
        Duty::Sequencer {
            agent: agent("carol"),
        },
    )
    .await;
    let alice = client(
        &f,
        Duty::Human {
            human: l3m_core::names::HumanName::parse("alice").unwrap(),
        },
    )
    .await;
    for c in [&carol, &alice] {
        let err = c
            .acquire_lease(&agent("bob"), "x", Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Refused), "{err}");
    }
    let bob = client(
        &f,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    )
    .await;
    let bad_ttl = bob
        .acquire_lease(&agent("bob"), "x", Duration::from_millis(1))
        .await
        .unwrap_err();
    assert_eq!(bad_ttl.code(), Some(ErrorCode::Invalid), "{bad_ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_appends_and_reads_back_typed_records_with_the_tip() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = client(
        &f,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    )
    .await;
    let records: Vec<Record> = (0..3)
        .map(|seq| Record {
            seq,
            at_ms: 5,
            body: if seq == 0 {
                RecordBody::SystemPrompt {
                    text: "p".into(),
                    continues: false,
                }
            } else {
                RecordBody::TurnEnd
            },
        })
        .collect();
    let appended = bob.append_log(&agent("bob"), None, &records).await.unwrap();
    let read = bob.read_log_from(&agent("bob"), 0).await.unwrap();
    assert_eq!(read.records, records);
    assert_eq!(
        (read.len, read.tip.as_deref()),
        (3, Some(appended.tip.as_str()))
    );
    let stale = bob
        .append_log(&agent("bob"), None, &records)
        .await
        .unwrap_err();
    assert!(stale.is_conflict(), "{stale}");
}

/// A holder text past the limit is refused as invalid; the longest allowed one leaves the agent
/// list readable for everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_allowed_holder_text_keeps_the_agent_list_readable() {
    use hubd::service::MAX_HOLDER;
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = client(
        &f,
        Duty::Sequencer {
            agent: agent("bob"),
        },
    )
    .await;
    let err = bob
        .acquire_lease(
            &agent("bob"),
            &"h".repeat(MAX_HOLDER + 1),
            Duration::from_secs(30),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, l3m_wire::client::ClientError::Refused { error, .. } if error.code == ErrorCode::Invalid && error.message.contains(&MAX_HOLDER.to_string())),
        "{err}"
    );
    let longest = "h".repeat(MAX_HOLDER);
    bob.acquire_lease(&agent("bob"), &longest, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        life_of(&bob, "bob").await,
        (AgentLife::Running, Some(longest))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hubd_restart_keeps_the_leases_and_every_client_carries_on() {
    let mut f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let seq = || Duty::Sequencer {
        agent: agent("bob"),
    };
    let bob = client(&f, seq()).await;
    let held = bob
        .acquire_lease(&agent("bob"), "host-a:11", Duration::from_secs(30))
        .await
        .unwrap();
    let first = record_at(0);
    let appended = bob
        .append_log(&agent("bob"), None, std::slice::from_ref(&first))
        .await
        .unwrap();
    let watcher = client(
        &f,
        Duty::Human {
            human: l3m_core::names::HumanName::parse("alice").unwrap(),
        },
    )
    .await;
    let voucher_key = bob.voucher_key();

    f.hub.restart_hubd().await;

    // The old sessions ended with the process; each client opens a new one by itself, and the
    // lease taken before the restart is still the one in force.
    bob.renew_lease(&agent("bob"), held.token).await.unwrap();
    assert_ne!(
        bob.voucher_key(),
        voucher_key,
        "a new hubd signs with a new key"
    );
    assert_eq!(
        life_of(&watcher, "bob").await,
        (AgentLife::Running, Some("host-a:11".into()))
    );
    let usurper = client(&f, seq()).await;
    let refused = usurper
        .acquire_lease(&agent("bob"), "host-b:22", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::Conflict), "{refused}");
    assert!(refused.to_string().contains("host-a:11"), "{refused}");

    // Appends go on from the tip the restart kept; the Log holds each record once.
    let next = record_at(1);
    bob.append_log(
        &agent("bob"),
        Some(&appended.tip),
        std::slice::from_ref(&next),
    )
    .await
    .unwrap();
    let log = watcher.read_log_from(&agent("bob"), 0).await.unwrap();
    assert_eq!(log.records, vec![first, next]);

    // A release after the restart frees the agent, and a fresh lease numbers past the old one.
    bob.release_lease(&agent("bob"), held.token).await.unwrap();
    let taken = usurper
        .acquire_lease(&agent("bob"), "host-b:22", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(taken.token > held.token);
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_from_before_a_restart_is_told_its_session_ended() {
    let mut f = Fixture::start().await;
    let stale = f.human().await;
    f.hub.restart_hubd().await;
    let reply: l3m_wire::reply::Reply<l3m_wire::hubd::tree::AgentTree> = f
        .call(
            l3m_wire::hubd::Op::ListAgents,
            &l3m_wire::hubd::tree::ListAgents {
                capability: stale,
                after: None,
            },
        )
        .await;
    let err = reply.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionEnded, "{}", err.message);
    assert!(
        err.message.contains("open a new session"),
        "{}",
        err.message
    );
}

fn record_at(seq: u64) -> Record {
    Record {
        seq,
        at_ms: 5,
        body: if seq == 0 {
            RecordBody::SystemPrompt {
                text: "p".into(),
                continues: false,
            }
        } else {
            RecordBody::TurnEnd
        },
    }
}
