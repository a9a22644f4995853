//! A context that always fits (issue 37, item 4), on real model wires in both dialects: a
//! legal 150 KB `write_file` in the kept tail is stood in for by a stub in the request, so no
//! request exceeds a 16k-token window; a provider that refuses a request as too long (its
//! real window smaller than configured) gets a compacted, fitted retry, not a failed turn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::chat::{ChatServer, Turn, tokens_of};
use common::*;
use l3m_core::log::{Record, RecordBody};
use sequencer::{Config, Exit, run_agent};
use tokio_util::sync::CancellationToken;

const DIALECTS: [&str; 2] = ["openai", "anthropic"];

fn wire_config(dialect: &str, server: &ChatServer, window: u32) -> Config {
    Config::parse(&format!(
        "default_model = \"m\"\n[models.m]\ndialect = \"{dialect}\"\nmodel = \"m\"\n\
         base_url = \"{}\"\napi_key_env = \"KEY\"\ncontext_window = {window}\n\
         [sequencer]\nretry_backoff_ms = 1\nidle_exit_secs = 1\nmax_tokens = 1024\n",
        server.base_url
    ))
    .unwrap()
}

async fn run_idle(hub: &TestHub, config: &Config) -> Vec<Record> {
    let factory = sequencer::model::provider_factory(
        config.clone(),
        std::env::temp_dir(),
        Arc::new(|name: &str| (name == "KEY").then(|| "k".to_owned())),
    );
    let run = hub.run("demo", config.clone(), factory).await;
    let exit = run_agent(run, CancellationToken::new()).await;
    assert!(matches!(exit, Ok(Exit::Idle)), "{exit:?}");
    let log = hub.log("demo").await;
    check_log(&log);
    log
}

fn is_summary_request(body: &serde_json::Value) -> bool {
    body.to_string().contains("You are summarizing")
}

/// A server that writes a 150 KB file at the first request, then summarizes when asked and
/// says `done` otherwise.
async fn writer_server() -> ChatServer {
    let content = "w".repeat(150_000);
    let server = ChatServer::start(vec![Turn::call(
        "write_file",
        &serde_json::json!({"path": "workspace/big.txt", "content": content}).to_string(),
    )])
    .await;
    server.then(|_, body| {
        if is_summary_request(body) {
            Turn::text("summary: wrote workspace/big.txt")
        } else {
            Turn::text("done")
        }
    });
    server
}

/// With a 16k-token window, a legal 150 KB write stays in the kept tail; every later request
/// stands a stub in for it and fits the window, and the turn completes; a later wake too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_item_in_the_kept_tail_is_stubbed_and_every_request_fits() {
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 40).await;
        hub.letter("demo", "write the big file").await;
        let server = writer_server().await;
        let config = wire_config(dialect, &server, 16_000);
        let log = run_idle(&hub, &config).await;
        assert_eq!(
            std::fs::read(hub.acr("demo").join("workspace/big.txt"))
                .unwrap()
                .len(),
            150_000,
            "{dialect}: the write ran whole"
        );
        assert_eq!(assistant_texts(&log).last().unwrap(), "done", "{dialect}");
        hub.letter("demo", "and now?").await;
        let log = run_idle(&hub, &config).await;
        assert_eq!(assistant_texts(&log).last().unwrap(), "done", "{dialect}");
        let raw = server.raw();
        for (n, body) in raw.iter().enumerate() {
            assert!(
                tokens_of(body) <= 16_000,
                "{dialect}: request {n} is {} tokens",
                tokens_of(body)
            );
        }
        let stubbed = server
            .received()
            .iter()
            .any(|b| b.to_string().contains("l3m_elided"));
        assert!(
            stubbed,
            "{dialect}: the write's arguments were stood in for"
        );
    }
}

/// A provider whose real window is a quarter of the configured one answers a request over it
/// with its own "context too long" 400: the call is journaled as a retryable failure that says
/// so, the retry is compacted and fitted below the refused size, and the turn completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_too_long_answer_is_compacted_and_asked_again() {
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 40).await;
        hub.letter("demo", "write the big file").await;
        let server = writer_server().await;
        server.refuse_over(64_000);
        let log = run_idle(&hub, &wire_config(dialect, &server, 200_000)).await;
        let overflowed: Vec<_> = log
            .iter()
            .filter_map(|r| match &r.body {
                RecordBody::CallFailed {
                    error, retryable, ..
                } => Some((error.clone(), *retryable)),
                _ => None,
            })
            .collect();
        assert_eq!(overflowed.len(), 1, "{dialect}: {overflowed:?}");
        assert!(
            overflowed[0].1 && overflowed[0].0.contains("compacted and asked again"),
            "{dialect}: {overflowed:?}"
        );
        assert_eq!(assistant_texts(&log).last().unwrap(), "done", "{dialect}");
        assert!(
            matches!(log.last().map(|r| &r.body), Some(RecordBody::TurnEnd)),
            "{dialect}"
        );
        let raw = server.raw();
        let over = raw.iter().filter(|b| b.len() > 64_000).count();
        assert_eq!(
            over, 1,
            "{dialect}: only the first refused request was over"
        );
    }
}
