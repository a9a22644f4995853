//! What the harness adds to one review round, as a ratio to one model round trip.
//!
//! Both paths call the same local HTTP server speaking the OpenAI Chat Completions API (a
//! streamed verdict): `model` is the reviewer's provider called directly; `round` is a whole
//! round as a sequencer asks it — a typed request over a real nats-server to `reviewer::serve`,
//! the prompt rendered, the model called, the verdict parsed and answered back. The difference
//! of medians is the harness's own time per round. Goal: at most 5% of a model round trip.
//!
//! `cargo bench -p reviewer --bench round` (L3M_BENCH_ROUNDS sets the rounds, default 200).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shared/models/tests/common/mod.rs"]
#[allow(unreachable_pub)]
mod model_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::log::{CallId, ToolUseId};
use l3m_core::names::AgentName;
use l3m_core::review::{Effect, Family, ReviewRequest};
use l3m_core::view::{Message, Part, View};
use l3m_models::{ModelConfig, ModelRequest, build};
use l3m_wire::bus::{NatsAuth, NatsBus};
use l3m_wire::envelope::Limits;
use l3m_wire::reviewer::{ReviewAnswer, ReviewAsk};
use l3m_wire::subjects::{HubId, Subjects};
use l3m_wire::test_support::NatsServer;
use model_server::{Answer, Server, openai_stream};
use tokio_util::sync::CancellationToken;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn request() -> ReviewRequest {
    ReviewRequest {
        agent: AgentName::parse("alice/main").unwrap(),
        tool_use: ToolUseId::new("u1").unwrap(),
        round: 1,
        of: 2,
        proposer: Family::Anthropic,
        effect: Effect {
            tool: "shell".into(),
            footprint: Footprint::of([EffectClass::Shell]),
            what: "runs `make` with arguments [\"test\"] in `workspace`, sandboxed".into(),
            write_roots: vec!["workspace".into()],
            hosts: vec![],
            input: serde_json::json!({"program": "make", "args": ["test"]}),
        },
        justification: "the task asks to run the tests".into(),
        earlier: vec![],
    }
}

fn main() {
    let rounds: usize = l3m_wire::test_support::env_number("L3M_BENCH_ROUNDS", 200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let verdict = || {
            Answer::Sse {
                events: openai_stream(&[r#"{"verdict": "safe"}"#], None),
                chunk: 4096,
            }
        };
        let server = Server::start((0..2 * rounds + 20).map(|_| verdict()).collect()).await;
        let config: ModelConfig = toml::from_str(&format!(
            "dialect = \"openai\"\nmodel = \"m\"\nbase_url = \"{}\"\napi_key_env = \"K\"\nmax_retries = 0",
            server.base_url
        ))
        .unwrap();
        let provider = build(&config, &|_| Some("k".into())).unwrap();
        let reviewer =
            reviewer::Reviewer::new(provider.clone(), "m".into(), 256, false).unwrap();
        let nats = NatsServer::start().unwrap();
        let bus = NatsBus::connect(nats.url(), NatsAuth::Anonymous).await.unwrap();
        let subjects = Subjects::new(HubId::parse("main").unwrap());
        let (b, s) = (bus.clone(), subjects.clone());
        tokio::spawn(async move {
            reviewer::serve(&b, &s, Arc::new(reviewer), CancellationToken::new()).await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let subject = format!("{}reviewer.review", subjects.prefix());
        let direct = ModelRequest {
            model: "m".into(),
            view: View {
                system: "You review.".into(),
                messages: vec![Message::User {
                    content: vec![Part::Text {
                        text: reviewer::judge::render(&request()),
                    }],
                }],
            },
            notes: None,
            tools: vec![],
            max_tokens: 256,
            call: CallId::new("bench").unwrap(),
        };
        let round = || async {
            let _: ReviewAnswer = l3m_wire::typed::call(
                &bus,
                &subject,
                &ReviewAsk { request: request() },
                Duration::from_secs(10),
                &Limits::default(),
            )
            .await
            .unwrap()
            .unwrap();
        };
        for _ in 0..5 {
            provider.complete(&direct).await.unwrap();
            round().await;
        }
        let (mut model, mut whole) = (Vec::new(), Vec::new());
        // Interleaved, so drift on a shared machine hits both alike.
        for _ in 0..rounds {
            let t = Instant::now();
            provider.complete(&direct).await.unwrap();
            model.push(t.elapsed());
            let t = Instant::now();
            round().await;
            whole.push(t.elapsed());
        }
        let (m, w) = (median(model), median(whole));
        let added = w.saturating_sub(m);
        println!(
            "review round: model round trip median {:.3} ms, whole round median {:.3} ms, harness adds {:.3} ms = {:.1}% of a model round trip ({rounds} rounds)",
            m.as_secs_f64() * 1e3,
            w.as_secs_f64() * 1e3,
            added.as_secs_f64() * 1e3,
            100.0 * added.as_secs_f64() / m.as_secs_f64()
        );
    });
}
