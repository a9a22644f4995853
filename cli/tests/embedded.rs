//! The embedded stack: hubd inside one process, over the in-process bus (`l3m demo`'s shape)
//! and over NATS (`l3m up --embedded`, which the human's other commands reach).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use l3m::embedded::Embedded;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnLevel, SpawnRequest};
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::bus::{Bus, LocalBus};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;
use l3m_wire::subjects::HubId;
use predicates::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubd_serves_in_process_over_the_local_bus() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hub");
    let human = HumanName::parse("alice").unwrap();
    let grant = Grant {
        spawn: SpawnLevel::Persist,
        ..Grant::default()
    };
    hubd::init::init_hub(&root, Default::default(), human.clone(), grant.clone(), 1).unwrap();
    let bus: Arc<dyn Bus> = Arc::new(LocalBus::new());
    let hub_id = HubId::parse("local").unwrap();
    let embedded = Embedded::start(Arc::clone(&bus), &root, hub_id.clone())
        .await
        .unwrap();
    let duty = Duty::Human { human };
    let credential = hubd::init::local_key(&root, &duty).unwrap();
    let client = HubClient::open(bus, hub_id, &credential, duty)
        .await
        .unwrap();
    client
        .spawn(SpawnRequest::new(AgentName::parse("demo").unwrap(), grant))
        .await
        .unwrap();
    let tree = client.list_agents().await.unwrap();
    assert_eq!(tree.agents.len(), 1);
    assert_eq!(tree.agents[0].life, AgentLife::Asleep);
    embedded.stop().await;
}

/// Kills the child on drop, so a failing test leaves no `l3m up` behind.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn up_embedded_serves_the_other_commands_until_down() {
    let home = Home::new();
    home.init();
    let _guard = StackGuard { home: &home };
    let mut up = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("l3m"))
            .env("L3M_HOME", home.path())
            .args(["up", "--embedded", "--services", "hubd"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let begun = Instant::now();
    while home.run_file().is_none() {
        assert!(
            up.0.try_wait().unwrap().is_none(),
            "l3m up --embedded exited early"
        );
        assert!(begun.elapsed() < Duration::from_secs(30), "no run file");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(home.run_file().unwrap().contains("embedded = true"));
    home.l3m(&["spawn", "demo"]).assert().success();
    let ls = home.json(&["ls"]);
    assert_eq!(ls["agents"][0]["name"], "demo");
    home.l3m(&["down"])
        .assert()
        .success()
        .stdout(predicate::str::contains("stopped l3m"));
    let status = up.0.wait().unwrap();
    assert!(
        status.success(),
        "l3m up --embedded stopped cleanly on SIGTERM: {status}"
    );
    assert!(home.run_file().is_none());
    home.l3m(&["ls"]).assert().code(5);
}
