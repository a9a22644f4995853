//! `l3m cards` and `l3m card approve|deny` against a real stack: a card raised by the agent's
//! sequencer (as a sequencer-duty session would), listed, answered by the human once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use l3m_core::duty::Duty;
use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::log::ToolUseId;
use l3m_core::names::AgentName;
use l3m_core::review::Effect;
use l3m_core::review::card::{CardLine, parse_card_line};
use l3m_wire::bus::{Bus, NatsBus};
use l3m_wire::client::HubClient;
use l3m_wire::subjects::HubId;
use predicates::prelude::*;

/// Opens `agent`'s sequencer session (the host credential, the `sequencer` NATS user) and
/// runs `act` with it.
fn as_sequencer<T>(
    home: &Home,
    agent: &str,
    act: impl AsyncFnOnce(&HubClient, &AgentName) -> T,
) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let bus: Arc<dyn Bus> = Arc::new(
            NatsBus::connect(&home.nats_url(), home.nats_user("sequencer"))
                .await
                .unwrap(),
        );
        let agent = AgentName::parse(agent).unwrap();
        let duty = Duty::Sequencer {
            agent: agent.clone(),
        };
        let credential = hubd::init::local_key(&home.hub_root(), &duty).unwrap();
        let client = HubClient::open(bus, HubId::parse("local").unwrap(), &credential, duty)
            .await
            .unwrap();
        act(&client, &agent).await
    })
}

fn raised(id: &str) -> String {
    serde_json::to_string(&CardLine::Raised {
        id: ToolUseId::new(id).unwrap(),
        round: 2,
        effect: Effect {
            tool: "shell".into(),
            footprint: Footprint::of([EffectClass::Shell]),
            what: "runs `rm` with arguments [\"-r\", \"build\"] in `workspace`".into(),
            write_roots: vec!["workspace".into()],
            hosts: vec![],
            input: serde_json::json!({"program": "rm", "args": ["-r", "build"]}),
        },
        justification: "build/ is stale".into(),
        reason: "cannot tell what build/ holds".into(),
    })
    .unwrap()
}

#[test]
fn a_human_lists_and_answers_cards_and_a_card_is_answered_once() {
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.json(&["spawn", "demo", "--files", "workspace"]);
    home.l3m(&["cards"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no cards wait for you"));
    as_sequencer(&home, "demo", async |client, agent| {
        client.append_card(agent, raised("u7")).await.unwrap();
        client.append_card(agent, raised("u8")).await.unwrap();
    });
    let listed = home.json(&["cards"]);
    let cards = listed["cards"].as_array().unwrap();
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0]["id"], "u7");
    assert_eq!(cards[0]["agent"], "demo");
    assert_eq!(cards[0]["justification"], "build/ is stale");
    assert_eq!(cards[0]["effect"]["write_roots"][0], "workspace");
    home.l3m(&["cards"]).assert().success().stdout(
        predicate::str::contains("runs `rm`")
            .and(predicate::str::contains("cannot tell what build/ holds")),
    );

    let approved = home.json(&["card", "approve", "u7", "--reason", "build/ is generated"]);
    assert_eq!(
        (approved["agent"].as_str(), approved["approve"].as_bool()),
        (Some("demo"), Some(true))
    );
    home.json(&["card", "deny", "u8", "--reason", "no"]);
    assert_eq!(home.json(&["cards"])["cards"].as_array().unwrap().len(), 0);
    // Answered once: a second answer finds no waiting card.
    home.l3m(&["card", "approve", "u7"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no waiting card u7"));
    // The chain holds the answers, each by the human hubd named.
    let lines = as_sequencer(&home, "demo", async |client, agent| {
        client.read_cards(agent).await.unwrap()
    });
    let answers: Vec<(String, bool)> = lines
        .iter()
        .filter_map(|l| match parse_card_line(l).unwrap() {
            CardLine::Answered { by, approve, .. } => Some((by.to_string(), approve)),
            CardLine::Raised { .. } => None,
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("human:alice".to_owned(), true),
            ("human:alice".to_owned(), false)
        ]
    );
}
