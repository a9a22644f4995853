//! The Anthropic Messages client against a local server speaking the API: what it sends, and
//! what it makes of a realistic stream.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod common;

use std::sync::Arc;

use common::{Answer, RecordingPause, Server, anthropic_stream, sample_request, tuning};
use l3m_core::log::Usage;
use l3m_models::anthropic::Anthropic;
use l3m_models::{ModelReply, Provider};
use serde_json::{Value, json};

async fn one_call(answer: Answer) -> (ModelReply, common::Received) {
    let server = Server::start(vec![answer]).await;
    let provider = Anthropic::new(
        &server.base_url,
        "sk-test",
        tuning(Arc::new(RecordingPause::default())),
    )
    .unwrap();
    let reply = provider
        .complete(&sample_request("claude-test"))
        .await
        .unwrap();
    let mut received = server.received();
    assert_eq!(received.len(), 1);
    (reply, received.remove(0))
}

async fn sent_body() -> Value {
    one_call(Answer::sse(anthropic_stream(&["ok"], None)))
        .await
        .1
        .body
}

#[tokio::test]
async fn the_request_carries_the_system_prompt_top_level_with_notes_and_the_exact_conversation() {
    let (_, received) = one_call(Answer::sse(anthropic_stream(&["ok"], None))).await;
    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.header("x-api-key"), Some("sk-test"));
    assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received.header("content-type"), Some("application/json"));
    assert_eq!(received.header("idempotency-key"), Some("l3m-c5"));
    let expected = json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "stream": true,
        "system": [{"type": "text", "text": "You are the l3m test agent.\n\nNOTES: prefer short answers.",
                    "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": format!("(l3m) summary of earlier conversation: {}", common::SUMMARY)},
                {"type": "text", "text": "please read the file"},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "workspace/a.md"}},
                {"type": "tool_use", "id": "tu_2", "name": "list_dir", "input": {"path": "secret"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "contents of a", "is_error": false},
                {"type": "tool_result", "tool_use_id": "tu_2", "content": "permission denied", "is_error": true,
                 "cache_control": {"type": "ephemeral"}},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "The file says hi."}]},
            {"role": "user", "content": [{"type": "text", "text": "and now?",
                                          "cache_control": {"type": "ephemeral"}}]},
        ],
        "tools": [
            {"name": "read_file", "description": "Reads a file under the ACR.",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
            {"name": "list_dir", "description": "Lists a directory.", "input_schema": {"type": "object"},
             "cache_control": {"type": "ephemeral"}},
        ],
    });
    assert_eq!(received.body, expected);
}

#[tokio::test]
async fn every_tool_result_is_paired_with_a_tool_use_of_the_message_before() {
    let body = sent_body().await;
    let messages = body["messages"].as_array().unwrap();
    assert!(
        messages.iter().all(|m| m["role"] != "system"),
        "system is never a message"
    );
    let mut results_seen = 0;
    for (i, message) in messages.iter().enumerate() {
        let blocks = message["content"].as_array().unwrap();
        let uses: Vec<&Value> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| &b["id"])
            .collect();
        if !uses.is_empty() {
            let next = messages[i + 1]["content"].as_array().unwrap();
            let results: Vec<&Value> = next
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| &b["tool_use_id"])
                .collect();
            assert_eq!(
                uses, results,
                "each use answered once, in order, in the next user turn"
            );
            let first_text = next
                .iter()
                .position(|b| b["type"] == "text")
                .unwrap_or(next.len());
            assert!(
                next[..first_text]
                    .iter()
                    .all(|b| b["type"] == "tool_result"),
                "results come first"
            );
            results_seen += results.len();
        }
    }
    let all_results = messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_result")
        .count();
    assert_eq!(results_seen, all_results);
    assert_eq!(all_results, 2);
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
async fn a_streamed_reply_with_a_split_tool_input_is_assembled_with_its_usage() {
    let stream = anthropic_stream(
        &["I will ", "read it."],
        Some((
            "toolu_01",
            "read_file",
            &["{\"pa", "th\": \"work", "space/b.md\"}"],
        )),
    );
    for chunk in [1, 7, 4096] {
        let (reply, _) = one_call(Answer::Sse {
            events: stream.clone(),
            chunk,
        })
        .await;
        assert_eq!(reply.text, "I will read it.");
        assert_eq!(reply.stop_reason, "tool_use");
        assert_eq!(reply.tool_uses.len(), 1);
        assert_eq!(reply.tool_uses[0].id.as_str(), "toolu_01");
        assert_eq!(reply.tool_uses[0].name, "read_file");
        assert_eq!(reply.tool_uses[0].input, json!({"path": "workspace/b.md"}));
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 120,
                output_tokens: 42,
                cache_read_tokens: 40,
                cache_write_tokens: 30
            }
        );
    }
}
