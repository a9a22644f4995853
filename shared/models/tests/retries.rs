//! Retries, deadlines and bad replies, over real HTTP against the local server: the same
//! idempotency key on every try, `retry-after` honoured, refusals not retried, timeouts and
//! broken streams surfacing as typed errors.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Answer, RecordingPause, Server, anthropic_stream, event, openai_stream, sample_request, tuning,
};
use l3m_models::anthropic::Anthropic;
use l3m_models::http::HttpTuning;
use l3m_models::openai::OpenAi;
use l3m_models::{ModelError, Provider, TimeoutKind};
use serde_json::json;

#[derive(Clone, Copy, Debug)]
enum Which {
    Anthropic,
    OpenAi,
}

const BOTH: [Which; 2] = [Which::Anthropic, Which::OpenAi];

impl Which {
    fn provider(self, base: &str, tuning: HttpTuning) -> Box<dyn Provider> {
        match self {
            Which::Anthropic => Box::new(Anthropic::new(base, "k", tuning).unwrap()),
            Which::OpenAi => Box::new(OpenAi::new(base, Some("k"), tuning).unwrap()),
        }
    }

    fn good(self) -> Answer {
        match self {
            Which::Anthropic => Answer::sse(anthropic_stream(&["fine"], None)),
            Which::OpenAi => Answer::sse(openai_stream(&["fine"], None)),
        }
    }
}

struct Run {
    result: Result<l3m_models::ModelReply, ModelError>,
    received: Vec<common::Received>,
    waits: Vec<Duration>,
}

async fn run(which: Which, answers: Vec<Answer>, adjust: impl FnOnce(&mut HttpTuning)) -> Run {
    let server = Server::start(answers).await;
    let pause = Arc::new(RecordingPause::default());
    let mut tuning = tuning(pause.clone());
    adjust(&mut tuning);
    let provider = which.provider(&server.base_url, tuning);
    let result = provider.complete(&sample_request("m")).await;
    let waits = pause.waits.lock().unwrap().clone();
    Run {
        result,
        received: server.received(),
        waits,
    }
}

#[tokio::test]
async fn every_try_of_one_call_carries_the_same_idempotency_key_and_body() {
    for which in BOTH {
        let answers = vec![
            Answer::status(
                529,
                "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",
            ),
            Answer::status(500, "oops"),
            which.good(),
        ];
        let run = run(which, answers, |_| {}).await;
        let reply = run.result.unwrap();
        assert_eq!(reply.text, "fine", "{which:?}");
        assert_eq!(run.received.len(), 3, "{which:?}");
        for received in &run.received {
            assert_eq!(
                received.header("idempotency-key"),
                Some("l3m-c5"),
                "{which:?}"
            );
            assert_eq!(
                received.body, run.received[0].body,
                "{which:?}: a retry sends the same body"
            );
        }
        assert_eq!(run.waits.len(), 2, "{which:?}");
        for (retry, wait) in run.waits.iter().enumerate() {
            let ceiling =
                (Duration::from_millis(1) * 2u32.pow(retry as u32)).min(Duration::from_millis(4));
            assert!(
                *wait >= ceiling / 2 && *wait <= ceiling,
                "{which:?} retry {retry}: {wait:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_providers_retry_after_is_honoured() {
    for which in BOTH {
        let limited = |value: &str, header: &'static str| Answer::Status {
            status: 429,
            headers: vec![(header, value.to_owned())],
            body: "slow down".into(),
        };
        let answers = vec![
            limited("7", "retry-after"),
            limited("1500", "retry-after-ms"),
            which.good(),
        ];
        let run = run(which, answers, |_| {}).await;
        assert!(run.result.is_ok(), "{which:?}");
        assert_eq!(
            run.waits,
            vec![Duration::from_secs(7), Duration::from_millis(1500)],
            "{which:?}"
        );
    }
}

#[tokio::test]
async fn a_400_is_not_retried_and_names_the_providers_reason() {
    for which in BOTH {
        let answers = vec![
            Answer::status(
                400,
                "{\"error\":\"messages: tool_result without tool_use\"}",
            ),
            which.good(),
        ];
        let run = run(which, answers, |_| {}).await;
        let error = run.result.unwrap_err();
        assert!(!error.retryable());
        assert!(
            matches!(error, ModelError::Status { status: 400, .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("tool_result without tool_use"),
            "{error}"
        );
        assert_eq!(run.received.len(), 1, "{which:?}: a 400 is sent once");
        assert!(run.waits.is_empty());
    }
}

#[tokio::test]
async fn retries_stop_at_the_budget_and_return_the_last_failure() {
    let answers = vec![
        Answer::status(503, "a"),
        Answer::status(502, "b"),
        Answer::status(500, "c"),
    ];
    let run = run(Which::Anthropic, answers, |t| t.max_retries = 1).await;
    let error = run.result.unwrap_err();
    assert!(
        matches!(error, ModelError::Status { status: 502, .. }),
        "{error:?}"
    );
    assert!(
        error.retryable(),
        "the sequencer may still try another attempt"
    );
    assert_eq!(run.received.len(), 2);
}

#[tokio::test]
async fn a_stream_that_goes_silent_times_out_as_retryable() {
    for which in BOTH {
        let first = match which {
            Which::Anthropic => anthropic_stream(&["x"], None)[..2].to_vec(),
            Which::OpenAi => openai_stream(&["x"], None)[..2].to_vec(),
        };
        let run = run(which, vec![Answer::StallAfter(first)], |t| {
            t.idle_timeout = Duration::from_millis(200);
            t.max_retries = 0;
        })
        .await;
        let error = run.result.unwrap_err();
        assert!(
            matches!(
                error,
                ModelError::Timeout {
                    kind: TimeoutKind::Idle,
                    ..
                }
            ),
            "{which:?}: {error:?}"
        );
        assert!(error.retryable());
    }
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_request_deadline_as_retryable() {
    let run = run(Which::Anthropic, vec![Answer::Hang], |t| {
        t.timeout = Duration::from_millis(300);
        t.max_retries = 0;
    })
    .await;
    let error = run.result.unwrap_err();
    assert!(
        matches!(
            error,
            ModelError::Timeout {
                kind: TimeoutKind::Request,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.retryable());
}

#[tokio::test]
async fn a_try_that_timed_out_is_tried_again() {
    let run = run(
        Which::OpenAi,
        vec![Answer::Hang, Which::OpenAi.good()],
        |t| {
            t.timeout = Duration::from_secs(2);
        },
    )
    .await;
    assert_eq!(run.result.unwrap().text, "fine");
    assert_eq!(run.received.len(), 2);
    assert_eq!(
        run.received[0].header("idempotency-key"),
        run.received[1].header("idempotency-key")
    );
}

#[tokio::test]
async fn malformed_event_streams_are_typed_errors_and_not_retried() {
    let cases: Vec<(Which, Vec<String>, &str)> = vec![
        (
            Which::Anthropic,
            vec!["data: {not json\n\n".into()],
            "not a Messages stream event",
        ),
        (
            Which::Anthropic,
            anthropic_stream(&["cut"], None)[..4].to_vec(),
            "ended before message_stop",
        ),
        (
            Which::Anthropic,
            vec![
                anthropic_stream(&[], None)[0].clone(),
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 5, "delta": {"type": "text_delta", "text": "x"}}),
                ),
            ],
            "never started",
        ),
        (
            Which::Anthropic,
            vec!["data: \u{1}\u{2}\n\n".into(), "data: \n\n".into()],
            "not a Messages stream event",
        ),
        (
            Which::OpenAi,
            vec!["data: [1, 2\n\n".into()],
            "not a chat completion chunk",
        ),
        (
            Which::OpenAi,
            openai_stream(&["cut"], None)[..2].to_vec(),
            "finish_reason",
        ),
        (
            Which::OpenAi,
            vec!["<html>502 Bad Gateway</html>".into()],
            "finish_reason",
        ),
    ];
    for (which, events, expected) in cases {
        let run = run(which, vec![Answer::sse(events), which.good()], |_| {}).await;
        let error = run.result.unwrap_err();
        assert!(
            matches!(error, ModelError::BadResponse { .. }),
            "{which:?}: {error:?}"
        );
        assert!(error.to_string().contains(expected), "{which:?}: {error}");
        assert!(!error.retryable());
        assert_eq!(run.received.len(), 1);
    }
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_a_typed_error() {
    for which in BOTH {
        let answers = vec![Answer::RawSse(b"data: \xc3\x28\n\n".to_vec()), which.good()];
        let run = run(which, answers, |_| {}).await;
        let error = run.result.unwrap_err();
        assert!(
            matches!(error, ModelError::BadResponse { .. }),
            "{which:?}: {error:?}"
        );
        assert!(error.to_string().contains("not UTF-8"), "{error}");
        assert_eq!(run.received.len(), 1);
    }
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_retried() {
    let mut overloaded = anthropic_stream(&[], None)[..2].to_vec();
    overloaded.push(event(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let run = run(
        Which::Anthropic,
        vec![Answer::sse(overloaded), Which::Anthropic.good()],
        |_| {},
    )
    .await;
    assert_eq!(run.result.unwrap().text, "fine");
    assert_eq!(run.received.len(), 2);
    assert_eq!(run.received[1].header("idempotency-key"), Some("l3m-c5"));
}

#[tokio::test]
async fn a_refused_connection_is_retryable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let pause = Arc::new(RecordingPause::default());
    let mut tuning = tuning(pause.clone());
    tuning.max_retries = 2;
    let provider = Anthropic::new(&base, "k", tuning).unwrap();
    let error = provider.complete(&sample_request("m")).await.unwrap_err();
    assert!(matches!(error, ModelError::Connect { .. }), "{error:?}");
    assert!(error.retryable());
    assert_eq!(pause.waits.lock().unwrap().len(), 2, "tried three times");
}
