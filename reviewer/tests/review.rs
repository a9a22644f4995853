//! The reviewer against local HTTP servers speaking both model APIs, served over a real
//! nats-server; and what its NATS user cannot do under deploy/nats.conf.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shared/models/tests/common/mod.rs"]
mod model_server;

use std::sync::Arc;
use std::time::Duration;

use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::log::{ToolUseId, Verdict};
use l3m_core::names::AgentName;
use l3m_core::review::{EarlierRound, Effect, Family, ReviewRequest};
use l3m_models::{ModelConfig, Provider, build};
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::envelope::Limits;
use l3m_wire::reply::ErrorCode;
use l3m_wire::reviewer::{ReviewAnswer, ReviewAsk};
use l3m_wire::subjects::{HubId, Service, Subjects};
use l3m_wire::test_support::{NatsServer, server_reported};
use model_server::{Answer, Server, anthropic_stream, openai_stream};
use reviewer::Reviewer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn provider(dialect: &str, base_url: &str) -> Arc<dyn Provider> {
    let config: ModelConfig = toml::from_str(&format!(
        "dialect = \"{dialect}\"\nmodel = \"m\"\nbase_url = \"{base_url}\"\napi_key_env = \"K\"\nmax_retries = 0"
    ))
    .unwrap();
    build(&config, &|_| Some("test-key".into())).unwrap()
}

fn request(proposer: Family, justification: &str) -> ReviewRequest {
    ReviewRequest {
        agent: AgentName::parse("alice/main").unwrap(),
        tool_use: ToolUseId::new("u1").unwrap(),
        round: 2,
        of: 2,
        proposer,
        effect: Effect {
            tool: "shell".into(),
            footprint: Footprint::of([EffectClass::Shell]),
            what: "runs `rm` with arguments [\"-r\", \"build\"] in `workspace`".into(),
            write_roots: vec!["workspace".into()],
            hosts: vec![],
            input: json!({"program": "rm", "args": ["-r", "build"]}),
        },
        justification: justification.into(),
        earlier: vec![EarlierRound {
            round: 1,
            justification: "cleanup".into(),
            verdict: Verdict::Unclear { reason: None },
        }],
    }
}

/// A reviewer serving on a fresh nats-server, and a bus to ask it on.
async fn serving(reviewer: Reviewer) -> (NatsServer, NatsBus, Subjects, CancellationToken) {
    let nats = NatsServer::start().unwrap();
    let bus = NatsBus::connect(nats.url(), NatsAuth::Anonymous)
        .await
        .unwrap();
    let subjects = Subjects::new(HubId::parse("main").unwrap());
    let shutdown = CancellationToken::new();
    let (b, s, stop) = (bus.clone(), subjects.clone(), shutdown.clone());
    tokio::spawn(async move { reviewer::serve(&b, &s, Arc::new(reviewer), stop).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    (nats, bus, subjects, shutdown)
}

async fn ask(
    bus: &NatsBus,
    subjects: &Subjects,
    request: ReviewRequest,
) -> Result<ReviewAnswer, l3m_wire::reply::RemoteError> {
    let subject = format!("{}reviewer.review", subjects.prefix());
    l3m_wire::typed::call(
        bus,
        &subject,
        &ReviewAsk { request },
        Duration::from_secs(20),
        &Limits::default(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn an_openai_reviewer_judges_an_anthropic_proposal_from_its_effect() {
    let verdict = r#"{"verdict": "unsafe", "reason": "deletes build/", "alternative": "use the delete_file tool"}"#;
    let model = Server::start(vec![Answer::sse(openai_stream(&[verdict], None))]).await;
    let reviewer =
        Reviewer::new(provider("openai", &model.base_url), "m".into(), 512, false).unwrap();
    let (_nats, bus, subjects, _stop) = serving(reviewer).await;
    let answer = ask(
        &bus,
        &subjects,
        request(Family::Anthropic, "build/ is stale output"),
    )
    .await
    .unwrap();
    assert_eq!(
        answer.verdict,
        Verdict::Unsafe {
            reason: "deletes build/".into(),
            alternative: Some("use the delete_file tool".into())
        }
    );
    assert_eq!(answer.spent.model_calls, 1);
    assert!(
        answer.by.starts_with("svc:reviewer (openai"),
        "{}",
        answer.by
    );
    // What the model read: the effect (command, directory, write roots, no network), the
    // justification marked as data, and the earlier round.
    let sent = model.received()[0].body.to_string();
    for needle in [
        "runs `rm`",
        "May write only under: workspace",
        "Network: none",
        "build/ is stale output",
        "data, not instructions",
        "Round 1: justification <<<cleanup>>>",
        "Answer with one JSON object",
    ] {
        assert!(sent.contains(needle), "{needle} missing from {sent}");
    }
}

#[tokio::test]
async fn an_anthropic_reviewer_approves_an_openai_proposal() {
    let model = Server::start(vec![Answer::sse(anthropic_stream(
        &["{\"verdict\":", " \"safe\"}"],
        None,
    ))])
    .await;
    let reviewer = Reviewer::new(
        provider("anthropic", &model.base_url),
        "m".into(),
        512,
        false,
    )
    .unwrap();
    let (_nats, bus, subjects, _stop) = serving(reviewer).await;
    let answer = ask(&bus, &subjects, request(Family::OpenAi, "needed"))
        .await
        .unwrap();
    assert_eq!(answer.verdict, Verdict::Safe);
    assert_eq!(model.received()[0].path, "/v1/messages");
}

#[tokio::test]
async fn the_same_family_is_refused_unless_the_human_opted_in() {
    let model = Server::start(vec![Answer::sse(openai_stream(
        &["{\"verdict\":\"safe\"}"],
        None,
    ))])
    .await;
    let strict =
        Reviewer::new(provider("openai", &model.base_url), "m".into(), 512, false).unwrap();
    let (_nats, bus, subjects, _stop) = serving(strict).await;
    let refused = ask(&bus, &subjects, request(Family::OpenAi, "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Refused);
    assert!(
        refused.message.contains("same_family = true"),
        "{}",
        refused.message
    );
    assert!(
        model.received().is_empty(),
        "no model call for a refused proposal"
    );
    let opted = Reviewer::new(provider("openai", &model.base_url), "m".into(), 512, true).unwrap();
    let answer = opted.review(&request(Family::OpenAi, "x")).await.unwrap();
    assert_eq!(answer.verdict, Verdict::Safe);
}

#[tokio::test]
async fn garbage_and_a_dead_model_are_typed_errors_never_a_verdict() {
    let model = Server::start(vec![
        Answer::sse(openai_stream(&["Sure, approved! Running it now."], None)),
        Answer::status(500, "{\"error\": {\"message\": \"down\"}}"),
    ])
    .await;
    let reviewer =
        Reviewer::new(provider("openai", &model.base_url), "m".into(), 512, false).unwrap();
    let (_nats, bus, subjects, _stop) = serving(reviewer).await;
    let garbage = ask(&bus, &subjects, request(Family::Anthropic, "x"))
        .await
        .unwrap_err();
    assert_eq!(garbage.code, ErrorCode::Invalid);
    assert!(
        garbage.message.contains("not a verdict"),
        "{}",
        garbage.message
    );
    let dead = ask(&bus, &subjects, request(Family::Anthropic, "x"))
        .await
        .unwrap_err();
    assert_eq!(dead.code, ErrorCode::Internal);
}

/// deploy/nats.conf with test passwords for every user.
fn nats_conf() -> String {
    l3m_wire::test_support::deployed_nats_conf()
}

async fn connect(server: &NatsServer, user: &str) -> NatsBus {
    l3m_wire::test_support::connect_as(server, user).await
}

#[tokio::test]
async fn the_reviewers_user_may_serve_reviews_and_do_nothing_else() {
    let server = NatsServer::start_with(&nats_conf()).unwrap();
    let reviewer_bus = connect(&server, "reviewer").await;
    let mut errors = reviewer_bus.server_errors();
    // It cannot ask hubd for anything, nor listen to hubd's requests or ref moves.
    reviewer_bus
        .publish("l3m.main.hubd.append-log", bytes::Bytes::new())
        .await
        .unwrap();
    let text = server_reported(
        &mut errors,
        "Permissions Violation for Publish",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert!(text.contains("l3m.main.hubd.append-log"), "{text}");
    let _spy = reviewer_bus.subscribe("l3m.main.ref.>").await.unwrap();
    let text = server_reported(
        &mut errors,
        "Permissions Violation for Subscription",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert!(text.contains("l3m.main.ref.>"), "{text}");
    // Nor answer as a sequencer: serving another service's subject is refused.
    let _fake = reviewer_bus
        .subscribe("l3m.main.sequencer.>")
        .await
        .unwrap();
    let text = server_reported(
        &mut errors,
        "Permissions Violation for Subscription",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert!(text.contains("l3m.main.sequencer.>"), "{text}");
    // What it is for still works: a sequencer's request reaches it and its answer comes back.
    let model = Server::start(vec![Answer::sse(openai_stream(
        &["{\"verdict\":\"unclear\"}"],
        None,
    ))])
    .await;
    let reviewer =
        Reviewer::new(provider("openai", &model.base_url), "m".into(), 512, false).unwrap();
    let subjects = Subjects::new(HubId::parse("main").unwrap());
    let (b, s) = (reviewer_bus.clone(), subjects.clone());
    tokio::spawn(async move {
        reviewer::serve(&b, &s, Arc::new(reviewer), CancellationToken::new()).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sequencer = connect(&server, "sequencer").await;
    let answer = ask(&sequencer, &subjects, request(Family::Anthropic, "x"))
        .await
        .unwrap();
    assert_eq!(answer.verdict, Verdict::Unclear { reason: None });
    // The CLI user (and so an agent's tools, which hold no NATS user at all) cannot ask.
    let cli = connect(&server, "cli").await;
    let mut cli_errors = cli.server_errors();
    cli.publish("l3m.main.reviewer.review", bytes::Bytes::new())
        .await
        .unwrap();
    let text = server_reported(
        &mut cli_errors,
        "Permissions Violation for Publish",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert!(text.contains("l3m.main.reviewer.review"), "{text}");
    // It may ask how the reviewer is, and hears the round it answered.
    let healths =
        l3m_wire::health::gather(&cli, &subjects, Service::Reviewer, Duration::from_secs(2))
            .await
            .unwrap();
    assert_eq!(healths.len(), 1, "{healths:?}");
    assert_eq!(healths[0].gauges["rounds_answered_total"], 1);
}
