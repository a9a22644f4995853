//! `l3m vigil ls|pin|cancel` against a real stack: a human pins a vigil the agent cannot
//! cancel, lists the agent's own and pinned ones, sees them fire or cancels them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use l3m_core::vigil::Watch;
use predicates::prelude::*;

#[test]
fn a_human_pins_lists_and_cancels_vigils_the_agent_cannot_shake_off() {
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.json(&["spawn", "demo"]);
    home.l3m(&["vigil", "ls", "demo"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no vigil is armed on demo"));
    let pinned = home.json(&["vigil", "pin", "demo", "--deadline-in", "600"]);
    assert_eq!(pinned["id"], "v1");
    let pinned_too = home.json(&["vigil", "pin", "demo", "--ref-moved", "demo:inbox"]);
    assert_eq!(pinned_too["id"], "v2");
    // The agent arms its own, and cannot cancel the human's.
    let refused = as_sequencer(&home, "demo", async |client, agent| {
        let at = l3m_core::clock::now_ms() + 600_000;
        client
            .arm_vigil(agent, Watch::Deadline { at_ms: at }, at + 1)
            .await
            .unwrap();
        client
            .cancel_vigil(agent, "v1")
            .await
            .unwrap_err()
            .to_string()
    });
    assert!(refused.contains("pinned by human:alice"), "{refused}");
    let listed = home.json(&["vigil", "ls", "demo"]);
    let vigils = listed["vigils"].as_array().unwrap();
    assert_eq!(vigils.len(), 3);
    assert_eq!(
        (
            vigils[0]["pinned"].as_bool(),
            vigils[0]["armed_by"].as_str()
        ),
        (Some(true), Some("human:alice"))
    );
    assert_eq!(vigils[2]["pinned"], false);
    home.l3m(&["vigil", "ls", "demo"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("pinned by human:alice")
                .and(predicate::str::contains("demo's inbox ref moves")),
        );
    // A letter moves the inbox: v2 fires once; a human cancels v1 (pinned) and v3 (the agent's).
    home.l3m(&["say", "demo", "hello"]).assert().success();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let all = home.json(&["vigil", "ls", "demo", "--all"]);
        if all["vigils"][1]["state"] == "fired" {
            assert_eq!(all["vigils"][1]["fact"]["kind"], "moved");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{all}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    home.json(&["vigil", "cancel", "demo", "v1"]);
    home.json(&["vigil", "cancel", "demo", "v3"]);
    home.l3m(&["vigil", "ls", "demo"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no vigil is armed on demo"));
    // Bad input is a usage error naming it; a vigil no longer armed is refused by hubd.
    home.l3m(&["vigil", "pin", "demo", "--ref-moved", "demo"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("AGENT:REF"));
    home.l3m(&["vigil", "pin", "demo"]).assert().code(2);
    home.l3m(&["vigil", "cancel", "demo", "v1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no vigil v1 is armed on demo"));
}
