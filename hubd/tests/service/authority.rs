//! Regrants and read checks through hubd over a real nats-server: only an agent's issuer
//! changes its grant, never wider; an agent's Log, inbox and grant are read only by itself, its
//! ancestors and humans.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use futures_util::StreamExt;
use l3m_core::grant::{Grant, HostPattern, SpawnLevel};
use l3m_core::refs::AgentRef;
use l3m_wire::envelope::{Limits, decode};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{GrantView, ReadGrant, Regrant, Regranted};
use l3m_wire::hubd::log::{LogRange, ReadLog};
use l3m_wire::hubd::mail::{InboxLines, ReadInbox};
use l3m_wire::hubd::notify::RefMoved;
use l3m_wire::hubd::session::Capability;
use l3m_wire::reply::{ErrorCode, Reply};

/// Spawning and a host to reach: what alice, and so her root bob, holds.
fn wide() -> Grant {
    Grant {
        net: [HostPattern::parse("example.com").unwrap()].into(),
        ..root_grant()
    }
}

async fn regrant(f: &Fixture, by: &Capability, agent: &str, grant: Grant) -> Reply<Regranted> {
    f.call(
        Op::Regrant,
        &Regrant {
            capability: by.clone(),
            agent: agent.into(),
            grant,
        },
    )
    .await
}

async fn grant_of(f: &Fixture, by: &Capability, agent: &str) -> Reply<GrantView> {
    f.call(
        Op::ReadGrant,
        &ReadGrant {
            capability: by.clone(),
            agent: agent.into(),
        },
    )
    .await
}

fn ledger_log(f: &Fixture) -> String {
    let out = l3m_git::repo_command(&f.git_dir())
        .args(["log", "--format=%s", "refs/l3m/ledger"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_narrows_its_child_and_the_grants_ref_ledger_and_announcement_follow() {
    let f = Fixture::start_granted("", wide()).await;
    let human = f.human().await;
    f.spawn(&human, "bob", wide()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", wide()).await.unwrap();
    let mut moves = f
        .bus
        .subscribe(&f.subjects.ref_changed(AgentRef::Grants, &agent("bob/kid")))
        .await
        .unwrap();
    let narrow = Grant {
        spawn: SpawnLevel::Off,
        ..wide()
    };
    let done = regrant(&f, &bob, "bob/kid", narrow.clone()).await.unwrap();
    assert_eq!(done.agent, "bob/kid");
    assert_eq!(
        f.tip("refs/l3m/a/bob/kid/_/grants").as_deref(),
        Some(done.grants_tip.as_str())
    );
    let view = grant_of(&f, &bob, "bob/kid").await.unwrap();
    assert_eq!(view.grant, narrow);
    // Announcements go out after the replies, so the spawn's own may come first.
    loop {
        let next = tokio::time::timeout(std::time::Duration::from_secs(20), moves.next());
        let message = next.await.expect("the regrant is announced").unwrap();
        let moved: RefMoved = decode(&message.payload, &Limits::default()).unwrap();
        if moved.tip.as_deref() == Some(done.grants_tip.as_str()) {
            break;
        }
    }
    assert!(
        ledger_log(&f).lines().next() == Some("regrant bob/kid by bob"),
        "{}",
        ledger_log(&f)
    );
    // The human issuer of a root regrants it too, within the human's own grant.
    regrant(&f, &human, "bob", wide()).await.unwrap();
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_issuer_regrants_and_never_wider() {
    let f = Fixture::start_granted("", wide()).await;
    let human = f.human().await;
    f.spawn(&human, "bob", wide()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    f.spawn(&bob, "bob/sib", root_grant()).await.unwrap();
    let kid = f.sequencer("bob/kid").await;
    let sib = f.sequencer("bob/sib").await;
    f.spawn(&kid, "bob/kid/gk", Grant::default()).await.unwrap();
    let before = f.refs();

    let own = regrant(&f, &kid, "bob/kid", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(own.code, ErrorCode::Refused);
    assert!(own.message.contains("issuer"), "{}", own.message);
    let sibling = regrant(&f, &sib, "bob/kid", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(sibling.code, ErrorCode::Refused);
    assert!(
        sibling.message.contains("issued by bob"),
        "{}",
        sibling.message
    );
    // Not even a human regrants past the issuer: bob/kid's grant is bob's to change.
    let human_not_issuer = regrant(&f, &human, "bob/kid", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(human_not_issuer.code, ErrorCode::Refused);
    // Nor a grandparent: bob/kid/gk's issuer is bob/kid.
    let grandparent = regrant(&f, &bob, "bob/kid/gk", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(grandparent.code, ErrorCode::Refused);
    assert!(
        grandparent.message.contains("issued by bob/kid"),
        "{}",
        grandparent.message
    );

    // Widening: bob/kid to a host bob does not hold; bob beyond alice's grant.
    let mut wider = root_grant();
    wider
        .net
        .insert(HostPattern::parse("evil.example").unwrap());
    let widened = regrant(&f, &bob, "bob/kid", wider.clone())
        .await
        .unwrap_err();
    assert_eq!(widened.code, ErrorCode::Refused);
    assert!(
        widened.message.contains("axis `net`"),
        "{}",
        widened.message
    );
    let widened = regrant(&f, &human, "bob", wider).await.unwrap_err();
    assert_eq!(widened.code, ErrorCode::Refused);
    assert!(
        widened.message.contains("axis `net`"),
        "{}",
        widened.message
    );

    // Narrowing bob below a child's grant would strand the child: refused, naming both.
    let stranding = regrant(&f, &human, "bob", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(stranding.code, ErrorCode::Refused);
    assert!(
        stranding.message.contains("bob/kid") && stranding.message.contains("axis `spawn`"),
        "{}",
        stranding.message
    );
    let unknown = regrant(&f, &bob, "bob/nobody", Grant::default())
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(f.refs(), before, "a refused regrant writes nothing");
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_inboxes_and_grants_are_read_by_the_agent_its_ancestors_and_humans_only() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    f.spawn(&bob, "bob/sib", root_grant()).await.unwrap();
    let kid_cap = f.sequencer("bob/kid").await;
    let sib = f.sequencer("bob/sib").await;
    let carol = f.sequencer("carol").await;

    let log = |by: &Capability, agent: &str| ReadLog {
        capability: by.clone(),
        agent: agent.into(),
        from: 0,
        to: u64::MAX,
    };
    let inbox = |by: &Capability, agent: &str| ReadInbox {
        capability: by.clone(),
        agent: agent.into(),
        from: 0,
    };
    for reader in [&kid_cap, &bob, &human] {
        let _: LogRange = f.call(Op::ReadLog, &log(reader, "bob/kid")).await.unwrap();
        let _: InboxLines = f
            .call(Op::ReadInbox, &inbox(reader, "bob/kid"))
            .await
            .unwrap();
        grant_of(&f, reader, "bob/kid").await.unwrap();
    }
    // A sibling, an unrelated root, and a child reading its parent are all refused.
    for (reader, whose) in [(&sib, "bob/kid"), (&carol, "bob/kid"), (&kid_cap, "bob")] {
        let refused = f
            .call::<_, LogRange>(Op::ReadLog, &log(reader, whose))
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Refused);
        assert!(
            refused.message.contains(
                "its own sequencer, the sequencer of one of its ancestors, its host, or a human"
            ),
            "{}",
            refused.message
        );
        let refused = f
            .call::<_, InboxLines>(Op::ReadInbox, &inbox(reader, whose))
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Refused);
        let refused = grant_of(&f, reader, whose).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Refused);
        assert!(refused.message.contains("grant of"), "{}", refused.message);
    }
}
