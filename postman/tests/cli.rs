//! `postman identity` through the binary: it makes the identity once, in the hub folder only,
//! and prints the fingerprint peers pin.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn postman(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postman"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn identity_is_made_once_in_a_hub_folder_and_its_fingerprint_printed() {
    let dir = tempfile::tempdir().unwrap();
    let hub = dir.path().join("north");
    let hub_arg = hub.to_str().unwrap();
    let refused = postman(&["identity", "--hub", hub_arg]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a hub folder"));
    std::fs::create_dir_all(hub.join("hub.git")).unwrap();
    let first = postman(&["identity", "--hub", hub_arg, "--json"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let again = postman(&["identity", "--hub", hub_arg, "--json"]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(first["fingerprint"], again["fingerprint"], "made once");
    let cert = std::fs::read(first["certificate"].as_str().unwrap()).unwrap();
    assert_eq!(
        postman::identity::Fingerprint::of(&cert).to_string(),
        first["fingerprint"].as_str().unwrap()
    );
}

/// Two hubs, each served in process over its own nats-server, and two real `postman serve`
/// processes: an agent's letter on north reaches bob on south.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_postman_processes_carry_a_letter_between_two_hubs() {
    use hubd::test_support::TestHub;
    use l3m_core::duty::Duty;
    use l3m_core::grant::{Grant, MailCover, SpawnLevel, SpawnRequest};
    use l3m_core::names::{AgentName, OfficeName};

    let airmail_to = |office: &str| {
        let office = OfficeName::parse(office).unwrap();
        Grant {
            spawn: SpawnLevel::Persist,
            airmail: [office.clone()].into(),
            mail: [MailCover::Office(office)].into(),
            ..Grant::default()
        }
    };
    let north = TestHub::start(airmail_to("south"), "").await;
    let south = TestHub::start(Grant::default(), "").await;
    let spawn = |name: &str, grant: Grant| SpawnRequest {
        child: AgentName::parse(name).unwrap(),
        grant,
        loan: Default::default(),
        driven: false,
        persona: None,
        fork: None,
    };
    north
        .human_client()
        .await
        .spawn(spawn("lead", airmail_to("south")))
        .await
        .unwrap();
    south
        .human_client()
        .await
        .spawn(spawn("bob", Grant::default()))
        .await
        .unwrap();
    let fingerprint = |hub: &TestHub| {
        let out = postman(&["identity", "--hub", hub.root().to_str().unwrap(), "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["fingerprint"].as_str().unwrap().to_owned()
    };
    let free_port = || {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (north_port, south_port) = (free_port(), free_port());
    pin(&north, "south", south_port, fingerprint(&south)).await;
    pin(&south, "north", north_port, fingerprint(&north)).await;
    let serve = |hub: &TestHub, name: &str, port: u16| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_postman"))
            .args([
                "serve",
                "--hub",
                hub.root().to_str().unwrap(),
                "--hub-id",
                "t",
            ])
            .args(["--nats", hub.nats.url(), "--name", name])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let _north = serve(&north, "north", north_port);
    let _south = serve(&south, "south", south_port);

    let lead = north
        .client(Duty::Sequencer {
            agent: AgentName::parse("lead").unwrap(),
        })
        .await;
    lead.stage_airmail("office:south agent:bob*", Some("hi"), "across hubs")
        .await
        .unwrap();
    let human = south.human_client().await;
    let bob = AgentName::parse("bob").unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let letter = loop {
        let read = human.read_inbox(&bob, 0).await.unwrap();
        if let Some(l3m_core::mail::InboxEntry::Letter(letter)) = read.entries.into_iter().next() {
            break letter;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the letter never arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(letter.from.render(), "office:north agent:lead*");
    assert_eq!(letter.body, "across hubs");
}

/// Pins `office` (its postman on loopback `port`, its certificate `fingerprint`) in `hub`.
async fn pin(hub: &hubd::test_support::TestHub, office: &str, port: u16, fingerprint: String) {
    let hub = hub.human_client().await;
    let view = hub.read_settings().await.unwrap();
    let text = view.text.replace(
        "offices = []",
        &format!(
            "offices = [{{ name = \"{office}\", addr = \"127.0.0.1:{port}\", cert-sha256 = \"{fingerprint}\" }}]"
        ),
    );
    hub.update_settings(&text, &view.tip).await.unwrap();
}
