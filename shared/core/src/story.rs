//! The story a Log tells, one line per record: what `l3m log` prints and what each commit of
//! the Log's ref says, so plain `git log` on `refs/l3m/a/<agent>/_/log` reads as the agent's
//! story, not as "2 record(s) from seq 33".

use crate::log::{Disposition, Record, RecordBody};

/// A disposition in a few words: `show`, `reply "…"`, `forward to alice/main`.
pub fn disposition(disposition: &Disposition) -> String {
    match disposition {
        Disposition::Show => "show".into(),
        Disposition::Dismiss => "dismiss".into(),
        Disposition::Ignore => "ignore".into(),
        Disposition::Close => "close".into(),
        Disposition::Reply { text } => format!("reply {:?}", short(text)),
        Disposition::Forward { to } => format!("forward to {to}"),
        Disposition::Defer { program } => format!("defer to program {program}"),
        Disposition::RetireChild { child } => format!("retire child {child}"),
    }
}

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
        RecordBody::HookDecision { event, disposition } => {
            format!("{event}: {}", self::disposition(disposition))
        }
        RecordBody::GrantChange { summary, .. } => short(summary),
        RecordBody::BudgetChange { left, summary } => format!("{} (left {left})", short(summary)),
        RecordBody::Review {
            call,
            round,
            of,
            verdict,
            by,
            ..
        } => format!("{call} round {round}/{of} by {by}: {verdict:?}"),
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

/// The subject of the commit that appends `records`: the most telling record's kind and summary
/// (a reply, a tool result, an event, a failure; else the first record), and how many more
/// records the commit holds. One line, at most [`SUBJECT`] characters.
pub fn subject(records: &[Record]) -> String {
    let telling = |r: &&Record| {
        matches!(
            r.body,
            RecordBody::AssistantReply { .. }
                | RecordBody::ToolResult { .. }
                | RecordBody::Event { .. }
                | RecordBody::CallFailed { .. }
                | RecordBody::Rewind { .. }
                | RecordBody::OutOfFuel { .. }
                | RecordBody::UserLine { .. }
        )
    };
    let Some(chosen) = records.iter().find(telling).or(records.first()) else {
        return "log: nothing appended".into();
    };
    let text = summary(&chosen.body);
    let mut line = if text.is_empty() {
        chosen.body.kind().to_owned()
    } else {
        format!("{}: {text}", chosen.body.kind())
    };
    if line.chars().count() > SUBJECT {
        line = line.chars().take(SUBJECT - 1).collect::<String>() + "…";
    }
    match records.len() {
        1 => line,
        n => format!("{line} (+{} more)", n - 1),
    }
}

/// The longest commit subject [`subject`] writes, before the count of more records.
pub const SUBJECT: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{CallId, Usage};

    #[test]
    fn a_commit_subject_tells_what_happened_on_one_line() {
        let call = CallId::new("c1").unwrap();
        let reply = RecordBody::AssistantReply {
            call: call.clone(),
            text: "The worker reports\nits notes are committed".into(),
            tool_uses: vec![],
            usage: Usage::default(),
            stop_reason: "end_turn".into(),
        };
        let started = RecordBody::CallStarted {
            call,
            provider: "p".into(),
            model: "m".into(),
            attempt: 1,
            fallback_of: None,
        };
        let subject = subject(&[
            Record::fixture(3, started),
            Record::fixture(4, reply),
            Record::fixture(5, RecordBody::TurnEnd),
        ]);
        assert!(
            subject.starts_with("assistant-reply: The worker reports its notes are committed")
                && subject.ends_with("(+2 more)")
                && !subject.contains('\n'),
            "{subject}"
        );
        assert_eq!(subject_of_turn_end(), "turn-end");
        let long = RecordBody::Event {
            id: crate::log::EventId::new("e").unwrap(),
            source: crate::log::EventSource::Notice,
            text: "y".repeat(500),
        };
        assert!(super::subject(&[Record::fixture(0, long)]).chars().count() <= SUBJECT);
    }

    #[test]
    fn long_text_is_cut() {
        let s = short(&"x".repeat(200));
        assert_eq!(s.chars().count(), SHORT);
        assert!(s.ends_with('…'));
    }

    fn subject_of_turn_end() -> String {
        subject(&[Record::fixture(0, RecordBody::TurnEnd)])
    }
}
