//! An agent's hook: `agent/hooks.star`, whose `on_event(event)` proposes a disposition for each
//! event before the model sees it.
//!
//! A hook is checked at boot like a program, by the evaluator, with one difference: it has no
//! effect class at all, so naming any class function is a load error ([`Rule::NoEffect`]) and it
//! makes no calls. It runs in the evaluator too, never in the caller: one process per batch of
//! events ([`Hook::decide`]), each call under its own step budget, the batch under the address
//! space, CPU and wall-clock limits of [`Evaluator`]. What it returns is only a proposal: the
//! caller checks it against the event (`l3m_core::hooks::decide`) and journals the decision.
//!
//! # Format
//! The event a hook sees is a dict: `id`, `text` (at most [`MAX_EVENT_TEXT`] bytes) and the
//! source's fields, `kind` first (`letter` with `letter_id`, `from` and, for a reply,
//! `in_reply_to`; `vigil`; `child-done` with `child`; `program-done` with `program`;
//! `deadline`; `notice`). It returns `"show"`, `"dismiss"`, `"ignore"` or `"close"`, or a dict
//! `{"kind": "reply", "text": …}`, `{"kind": "forward", "to": …}`, `{"kind": "defer",
//! "program": …}` or `{"kind": "retire-child", "child": …}`.

use std::path::Path;
use std::sync::Arc;

use l3m_core::log::{Disposition, EventId, EventSource};
use serde_json::Value;

use crate::process::{Evaluator, exchange, parent_stop, read_source};
use crate::protocol::{CheckRequest, FromChild, HookRequest};
use crate::rule::{LoadError, Rule, RunError};

/// Where an agent's hook lives, relative to its ACR (on its persona branch).
pub const HOOKS_FILE: &str = "agent/hooks.star";

/// The most of an event's text a hook sees, in bytes.
pub const MAX_EVENT_TEXT: usize = 16 * 1024;

/// The most events one evaluator decides: a larger backlog is split into batches.
pub const MAX_BATCH: usize = 64;

/// The event `id` from `source` with `text`, as the hook sees it.
pub fn event_json(id: &EventId, source: &EventSource, text: &str) -> Value {
    let mut cut = text.len().min(MAX_EVENT_TEXT);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut event = match serde_json::to_value(source) {
        Ok(Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    event.insert("id".into(), Value::String(id.to_string()));
    event.insert("text".into(), Value::String(text[..cut].to_owned()));
    Value::Object(event)
}

/// The disposition a hook returned, or what is wrong with it.
pub fn disposition(value: &Value) -> Result<Disposition, String> {
    const EXPECTED: &str = "return \"show\", \"dismiss\", \"ignore\" or \"close\", or a dict \
                            such as {\"kind\": \"reply\", \"text\": \"…\"}";
    let brief = || {
        let mut text = value.to_string();
        if text.len() > 120 {
            let mut cut = 120;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        text
    };
    match value {
        Value::String(word) => match word.as_str() {
            "show" => Ok(Disposition::Show),
            "dismiss" => Ok(Disposition::Dismiss),
            "ignore" => Ok(Disposition::Ignore),
            "close" => Ok(Disposition::Close),
            _ => Err(format!("{} is not a disposition; {EXPECTED}", brief())),
        },
        Value::Object(_) => serde_json::from_value(value.clone())
            .map_err(|e| format!("{} is not a disposition ({e}); {EXPECTED}", brief())),
        _ => Err(format!("{} is not a disposition; {EXPECTED}", brief())),
    }
}

/// An admitted hook, ready to decide events.
#[derive(Debug, Clone)]
pub struct Hook {
    file: String,
    source: Arc<str>,
    evaluator: Evaluator,
}

impl Hook {
    /// Checks `source` (named `file`) in the evaluator: the seal, the type check with no class,
    /// the load. Admitted, it is a hook; refused, the refusal names file, line and rule.
    pub fn check(evaluator: &Evaluator, file: &str, source: &str) -> Result<Hook, LoadError> {
        let request = CheckRequest {
            file: file.to_owned(),
            source: source.to_owned(),
        };
        match exchange(evaluator, "check-hook", file, &request) {
            Ok(FromChild::HookChecked { result }) => result.map(|()| Hook {
                file: file.to_owned(),
                source: source.into(),
                evaluator: evaluator.clone(),
            }),
            Ok(other) => Err(LoadError::new(
                file,
                1,
                Rule::Evaluator,
                format!("the evaluator answered a hook's check with {other:?}"),
            )),
            Err(e) => Err(LoadError::new(file, e.line.unwrap_or(1), e.rule, e.detail)),
        }
    }

    /// Runs `on_event` on each of `events` (as [`event_json`] built them), in one evaluator per
    /// [`MAX_BATCH`] events. Each result is the proposed disposition or why there is none: the
    /// event's own failure, or the batch's (its deadline, a kernel limit), which every event of
    /// that batch then carries. Blocks for at most the evaluator's deadline per batch.
    pub fn decide(&self, events: &[Value]) -> Vec<Result<Disposition, RunError>> {
        events
            .chunks(MAX_BATCH)
            .flat_map(|batch| self.decide_batch(batch))
            .collect()
    }

    fn decide_batch(&self, events: &[Value]) -> Vec<Result<Disposition, RunError>> {
        let request = HookRequest {
            file: self.file.clone(),
            source: self.source.to_string(),
            events: events.to_vec(),
            steps: self.evaluator.steps,
        };
        let answered = match exchange(&self.evaluator, "hook", &self.file, &request) {
            Ok(FromChild::Decided {
                result: Ok(results),
            }) if results.len() == events.len() => Ok(results),
            Ok(FromChild::Decided {
                result: Ok(results),
            }) => Err(parent_stop(
                &self.file,
                Rule::Evaluator,
                format!(
                    "the evaluator decided {} events of {}",
                    results.len(),
                    events.len()
                ),
            )),
            Ok(FromChild::Decided { result: Err(e) }) => Err(e),
            Ok(other) => Err(parent_stop(
                &self.file,
                Rule::Evaluator,
                format!("the evaluator answered a hook's run with {other:?}"),
            )),
            Err(e) => Err(e),
        };
        match answered {
            Ok(results) => results
                .into_iter()
                .map(|result| {
                    result.and_then(|value| {
                        disposition(&value)
                            .map_err(|detail| parent_stop(&self.file, Rule::NotDisposition, detail))
                    })
                })
                .collect(),
            Err(e) => vec![Err(e); events.len()],
        }
    }
}

/// Reads and checks `<acr>/agent/hooks.star`: `None` when there is none, else the hook or its
/// refusal (a link is refused, naming the file).
pub fn load(evaluator: &Evaluator, acr: &Path) -> Option<Result<Hook, LoadError>> {
    let path = acr.join(HOOKS_FILE);
    std::fs::symlink_metadata(&path).ok()?;
    Some(
        read_source(&path, HOOKS_FILE)
            .and_then(|source| Hook::check(evaluator, HOOKS_FILE, &source)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::names::{AgentName, Entity};

    #[test]
    fn dispositions_parse_from_words_and_dicts_or_are_named() {
        assert_eq!(disposition(&"dismiss".into()), Ok(Disposition::Dismiss));
        assert_eq!(
            disposition(&serde_json::json!({"kind": "reply", "text": "ok"})),
            Ok(Disposition::Reply { text: "ok".into() })
        );
        assert_eq!(
            disposition(&serde_json::json!({"kind": "retire-child", "child": "a/b/c"})),
            Ok(Disposition::RetireChild {
                child: AgentName::parse("a/b/c").unwrap()
            })
        );
        for bad in [
            serde_json::json!("launch"),
            serde_json::json!(3),
            serde_json::json!({"kind": "reply"}),
            serde_json::json!({"kind": "forward", "to": "Not A Name"}),
            serde_json::json!("x".repeat(1000)),
        ] {
            let e = disposition(&bad).unwrap_err();
            assert!(e.contains("is not a disposition") && e.len() < 600, "{e}");
        }
    }

    #[test]
    fn the_event_carries_its_source_id_and_bounded_text() {
        let source = EventSource::Letter {
            letter_id: "l1".into(),
            from: Entity::parse("alice/main").unwrap(),
            in_reply_to: None,
        };
        let long = "é".repeat(MAX_EVENT_TEXT);
        let event = event_json(&EventId::new("e1").unwrap(), &source, &long);
        assert_eq!(event["kind"], "letter");
        assert_eq!(event["from"], "alice/main");
        assert_eq!(event["id"], "e1");
        let text = event["text"].as_str().unwrap();
        assert!(text.len() <= MAX_EVENT_TEXT && text.len() > MAX_EVENT_TEXT - 4);
    }
}
