//! Whole sessions over a real hubd on a real nats-server, with the scripted provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures_util::future::BoxFuture;
use l3m_core::effects::EffectClass;
use l3m_core::effects::{Footprint, Reversibility, ToolDecl};
use l3m_core::grant::{ForkFrom, SpawnRequest};
use l3m_core::log::{EventSource, RecordBody};
use l3m_core::mail::InboxEntry;
use l3m_core::names::Entity;
use l3m_ring::effects::Granted;
use l3m_tools::{Tool, ToolError, ToolOutput};
use l3m_wire::control::{ControlReply, ControlRequest, Controlled, OP_REWIND, OP_STATUS, Target};
use sequencer::model::{ModelError, ModelReply, ModelRequest, Provider, Script, Scripted};
use sequencer::{Exit, ProviderFactory, SequencerError, run_agent, run_agent_with};
use tokio_util::sync::CancellationToken;

const SESSION: &str = r#"
[[turn]]
text = "writing a"
[[turn.tool_use]]
name = "write_file"
input = { path = "workspace/a.txt", content = "one" }
[[turn.tool_use]]
name = "no_such_tool"
[[turn]]
text = "reading a"
[[turn.tool_use]]
name = "read_file"
input = { path = "workspace/a.txt" }
[[turn]]
text = "writing b"
[[turn.tool_use]]
name = "write_file"
input = { path = "workspace/b.txt", content = "two" }
[[turn]]
text = "done"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_tools_journals_a_letter_mid_call_and_ends_idle() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "please write two files").await;
    let provider = counting(SESSION, Duration::from_millis(300));
    let run = hub
        .run(
            "demo",
            config("idle_exit_secs = 2"),
            factory_of(provider.clone()),
        )
        .await;
    let task = tokio::spawn(run_agent(run, CancellationToken::new()));
    // A letter arriving while the first call is open is journaled at once.
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::CallStarted { .. }))
    })
    .await;
    hub.letter("demo", "also, hello").await;
    assert_eq!(task.await.unwrap().unwrap(), Exit::Idle);

    let log = hub.log("demo").await;
    check_log(&log);
    assert!(matches!(
        log[0].body,
        RecordBody::SystemPrompt {
            continues: false,
            ..
        }
    ));
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        unreachable!()
    };
    assert!(text.contains("write_file") && text.contains("- files: [\"workspace\"]"));
    assert_eq!(
        assistant_texts(&log),
        ["writing a", "reading a", "writing b", "done"]
    );
    assert_eq!(provider.requests.load(Ordering::SeqCst), 4);
    let letters: Vec<u64> = log
        .iter()
        .filter(|r| {
            matches!(
                &r.body,
                RecordBody::Event { source: EventSource::Letter { from, .. }, .. }
                    if *from == Entity::parse("human:alice").unwrap()
            )
        })
        .map(|r| r.seq)
        .collect();
    assert_eq!(letters.len(), 2, "{:?}", kinds(&log));
    let first_reply = log
        .iter()
        .position(|r| matches!(r.body, RecordBody::AssistantReply { .. }))
        .unwrap() as u64;
    assert!(
        letters[1] < first_reply,
        "the second letter was journaled while the first call was open"
    );
    // The unknown tool got an error result without running; the read saw the write.
    let results: Vec<(&str, bool)> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results
            .iter()
            .any(|(o, e)| *e && o.contains("no_such_tool"))
    );
    assert!(results.iter().any(|(o, e)| !*e && o.contains("one")));
    let writes: Vec<_> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult { effects, .. } if !effects.is_empty() => Some(effects),
            _ => None,
        })
        .collect();
    assert_eq!(writes.len(), 2);
    assert!(
        writes
            .iter()
            .all(|e| e[0].class == EffectClass::FsWrite && e[0].undo.is_some())
    );
    assert_eq!(
        read(&hub.acr("demo").join("workspace/a.txt")).unwrap(),
        b"one"
    );
    assert_eq!(
        read(&hub.acr("demo").join("workspace/b.txt")).unwrap(),
        b"two"
    );
    assert!(matches!(log.last().unwrap().body, RecordBody::TurnEnd));
    // Both letters were marked read after they were journaled.
    let inbox = hub
        .human()
        .await
        .read_inbox(&agent("demo"), 0)
        .await
        .unwrap();
    let marks = inbox
        .entries
        .iter()
        .filter(|e| matches!(e, InboxEntry::ReadMark(_)))
        .count();
    assert_eq!(marks, 2);

    // A second boot of a finished session journals nothing new and calls no model.
    let run = hub
        .run(
            "demo",
            config("idle_exit_secs = 1"),
            factory_of(provider.clone()),
        )
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::Idle
    );
    assert_eq!(hub.log("demo").await.len(), log.len());
    assert_eq!(provider.requests.load(Ordering::SeqCst), 4);
}

/// A tool that takes a while, to show the pass does not wait for it.
struct Slow;

impl Tool for Slow {
    fn decl(&self) -> ToolDecl {
        ToolDecl {
            name: "slow".into(),
            footprint: Footprint::of([EffectClass::Clock]),
            claims: Reversibility::ReadOnly,
        }
    }
    fn description(&self) -> &str {
        "waits two seconds"
    }
    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _input: serde_json::Value, _fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        std::thread::sleep(Duration::from_secs(2));
        Ok(ToolOutput::text("slept"))
    }
}

fn with_slow() -> Vec<Box<dyn Tool>> {
    let mut tools = l3m_tools::builtin();
    tools.push(Box::new(Slow));
    tools
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_is_journaled_while_a_slow_tool_runs() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "start").await;
    let script = "[[turn]]\ntext = \"sleeping\"\n[[turn.tool_use]]\nname = \"slow\"\n[[turn]]\ntext = \"awake\"\n";
    let provider = counting(script, Duration::ZERO);
    let run = hub
        .run("demo", config("idle_exit_secs = 2"), factory_of(provider))
        .await;
    let task = tokio::spawn(run_agent_with(run, with_slow, CancellationToken::new()));
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
    })
    .await;
    hub.letter("demo", "while you sleep").await;
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .filter(|r| matches!(r.body, RecordBody::Event { .. }))
            .count()
            == 2
    })
    .await;
    // The running sequencer answers health on the bus: its agent, its appends, the tool.
    let health = l3m_wire::health::ask(
        hub.hub.bus.as_ref(),
        &hub.hub.subjects,
        l3m_wire::subjects::Service::Sequencer,
        Duration::from_secs(5),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(health.ok(), "{health:?}");
    assert!(health.checks[0].detail.starts_with("demo:"), "{health:?}");
    assert!(health.gauges["appends_total"] >= 2, "{health:?}");
    assert!(
        health.gauges["records_appended_total"] >= health.gauges["appends_total"],
        "{health:?}"
    );
    let log = hub.log("demo").await;
    assert!(
        !log.iter()
            .any(|r| matches!(r.body, RecordBody::ToolResult { .. })),
        "the letter was journaled before the slow tool finished: {:?}",
        kinds(&log)
    );
    assert_eq!(
        health.gauges["activities_running"], 1,
        "the slow tool ran when health was asked: {health:?}"
    );
    assert_eq!(task.await.unwrap().unwrap(), Exit::Idle);
    let log = hub.log("demo").await;
    check_log(&log);
    assert_eq!(assistant_texts(&log), ["sleeping", "awake"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sequencer_is_refused_and_a_rogue_writer_stops_the_first() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let script = "[[turn]]\ntext = \"hi\"\n[[turn]]\ntext = \"again\"\n";
    let provider = counting(script, Duration::ZERO);
    let shutdown = CancellationToken::new();
    let first = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    let task = tokio::spawn(run_agent(first, shutdown.clone()));
    wait_log(&hub, "demo", 20, |l| !l.is_empty()).await;

    let mut second = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    second.holder = "test:second".into();
    let refused = run_agent(second, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, SequencerError::LeaseHeld { message, .. } if message.contains("test:demo")),
        "{refused}"
    );

    // A writer that ignores the lease appends behind the sequencer's back: the sequencer's next
    // append loses the compare-and-swap, and it stops rather than interleave.
    let rogue = hub.sequencer_client("demo").await;
    let read = rogue.read_log_from(&agent("demo"), 0).await.unwrap();
    let record = l3m_core::log::Record {
        seq: read.len,
        at_ms: 1,
        body: RecordBody::TurnEnd,
    };
    rogue
        .append_log(
            &agent("demo"),
            read.tip.as_deref(),
            std::slice::from_ref(&record),
        )
        .await
        .unwrap();
    hub.letter("demo", "wake up").await;
    let stopped = task.await.unwrap().unwrap_err();
    assert!(
        matches!(stopped, SequencerError::LostWriter { .. }),
        "{stopped}"
    );
    let log = hub.log("demo").await;
    assert_eq!(log.len() as u64, read.len + 1, "{:?}", kinds(&log));
    assert_eq!(log.last().unwrap(), &record);
    assert_eq!(provider.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hubd_restart_under_a_running_agent_loses_and_doubles_nothing() {
    let mut hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let script = "[[turn]]\ntext = \"hi\"\n[[turn]]\ntext = \"again\"\n";
    let provider = counting(script, Duration::ZERO);
    let shutdown = CancellationToken::new();
    let run = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    hub.letter("demo", "before the restart").await;
    wait_log(&hub, "demo", 20, |l| assistant_texts(l) == ["hi"]).await;

    hub.hub.restart_hubd().await;
    hub.letter("demo", "after the restart").await;

    // The sequencer kept its lease and its writer: it answers the letter in the same Log.
    wait_log(&hub, "demo", 20, |l| assistant_texts(l) == ["hi", "again"]).await;
    assert!(!task.is_finished(), "the sequencer stopped at the restart");
    let log = hub.log("demo").await;
    check_log(&log);
    assert_eq!(letters_journaled(&log), 2, "{:?}", kinds(&log));
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2);
    // Control requests vouched by the new hubd are taken: the sequencer checks them against
    // the key of its reopened session.
    let ControlReply::Status(status) = control(&hub, &ControlRequest::Status).await else {
        panic!("not a status")
    };
    assert_eq!(status.next_seq, log.len() as u64);
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_fuel_stops_before_any_call_past_the_budget_even_across_boots() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 2).await;
    hub.letter("demo", "tick forever").await;
    let tick = "[[turn]]\ntext = \"tick\"\n[[turn.tool_use]]\nname = \"now\"\n";
    let provider = counting(&tick.repeat(6), Duration::ZERO);
    let run = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::OutOfFuel
    );
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2);
    hub.letter("demo", "more please").await;
    let run = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::OutOfFuel
    );
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2);
    let log = hub.log("demo").await;
    check_log(&log);
    let started = log
        .iter()
        .filter(|r| matches!(r.body, RecordBody::CallStarted { .. }))
        .count();
    assert_eq!(started, 2);
    assert!(matches!(
        log.last().unwrap().body,
        RecordBody::OutOfFuel { .. }
    ));
}

const EDITS: &str = r#"
[[turn]]
text = "v1"
[[turn.tool_use]]
name = "write_file"
input = { path = "workspace/a.txt", content = "v1" }
[[turn]]
text = "v2"
[[turn.tool_use]]
name = "write_file"
input = { path = "workspace/a.txt", content = "v2\u0000binary" }
[[turn]]
text = "done"
"#;

/// Sends `request` to demo's sequencer as the human, with hubd's voucher.
async fn control(hub: &TestHub, request: &ControlRequest) -> ControlReply {
    let human = hub.human().await;
    l3m_wire::control::call(
        &human,
        Target::Sequencer,
        &agent("demo"),
        request,
        Duration::from_secs(20),
    )
    .await
    .unwrap()
}

/// A control request with no voucher, as a party that may only publish would send it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Bare {
    request: ControlRequest,
}

impl l3m_wire::envelope::Message for Bare {
    const KIND: &'static str = "sequencer.control";
}

/// Sends `body` to demo's `op` subject as any party that may publish there would.
async fn control_raw<M: l3m_wire::envelope::Message>(
    hub: &TestHub,
    op: &str,
    body: &M,
) -> Result<ControlReply, l3m_wire::reply::RemoteError> {
    let subjects = l3m_wire::subjects::Subjects::new(hub.hub_id.clone());
    let subject = subjects.agent_request(
        l3m_wire::subjects::Service::Sequencer,
        &l3m_wire::subjects::Operation::parse(op).unwrap(),
        &agent("demo"),
    );
    l3m_wire::typed::call(
        hub.bus.as_ref(),
        &subject,
        body,
        Duration::from_secs(20),
        &Default::default(),
    )
    .await
    .unwrap()
}

fn result_seqs(log: &[l3m_core::log::Record]) -> Vec<u64> {
    log.iter()
        .filter(|r| matches!(r.body, RecordBody::ToolResult { .. }))
        .map(|r| r.seq)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_restores_files_byte_exact_online_and_offline() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let file = hub.acr("demo").join("workspace/a.txt");
    std::fs::write(&file, b"orig\n").unwrap();
    hub.letter("demo", "edit").await;
    let provider = counting(EDITS, Duration::ZERO);
    let shutdown = CancellationToken::new();
    let run = hub.run("demo", config(""), factory_of(provider)).await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    wait_log(&hub, "demo", 20, |l| {
        matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    assert_eq!(read(&file).unwrap(), b"v2\0binary");
    let log = hub.log("demo").await;
    let results = result_seqs(&log);
    let ControlReply::Status(status) = control(&hub, &ControlRequest::Status).await else {
        panic!("not a status")
    };
    assert_eq!(status.next_seq, log.len() as u64);
    assert!(!status.live);
    // Publishing on the control subject is not enough: a voucher for another op, a used one,
    // or none at all is refused before the writer sees anything; a sibling's sequencer gets
    // no voucher from hubd.
    let human = hub.human().await;
    let status_voucher = human
        .vouch(&agent("demo"), &ControlRequest::Status)
        .await
        .unwrap();
    let rewind = ControlRequest::Rewind {
        to: 0,
        reason: "a stranger".into(),
    };
    let misused = Controlled {
        vouched: status_voucher.clone(),
        request: rewind.clone(),
    };
    let refused = control_raw(&hub, OP_REWIND, &misused).await.unwrap_err();
    assert!(
        refused.message.contains("not for this request"),
        "{}",
        refused.message
    );
    let spent = Controlled {
        vouched: status_voucher,
        request: ControlRequest::Status,
    };
    control_raw(&hub, OP_STATUS, &spent).await.unwrap();
    let replayed = control_raw(&hub, OP_STATUS, &spent).await.unwrap_err();
    assert!(
        replayed.message.contains("used before"),
        "{}",
        replayed.message
    );
    let unvouched = control_raw(
        &hub,
        OP_REWIND,
        &Bare {
            request: rewind.clone(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(unvouched.code, l3m_wire::reply::ErrorCode::Malformed);
    hub.spawn("other", 5).await;
    let sibling = hub.sequencer_client("other").await;
    let denied = sibling.vouch(&agent("demo"), &rewind).await.unwrap_err();
    assert_eq!(denied.code(), Some(l3m_wire::reply::ErrorCode::Refused));
    assert_eq!(
        hub.log("demo").await.len(),
        log.len(),
        "nothing was journaled"
    );

    // Online: back to just after the first write's result.
    let reply = control(
        &hub,
        &ControlRequest::Rewind {
            to: results[0],
            reason: "undo v2".into(),
        },
    )
    .await;
    assert!(matches!(reply, ControlReply::Done { .. }), "{reply:?}");
    wait_log(&hub, "demo", 20, |l| {
        l.iter().any(|r| {
            matches!(&r.body, RecordBody::Event { text, .. } if text.contains("restored 1 file edit of workspace/a.txt"))
        })
    })
    .await;
    assert_eq!(read(&file).unwrap(), b"v1");
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);

    // Offline: back to before the first write started.
    let first_start = log
        .iter()
        .find(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
        .unwrap()
        .seq;
    let client = hub.sequencer_client("demo").await;
    sequencer::rewind_offline(
        &client,
        &hub.forest(),
        &agent("demo"),
        first_start - 1,
        "undo all",
    )
    .await
    .unwrap();
    assert_eq!(read(&file).unwrap(), b"orig\n");
    let log = hub.log("demo").await;
    check_log(&log);
    let rewinds = log
        .iter()
        .filter(|r| matches!(r.body, RecordBody::Rewind { .. }))
        .count();
    assert_eq!(rewinds, 2);
    // The view is back at the first reply: its write is shown as rewound, nothing after it.
    let view = l3m_core::view::view(&log);
    let texts: Vec<&str> = view
        .messages
        .iter()
        .filter_map(|m| match m {
            l3m_core::view::Message::Assistant { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["v1"], "{view:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_is_seeded_by_hubd_with_the_prefix_and_closes_what_was_open() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "edit").await;
    let provider = counting(EDITS, Duration::ZERO);
    let run = hub
        .run("demo", config("idle_exit_secs = 1"), factory_of(provider))
        .await;
    run_agent(run, CancellationToken::new()).await.unwrap();
    let log = hub.log("demo").await;
    let at = log
        .iter()
        .find(|r| matches!(r.body, RecordBody::CallStarted { .. }))
        .unwrap()
        .seq;
    let human = hub.human().await;
    let fork = |grant| SpawnRequest {
        child: agent("copy"),
        grant,
        loan: fuel(5),
        driven: false,
        persona: None,
        fork: Some(ForkFrom {
            source: agent("demo"),
            at,
        }),
    };
    // A fork wider than its source is refused by hubd before anything is written.
    let wider = grant("files = [\"workspace\"]\nspawn = \"persist\"");
    let refused = human.spawn(fork(wider)).await.unwrap_err();
    assert!(refused.to_string().contains("spawn"), "{refused}");
    let agents = human.list_agents().await.unwrap().agents;
    assert!(agents.iter().all(|a| a.name != "copy"), "{agents:?}");
    human
        .spawn(fork(grant("files = [\"workspace\"]")))
        .await
        .unwrap();
    let copy = hub.log("copy").await;
    assert_eq!(&copy[..=at as usize], &log[..=at as usize]);
    assert!(matches!(
        &copy[at as usize + 1].body,
        RecordBody::Interrupted {
            closed_call: Some(_),
            ..
        }
    ));
    check_log(&copy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_closes_a_running_tool_and_its_late_result_is_dropped() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "start").await;
    let script = "[[turn]]\ntext = \"sleeping\"\n[[turn.tool_use]]\nname = \"slow\"\n[[turn]]\ntext = \"never\"\n";
    let provider = counting(script, Duration::ZERO);
    let run = hub
        .run(
            "demo",
            config("idle_exit_secs = 3"),
            factory_of(provider.clone()),
        )
        .await;
    let task = tokio::spawn(run_agent_with(run, with_slow, CancellationToken::new()));
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
    })
    .await;
    let reply = control(
        &hub,
        &ControlRequest::Interrupt {
            reason: "human:alice pressed escape".into(),
        },
    )
    .await;
    assert!(matches!(reply, ControlReply::Done { .. }), "{reply:?}");
    assert_eq!(task.await.unwrap().unwrap(), Exit::Idle);
    let log = hub.log("demo").await;
    check_log(&log);
    assert!(log.iter().any(|r| matches!(
        &r.body,
        RecordBody::Interrupted { closed_tools, reason, .. }
            if closed_tools.len() == 1 && reason.contains("escape")
                && reason.contains("(asked by human:alice)")
    )));
    assert!(
        !log.iter()
            .any(|r| matches!(r.body, RecordBody::ToolResult { .. })),
        "the slow tool's late result was dropped: {:?}",
        kinds(&log)
    );
    assert_eq!(assistant_texts(&log), ["sleeping"]);
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1);
}

const ASK_THE_TIME: &str = r#"
[[turn]]
text = "checking the clock"
[[turn.tool_use]]
name = "now"
[[turn]]
text = "done"
"#;

/// Answers from a script, noting the tools each request offers; the first call is held until
/// the test releases it.
#[derive(Debug)]
struct Noting {
    inner: Scripted,
    held: tokio::sync::Semaphore,
    offered: Mutex<Vec<Vec<String>>>,
}

impl Provider for Noting {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            let calls = {
                let mut offered = self.offered.lock().unwrap();
                offered.push(request.tools.iter().map(|t| t.name.clone()).collect());
                offered.len()
            };
            if calls == 1 {
                let _released = self.held.acquire().await.unwrap();
            }
            self.inner.complete(request).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_widened_during_a_call_offers_its_tools_from_the_next_request() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    hub.letter("demo", "what time is it?").await;
    let provider = Arc::new(Noting {
        inner: Scripted::new(Script::parse(Path::new("time.toml"), ASK_THE_TIME).unwrap()),
        held: tokio::sync::Semaphore::new(0),
        offered: Mutex::default(),
    });
    let p = provider.clone();
    let factory: ProviderFactory = Arc::new(move |_: &str| {
        let p: Arc<dyn Provider> = p.clone();
        Ok(p)
    });
    let run = hub.run("demo", config("idle_exit_secs = 1"), factory).await;
    let task = tokio::spawn(run_agent(run, CancellationToken::new()));
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::CallStarted { .. }))
    })
    .await;
    hub.human()
        .await
        .regrant(
            &agent("demo"),
            grant("files = [\"workspace\"]\nspawn = \"persist\""),
        )
        .await
        .unwrap();
    wait_log(&hub, "demo", 20, |l| {
        l.iter()
            .any(|r| matches!(r.body, RecordBody::GrantChange { .. }))
    })
    .await;
    provider.held.add_permits(1);
    assert_eq!(task.await.unwrap().unwrap(), Exit::Idle);
    let offered = provider.offered.lock().unwrap().clone();
    assert_eq!(offered.len(), 2, "{offered:?}");
    let has = |tools: &[String], name: &str| tools.iter().any(|t| t == name);
    assert!(!has(&offered[0], "spawn_agent"), "{offered:?}");
    assert!(has(&offered[1], "spawn_agent"), "{offered:?}");
    assert!(has(&offered[1], "now"), "{offered:?}");
    check_log(&hub.log("demo").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_remote_gets_its_url_from_the_settings_or_the_agent_does_not_boot() {
    let push = "files = [\"workspace\"]\n[git-push]\norigin = [\"refs/heads/l3m/\"]\n";
    let hub = TestHub::start_bound(&format!("spawn = \"persist\"\n{push}")).await;
    let human = hub.human().await;
    human
        .spawn(SpawnRequest {
            child: agent("pusher"),
            grant: grant(push),
            loan: fuel(5),
            driven: false,
            persona: None,
            fork: None,
        })
        .await
        .unwrap();
    let script = "[[turn]]\ntext = \"nothing to push yet\"\n";

    // The settings give `origin` no URL: the agent cannot be given a push token, and says so.
    let run = hub
        .run(
            "pusher",
            config("idle_exit_secs = 1"),
            factory_of(counting(script, Duration::ZERO)),
        )
        .await;
    let refused = run_agent(run, CancellationToken::new()).await.unwrap_err();
    assert!(refused.to_string().contains("origin"), "{refused}");

    let settings = human.read_settings().await.unwrap();
    let text = format!(
        "{}[remotes]\norigin = \"file:///srv/app.git\"\n",
        settings.text
    );
    human.update_settings(&text, &settings.tip).await.unwrap();
    hub.letter("pusher", "hello").await;
    let run = hub
        .run(
            "pusher",
            config("idle_exit_secs = 1"),
            factory_of(counting(script, Duration::ZERO)),
        )
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::Idle
    );
    let log = hub.log("pusher").await;
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        panic!("the Log starts with the system prompt");
    };
    assert!(
        text.contains("git_push"),
        "the push tool is offered: {text}"
    );
}

/// A model whose reply would not fit a record (a 200 kB tool input) leaves a journaled, named
/// failure and a live sequencer; it spends the one call, and the next wake one more, not a
/// crash-loop of calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_model_reply_is_a_journaled_failure_and_the_sequencer_lives() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let script = format!(
        "[[turn]]\ntext = \"here\"\n[[turn.tool_use]]\nname = \"write_file\"\ninput = {{ path = \"workspace/big\", content = \"{}\" }}\n",
        "z".repeat(200_000)
    );
    let provider = counting(&script, Duration::ZERO);
    let shutdown = CancellationToken::new();
    let run = hub
        .run("demo", config(""), factory_of(provider.clone()))
        .await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    let failed = |l: &[l3m_core::log::Record]| {
        l.iter()
            .filter(|r| {
                matches!(&r.body, RecordBody::CallFailed { error, retryable: false, .. }
                    if error.contains(&format!("limit of {} bytes", sequencer::boundary::MAX_REPLY)))
            })
            .count()
    };
    let told = |l: &[l3m_core::log::Record]| {
        l.iter()
            .filter(|r| {
                matches!(&r.body, RecordBody::Event { text, .. }
                    if text.starts_with("(l3m) the model's reply of"))
            })
            .count()
    };
    hub.letter("demo", "write it").await;
    wait_log(&hub, "demo", 20, |l| failed(l) == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = || provider.requests.load(Ordering::SeqCst);
    assert_eq!(calls(), 2, "told once, asked again");
    assert_eq!(told(&hub.log("demo").await), 1);
    hub.letter("demo", "again").await;
    wait_log(&hub, "demo", 20, |l| failed(l) == 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls(), 3, "one call for the next wake");
    assert_eq!(
        told(&hub.log("demo").await),
        1,
        "a repeat is not told again"
    );
    assert!(!task.is_finished(), "the sequencer keeps running");
    assert!(read(&hub.acr("demo").join("workspace/big")).is_none());
    check_log(&hub.log("demo").await);
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);
}

/// A tool result past the limit reaches the Log cut, with a note saying how to get the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_tool_output_is_cut_with_a_note() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    std::fs::write(
        hub.acr("demo").join("workspace/big.txt"),
        "line\n".repeat(180_000),
    )
    .unwrap();
    let script = "[[turn]]\ntext = \"reading\"\n[[turn.tool_use]]\nname = \"read_file\"\ninput = { path = \"workspace/big.txt\" }\n[[turn]]\ntext = \"done\"\n";
    let shutdown = CancellationToken::new();
    let run = hub
        .run(
            "demo",
            config(""),
            factory_of(counting(script, Duration::ZERO)),
        )
        .await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    hub.letter("demo", "read it").await;
    wait_log(&hub, "demo", 20, |l| {
        matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    let log = hub.log("demo").await;
    let output = log
        .iter()
        .find_map(|r| match &r.body {
            RecordBody::ToolResult { output, .. } => Some(output.clone()),
            _ => None,
        })
        .unwrap();
    assert!(output.len() <= sequencer::boundary::MAX_TOOL_OUTPUT);
    assert!(output.starts_with("line\nline\n"));
    assert!(
        output.contains("(l3m) output cut"),
        "{}",
        &output[output.len() - 200..]
    );
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);
}
