//! JSON values as messages about bad input name them: a tool's or a program's input, checked
//! field by field, says what came ("expected a string, got a number").

use serde_json::Value;

/// `value`'s JSON type with its article, as an error names what came.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
