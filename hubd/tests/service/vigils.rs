//! Vigils through a real hubd: who may arm, cancel and read them; each fires once on its own
//! fact (a ref moving, a letter read, a descendant retired, a deadline) and they outlive a
//! restart of hubd.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest};
use l3m_core::mail::Address;
use l3m_core::refs::AgentRef;
use l3m_core::vigil::{Fact, VigilLine, Watch, parse_vigil_line};
use l3m_wire::client::HubClient;
use l3m_wire::reply::ErrorCode;

use crate::common::*;

fn now_ms() -> u64 {
    l3m_core::clock::now_ms()
}

/// `p` (a root that may spawn) and its child `p/c`; their sequencers' clients.
async fn family(f: &Fixture) -> (HubClient, HubClient) {
    let human = f.human_client().await;
    let spawn = |child: &str, by: &HubClient| {
        let request = SpawnRequest {
            child: agent(child),
            grant: Grant {
                spawn: SpawnLevel::Persist,
                ..Grant::default()
            },
            loan: Default::default(),
            driven: false,
            persona: None,
            fork: None,
        };
        let by = by.clone();
        async move { by.spawn(request).await.unwrap() }
    };
    spawn("p", &human).await;
    let p = f.client(Duty::Sequencer { agent: agent("p") }).await;
    spawn("p/c", &p).await;
    let c = f
        .client(Duty::Sequencer {
            agent: agent("p/c"),
        })
        .await;
    (p, c)
}

/// The vigils chain of `of`, read by a human.
async fn lines(f: &Fixture, of: &str) -> Vec<VigilLine> {
    let human = f.human_client().await;
    (human.read_vigils(&agent(of)).await.unwrap().iter())
        .map(|l| parse_vigil_line(l).unwrap())
        .collect()
}

/// The facts fired on `of`'s chain.
async fn fired(f: &Fixture, of: &str) -> Vec<(String, Fact)> {
    lines(f, of)
        .await
        .into_iter()
        .filter_map(|l| match l {
            VigilLine::Fired { id, fact, .. } => Some((id, fact)),
            _ => None,
        })
        .collect()
}

/// Waits until `of` has fired `n` vigils.
async fn wait_fired(f: &Fixture, of: &str, n: usize) -> Vec<(String, Fact)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = fired(f, of).await;
        if now.len() >= n {
            return now;
        }
        assert!(tokio::time::Instant::now() < deadline, "fired only {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_vigil_survives_the_childs_cancel_and_fires_once() {
    let f = Fixture::start().await;
    let (p, c) = family(&f).await;
    let at = now_ms() + 1_500;
    let armed = p
        .arm_vigil(&agent("p/c"), Watch::Deadline { at_ms: at }, at + 60_000)
        .await
        .unwrap();
    let err = c.cancel_vigil(&agent("p/c"), &armed.id).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Refused), "{err}");
    assert!(err.to_string().contains("pinned by p"), "{err}");
    // Its own vigil the child may cancel; the parent may not.
    let own = c
        .arm_vigil(&agent("p/c"), Watch::Deadline { at_ms: at }, at + 60_000)
        .await
        .unwrap();
    let err = p.cancel_vigil(&agent("p/c"), &own.id).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Refused), "{err}");
    c.cancel_vigil(&agent("p/c"), &own.id).await.unwrap();

    let fired = wait_fired(&f, "p/c", 1).await;
    assert_eq!(fired, [(armed.id.clone(), Fact::Reached)]);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(self::fired(&f, "p/c").await.len(), 1, "a vigil fires once");
    assert_eq!(
        f.human_client()
            .await
            .cancel_vigil(&agent("p/c"), &armed.id)
            .await
            .unwrap_err()
            .code(),
        Some(ErrorCode::Invalid),
        "a fired vigil is no longer armed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_watch_fires_on_its_own_fact() {
    let f = Fixture::start().await;
    let (p, c) = family(&f).await;
    let human = f.human_client().await;
    let until = now_ms() + 60_000;
    // A ref of its own moves: a letter arrives in its inbox.
    let inbox = Watch::RefMoved {
        agent: agent("p"),
        which: AgentRef::Inbox,
        from: None,
    };
    let moved = p.arm_vigil(&agent("p"), inbox, until).await.unwrap();
    // A letter it sent is read.
    let sent = p
        .send_letter(&Address::for_agent(agent("p/c")).render(), None, "read me")
        .await
        .unwrap();
    let read = Watch::LetterRead {
        letter: sent.letter.clone(),
        reader: agent("p/c"),
    };
    let read = p.arm_vigil(&agent("p"), read, until).await.unwrap();
    // A child retires.
    let done = Watch::ChildDone {
        child: agent("p/c"),
    };
    let done = p.arm_vigil(&agent("p"), done, until).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(fired(&f, "p").await.is_empty(), "nothing came true yet");

    human
        .send_letter(&Address::for_agent(agent("p")).render(), None, "hi")
        .await
        .unwrap();
    let now = wait_fired(&f, "p", 1).await;
    assert_eq!(now[0].0, moved.id);
    assert!(matches!(&now[0].1, Fact::Moved { tip: Some(_) }), "{now:?}");

    c.mark_read(&sent.letter).await.unwrap();
    let now = wait_fired(&f, "p", 2).await;
    assert_eq!(now[1], (read.id.clone(), Fact::Read));

    human.retire(&agent("p/c")).await.unwrap();
    let now = wait_fired(&f, "p", 3).await;
    assert_eq!(now[2], (done.id.clone(), Fact::Done));
    assert_eq!(now.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_agent_an_ancestor_or_a_human_arms_and_reads_and_watches_stay_in_the_subtree() {
    let f = Fixture::start().await;
    let (p, c) = family(&f).await;
    let human = f.human_client().await;
    let request = SpawnRequest::new(agent("q"), Grant::default());
    human.spawn(request).await.unwrap();
    let q = f.client(Duty::Sequencer { agent: agent("q") }).await;
    let until = now_ms() + 60_000;
    let at = Watch::Deadline {
        at_ms: now_ms() + 30_000,
    };
    let refused = |e: l3m_wire::client::ClientError| e.code() == Some(ErrorCode::Refused);
    assert!(refused(
        q.arm_vigil(&agent("p"), at.clone(), until)
            .await
            .unwrap_err()
    ));
    assert!(refused(
        c.arm_vigil(&agent("p"), at.clone(), until)
            .await
            .unwrap_err()
    ));
    assert!(refused(q.read_vigils(&agent("p")).await.unwrap_err()));
    // A watch outside the subtree, on the chain itself, past the bound, or on a letter the
    // agent never sent is invalid.
    let invalid = |e: l3m_wire::client::ClientError| e.code() == Some(ErrorCode::Invalid);
    let outside = Watch::RefMoved {
        agent: agent("q"),
        which: AgentRef::Log,
        from: None,
    };
    assert!(invalid(
        p.arm_vigil(&agent("p"), outside, until).await.unwrap_err()
    ));
    let itself = Watch::RefMoved {
        agent: agent("p"),
        which: AgentRef::Vigils,
        from: None,
    };
    assert!(invalid(
        p.arm_vigil(&agent("p"), itself, until).await.unwrap_err()
    ));
    let far = now_ms() + l3m_core::vigil::MAX_SPAN_MS + 60_000;
    assert!(invalid(
        p.arm_vigil(&agent("p"), at.clone(), far).await.unwrap_err()
    ));
    let forged = Watch::LetterRead {
        letter: "L-none".into(),
        reader: agent("p/c"),
    };
    assert!(invalid(
        p.arm_vigil(&agent("p"), forged, until).await.unwrap_err()
    ));
    // No more than MAX_ARMED at once.
    for _ in 0..l3m_core::vigil::MAX_ARMED {
        p.arm_vigil(&agent("p"), at.clone(), until).await.unwrap();
    }
    assert!(invalid(
        p.arm_vigil(&agent("p"), at, until).await.unwrap_err()
    ));
    assert!(
        lines(&f, "q").await.is_empty(),
        "nothing was written for a refusal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vigils_outlive_a_restart_of_hubd_and_fire_after_it() {
    let mut f = Fixture::start().await;
    let (p, _c) = family(&f).await;
    let at = now_ms() + 2_500;
    let armed = p
        .arm_vigil(&agent("p"), Watch::Deadline { at_ms: at }, at + 60_000)
        .await
        .unwrap();
    let inbox = Watch::RefMoved {
        agent: agent("p"),
        which: AgentRef::Inbox,
        from: None,
    };
    let moved = p.arm_vigil(&agent("p"), inbox, at + 60_000).await.unwrap();
    f.hub.restart_hubd().await;
    // A move while hubd was down is found by the sweep at start; here, one after the restart.
    f.human_client()
        .await
        .send_letter(&Address::for_agent(agent("p")).render(), None, "after")
        .await
        .unwrap();
    let now = wait_fired(&f, "p", 2).await;
    let ids: Vec<&str> = now.iter().map(|(id, _)| id.as_str()).collect();
    assert!(
        ids.contains(&armed.id.as_str()) && ids.contains(&moved.id.as_str()),
        "{now:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(fired(&f, "p").await.len(), 2, "each fired once");
}

/// hubd retires an agent when its lifetime is over, with its subtree, and not before; its
/// parent's vigil on it fires as done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_lifetime_is_over_is_retired_with_its_subtree_and_not_before() {
    let f = Fixture::start().await;
    let (p, _c) = family(&f).await;
    let end = now_ms() + 2_000;
    let spawn = |child: &str, lifetime| {
        let p = p.clone();
        let request = SpawnRequest {
            child: agent(child),
            grant: Grant {
                spawn: SpawnLevel::Persist,
                lifetime,
                ..Grant::default()
            },
            loan: Default::default(),
            driven: false,
            persona: None,
            fork: None,
        };
        async move { p.spawn(request).await.unwrap() }
    };
    spawn("p/brief", l3m_core::grant::Lifetime::Until(end)).await;
    let brief = f
        .client(Duty::Sequencer {
            agent: agent("p/brief"),
        })
        .await;
    let request = SpawnRequest {
        child: agent("p/brief/sub"),
        grant: Grant {
            lifetime: l3m_core::grant::Lifetime::Until(end),
            ..Grant::default()
        },
        loan: Default::default(),
        driven: false,
        persona: None,
        fork: None,
    };
    brief.spawn(request).await.unwrap();
    let done = Watch::ChildDone {
        child: agent("p/brief"),
    };
    let vigil = p.arm_vigil(&agent("p"), done, end + 60_000).await.unwrap();
    let live = |tree: &l3m_wire::hubd::tree::AgentTree, name: &str| {
        tree.agents.iter().any(|a| {
            a.name == name
                && matches!(
                    a.life,
                    l3m_wire::hubd::tree::AgentLife::Asleep
                        | l3m_wire::hubd::tree::AgentLife::Running
                )
        })
    };
    let human = f.human_client().await;
    let tree = human.list_agents().await.unwrap();
    assert!(
        live(&tree, "p/brief") && live(&tree, "p/brief/sub"),
        "not before"
    );
    let fired = wait_fired(&f, "p", 1).await;
    assert_eq!(fired, [(vigil.id, Fact::Done)]);
    let tree = human.list_agents().await.unwrap();
    assert!(
        !live(&tree, "p/brief") && !live(&tree, "p/brief/sub"),
        "{tree:?}"
    );
    assert!(
        live(&tree, "p") && live(&tree, "p/c"),
        "agents with no lifetime stay"
    );
    assert!(now_ms() >= end, "retired only once its lifetime was over");
}
