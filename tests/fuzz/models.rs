//! Model replies (`l3m_models`): the server-sent event stream (`sse::Parser`) and the two
//! dialects' decoders over its events (`anthropic::Decoder`, `openai::Decoder`), which read
//! whatever a model endpoint, or anything posing as one, streams back.

use l3m_core::log::CallId;
use l3m_models::http::StreamDecoder;
use l3m_models::sse::{Event, Parser, SseError};
use l3m_models::{ModelError, ModelReply, anthropic, openai};
use serde_json::{Map, Value};

use crate::harness::{self, Src};

/// The two dialects' keys, the object shapes the fuzzer builds events from.
const KEYS: &[&str] = &[
    "type",
    "message",
    "usage",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "index",
    "content_block",
    "delta",
    "text",
    "partial_json",
    "id",
    "name",
    "input",
    "stop_reason",
    "error",
    "choices",
    "content",
    "tool_calls",
    "function",
    "arguments",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "code",
];

/// The values of `type`, and other strings the decoders compare against.
const TYPES: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "text",
    "tool_use",
    "text_delta",
    "input_json_delta",
    "end_turn",
    "tool_use",
    "stop",
    "tool_calls",
    "{\"a\":",
    "}",
    "toolu_1",
    "",
];

/// A JSON value from `src` over the dialects' keys and words, at most `depth` deep.
fn json(src: &mut Src<'_>, depth: usize) -> Value {
    let top = if depth == 0 { 6 } else { 8 };
    match src.below(top) {
        0 => Value::Null,
        1 => Value::Bool(src.byte() & 1 == 1),
        2 => Value::from(match src.below(3) {
            0 => u64::from(src.byte() % 4),
            1 => u64::MAX - u64::from(src.byte() % 2),
            _ => src.u64(),
        }),
        3 => Value::from(-i64::from(src.byte())),
        4 | 5 => Value::String(match src.below(3) {
            0 => harness::string(src, KEYS),
            _ => (*src.pick(TYPES)).to_owned(),
        }),
        6 => Value::Array((0..src.below(3)).map(|_| json(src, depth - 1)).collect()),
        _ => {
            let mut map = Map::new();
            for _ in 0..src.below(5) {
                map.insert((*src.pick(KEYS)).to_owned(), json(src, depth - 1));
            }
            Value::Object(map)
        }
    }
}

/// An event stream from `src`: events of generated JSON (or raw text, or `[DONE]`), with mixed
/// line ends, comments and unnamed events.
fn stream(src: &mut Src<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    while !src.done() && out.len() < 8192 {
        let ends: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
        let end = *src.pick(&ends);
        match src.below(10) {
            0 => out.extend_from_slice(b": keep-alive"),
            1 => out.extend_from_slice(&src.bytes(16)),
            2 => out.extend_from_slice(b"data: [DONE]"),
            _ => {
                if src.below(2) == 0 {
                    out.extend_from_slice(b"event: ");
                    out.extend_from_slice(src.pick(TYPES).as_bytes());
                    out.extend_from_slice(end);
                }
                let mut object = json(src, 4);
                if let Value::Object(map) = &mut object {
                    map.insert("type".into(), Value::String((*src.pick(TYPES)).to_owned()));
                }
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(object.to_string().as_bytes());
            }
        }
        out.extend_from_slice(end);
        if src.below(2) == 0 {
            out.extend_from_slice(end);
        }
    }
    out
}

/// The events of `bytes` fed whole, or in the pieces `cuts` chooses, then finished.
fn events(bytes: &[u8], mut cuts: Option<&mut Src<'_>>) -> Result<Vec<Event>, SseError> {
    let mut parser = Parser::new();
    let mut events = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = match cuts.as_deref_mut() {
            Some(cuts) => 1 + cuts.below(rest.len()),
            None => rest.len(),
        };
        let (piece, after) = rest.split_at(n);
        events.extend(parser.feed(piece)?);
        rest = after;
    }
    events.extend(parser.finish()?);
    Ok(events)
}

/// Runs one dialect's decoder over `events` as the endpoint does: until it reports the end,
/// then `finish`.
fn decode<D: StreamDecoder>(mut decoder: D, events: &[Event]) -> Result<ModelReply, ModelError> {
    for event in events {
        if decoder.event(event.clone())? {
            return decoder.finish(true);
        }
    }
    decoder.finish(false)
}

/// A decoder's refusal is one of the two a reply can earn: a bad response or the stream's own
/// error; a reply holds no more text than the stream brought.
fn check(result: Result<ModelReply, ModelError>, len: usize) {
    match result {
        Ok(reply) => {
            assert!(reply.text.len() <= len, "a reply longer than its stream");
            assert!(reply.tool_uses.len() <= len);
        }
        Err(e) => assert!(
            matches!(
                e,
                ModelError::BadResponse { .. } | ModelError::StreamError { .. }
            ),
            "a decoder answered {e:?}"
        ),
    }
}

/// `fuzz_model_replies_both_dialects`: any stream parses into the same events however it is
/// cut into chunks, or into the same typed refusal; the events hold no more than the stream;
/// both dialects decode them into a reply or a typed refusal.
#[test]
fn fuzz_model_replies_both_dialects() {
    let call = CallId::new("c1").expect("a valid call id");
    harness::run("model-replies", 20_000, 4096, |input| {
        let mut src = Src::new(input);
        let bytes = match src.below(8) {
            0 => input.to_vec(),
            _ => stream(&mut src),
        };
        let whole = events(&bytes, None);
        let cut = events(&bytes, Some(&mut Src::new(input)));
        assert_eq!(whole, cut, "chunking changed the events");
        let Ok(events) = whole else { return };
        let data: usize = events.iter().map(|e| e.data.len()).sum();
        assert!(data <= bytes.len(), "events hold more than the stream");
        check(decode(anthropic::Decoder::default(), &events), bytes.len());
        check(decode(openai::Decoder::new(&call), &events), bytes.len());
    });
}
