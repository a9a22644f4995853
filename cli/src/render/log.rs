//! One line per Log record: seq, time, kind and a short summary.

use l3m_core::log::{Record, RecordBody};

use super::time::utc;

/// How many characters of free text a summary keeps.
const SHORT: usize = 72;

/// `text` on one line, cut to `SHORT` characters.
pub fn short(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > SHORT {
        let cut: String = one.chars().take(SHORT - 1).collect();
        format!("{cut}…")
    } else {
        one
    }
}

/// The summary of one record's body.
pub fn summary(body: &RecordBody) -> String {
    match body {
        RecordBody::SystemPrompt { text, continues } => format!(
            "{}{} chars",
            if *continues { "continues, " } else { "" },
            text.chars().count()
        ),
        RecordBody::UserLine { from, text } => format!("{from}: {}", short(text)),
        RecordBody::CallStarted {
            call,
            provider,
            model,
            attempt,
            ..
        } => format!("{call} → {provider}/{model} (attempt {attempt})"),
        RecordBody::AssistantReply {
            text,
            tool_uses,
            usage,
            ..
        } => {
            let tools: Vec<&str> = tool_uses.iter().map(|u| u.name.as_str()).collect();
            let uses = if tools.is_empty() {
                String::new()
            } else {
                format!(" [uses {}]", tools.join(", "))
            };
            format!(
                "{}{uses} ({} in, {} out)",
                short(text),
                usage.input_tokens,
                usage.output_tokens
            )
        }
        RecordBody::CallFailed {
            call,
            error,
            retryable,
        } => format!(
            "{call}: {}{}",
            short(error),
            if *retryable { " (retryable)" } else { "" }
        ),
        RecordBody::ToolCall { id, name, tier, .. } => format!("{id} {name} ({tier:?})"),
        RecordBody::ToolStarted { id } => id.to_string(),
        RecordBody::ToolResult {
            id,
            output,
            is_error,
            ..
        } => format!(
            "{id}{} {}",
            if *is_error { " error:" } else { "" },
            short(output)
        ),
        RecordBody::Event { text, .. } => short(text),
        RecordBody::HookDecision { event, disposition } => format!("{event}: {disposition:?}"),
        RecordBody::GrantChange { summary, .. } => short(summary),
        RecordBody::BudgetChange { left, summary } => format!("{} (left {left})", short(summary)),
        RecordBody::Review {
            call,
            round,
            verdict,
            by,
        } => format!("{call} round {round} by {by}: {verdict:?}"),
        RecordBody::Rewind { to, reason } => format!("back to after #{to}: {}", short(reason)),
        RecordBody::Compaction { from, to, .. } => format!("#{from}..#{to} summarized"),
        RecordBody::Interrupted {
            reason,
            closed_call,
            closed_tools,
        } => format!(
            "{} (closed {} call, {} tools)",
            short(reason),
            usize::from(closed_call.is_some()),
            closed_tools.len()
        ),
        RecordBody::TurnEnd => String::new(),
        RecordBody::OutOfFuel { unit } => format!("{unit:?} ran out"),
    }
}

/// One line for `record`: `#seq  time  kind  summary`.
pub fn line(record: &Record) -> String {
    let summary = summary(&record.body);
    let line = format!(
        "#{:<4} {}  {:<15} {summary}",
        record.seq,
        utc(record.at_ms),
        record.body.kind()
    );
    line.trim_end().to_owned()
}

/// The JSON form of one record line (`l3m log --json`): the record as stored, plus `summary`.
pub fn json(record: &Record) -> serde_json::Value {
    let mut value = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("summary".into(), summary(&record.body).into());
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::names::Entity;

    #[test]
    fn a_user_line_renders_on_one_line_with_its_sender() {
        let record = Record {
            seq: 3,
            at_ms: 0,
            body: RecordBody::UserLine {
                from: Entity::parse("human:alice").unwrap(),
                text: "hello\nthere".into(),
            },
        };
        assert_eq!(
            line(&record),
            "#3    1970-01-01T00:00:00.000Z  user-line       human:alice: hello there"
        );
        assert_eq!(json(&record)["summary"], "human:alice: hello there");
        assert_eq!(json(&record)["kind"], "user-line");
    }

    #[test]
    fn long_text_is_cut() {
        let s = short(&"x".repeat(200));
        assert_eq!(s.chars().count(), SHORT);
        assert!(s.ends_with('…'));
    }
}
