//! The supervisor wakes an asleep agent when a letter arrives, and again after it slept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use l3m_core::duty::Duty;
use l3m_core::log::RecordBody;
use sequencer::{Supervisor, TaskLauncher, supervise};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asleep_agent_with_unread_mail_is_woken_each_time() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.spawn("quiet", 20).await;
    let provider = counting(
        "[[turn]]\ntext = \"first\"\n[[turn]]\ntext = \"second\"\n",
        Duration::ZERO,
    );
    let shutdown = CancellationToken::new();
    let launcher = TaskLauncher {
        bus: hub.bus.clone(),
        hub: hub.hub_id.clone(),
        credential: hub.key_for(&Duty::Host { subtree: None }),
        hub_root: hub.root(),
        config: config("idle_exit_secs = 1"),
        provider_factory: factory_of(provider.clone()),
        holder: "embedded".into(),
        shutdown: shutdown.clone(),
    };
    let sup = Supervisor {
        client: hub.client(Duty::Host { subtree: None }).await,
        launcher: Arc::new(launcher),
    };
    let task = tokio::spawn(supervise(sup, shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    hub.letter("demo", "one").await;
    wait_log(&hub, "demo", 20, |l| assistant_texts(l) == ["first"]).await;
    // Let it fall asleep (idle exit releases the lease), then write again.
    wait_log(&hub, "demo", 20, |_| true).await;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    hub.letter("demo", "two").await;
    wait_log(&hub, "demo", 20, |l| {
        assistant_texts(l) == ["first", "second"]
            && matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2);
    // An agent with no mail was never started: its Log is empty.
    assert!(hub.log("quiet").await.is_empty());
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
