//! A kind's input schema, compiled once per loaded version, and the check a submission
//! passes before anything is written.
//!
//! Schemas come from tenants' components, so compiling one is bounded like the rest of
//! an upload: no reference is fetched (no file, no network: only `$ref`s inside the
//! schema resolve), and `pattern`s run on the linear-time `regex` engine, so a schema
//! cannot make a submission backtrack for seconds.

use std::fmt;

use jsonschema::{Draft, PatternOptions, Validator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most violations one refusal lists; past it, the last entry says how many more.
pub const MAX_VIOLATIONS: usize = 20;
/// Longest message of one violation, in characters: a message quotes the offending
/// value, which may be as large as the input.
const MAX_MESSAGE_CHARS: usize = 300;

/// One way an input breaks its kind's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON Pointer (RFC 6901) to the offending value in the input; `""` is the whole
    /// input.
    pub pointer: String,
    /// What is wrong there, e.g. `"amount" is a required property`.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(the input)" } else { &self.pointer };
        write!(f, "{at}: {}", self.message)
    }
}

/// A compiled input schema.
pub struct InputSchema {
    validator: Validator,
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputSchema").finish_non_exhaustive()
    }
}

impl InputSchema {
    /// Compiles `text` (draft 2020-12 unless the schema's `$schema` names another).
    /// Refused: text that is not a JSON object, a schema that breaks its meta-schema, a
    /// `$ref` outside the schema, a `pattern` the `regex` engine does not accept.
    pub fn compile(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Self::compile_value(&value)
    }

    /// Compiles an already parsed schema.
    pub fn compile_value(value: &Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err("not a JSON object".into());
        }
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .with_pattern_options(PatternOptions::regex())
            .build(value)
            .map_err(|e| truncate(e.to_string()))?;
        Ok(Self { validator })
    }

    /// Checks a submitted input: it must be JSON and follow the schema. The violations
    /// come in the validator's order, at most [`MAX_VIOLATIONS`].
    pub fn check(&self, input: &[u8]) -> Result<(), Vec<Violation>> {
        let value: Value = serde_json::from_slice(input)
            .map_err(|e| vec![Violation { pointer: String::new(), message: format!("the input is not JSON: {e}") }])?;
        self.check_value(&value)
    }

    /// Checks an already parsed input.
    pub fn check_value(&self, value: &Value) -> Result<(), Vec<Violation>> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let mut violations = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(value) {
            if violations.len() == MAX_VIOLATIONS - 1 {
                more += 1;
                continue;
            }
            violations.push(Violation {
                pointer: error.instance_path().as_str().to_owned(),
                message: truncate(error.to_string()),
            });
        }
        match more {
            0 => {}
            1 => violations.push(Violation { pointer: String::new(), message: "1 more violation".into() }),
            n => violations.push(Violation { pointer: String::new(), message: format!("{n} more violations") }),
        }
        Err(violations)
    }
}

fn truncate(mut message: String) -> String {
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// An input that follows `schema`, for showing what a kind expects: the schema's first
/// `examples` entry if it has one; otherwise a value built from `default`, `const`,
/// `enum`, `type` and the required properties, with placeholder strings and numbers. A
/// best effort (combinators take their first branch), never an error.
pub fn example(schema: &Value) -> Value {
    example_at(schema, schema, 0)
}

fn example_at(root: &Value, schema: &Value, depth: usize) -> Value {
    let Some(object) = schema.as_object() else { return Value::Null };
    if depth > 16 {
        return Value::Null;
    }
    if let Some(first) = object.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    for keyword in ["const", "default"] {
        if let Some(value) = object.get(keyword) {
            return value.clone();
        }
    }
    if let Some(first) = object.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(target) = object.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'))
        && let Some(found) = root.pointer(target)
    {
        return example_at(root, found, depth + 1);
    }
    for keyword in ["allOf", "anyOf", "oneOf"] {
        if let Some(first) = object.get(keyword).and_then(Value::as_array).and_then(|e| e.first()) {
            return example_at(root, first, depth + 1);
        }
    }
    let ty = match object.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        // `["string", "null"]`: the first type that is not null.
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ if object.contains_key("properties") => "object",
        _ => return Value::Object(Default::default()),
    };
    match ty {
        "object" => {
            let required: Vec<&str> = object
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut out = serde_json::Map::new();
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if required.contains(&name.as_str()) {
                        out.insert(name.clone(), example_at(root, property, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => {
            let items = object.get("items").map(|items| example_at(root, items, depth + 1)).unwrap_or(Value::Null);
            let min = object.get("minItems").and_then(Value::as_u64).unwrap_or(1).clamp(1, 3);
            Value::Array(vec![items; min as usize])
        }
        "string" => {
            let min = object.get("minLength").and_then(Value::as_u64).unwrap_or(0).min(64) as usize;
            let text = "string";
            Value::String(if min > text.len() { "s".repeat(min) } else { text.into() })
        }
        "integer" => Value::from(object.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => object.get("minimum").cloned().unwrap_or_else(|| Value::from(1.5)),
        "boolean" => Value::Bool(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn payment() -> InputSchema {
        InputSchema::compile_value(&json!({
            "type": "object",
            "required": ["amount", "currency", "card_token"],
            "properties": {
                "amount": {"type": "integer", "minimum": 1},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
                "card_token": {"type": "string", "minLength": 8}
            },
            "additionalProperties": false
        }))
        .expect("a valid schema")
    }

    #[test]
    fn each_violation_names_its_pointer() {
        let violations = payment().check(br#"{"amount": "12", "currency": "EUR"}"#).unwrap_err();
        let pointers: Vec<_> = violations.iter().map(|v| v.pointer.as_str()).collect();
        assert!(pointers.contains(&"/amount"), "{violations:?}");
        assert!(pointers.contains(&""), "{violations:?}");
        assert!(violations.iter().any(|v| v.message.contains("card_token")), "{violations:?}");
        assert_eq!(payment().check(br#"{"amount": 12, "currency": "EUR", "card_token": "tok_12345"}"#), Ok(()));
    }

    #[test]
    fn input_that_is_not_json_is_one_violation_at_the_root() {
        let violations = payment().check(b"{amount: 12").unwrap_err();
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].pointer, "");
        assert!(violations[0].message.contains("not JSON"), "{violations:?}");
    }

    #[test]
    fn violations_are_capped_and_the_rest_counted() {
        let schema = InputSchema::compile_value(&json!({"type": "array", "items": {"type": "integer"}})).unwrap();
        let input = serde_json::to_vec(&vec!["x"; 50]).unwrap();
        let violations = schema.check(&input).unwrap_err();
        assert_eq!(violations.len(), MAX_VIOLATIONS);
        assert_eq!(violations.last().unwrap().message, format!("{} more violations", 50 - (MAX_VIOLATIONS - 1)));
    }

    #[test]
    fn schemas_that_cannot_be_enforced_are_refused() {
        for bad in [
            json!({"type": 5}),
            json!({"$ref": "https://example.com/schema.json"}),
            json!({"type": "string", "pattern": "(a)\\1"}),
        ] {
            assert!(InputSchema::compile_value(&bad).is_err(), "{bad} compiled");
        }
        assert!(InputSchema::compile("[1]").is_err());
        assert!(InputSchema::compile("{").is_err());
    }

    #[test]
    fn examples_follow_their_schema() {
        let schemas = [
            json!({"type": "object", "required": ["amount", "currency", "card_token"], "properties": {
                "amount": {"type": "integer", "minimum": 1},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
                "card_token": {"type": "string", "minLength": 8},
                "note": {"type": "string"}
            }}),
            json!({"type": "object", "required": ["rows"], "properties": {
                "rows": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/row"}}
            }, "$defs": {"row": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": ["string", "null"]}}}}}),
            json!({"examples": [{"url": "https://example.com"}], "type": "object"}),
            json!({}),
        ];
        for schema in schemas {
            let example = example(&schema);
            let compiled = InputSchema::compile_value(&schema).unwrap();
            assert_eq!(compiled.check_value(&example), Ok(()), "{example} does not follow {schema}");
        }
    }
}
