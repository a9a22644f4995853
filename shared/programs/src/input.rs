//! A program's `INPUT`, enforced: the JSON Schema the model is shown is the one its input is
//! checked against before the evaluator starts, so a program never receives a shape its
//! schema rules out, and a model that sends one is told which field is wrong and why.
//!
//! Programs may use the part of JSON Schema a tool's input needs, and nothing else: the seal
//! refuses a schema with any other keyword ([`check_schema`]), so nothing shown to the model
//! goes unenforced. Kept: `type` (one name or a list), `properties`, `required`,
//! `additionalProperties` (a boolean or a schema), `items`, `enum`, `minimum`, `maximum`,
//! `minLength`, `maxLength`, `minItems`, `maxItems`; and the annotations `description`,
//! `title`, `default`, `examples`, which constrain nothing.

use l3m_core::json::kind;
use serde_json::{Map, Value};

/// Why an input does not fit its program's schema: where, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct InputError {
    /// Where in the input, as `input.field[2].name`.
    pub path: String,
    /// What the schema wanted and what came.
    pub reason: String,
}

/// The keywords a program's schema may use that constrain the input.
const CONSTRAINTS: [&str; 12] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
];

/// The keywords that only describe.
const ANNOTATIONS: [&str; 4] = ["description", "title", "default", "examples"];

/// How deep a schema may nest: deeper than any tool's input needs, shallow enough that checking
/// cannot exhaust a stack.
const MAX_DEPTH: usize = 16;

/// Checks that `schema` uses only what [`check`] enforces, each in its own shape; the error
/// names the place (`INPUT.properties.dir`) and the keyword.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    schema_at(schema, "INPUT", 0)
}

fn schema_at(schema: &Value, at: &str, depth: usize) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err(format!("{at} must be a dict (a JSON Schema)"));
    };
    if depth > MAX_DEPTH {
        return Err(format!("{at} nests deeper than {MAX_DEPTH} schemas"));
    }
    for (keyword, value) in map {
        let shaped = match keyword.as_str() {
            "type" => match value {
                Value::String(name) => type_name(name),
                // An empty list would admit no input at all.
                Value::Array(names) => {
                    !names.is_empty() && names.iter().all(|n| n.as_str().is_some_and(type_name))
                }
                _ => false,
            },
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(format!("{at}.properties must be a dict of schemas"));
                };
                for (name, property) in properties {
                    schema_at(property, &format!("{at}.properties.{name}"), depth + 1)?;
                }
                true
            }
            "additionalProperties" => match value {
                Value::Bool(_) => true,
                other => {
                    schema_at(other, &format!("{at}.additionalProperties"), depth + 1)?;
                    true
                }
            },
            "items" => {
                schema_at(value, &format!("{at}.items"), depth + 1)?;
                true
            }
            "required" => value
                .as_array()
                .is_some_and(|names| names.iter().all(Value::is_string)),
            "enum" => value.is_array(),
            "minimum" | "maximum" => value.is_number(),
            "minLength" | "maxLength" | "minItems" | "maxItems" => value.is_u64(),
            other if ANNOTATIONS.contains(&other) => true,
            other => {
                return Err(format!(
                    "{at} uses `{other}`, which programs' schemas do not enforce; they may use {}",
                    CONSTRAINTS.join(", ")
                ));
            }
        };
        if !shaped {
            return Err(format!(
                "{at}.{keyword} is not in the shape JSON Schema gives it"
            ));
        }
    }
    Ok(())
}

fn type_name(name: &str) -> bool {
    matches!(
        name,
        "object" | "array" | "string" | "number" | "integer" | "boolean" | "null"
    )
}

/// Checks `input` against `schema` (one [`check_schema`] accepted).
pub fn check(schema: &Value, input: &Value) -> Result<(), InputError> {
    value_at(schema, input, "input")
}

fn value_at(schema: &Value, value: &Value, path: &str) -> Result<(), InputError> {
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    let wrong = |reason: String| InputError {
        path: path.to_owned(),
        reason,
    };
    if let Some(wanted) = schema.get("type") {
        let names: Vec<&str> = match wanted {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !names.iter().any(|name| is(value, name)) {
            return Err(wrong(format!(
                "expected {}, got {}",
                names.join(" or "),
                kind(value)
            )));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(wrong(format!("expected one of {}", listed.join(", "))));
    }
    bounds(schema, value).map_err(wrong)?;
    match value {
        Value::Object(fields) => object(schema, fields, path),
        Value::Array(items) => match schema.get("items") {
            Some(item) => (items.iter().enumerate())
                .try_for_each(|(i, v)| value_at(item, v, &format!("{path}[{i}]"))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The fields of an object: the required ones present, each known one fitting its schema, an
/// unknown one fitting `additionalProperties` (refused when that is `false`).
fn object(
    schema: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
) -> Result<(), InputError> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                return Err(InputError {
                    path: format!("{path}.{name}"),
                    reason: "required, and missing".to_owned(),
                });
            }
        }
    }
    for (name, field) in fields {
        let at = format!("{path}.{name}");
        match (
            properties.and_then(|p| p.get(name)),
            schema.get("additionalProperties"),
        ) {
            (Some(property), _) => value_at(property, field, &at)?,
            (None, Some(Value::Bool(false))) => {
                let known: Vec<&str> = properties
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                return Err(InputError {
                    path: at,
                    reason: format!("unknown field; this program takes {}", known.join(", ")),
                });
            }
            (None, Some(other @ Value::Object(_))) => value_at(other, field, &at)?,
            (None, _) => {}
        }
    }
    Ok(())
}

/// The numeric, length and count bounds of `schema` on `value`.
fn bounds(schema: &Map<String, Value>, value: &Value) -> Result<(), String> {
    let limit = |key: &str| schema.get(key).and_then(Value::as_f64);
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    if let Some(n) = value.as_f64() {
        if let Some(min) = limit("minimum").filter(|min| n < *min) {
            return Err(format!("{n} is below the minimum {min}"));
        }
        if let Some(max) = limit("maximum").filter(|max| n > *max) {
            return Err(format!("{n} is above the maximum {max}"));
        }
    }
    let size = match value {
        Value::String(s) => Some((
            s.chars().count() as u64,
            "minLength",
            "maxLength",
            "characters",
        )),
        Value::Array(items) => Some((items.len() as u64, "minItems", "maxItems", "items")),
        _ => None,
    };
    if let Some((len, min_key, max_key, unit)) = size {
        if let Some(min) = count(min_key).filter(|min| len < *min) {
            return Err(format!("{len} {unit}, fewer than the {min} required"));
        }
        if let Some(max) = count(max_key).filter(|max| len > *max) {
            return Err(format!("{len} {unit}, more than the {max} allowed"));
        }
    }
    Ok(())
}

/// Whether `value` is of the JSON Schema type `name` (an integer is a number too).
fn is(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "description": "what to count",
            "properties": {
                "dir": {"type": "string", "minLength": 1},
                "depth": {"type": "integer", "minimum": 0, "maximum": 8},
                "mode": {"enum": ["lines", "words"]},
                "globs": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            },
            "required": ["dir"],
            "additionalProperties": false,
        })
    }

    fn error(input: Value) -> String {
        check(&schema(), &input).unwrap_err().to_string()
    }

    #[test]
    fn an_input_that_fits_passes_and_each_misfit_names_its_field() {
        assert_eq!(check_schema(&schema()), Ok(()));
        let fits = json!({"dir": "src", "depth": 2, "mode": "words", "globs": ["*.rs"]});
        assert_eq!(check(&schema(), &fits), Ok(()));
        assert_eq!(error(json!([])), "input: expected object, got an array");
        assert_eq!(error(json!({})), "input.dir: required, and missing");
        assert_eq!(
            error(json!({"dir": 3})),
            "input.dir: expected string, got a number"
        );
        assert_eq!(
            error(json!({"dir": ""})),
            "input.dir: 0 characters, fewer than the 1 required"
        );
        assert_eq!(
            error(json!({"dir": "a", "depth": 1.5})),
            "input.depth: expected integer, got a number"
        );
        assert_eq!(
            error(json!({"dir": "a", "depth": 9})),
            "input.depth: 9 is above the maximum 8"
        );
        assert_eq!(
            error(json!({"dir": "a", "mode": "bytes"})),
            "input.mode: expected one of \"lines\", \"words\""
        );
        assert_eq!(
            error(json!({"dir": "a", "globs": ["x", 1]})),
            "input.globs[1]: expected string, got a number"
        );
        assert_eq!(
            error(json!({"dir": "a", "globs": ["x", "y", "z"]})),
            "input.globs: 3 items, more than the 2 allowed"
        );
        assert!(error(json!({"dir": "a", "path": "b"})).starts_with("input.path: unknown field"));
    }

    #[test]
    fn a_schema_using_what_is_not_enforced_is_refused_naming_the_keyword_and_place() {
        let pattern =
            json!({"type": "object", "properties": {"dir": {"type": "string", "pattern": "^a"}}});
        let refused = check_schema(&pattern).unwrap_err();
        assert!(
            refused.starts_with("INPUT.properties.dir uses `pattern`"),
            "{refused}"
        );
        let bad_type = json!({"type": "object", "properties": {"n": {"type": "float"}}});
        assert_eq!(
            check_schema(&bad_type).unwrap_err(),
            "INPUT.properties.n.type is not in the shape JSON Schema gives it"
        );
        let no_type = json!({"type": "object", "properties": {"n": {"type": []}}});
        assert_eq!(
            check_schema(&no_type).unwrap_err(),
            "INPUT.properties.n.type is not in the shape JSON Schema gives it"
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH {
            deep = json!({"type": "array", "items": deep});
        }
        assert!(check_schema(&deep).unwrap_err().contains("deeper"));
    }

    proptest! {
        /// With no constraints but `"type": "object"`, every object passes and nothing else
        /// does: checking never refuses what the schema allows.
        #[test]
        fn the_plain_object_schema_takes_every_object(
            fields in prop::collection::btree_map("[a-z]{1,6}", any::<i64>(), 0..6)
        ) {
            let input = Value::Object(fields.into_iter().map(|(k, v)| (k, json!(v))).collect());
            let plain = json!({"type": "object"});
            prop_assert_eq!(check(&plain, &input), Ok(()));
            prop_assert!(check(&plain, &json!(1)).is_err());
        }
    }
}
