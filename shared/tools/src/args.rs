//! Reading a tool's JSON input field by field, so a bad input names the field at fault.

use l3m_core::json::kind;
use serde_json::{Map, Value};

use crate::tool::ToolError;

/// A tool's input, checked to be an object whose every field its schema declares.
pub(crate) struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    /// Checks `input` against the `properties` of `schema`: an object, no unknown fields.
    pub(crate) fn parse(input: &'a Value, schema: &Value) -> Result<Self, ToolError> {
        let map = input
            .as_object()
            .ok_or_else(|| bad("input", format!("expected an object, got {}", kind(input))))?;
        let known: Vec<&str> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if let Some(field) = map.keys().find(|k| !known.contains(&k.as_str())) {
            let takes = if known.is_empty() {
                "no fields".to_owned()
            } else {
                known.join(", ")
            };
            return Err(bad(
                field,
                format!("unknown field; this tool takes {takes}"),
            ));
        }
        Ok(Self(map))
    }

    /// A required string field.
    pub(crate) fn string(&self, field: &str) -> Result<&'a str, ToolError> {
        self.opt_string(field)?
            .ok_or_else(|| bad(field, "required, and missing".into()))
    }

    /// An optional string field.
    pub(crate) fn opt_string(&self, field: &str) -> Result<Option<&'a str>, ToolError> {
        match self.0.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(bad(
                field,
                format!("expected a string, got {}", kind(other)),
            )),
        }
    }

    /// An optional field of any JSON type.
    pub(crate) fn opt_value(&self, field: &str) -> Option<&'a Value> {
        self.0.get(field)
    }

    /// An optional array of strings.
    pub(crate) fn opt_strings(&self, field: &str) -> Result<Option<Vec<&'a str>>, ToolError> {
        match self.0.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().ok_or_else(|| {
                        bad(field, format!("expected strings only, got {}", kind(item)))
                    })
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => Err(bad(
                field,
                format!("expected an array of strings, got {}", kind(other)),
            )),
        }
    }

    /// An optional whole number in `1..=max`.
    pub(crate) fn opt_count(&self, field: &str, max: usize) -> Result<Option<usize>, ToolError> {
        let Some(value) = self.0.get(field) else {
            return Ok(None);
        };
        value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=max).contains(n))
            .map(Some)
            .ok_or_else(|| {
                bad(
                    field,
                    format!("expected a whole number from 1 to {max}, got {value}"),
                )
            })
    }
}

impl Args<'_> {
    /// The optional `from_byte` field: bytes of the text read to skip (default 0), as a cut
    /// output's note names them.
    pub(crate) fn skip(&self) -> Result<usize, ToolError> {
        match self.0.get("from_byte") {
            None => Ok(0),
            Some(value) => value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    bad(
                        "from_byte",
                        format!("expected a whole number from 0, got {value}"),
                    )
                }),
        }
    }
}

/// `text` without its first `skip` bytes (moved on to the next character boundary, so a cut
/// that fell inside a character reads on from the character after it).
pub(crate) fn skip_bytes(text: String, skip: usize) -> String {
    if skip == 0 {
        return text;
    }
    let at = (skip..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[at..].to_owned()
}

/// A [`ToolError::BadInput`] at `field`.
pub(crate) fn bad(field: &str, reason: String) -> ToolError {
    ToolError::BadInput {
        field: field.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}})
    }

    fn field_of(err: ToolError) -> String {
        match err {
            ToolError::BadInput { field, .. } => field,
            other => panic!("expected BadInput, got {other}"),
        }
    }

    #[test]
    fn each_bad_input_names_its_field() {
        let s = schema();
        assert_eq!(
            field_of(Args::parse(&json!([1]), &s).err().unwrap()),
            "input"
        );
        assert_eq!(
            field_of(Args::parse(&json!({"pth": "x"}), &s).err().unwrap()),
            "pth"
        );
        let empty = json!({});
        let args = Args::parse(&empty, &s).unwrap();
        assert_eq!(field_of(args.string("path").unwrap_err()), "path");
        assert_eq!(args.opt_count("n", 5).unwrap(), None);
        let typed = json!({"path": 3, "n": 9});
        let args = Args::parse(&typed, &s).unwrap();
        assert_eq!(field_of(args.string("path").unwrap_err()), "path");
        assert_eq!(field_of(args.opt_count("n", 5).unwrap_err()), "n");
        for n in [json!(0), json!(-1), json!(1.5), json!("2")] {
            let v = json!({ "n": n });
            let args = Args::parse(&v, &s).unwrap();
            assert_eq!(field_of(args.opt_count("n", 5).unwrap_err()), "n");
        }
    }

    #[test]
    fn good_input_reads_back() {
        let v = json!({"path": "workspace/a", "n": 5});
        let args = Args::parse(&v, &schema()).unwrap();
        assert_eq!(args.string("path").unwrap(), "workspace/a");
        assert_eq!(args.opt_count("n", 5).unwrap(), Some(5));
    }
}
