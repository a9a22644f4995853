//! Vigils end to end: an agent arms one with its `watch` tool; hubd fires it; a running
//! sequencer hears its chain move and journals the event itself, and an asleep agent is woken
//! for it by its host's supervisor (`wakes_iff_asleep`). Each fired vigil is one event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use l3m_core::log::{EventSource, Record, RecordBody};
use l3m_wire::hubd::tree::AgentLife;
use sequencer::{Exit, run_agent, supervise};
use tokio_util::sync::CancellationToken;

/// Arms a deadline `secs` from now, then waits; a third turn answers the vigil.
fn script(secs: u64) -> String {
    format!(
        "[[turn]]\ntext = \"arming\"\n[[turn.tool_use]]\nname = \"watch\"\n\
         input = {{ fact = \"deadline\", in_secs = {secs} }}\n\
         [[turn]]\ntext = \"armed; waiting\"\n\
         [[turn]]\ntext = \"the moment came\"\n"
    )
}

/// The events a fired vigil became.
fn vigil_events(log: &[Record]) -> Vec<(&str, &str)> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::Event { id, source, text } if id.as_str().starts_with("vigil-") => {
                assert_eq!(*source, EventSource::Deadline, "{text}");
                Some((id.as_str(), text.as_str()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_agent_hears_its_vigil_fire_without_being_woken() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "tell me in a second").await;
    let provider = counting(&script(1), Duration::ZERO);
    let run = hub
        .run(
            "demo",
            config("idle_exit_secs = 4"),
            factory_of(provider.clone()),
        )
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::Idle
    );
    let log = hub.log("demo").await;
    check_log(&log);
    let results: Vec<_> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert!(
        !results[0].1 && results[0].0.starts_with("armed vigil v1"),
        "{results:?}"
    );
    let events = vigil_events(&log);
    assert_eq!(events.len(), 1, "{:?}", kinds(&log));
    assert_eq!(events[0].0, "vigil-v1");
    assert!(events[0].1.contains("the moment came"), "{}", events[0].1);
    assert_eq!(
        assistant_texts(&log),
        ["arming", "armed; waiting", "the moment came"]
    );
    assert_eq!(provider.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asleep_agent_is_woken_once_by_its_vigil() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let provider = counting(&script(3), Duration::ZERO);
    let shutdown = CancellationToken::new();
    let sup = hub
        .task_supervisor(
            config("idle_exit_secs = 1"),
            factory_of(provider.clone()),
            "host:1",
            &shutdown,
        )
        .await;
    let task = tokio::spawn(supervise(sup, shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    hub.letter("demo", "tell me in three seconds").await;
    // It arms the vigil, ends its turn and falls asleep (idle exit) before the vigil fires.
    wait_log(&hub, "demo", 20, |l| {
        assistant_texts(l) == ["arming", "armed; waiting"]
    })
    .await;
    let human = hub.human().await;
    let asleep = || async {
        let tree = human.list_agents().await.unwrap();
        tree.agents
            .iter()
            .any(|a| a.name == "demo" && a.life == AgentLife::Asleep)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !asleep().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "it never fell asleep"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        assistant_texts(&hub.log("demo").await).len(),
        2,
        "asleep before it fired"
    );
    wait_log(&hub, "demo", 20, |l| {
        assistant_texts(l).len() == 3
            && matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    let log = hub.log("demo").await;
    check_log(&log);
    assert_eq!(vigil_events(&log).len(), 1);
    // Asleep again with the vigil journaled: nothing wakes it a second time.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(provider.requests.load(Ordering::SeqCst), 3);
    assert_eq!(hub.log("demo").await.len(), log.len());
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
