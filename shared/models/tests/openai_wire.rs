//! The OpenAI-compatible Chat Completions client against a local server speaking the API: what
//! it sends, and what it makes of a realistic stream.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod common;

use std::sync::Arc;

use common::{Answer, RecordingPause, Server, openai_stream, sample_request, tuning};
use l3m_core::log::Usage;
use l3m_models::openai::OpenAi;
use l3m_models::{ModelReply, Provider};
use serde_json::{Value, json};

async fn one_call(answer: Answer, key: Option<&str>) -> (ModelReply, common::Received) {
    let server = Server::start(vec![answer]).await;
    let provider = OpenAi::new(
        &format!("{}/v1", server.base_url),
        key,
        tuning(Arc::new(RecordingPause::default())),
    )
    .unwrap();
    let reply = provider
        .complete(&sample_request("gpt-test"))
        .await
        .unwrap();
    let mut received = server.received();
    assert_eq!(received.len(), 1);
    (reply, received.remove(0))
}

async fn sent_body() -> Value {
    one_call(Answer::sse(openai_stream(&["ok"], None)), None)
        .await
        .1
        .body
}

#[tokio::test]
async fn the_request_opens_with_the_system_message_with_notes_and_carries_the_exact_conversation() {
    let (_, received) = one_call(Answer::sse(openai_stream(&["ok"], None)), Some("sk-open")).await;
    assert_eq!(received.path, "/v1/chat/completions");
    assert_eq!(received.header("authorization"), Some("Bearer sk-open"));
    assert_eq!(received.header("idempotency-key"), Some("l3m-c5"));
    let expected = json!({
        "model": "gpt-test",
        "max_tokens": 1024,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "You are the l3m test agent.\n\nNOTES: prefer short answers."},
            {"role": "user", "content": format!("(l3m) summary of earlier conversation: {}\n\nplease read the file", common::SUMMARY)},
            {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": "tu_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"workspace/a.md\"}"}},
                {"id": "tu_2", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\"secret\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "tu_1", "content": "contents of a"},
            {"role": "tool", "tool_call_id": "tu_2", "content": "error: permission denied"},
            {"role": "assistant", "content": "The file says hi."},
            {"role": "user", "content": "and now?"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "read_file", "description": "Reads a file under the ACR.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
            {"type": "function", "function": {"name": "list_dir", "description": "Lists a directory.", "parameters": {"type": "object"}}},
        ],
    });
    assert_eq!(received.body, expected);
}

#[tokio::test]
async fn a_local_server_gets_no_authorization_header_when_no_key_is_given() {
    let (_, received) = one_call(Answer::sse(openai_stream(&["ok"], None)), None).await;
    assert_eq!(received.header("authorization"), None);
}

#[tokio::test]
async fn every_tool_message_answers_a_tool_call_of_the_assistant_message_before() {
    let body = sent_body().await;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages.iter().filter(|m| m["role"] == "system").count(), 1);
    let mut open: Vec<String> = Vec::new();
    let mut answered = 0;
    for message in messages {
        match message["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "a tool call was left unanswered: {open:?}");
                open = message["tool_calls"]
                    .as_array()
                    .map_or(Vec::new(), |calls| {
                        calls
                            .iter()
                            .map(|c| c["id"].as_str().unwrap().to_owned())
                            .collect()
                    });
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert_eq!(
                    open.first().map(String::as_str),
                    Some(id),
                    "results follow their calls in order"
                );
                open.remove(0);
                answered += 1;
            }
            _ => assert!(
                open.is_empty(),
                "a user message came before every call was answered"
            ),
        }
    }
    assert!(open.is_empty());
    assert_eq!(answered, 2);
}

#[tokio::test]
async fn rewound_turns_are_absent_and_the_compacted_span_is_its_summary() {
    let text = sent_body().await.to_string();
    assert!(
        !text.contains("REWOUND"),
        "a rewound turn reached the model: {text}"
    );
    assert!(
        !text.contains("OLD-SPAN"),
        "a compacted span reached the model: {text}"
    );
    assert_eq!(text.matches(common::SUMMARY).count(), 1);
}

#[tokio::test]
async fn a_streamed_reply_with_split_tool_arguments_is_assembled_with_its_usage() {
    let stream = openai_stream(
        &["Let me ", "look."],
        Some((
            "call_9",
            "read_file",
            &["{\"path\"", ": \"workspace/", "c.md\"}"],
        )),
    );
    for chunk in [1, 7, 4096] {
        let (reply, _) = one_call(
            Answer::Sse {
                events: stream.clone(),
                chunk,
            },
            None,
        )
        .await;
        assert_eq!(reply.text, "Let me look.");
        assert_eq!(reply.stop_reason, "tool_calls");
        assert_eq!(reply.tool_uses.len(), 1);
        assert_eq!(reply.tool_uses[0].id.as_str(), "call_9");
        assert_eq!(reply.tool_uses[0].input, json!({"path": "workspace/c.md"}));
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 150,
                output_tokens: 33,
                cache_read_tokens: 50,
                cache_write_tokens: 0
            }
        );
    }
}
