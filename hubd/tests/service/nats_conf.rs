//! deploy/nats.conf keeps each service to its own subjects, checked against a real nats-server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use l3m_wire::bus::{Bus, NatsBus};
use l3m_wire::test_support::{NatsServer, server_reported};
use tokio::sync::broadcast;

/// The deployed file with its environment references replaced by test passwords.
fn config() -> String {
    l3m_wire::test_support::deployed_nats_conf()
}

async fn connect(server: &NatsServer, user: &str) -> NatsBus {
    l3m_wire::test_support::connect_as(server, user).await
}

async fn reported(errors: &mut broadcast::Receiver<String>, needle: &str) -> String {
    server_reported(errors, needle, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("the server never reported {needle:?}"))
}

#[tokio::test]
async fn the_sequencer_cannot_take_hubds_requests() {
    let server = NatsServer::start_with(&config()).unwrap();
    let sequencer = connect(&server, "sequencer").await;
    let mut errors = sequencer.server_errors();
    let _spy = sequencer
        .subscribe("l3m.main.hubd.append-log")
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Subscription").await;
    assert!(text.contains("l3m.main.hubd.append-log"), "{text}");
}

#[tokio::test]
async fn the_sequencer_cannot_publish_as_another_service() {
    let server = NatsServer::start_with(&config()).unwrap();
    let sequencer = connect(&server, "sequencer").await;
    let hubd = connect(&server, "hubd").await;
    let mut errors = sequencer.server_errors();
    let mut hubd_hears = hubd.subscribe("l3m.main.hubd.>").await.unwrap();
    // A forged ref announcement (hubd's to make) and a postman request are both refused.
    sequencer
        .publish("l3m.main.ref.log.alice", Bytes::new())
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(text.contains("l3m.main.ref.log.alice"), "{text}");
    sequencer
        .publish("l3m.main.postman.carry", Bytes::new())
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(text.contains("l3m.main.postman.carry"), "{text}");
    // A host asks other sequencers how they are (its metrics), and nothing else of them: it
    // cannot interrupt or rewind another agent.
    sequencer
        .publish("l3m.main.sequencer.interrupt.alice", Bytes::new())
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(
        text.contains("l3m.main.sequencer.interrupt.alice"),
        "{text}"
    );
    // Its own subject family still works: hubd hears a request-shaped publish.
    sequencer
        .publish("l3m.main.hubd.fence", Bytes::new())
        .await
        .unwrap();
    use futures_util::StreamExt;
    let heard = tokio::time::timeout(Duration::from_secs(20), hubd_hears.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard.subject, "l3m.main.hubd.fence");
}

/// The postman serves its status and asks hubd, and nothing more: it cannot pose as a
/// sequencer or a host, announce a ref, or take hubd's requests; the CLI may ask it.
#[tokio::test]
async fn the_postman_is_kept_to_its_status_and_hubd() {
    use futures_util::StreamExt;
    let server = NatsServer::start_with(&config()).unwrap();
    let postman = connect(&server, "postman").await;
    let cli = connect(&server, "cli").await;
    let mut errors = postman.server_errors();
    for subject in [
        "l3m.main.sequencer.interrupt.alice",
        "l3m.main.host.rewind.alice",
        "l3m.main.ref.inbox.alice",
    ] {
        postman.publish(subject, Bytes::new()).await.unwrap();
        let text = reported(&mut errors, "Permissions Violation for Publish").await;
        assert!(text.contains(subject), "{text}");
    }
    let _spy = postman.subscribe("l3m.main.hubd.read-inbox").await.unwrap();
    let text = reported(&mut errors, "Permissions Violation for Subscription").await;
    assert!(text.contains("l3m.main.hubd.read-inbox"), "{text}");
    let mut status = postman.subscribe("l3m.main.postman.status").await.unwrap();
    cli.flush().await.unwrap();
    postman.flush().await.unwrap();
    cli.publish("l3m.main.postman.status", Bytes::new())
        .await
        .unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(20), status.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard.subject, "l3m.main.postman.status");
}

/// `hubd serve` takes its NATS password from an environment variable it is told the name of,
/// so the password is never in its arguments (readable by any local user in /proc); a missing
/// variable is named.
#[tokio::test]
async fn hubd_serve_reads_its_password_from_the_environment_never_argv() {
    let server = NatsServer::start_with(&config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hub");
    let alice = l3m_core::names::HumanName::parse("alice").unwrap();
    drop(
        hubd::init::init_hub(
            &root,
            hubd::store::HubOptions::default(),
            alice.clone(),
            l3m_core::grant::Grant::default(),
            1,
        )
        .unwrap(),
    );
    let serve = |var: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hubd"));
        cmd.args(["serve", "--hub"])
            .arg(&root)
            .args(["--nats", server.url(), "--hub-id", "main"])
            .args(["--nats-user", "hubd", "--nats-password-env", var])
            .env_remove("L3M_TEST_MISSING")
            .env("L3M_TEST_HUBD_PW", "hubd-secret")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    let missing = serve("L3M_TEST_MISSING").output().unwrap();
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("L3M_TEST_MISSING"), "{said}");

    let mut child = serve("L3M_TEST_HUBD_PW").spawn().unwrap();
    let cli: std::sync::Arc<dyn Bus> = std::sync::Arc::new(connect(&server, "cli").await);
    let credential = human_key(&root, &alice);
    let hub_id = l3m_wire::subjects::HubId::parse("main").unwrap();
    let duty = l3m_core::duty::Duty::Human { human: alice };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while l3m_wire::client::HubClient::open(cli.clone(), hub_id.clone(), &credential, duty.clone())
        .await
        .is_err()
    {
        assert!(std::time::Instant::now() < deadline, "hubd never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let argv = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(
        !String::from_utf8_lossy(&argv).contains("hubd-secret"),
        "the password is in hubd's arguments"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Replies are confidential between services: each user's replies arrive under its own inbox
/// prefix, which no other user may subscribe to, so a sequencer cannot read the capabilities
/// and Log ranges hubd sends the CLI — while the CLI's own requests still get their answers.
#[tokio::test]
async fn no_service_may_read_another_services_replies() {
    let server = NatsServer::start_with(&config()).unwrap();
    let sequencer = connect(&server, "sequencer").await;
    let mut errors = sequencer.server_errors();
    for spy in ["_INBOX.>", "_INBOX_cli.>", "_INBOX_postman.>"] {
        let _spy = sequencer.subscribe(spy).await.unwrap();
        let text = reported(&mut errors, "Permissions Violation for Subscription").await;
        assert!(text.contains(spy), "{text}");
    }
    // The CLI's requests are answered on its own prefix.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hub");
    let alice = l3m_core::names::HumanName::parse("alice").unwrap();
    let hub = hubd::init::init_hub(
        &root,
        hubd::store::HubOptions::default(),
        alice.clone(),
        l3m_core::grant::Grant::default(),
        1,
    )
    .unwrap();
    let hubd_bus: std::sync::Arc<dyn Bus> = std::sync::Arc::new(connect(&server, "hubd").await);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let hub_id = l3m_wire::subjects::HubId::parse("main").unwrap();
    let started = hubd::service::start(hubd_bus, hub, hub_id.clone(), shutdown.clone())
        .await
        .unwrap();
    tokio::spawn(started.serve());
    let cli: std::sync::Arc<dyn Bus> = std::sync::Arc::new(connect(&server, "cli").await);
    let credential = human_key(&root, &alice);
    let client = l3m_wire::client::HubClient::open(
        cli,
        hub_id,
        &credential,
        l3m_core::duty::Duty::Human { human: alice },
    )
    .await
    .unwrap();
    assert!(client.list_agents().await.unwrap().agents.is_empty());
    assert_eq!(
        l3m_wire::bus::inbox_prefix("cli"),
        "_INBOX_cli",
        "the prefix deploy/nats.conf grants the cli user"
    );
    shutdown.cancel();
}

fn human_key(
    root: &std::path::Path,
    human: &l3m_core::names::HumanName,
) -> l3m_wire::credential::KeyFile {
    l3m_wire::credential::KeyFile::read(&hubd::init::human_key_path(root, human)).unwrap()
}
