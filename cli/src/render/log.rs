//! One line per Log record: seq, time, kind and a short summary, the summary's control
//! characters made visible.

use l3m_core::log::Record;
use l3m_core::story::summary;

use super::escape::Foreign;
use super::time::utc;

/// One line for `record`: `#seq  time  kind  summary`.
pub fn line(record: &Record) -> String {
    let summary = summary(&record.body);
    let line = format!(
        "#{:<4} {}  {:<15} {}",
        record.seq,
        utc(record.at_ms),
        record.body.kind(),
        Foreign(&summary)
    );
    line.trim_end().to_owned()
}

/// The JSON form of one record line (`l3m log --json`): the record as stored, plus `line`
/// (the one-line summary `l3m log` prints) and `summary`, which is the same line except for a
/// record that has a `summary` field of its own (a compaction's summary, a grant or budget
/// change's account): that field is kept as stored.
pub fn json(record: &Record) -> serde_json::Value {
    let mut value = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let Some(map) = value.as_object_mut() {
        let line = summary(&record.body);
        map.entry("summary").or_insert_with(|| line.clone().into());
        map.insert("line".into(), line.into());
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::RecordBody;
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
    fn a_compaction_keeps_its_own_summary_in_json() {
        let record = Record {
            seq: 9,
            at_ms: 0,
            body: RecordBody::Compaction {
                from: 1,
                to: 7,
                summary: "The agent wrote notes.md and was asked to add a title.".into(),
            },
        };
        let value = json(&record);
        assert_eq!(
            value["summary"],
            "The agent wrote notes.md and was asked to add a title."
        );
        assert_eq!(value["line"], "#1..#7 summarized");
    }

    #[test]
    fn a_hostile_summary_cannot_fake_a_line_or_reach_the_terminal() {
        let record = Record {
            seq: 1,
            at_ms: 0,
            body: RecordBody::CallFailed {
                call: l3m_core::log::CallId::new("c1").unwrap(),
                error: "bad\x1b[2J\rfake\u{9b}1m\u{202E}txt".into(),
                retryable: false,
            },
        };
        let shown = line(&record);
        assert!(
            !shown.chars().any(crate::render::escape::is_hostile),
            "{shown:?}"
        );
        assert!(
            shown.ends_with("c1: bad^[[2J fake<U+009B>1m<U+202E>txt"),
            "{shown}"
        );
    }
}
