//! The supervisor wakes an asleep agent when a letter arrives, and again after it slept; as
//! the host of its subtree it rewinds an asleep agent on a vouched request only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use l3m_core::log::RecordBody;
use l3m_wire::control::{self, ControlReply, ControlRequest, Controlled, Target};
use l3m_wire::subjects::{Operation, Service};
use sequencer::supervise;
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
    let sup = hub
        .task_supervisor(
            config("idle_exit_secs = 1"),
            factory_of(provider.clone()),
            "embedded",
            &shutdown,
        )
        .await;
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

/// A sequencer host away from the hub keeps clones in its own forest; once an agent is
/// retired, the host's next sweep removes its clone (the hub keeps its branches), and leaves a
/// live agent's alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_agents_clone_leaves_another_hosts_forest_at_its_sweep() {
    let hub = TestHub::start().await;
    hub.spawn("gone", 5).await;
    hub.spawn("kept", 5).await;
    let elsewhere = tempfile::tempdir().unwrap();
    for name in ["gone", "kept"] {
        let client = hub.sequencer_client(name).await;
        sequencer::acr::Acr::at(elsewhere.path(), &agent(name))
            .ready(&client)
            .await
            .unwrap();
    }
    let clone = |name: &str| elsewhere.path().join(name);
    hub.human().await.retire(&agent("gone")).await.unwrap();
    assert!(
        clone("gone").join("self.git").is_dir(),
        "the hub host's hubd does not reach here"
    );

    let shutdown = CancellationToken::new();
    let mut sup = hub
        .task_supervisor(
            config(""),
            factory_of(counting("", Duration::ZERO)),
            "far:1",
            &shutdown,
        )
        .await;
    sup.host.forest = elsewhere.path().to_owned();
    let task = tokio::spawn(supervise(sup, shutdown.clone()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while clone("gone").join("self.git").exists() || clone("gone").join("self").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the retired agent's clone stayed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(clone("kept").join("self.git").is_dir());
    assert!(clone("kept").join("self/workspace").is_dir());
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

/// A host that dies holding an agent's lease (it never renews nor releases it) keeps the agent
/// from being woken only until the lease lapses: hubd tells the site, and the supervisor of
/// another host that may run the agent takes it over and answers the mail that waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_hosts_agent_is_taken_over_when_its_lease_lapses() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let dead = hub.sequencer_client("demo").await;
    dead.acquire_lease(&agent("demo"), "dead-host:1", Duration::from_millis(1_500))
        .await
        .unwrap();
    let provider = counting("[[turn]]\ntext = \"taken over\"\n", Duration::ZERO);
    let shutdown = CancellationToken::new();
    let sup = hub
        .task_supervisor(
            config(""),
            factory_of(provider.clone()),
            "live-host:2",
            &shutdown,
        )
        .await;
    let task = tokio::spawn(supervise(sup, shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The letter arrives while the dead host still holds the lease: nobody may wake the agent.
    hub.letter("demo", "are you there?").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(hub.log("demo").await.is_empty(), "woken under a live lease");
    // Its lease lapses; no new letter comes, yet the agent is taken over and answers.
    wait_log(&hub, "demo", 20, |l| assistant_texts(l) == ["taken over"]).await;
    let tree = hub.human().await.list_agents().await.unwrap();
    let demo = tree.agents.iter().find(|a| a.name == "demo").unwrap();
    assert_eq!(demo.holder.as_deref(), Some("live-host:2"));
    assert!(
        dead.renew_lease(&agent("demo"), 1).await.is_err(),
        "the dead host's lease is gone"
    );
    check_log(&hub.log("demo").await);
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

/// A sequencer killed mid-turn, after it journaled its letter and marked it read, leaves no
/// unread mail behind: what wakes the agent once the lease lapses is the turn its Log left
/// under way. The host that takes it over closes the dead call at boot and finishes the turn,
/// with the letter journaled once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_left_under_way_by_a_killed_sequencer_is_finished_on_another_host() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let dir = hub.dir.path();
    std::fs::write(
        dir.join("slow.toml"),
        "[[turn]]\ntext = \"never said\"\ndelay_ms = 60000\n",
    )
    .unwrap();
    let config_file = dir.join("dead-host.toml");
    std::fs::write(
        &config_file,
        "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\n\
         script = \"slow.toml\"\n[sequencer]\nlease_ttl_secs = 0.5\n",
    )
    .unwrap();
    hub.letter("demo", "are you there?").await;
    let mut dead = launch_sequencer(&hub, &config_file, "demo");
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::CallStarted { .. }))
    })
    .await;
    let human = hub.human().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !(human.read_inbox(&agent("demo"), 0).await.unwrap().entries)
        .iter()
        .any(|e| matches!(e, l3m_core::mail::InboxEntry::ReadMark(_)))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the letter was never marked read"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dead.kill().unwrap();
    dead.wait().unwrap();

    let provider = counting("[[turn]]\ntext = \"taken over\"\n", Duration::ZERO);
    let shutdown = CancellationToken::new();
    let sup = hub
        .task_supervisor(
            config("idle_exit_secs = 1"),
            factory_of(provider.clone()),
            "live-host:2",
            &shutdown,
        )
        .await;
    let task = tokio::spawn(supervise(sup, shutdown.clone()));
    wait_log(&hub, "demo", 20, |l| {
        assistant_texts(l) == ["taken over"]
            && matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    let log = hub.log("demo").await;
    check_log(&log);
    assert_eq!(letters_journaled(&log), 1, "the letter is journaled once");
    assert!(
        log.iter()
            .any(|r| matches!(r.body, RecordBody::Interrupted { .. })),
        "boot closed the dead call"
    );
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1);
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

/// The host rewinds an asleep agent on the human's voucher — under its own credential, never
/// the human's — and refuses what is not its to do: an agent outside its subtree, a voucher
/// spent on another agent's subject, an interrupt of an agent that does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_rewinds_an_asleep_agent_on_a_vouched_request_only() {
    let hub = TestHub::start().await;
    hub.spawn_with("demo", 20, "files = [\"workspace\"]").await;
    hub.letter("demo", "go").await;
    let script = write_todo("write", "one") + DONE;
    let shutdown = CancellationToken::new();
    let run = hub
        .run(
            "demo",
            config(""),
            factory_of(counting(&script, Duration::ZERO)),
        )
        .await;
    let task = tokio::spawn(sequencer::run_agent(run, shutdown.clone()));
    wait_log(&hub, "demo", 30, |l| {
        matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    let todo = hub.acr("demo").join("workspace/todo.md");
    assert_eq!(read(&todo), Some(b"one".to_vec()));
    let before_write = hub
        .log("demo")
        .await
        .iter()
        .find(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
        .unwrap()
        .seq
        - 1;

    let stop = CancellationToken::new();
    sequencer::serve_host(hub.host_control(None).await, stop.clone())
        .await
        .unwrap();
    let human = hub.human().await;
    let ask = |request: ControlRequest| {
        let human = human.clone();
        async move {
            control::call(
                &human,
                Target::Host,
                &agent("demo"),
                &request,
                Duration::from_secs(20),
            )
            .await
        }
    };
    let ControlReply::Forecast(forecast) = ask(ControlRequest::Forecast { to: before_write })
        .await
        .unwrap()
    else {
        panic!("a forecast answers a forecast");
    };
    assert_eq!(forecast.paths, ["workspace/todo.md"]);
    let refused = ask(ControlRequest::Interrupt { reason: "x".into() })
        .await
        .unwrap();
    assert!(
        matches!(&refused, ControlReply::Refused { reason } if reason.contains("no sequencer runs demo")),
        "{refused:?}"
    );

    let reply = ask(ControlRequest::Rewind {
        to: before_write,
        reason: "undo".into(),
    })
    .await
    .unwrap();
    assert!(matches!(reply, ControlReply::Done { .. }), "{reply:?}");
    assert_eq!(read(&todo), None, "the write is undone");
    let log = hub.log("demo").await;
    assert!(
        log.iter()
            .any(|r| matches!(&r.body, RecordBody::Rewind { reason, .. }
            if reason.contains("asked by human:"))),
        "the Log names who asked"
    );

    // A voucher for demo sent on another agent's host subject is refused, as is any request
    // to a host whose subtree does not hold the agent.
    hub.spawn("other", 5).await;
    let vouched = human
        .vouch(&agent("demo"), &ControlRequest::Forecast { to: 0 })
        .await
        .unwrap();
    let subject = human.subjects().agent_request(
        Service::Host,
        &Operation::parse("forecast").unwrap(),
        &agent("other"),
    );
    let misrouted = l3m_wire::typed::call::<_, ControlReply>(
        human.bus().as_ref(),
        &subject,
        &Controlled {
            vouched,
            request: ControlRequest::Forecast { to: 0 },
        },
        Duration::from_secs(20),
        &l3m_wire::envelope::Limits::default(),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(
        misrouted.message.contains("belongs on"),
        "{}",
        misrouted.message
    );
    stop.cancel();

    let narrow = CancellationToken::new();
    sequencer::serve_host(hub.host_control(Some("other")).await, narrow.clone())
        .await
        .unwrap();
    let outside = ask(ControlRequest::Forecast { to: 0 }).await.unwrap_err();
    assert!(
        outside.to_string().contains("outside this host's subtree"),
        "{outside}"
    );
    narrow.cancel();
}

/// A host's metrics endpoint shows each agent its sequencers run, labelled by name: the
/// sequencer's own appends and checks, gathered on the bus, beside the host's count of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_metrics_show_each_running_agent_by_name() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let provider = counting("[[turn]]\ntext = \"first\"\n", Duration::ZERO);
    let shutdown = CancellationToken::new();
    let sup = hub
        .task_supervisor(
            config("idle_exit_secs = 60"),
            factory_of(provider),
            "embedded",
            &shutdown,
        )
        .await;
    let meter = std::sync::Arc::new(sequencer::HostMeter::new());
    let shown = sequencer::HostShown(std::sync::Arc::clone(&meter));
    let bound = l3m_daemon::metrics::serve("127.0.0.1:0".parse().unwrap(), shown, shutdown.clone())
        .await
        .unwrap();
    let task = tokio::spawn(sequencer::supervise_metered(sup, meter, shutdown.clone()));
    hub.letter("demo", "one").await;
    wait_log(&hub, "demo", 20, |l| assistant_texts(l) == ["first"]).await;
    let name = agent("demo").to_string();
    let appends = format!("l3m_sequencer_appends_total{{agent=\"{name}\"}} ");
    let mut text = String::new();
    for _ in 0..60 {
        let (status, body) = tokio::task::spawn_blocking(move || {
            l3m_daemon::metrics::scrape(bound, "/metrics").unwrap()
        })
        .await
        .unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        text = body;
        if text.contains(&appends) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let sample = |prefix: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(prefix))?;
        line.rsplit_once(' ')?.1.parse().ok()
    };
    assert!(sample(&appends).is_some_and(|n| n >= 1), "{text}");
    assert_eq!(sample("l3m_host_sequencers_running "), Some(1), "{text}");
    let check = format!("l3m_sequencer_check_ok{{agent=\"{name}\",check=\"model\"}} ");
    assert_eq!(sample(&check), Some(1), "{text}");
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
