//! One line per Log record: seq, time, kind and a short summary.

use l3m_core::log::Record;
use l3m_core::story::summary;

use super::time::utc;

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
}
