//! The `build` and `run` tools over a real hubd and nats-server with no builder or runner
//! behind them (the end-to-end run with the real engine is `tests/builds`): a service that is
//! not running is a typed error result the model reads, and a build open when its sequencer
//! stops is closed at the next boot as an interrupt would close it, never sent again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use l3m_core::build::ArtifactDigest;
use l3m_core::log::RecordBody;
use l3m_wire::build::OP_BUILD;
use l3m_wire::subjects::{Operation, Service};
use sequencer::{Exit, SequencerError, run_agent};
use tokio_util::sync::CancellationToken;

const BOUND: &str = "files = [\"workspace\"]\nbuild = true\nrun = true\nspawn = \"persist\"";
const GRANT: &str = "files = [\"workspace\"]\nbuild = true\nrun = true";

fn tool_results(log: &[l3m_core::log::Record]) -> Vec<(String, bool)> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output, is_error, ..
            } => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_or_run_with_no_service_running_is_a_typed_error_result_the_model_reads() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 5, GRANT).await;
    hub.letter("maker", "build it").await;
    let script = format!(
        "[[turn]]\ntext = \"building\"\n[[turn.tool_use]]\nname = \"build\"\n\
         input = {{ source = \"workspace\", image = \"img\", command = [\"make\"] }}\n\
         [[turn.tool_use]]\nname = \"run\"\n\
         input = {{ artifact = \"{}\", image = \"img\", command = [\"/artifact/app\"] }}\n\
         [[turn]]\ntext = \"done\"\n",
        ArtifactDigest::from_bytes([7; 32]).as_str()
    );
    let provider = counting(&script, Duration::ZERO);
    let run = hub
        .run("maker", config("idle_exit_secs = 2"), factory_of(provider))
        .await;
    assert_eq!(
        run_agent(run, CancellationToken::new()).await.unwrap(),
        Exit::Idle
    );
    let log = hub.log("maker").await;
    check_log(&log);
    let results = tool_results(&log);
    assert_eq!(results.len(), 2, "{results:?}");
    for ((output, is_error), service) in results.iter().zip(["builder", "runner"]) {
        assert!(*is_error, "{output}");
        assert!(
            output.contains(&format!("the {service} could not be reached"))
                && output.contains("no service is listening"),
            "{output}"
        );
    }
    assert_eq!(assistant_texts(&log), ["building", "done"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_open_when_its_sequencer_stops_is_closed_at_boot_and_never_sent_again() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 5, GRANT).await;
    hub.letter("maker", "build it").await;
    // A builder that takes requests and answers none until the test says so.
    let subject = hub
        .subjects
        .request(Service::Builder, &Operation::parse(OP_BUILD).unwrap());
    let mut builder = hub.bus.serve(&subject, None).await.unwrap();
    let script = "[[turn]]\ntext = \"building\"\n[[turn.tool_use]]\nname = \"build\"\n\
         input = { source = \"workspace\", image = \"img\", command = [\"make\"], deadline_s = 5 }\n\
         [[turn]]\ntext = \"after the restart\"\n";
    let provider = counting(script, Duration::ZERO);
    let config = || config("idle_exit_secs = 2\nlease_ttl_secs = 0.5");
    let stop = CancellationToken::new();
    let first = hub
        .run("maker", config(), factory_of(provider.clone()))
        .await;
    let task = tokio::spawn(run_agent(first, stop.clone()));
    let request = tokio::time::timeout(Duration::from_secs(30), builder.next())
        .await
        .expect("the build reached the builder")
        .unwrap();
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);

    // The next boot closes the open build as an interrupt would; the model is asked again (it
    // sees the call closed) and nothing is resent.
    let exit = loop {
        let again = hub
            .run("maker", config(), factory_of(provider.clone()))
            .await;
        match run_agent(again, CancellationToken::new()).await {
            Err(SequencerError::LeaseHeld { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(exit, Exit::Idle);
    // The builder's late answer reaches a tool whose call is closed: it is dropped.
    request.respond(b"late".to_vec().into()).await.unwrap();
    let resent = tokio::time::timeout(Duration::from_millis(500), builder.next()).await;
    assert!(resent.is_err(), "the build was sent again");
    let log = hub.log("maker").await;
    check_log(&log);
    assert!(
        log.iter().any(|r| matches!(
            &r.body,
            RecordBody::Interrupted { closed_tools, .. } if closed_tools.len() == 1
        )),
        "{:?}",
        kinds(&log)
    );
    assert!(tool_results(&log).is_empty(), "{:?}", kinds(&log));
    assert_eq!(assistant_texts(&log), ["building", "after the restart"]);
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2);
}
