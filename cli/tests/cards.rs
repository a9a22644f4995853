//! `l3m cards` and `l3m card approve|deny` against a real stack: a card raised by the agent's
//! sequencer (as a sequencer-duty session would), listed, answered by the human once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::log::ToolUseId;
use l3m_core::names::AgentName;
use l3m_core::review::Effect;
use l3m_core::review::card::{CardLine, parse_card_line};
use l3m_wire::bus::NatsBus;
use predicates::prelude::*;

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

/// The value of the page's first hidden `csrf` field.
fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

/// `l3m cards --serve`, stopped when dropped.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_cards_page_shows_cards_in_chromium_and_answers_only_its_own_form() {
    use std::io::BufRead;
    let home = Home::new();
    home.init();
    let _stack = home.up();
    home.json(&["spawn", "demo", "--files", "workspace"]);
    as_sequencer(&home, "demo", async |client, agent| {
        client.append_card(agent, raised("w1")).await.unwrap();
    });
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("l3m"))
        .env("L3M_HOME", home.path())
        .env_remove("RUST_LOG")
        .args(["cards", "--serve"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _served = Served(child);
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "loopback by default: {first}"
    );
    let origin = url.trim_end_matches('/').to_owned();

    // A real headless Chromium renders the card: its DOM holds the card's text, and its
    // screenshot is a real PNG of the page.
    let shot = home.path().join("cards.png");
    let chromium = |extra: &[&str]| {
        std::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1000,900",
            ])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap()
    };
    let dom = chromium(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for text in [
        "w1 of demo",
        "runs `rm`",
        "build/ is stale",
        "cannot tell what build/ holds",
        "Approve",
    ] {
        assert!(dom.contains(text), "{text} not in the rendered DOM: {dom}");
    }
    let shot_arg = format!("--screenshot={}", shot.display());
    chromium(&[&shot_arg]);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page =
        runtime.block_on(async { client.get(&url).send().await.unwrap().text().await.unwrap() });
    let token = csrf(&page);
    let post = |body: String, origin: &str| {
        runtime.block_on(async {
            client
                .post(format!("{url}answer"))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("origin", origin)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let form = |token: &str| format!("csrf={token}&agent=demo&id=w1&decision=approve&reason=ok");
    // Without the token, with a wrong one, or from another origin: refused, nothing answered.
    assert_eq!(
        post("agent=demo&id=w1&decision=approve".into(), &origin),
        403
    );
    assert_eq!(post(form("00"), &origin), 403);
    assert_eq!(post(form(&token), "http://evil.example"), 403);
    // A page asked for under another host name (DNS rebinding) is refused too.
    let rebound = runtime.block_on(async {
        client
            .get(&url)
            .header("host", "evil.example")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(rebound, 403);
    assert_eq!(home.json(&["cards"])["cards"].as_array().unwrap().len(), 1);
    // The page's own form, with its token and origin, answers the card.
    assert_eq!(post(form(&token), &origin), 303);
    assert!(
        home.json(&["cards"])["cards"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Builds the `reviewer` binary beside `l3m`, so `l3m up` finds it.
fn build_reviewer() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let l3m = assert_cmd::cargo::cargo_bin("l3m");
    let profile_dir = l3m.parent().unwrap();
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "--locked", "-p", "reviewer", "--bin", "reviewer"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        build.env("CARGO_TARGET_DIR", target);
    }
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn l3m_up_starts_the_reviewer_as_its_own_user_when_review_is_configured() {
    build_services();
    build_reviewer();
    let home = Home::new();
    home.init();
    let document = home.path().join("l3m.toml");
    let mut text = std::fs::read_to_string(&document).unwrap();
    // A reviewer model that cannot be reached: the reviewer still starts and serves, and
    // answers each round with a typed error instead of a verdict.
    text.push_str(
        "\n[review]\nmodel = \"checker\"\n[models.checker]\ndialect = \"openai\"\nmodel = \"m\"\n\
         base_url = \"http://127.0.0.1:9\"\napi_key_env = \"L3M_TEST_REVIEW_KEY\"\nmax_retries = 0\n",
    );
    std::fs::write(&document, text).unwrap();
    let _stack = StackGuard { home: &home };
    home.l3m(&["up", "--services", "hubd,sequencer"])
        .env("L3M_TEST_REVIEW_KEY", "k")
        .assert()
        .success();
    let run_file = home.run_file().unwrap();
    assert!(run_file.contains("reviewer"), "{run_file}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(async {
        let bus = NatsBus::connect(&home.nats_url(), home.nats_user("sequencer"))
            .await
            .unwrap();
        let request = l3m_core::review::ReviewRequest {
            agent: AgentName::parse("demo").unwrap(),
            tool_use: ToolUseId::new("u1").unwrap(),
            round: 1,
            of: 2,
            proposer: l3m_core::review::Family::Anthropic,
            effect: match parse_card_line(&raised("u1")).unwrap() {
                CardLine::Raised { effect, .. } => effect,
                CardLine::Answered { .. } => unreachable!(),
            },
            justification: "needed".into(),
            earlier: vec![],
        };
        l3m_wire::typed::call::<_, l3m_wire::reviewer::ReviewAnswer>(
            &bus,
            "l3m.local.reviewer.review",
            &l3m_wire::reviewer::ReviewAsk { request },
            std::time::Duration::from_secs(30),
            &l3m_wire::envelope::Limits::default(),
        )
        .await
        .unwrap()
    });
    let refused = answer.unwrap_err();
    assert_eq!(
        refused.code,
        l3m_wire::reply::ErrorCode::Internal,
        "{refused:?}"
    );
    assert!(refused.message.contains("model failed"), "{refused:?}");
}
