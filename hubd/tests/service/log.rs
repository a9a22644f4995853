//! Sessions, Log appends by CAS and the agent tree, through hubd over a real nats-server.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use futures_util::StreamExt;
use l3m_core::grant::Grant;
use l3m_core::refs::AgentRef;
use l3m_wire::envelope::{Limits, decode};
use l3m_wire::hubd::Op;
use l3m_wire::hubd::authority::{GrantView, ReadGrant};
use l3m_wire::hubd::log::{AppendLog, LogAppended, LogRange, ReadLog};
use l3m_wire::hubd::notify::RefMoved;
use l3m_wire::hubd::tree::{AgentLife, AgentTree, ListAgents, Retire, Retired};
use l3m_wire::reply::ErrorCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_wins_once_is_announced_and_reads_back() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let mut moves = f
        .bus
        .subscribe(&f.subjects.ref_changed(AgentRef::Log, &agent("bob")))
        .await
        .unwrap();
    let append = |tip: Option<String>, records: Vec<String>| AppendLog {
        capability: bob.clone(),
        agent: "bob".into(),
        expected_tip: tip,
        records,
    };
    let first: LogAppended = f
        .call(Op::AppendLog, &append(None, vec![record(0), record(1)]))
        .await
        .unwrap();
    assert_eq!((first.first_seq, first.len), (0, 2));
    let moved: RefMoved = decode(&moves.next().await.unwrap().payload, &Limits::default()).unwrap();
    assert_eq!(moved.tip.as_deref(), Some(first.tip.as_str()));
    assert_eq!(moved.len, Some(2));
    let stale = f
        .call::<_, LogAppended>(Op::AppendLog, &append(None, vec![record(2)]))
        .await
        .unwrap_err();
    assert_eq!(stale.code, ErrorCode::Conflict);
    assert!(stale.message.contains(&first.tip), "{}", stale.message);
    let range: LogRange = f
        .call(
            Op::ReadLog,
            &ReadLog {
                capability: bob.clone(),
                agent: "bob".into(),
                from: 1,
                to: 9,
            },
        )
        .await
        .unwrap();
    assert_eq!(range.records, vec![record(1)]);
    assert_eq!(range.len, 2);
    let grant: GrantView = f
        .call(
            Op::ReadGrant,
            &ReadGrant {
                capability: bob.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(grant.grant, root_grant());
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_appenders_have_one_winner_per_tip_and_no_interleaving() {
    let f = std::sync::Arc::new(Fixture::start().await);
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let mut moves = f
        .bus
        .subscribe(&f.subjects.ref_changed(AgentRef::Log, &agent("bob")))
        .await
        .unwrap();
    let rounds = 20;
    let writer = |id: usize| {
        let f = std::sync::Arc::clone(&f);
        let bob = bob.clone();
        tokio::spawn(async move {
            let (mut wins, mut losses) = (0, 0);
            let mut tip: Option<String> = None;
            let mut len = 0;
            while wins < rounds {
                // Each writer appends a batch of two so interleaving would show in the seqs.
                let req = AppendLog {
                    capability: bob.clone(),
                    agent: "bob".into(),
                    expected_tip: tip.clone(),
                    records: vec![record(len), record(len + 1)],
                };
                match f.call::<_, LogAppended>(Op::AppendLog, &req).await {
                    Ok(won) => {
                        wins += 1;
                        tip = Some(won.tip);
                        len = won.len;
                    }
                    Err(e) => {
                        assert!(
                            matches!(e.code, ErrorCode::Conflict | ErrorCode::Invalid),
                            "{id}: {e}"
                        );
                        losses += 1;
                        let read: LogRange = f
                            .call(
                                Op::ReadLog,
                                &ReadLog {
                                    capability: bob.clone(),
                                    agent: "bob".into(),
                                    from: 0,
                                    to: 0,
                                },
                            )
                            .await
                            .unwrap();
                        len = read.len;
                        tip = f.tip("refs/l3m/a/bob/_/log");
                    }
                }
            }
            losses
        })
    };
    let (a, b) = (writer(0), writer(1));
    let _ = (a.await.unwrap(), b.await.unwrap());
    let all: LogRange = f
        .call(
            Op::ReadLog,
            &ReadLog {
                capability: bob.clone(),
                agent: "bob".into(),
                from: 0,
                to: u64::MAX,
            },
        )
        .await
        .unwrap();
    assert_eq!(all.len, 2 * 2 * rounds as u64);
    // Announcements go out after the replies, one per append, and never say the Log went back
    // (each says where the Log is when it is queued, so two may say the same).
    let mut last = None;
    let mut lens = Vec::new();
    while lens.len() < 2 * rounds {
        let next = tokio::time::timeout(std::time::Duration::from_secs(20), moves.next());
        let message = next.await.expect("every append is announced").unwrap();
        let moved: RefMoved = decode(&message.payload, &Limits::default()).unwrap();
        lens.push(moved.len.unwrap());
        last = moved.tip;
    }
    assert_eq!(lens.last(), Some(&all.len), "{lens:?}");
    assert_eq!(last, all.tip, "the last announcement names the tip");
    assert!(
        lens.is_sorted(),
        "announced lengths never go back: {lens:?}"
    );
    let expected: Vec<String> = (0..all.len).map(record).collect();
    assert_eq!(
        all.records, expected,
        "every seq once, in order: no interleaving"
    );
    let commits = l3m_git::repo_command(&f.git_dir())
        .args(["rev-list", "--count", "refs/l3m/a/bob/_/log"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&commits.stdout).trim(),
        (2 * rounds).to_string()
    );
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_widening_spawn_is_refused_naming_its_axis() {
    let f = Fixture::start().await;
    let human = f.human().await;
    let before = f.refs();
    let wide = Grant {
        build: true,
        ..root_grant()
    };
    let refused = f.spawn(&human, "bob", wide).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(refused.message.contains("`build`"), "{}", refused.message);
    assert_eq!(
        refused.axis,
        Some(l3m_core::axis::Axis::Build),
        "the axis as data"
    );
    assert_eq!(f.refs(), before, "nothing written");
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let child = f
        .spawn(
            &bob,
            "bob/kid",
            Grant {
                build: true,
                ..root_grant()
            },
        )
        .await
        .unwrap_err();
    assert!(child.message.contains("`build`"), "{}", child.message);
    assert_eq!(child.axis, Some(l3m_core::axis::Axis::Build));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retire_removes_a_subtree_deepest_first() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/a", root_grant()).await.unwrap();
    let a = f.sequencer("bob/a").await;
    f.spawn(&a, "bob/a/deep", root_grant()).await.unwrap();
    f.spawn(&bob, "bob/b", root_grant()).await.unwrap();
    // What a sequencer on the hub's host kept for the deepest one.
    let deep = f.dir.path().join("HUB/forest/bob/a/deep");
    std::fs::create_dir_all(deep.join("self/workspace")).unwrap();
    std::fs::create_dir_all(deep.join("self.git")).unwrap();
    let not_mine = f
        .call::<_, Retired>(
            Op::Retire,
            &Retire {
                capability: a.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(not_mine.code, ErrorCode::Refused);
    let retired: Retired = f
        .call(
            Op::Retire,
            &Retire {
                capability: human.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(retired.agents, ["bob/a/deep", "bob/a", "bob/b", "bob"]);
    assert!(!f.refs().contains("/_/grants"), "{}", f.refs());
    assert!(!deep.join("self").exists() && !deep.join("self.git").exists());
    let tree: AgentTree = f
        .call(
            Op::ListAgents,
            &ListAgents {
                capability: human.clone(),
                after: None,
            },
        )
        .await
        .unwrap();
    assert!(
        tree.agents.iter().all(|s| s.life == AgentLife::Retired),
        "{tree:?}"
    );
    assert_eq!(tree.agents.len(), 4);
    assert_eq!(tree.next, None, "four agents fit one page");
    // A page starts after the name asked for, in name order.
    let rest: AgentTree = f
        .call(
            Op::ListAgents,
            &ListAgents {
                capability: human,
                after: Some("bob/a".into()),
            },
        )
        .await
        .unwrap();
    let names: Vec<&str> = rest.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["bob/a/deep", "bob/b"]);
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_an_agent_nor_a_human_writes_another_log_and_no_one_writes_grants_or_personas() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    f.spawn(&human, "carol", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let before = f.refs();
    let sibling = f
        .call::<_, LogAppended>(
            Op::AppendLog,
            &AppendLog {
                capability: bob.clone(),
                agent: "carol".into(),
                expected_tip: None,
                records: vec![record(0)],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(sibling.code, ErrorCode::Refused);
    assert!(
        sibling.message.contains("own agent's sequencer"),
        "{}",
        sibling.message
    );
    // Nor may a human's session, the hub's owner included: a Log has one writer.
    let by_human = f
        .call::<_, LogAppended>(
            Op::AppendLog,
            &AppendLog {
                capability: human.clone(),
                agent: "bob".into(),
                expected_tip: None,
                records: vec![record(0)],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(by_human.code, ErrorCode::Refused, "{}", by_human.message);
    // Grants and personas have no write request at all; the duty table is the fence behind it.
    use l3m_core::duty::{Duty, RefWrite, may_write};
    let duty = Duty::Sequencer {
        agent: agent("bob"),
    };
    assert!(may_write(&duty, "refs/l3m/a/bob/_/grants", RefWrite::Set).is_err());
    assert!(may_write(&duty, "refs/l3m/personas/coder", RefWrite::Set).is_err());
    assert_eq!(f.refs(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_forks_a_published_persona_and_refuses_an_unknown_one() {
    use l3m_core::grant::SpawnRequest;
    use l3m_core::names::PersonaName;
    use l3m_wire::hubd::tree::{Collect, Collected, Spawn, Spawned};
    let f = Fixture::start().await;
    let human = f.human().await;
    let spawn = |persona: &str| Spawn {
        capability: human.clone(),
        request: SpawnRequest {
            child: agent("bob"),
            grant: root_grant(),
            loan: Default::default(),
            driven: false,
            persona: Some(PersonaName::parse(persona).unwrap()),
            fork: None,
        },
    };
    let before = f.refs();
    let unknown = f
        .call::<_, Spawned>(Op::Spawn, &spawn("coder"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::Refused);
    assert!(
        unknown.message.contains("persona coder"),
        "{}",
        unknown.message
    );
    assert_eq!(f.refs(), before, "nothing written");
    // Publish a persona with the git CLI, as a human would.
    let git = |args: &[&str]| {
        let out = l3m_git::repo_command(&f.git_dir())
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let empty = git(&["mktree"]);
    let persona = git(&["commit-tree", &empty, "-m", "coder"]);
    git(&["update-ref", "refs/l3m/personas/coder", &persona]);
    let spawned: Spawned = f.call(Op::Spawn, &spawn("coder")).await.unwrap();
    assert_eq!(
        f.tip("refs/l3m/a/bob/_/persona").as_deref(),
        Some(persona.as_str())
    );
    assert!(f.tip(&spawned.work_branch).is_some());
    f.call::<_, Retired>(
        Op::Retire,
        &Retire {
            capability: human.clone(),
            agent: "bob".into(),
        },
    )
    .await
    .unwrap();
    let collected: Collected = f
        .call(
            Op::Collect,
            &Collect {
                capability: human.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(collected.agent, "bob");
    assert!(!f.refs().contains("refs/l3m/a/bob/"), "{}", f.refs());
    f.fsck();
}

/// A record past the stored-line limit is refused as invalid, naming the limit, and writes
/// nothing; so no Log can hold a record its readers cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_over_the_stored_line_limit_is_refused_and_nothing_is_written() {
    use l3m_core::record_format::MAX_STORED_LINE;
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let huge = l3m_core::log::Record {
        seq: 0,
        at_ms: 7,
        body: l3m_core::log::RecordBody::Event {
            id: l3m_core::log::EventId::new("e1").unwrap(),
            source: l3m_core::log::EventSource::Notice,
            text: "y".repeat(MAX_STORED_LINE),
        },
    }
    .to_line()
    .unwrap();
    let refs = f.refs();
    let err = f
        .call::<_, LogAppended>(
            Op::AppendLog,
            &AppendLog {
                capability: bob,
                agent: "bob".into(),
                expected_tip: None,
                records: vec![huge],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid, "{}", err.message);
    assert!(
        err.message.contains(&MAX_STORED_LINE.to_string()),
        "{}",
        err.message
    );
    assert_eq!(f.refs(), refs);
}

/// A sequencer's capability dies with its agent's incarnation: after retire, and again after
/// collect and a respawn of the same name, every use is refused as `revoked` and writes
/// nothing — the old capability never reaches the new agent's Log, inbox or grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_agents_capability_is_revoked_also_after_respawn() {
    use l3m_wire::hubd::mail::{MarkRead, MarkedRead};
    use l3m_wire::hubd::tree::{Collect, Collected};
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let old = f.sequencer("bob").await;
    let append =
        |capability: &l3m_wire::hubd::session::Capability, tip: Option<String>| AppendLog {
            capability: capability.clone(),
            agent: "bob".into(),
            expected_tip: tip,
            records: vec![record(0)],
        };
    f.call::<_, LogAppended>(Op::AppendLog, &append(&old, None))
        .await
        .unwrap();
    let retire = Retire {
        capability: human.clone(),
        agent: "bob".into(),
    };
    f.call::<_, Retired>(Op::Retire, &retire).await.unwrap();
    let refs = f.refs();
    let tip = f.tip("refs/l3m/a/bob/_/log");
    let err = f
        .call::<_, LogAppended>(Op::AppendLog, &append(&old, tip))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Revoked, "{}", err.message);
    let err = f
        .call::<_, MarkedRead>(
            Op::MarkRead,
            &MarkRead {
                capability: old.clone(),
                letter: "0".repeat(64),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Revoked, "{}", err.message);
    assert_eq!(f.refs(), refs, "nothing was written");

    let collect = Collect {
        capability: human.clone(),
        agent: "bob".into(),
    };
    f.call::<_, Collected>(Op::Collect, &collect).await.unwrap();
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let refs = f.refs();
    for code in [
        f.call::<_, LogAppended>(Op::AppendLog, &append(&old, None))
            .await
            .unwrap_err()
            .code,
        f.call::<_, GrantView>(
            Op::ReadGrant,
            &ReadGrant {
                capability: old.clone(),
                agent: "bob".into(),
            },
        )
        .await
        .unwrap_err()
        .code,
    ] {
        assert_eq!(code, ErrorCode::Revoked);
    }
    assert_eq!(f.refs(), refs, "the new bob's refs are untouched");
    let new = f.sequencer("bob").await;
    f.call::<_, LogAppended>(Op::AppendLog, &append(&new, None))
        .await
        .unwrap();
}

/// Plain `git log` on a Log's ref tells the agent's story: each commit's subject says what its
/// records did, on one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_log_of_a_log_ref_reads_as_the_agents_story() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let event = l3m_core::log::Record {
        seq: 0,
        at_ms: 7,
        body: l3m_core::log::RecordBody::Event {
            id: l3m_core::log::EventId::new("e1").unwrap(),
            source: l3m_core::log::EventSource::Notice,
            text: "the notes\nare done".into(),
        },
    }
    .to_line()
    .unwrap();
    f.call::<_, LogAppended>(
        Op::AppendLog,
        &AppendLog {
            capability: bob,
            agent: "bob".into(),
            expected_tip: None,
            records: vec![event, record(1)],
        },
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let subject = loop {
        let out = l3m_git::repo_command(&f.git_dir())
            .args(["log", "-1", "--format=%s", "refs/l3m/a/bob/_/log"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        if out.status.success() && !text.trim().is_empty() {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the Log's commit never appeared"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(subject.trim_end(), "event: the notes are done (+1 more)");
}

/// A read of a long Log answers one page of at most `PAGE_LINES` records, whatever the range
/// asked, so a reader walks a long chain page by page instead of rereading its rest each time;
/// the client reads every page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_log_is_read_a_page_of_lines_at_a_time() {
    use l3m_core::record_format::PAGE_LINES;
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    let n = PAGE_LINES + 88;
    f.call::<_, LogAppended>(
        Op::AppendLog,
        &AppendLog {
            capability: bob.clone(),
            agent: "bob".into(),
            expected_tip: None,
            records: (0..n).map(record).collect(),
        },
    )
    .await
    .unwrap();
    let page: LogRange = f
        .call(
            Op::ReadLog,
            &ReadLog {
                capability: bob,
                agent: "bob".into(),
                from: 0,
                to: u64::MAX,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.records.len() as u64, PAGE_LINES);
    assert_eq!(page.len, n);
    let client = f
        .client(l3m_core::duty::Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    let all = client.read_log_from(&agent("bob"), 0).await.unwrap();
    assert_eq!(all.records.len() as u64, n);
    assert!(all.records.iter().zip(0..).all(|(r, seq)| r.seq == seq));
}

/// A fork is a spawn hubd seeds: the new Log starts with the source's records up to the fork
/// point, written by hubd in the spawn. A spawner who may not read the source, a fork point
/// past the source's Log, or a grant wider than the source's is refused with nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_is_seeded_by_hubd_and_refused_to_whom_may_not_read_its_source() {
    use l3m_core::grant::{ForkFrom, SpawnRequest};
    use l3m_wire::hubd::session::Capability;
    use l3m_wire::hubd::tree::{Spawn, Spawned};
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    f.spawn(&bob, "bob/sib", root_grant()).await.unwrap();
    let kid = f.sequencer("bob/kid").await;
    let sib = f.sequencer("bob/sib").await;
    let _: LogAppended = f
        .call(
            Op::AppendLog,
            &AppendLog {
                capability: kid.clone(),
                agent: "bob/kid".into(),
                expected_tip: None,
                records: vec![record(0), record(1)],
            },
        )
        .await
        .unwrap();
    let fork = |by: &Capability, child: &str, at: u64| Spawn {
        capability: by.clone(),
        request: SpawnRequest {
            child: agent(child),
            grant: root_grant(),
            loan: Default::default(),
            driven: false,
            persona: None,
            fork: Some(ForkFrom {
                source: agent("bob/kid"),
                at,
            }),
        },
    };
    let before = f.refs();
    let unread = f
        .call::<_, Spawned>(Op::Spawn, &fork(&sib, "bob/sib/copy", 0))
        .await
        .unwrap_err();
    assert_eq!(unread.code, ErrorCode::Refused, "{}", unread.message);
    let past = f
        .call::<_, Spawned>(Op::Spawn, &fork(&bob, "bob/copy", 2))
        .await
        .unwrap_err();
    assert_eq!(past.code, ErrorCode::Invalid, "{}", past.message);
    assert!(past.message.contains("no record 2"), "{}", past.message);
    assert_eq!(f.refs(), before, "a refused fork writes nothing");

    let _: Spawned = f.call(Op::Spawn, &fork(&bob, "bob/copy", 0)).await.unwrap();
    let copy: LogRange = f
        .call(
            Op::ReadLog,
            &ReadLog {
                capability: bob.clone(),
                agent: "bob/copy".into(),
                from: 0,
                to: u64::MAX,
            },
        )
        .await
        .unwrap();
    assert_eq!(copy.records, [record(0)]);
}
