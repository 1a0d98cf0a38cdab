//! The traffic checked against `openapi.json`, both ways, without changing
//! it: a request the document would refuse, an answer it does not describe,
//! each reported as a [`Mismatch`] naming the operation and the field.
//!
//! A mismatch names fields by the document's own names only: a name the
//! document does not know (a field an SDK made up, or a value pasted where
//! a name belongs) is said as "a field the document does not list", so a
//! key or a prompt never reaches a warning.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::OnceLock;

use genapi::api::types::ValidationErrorLocItem;
use genapi::validate::Document;
use serde_json::Value;

/// One way the traffic differs from the document.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[non_exhaustive]
pub struct Mismatch {
    /// The operation, as the document names it (`gen_2_pro`, `get_result`).
    pub operation: String,
    /// `request`, or the answer's status (`answer 200`).
    pub direction: String,
    /// The field, as `body.width`, or `body` for the whole.
    pub field: String,
    /// What is wrong, as the validator classes it (`missing`,
    /// `less_than_equal`, `extra_forbidden`…).
    pub kind: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {} ({})",
            self.operation, self.direction, self.field, self.kind
        )
    }
}

/// The mismatches of a request to `path` with `body`.
pub(crate) fn request(method: &http::Method, path: &str, body: &[u8]) -> Vec<Mismatch> {
    let Some(operation) = genapi::OperationSpec::by_path(path) else {
        return Vec::new();
    };
    let Some(schema) = operation.request_schema else {
        return Vec::new();
    };
    if method.as_str() != operation.method.to_ascii_uppercase() {
        return Vec::new();
    }
    mismatches(operation.id, "request".into(), schema, body)
}

/// The mismatches of an answer with `status` and `body` to a request of
/// `method` at `path` (the service's path, whatever host).
pub(crate) fn answer(method: &http::Method, path: &str, status: u16, body: &[u8]) -> Vec<Mismatch> {
    let Some(operation) = operation_id(path, method) else {
        return Vec::new();
    };
    let direction = format!("answer {status}");
    match answer_schema(path, method, status) {
        Some(schema) => mismatches(&operation, direction, &schema, body),
        // Refusals the document does not list (429, 402, 503…) are the
        // service's everyday answers, which the contract notes describe.
        None if !(200..300).contains(&status) => Vec::new(),
        None => vec![Mismatch {
            operation,
            direction,
            field: "status".into(),
            kind: "undocumented_status".into(),
        }],
    }
}

/// The document's name of the operation `method` at `path`.
pub(crate) fn operation_id(path: &str, method: &http::Method) -> Option<String> {
    let operation = &document()["paths"][path][method.as_str().to_ascii_lowercase()];
    operation["operationId"].as_str().map(str::to_string)
}

fn mismatches(operation: &str, direction: String, schema: &str, body: &[u8]) -> Vec<Mismatch> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return vec![Mismatch {
            operation: operation.to_string(),
            direction,
            field: "body".into(),
            kind: "not_json".into(),
        }];
    };
    let mut found: BTreeSet<Mismatch> = BTreeSet::new();
    for error in Document::embedded().validate(schema, &value) {
        found.insert(Mismatch {
            operation: operation.to_string(),
            direction: direction.clone(),
            field: field_of(&error.loc),
            kind: error
                .type_
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(40)
                .collect(),
        });
    }
    found.into_iter().collect()
}

/// A field's place, by the document's names alone.
fn field_of(loc: &[ValidationErrorLocItem]) -> String {
    let known = known_names();
    let parts: Vec<String> = loc
        .iter()
        .map(|item| match item {
            ValidationErrorLocItem::Int64(index) => index.to_string(),
            ValidationErrorLocItem::String(name) if name == "body" || known.contains(name.as_str()) => name.clone(),
            ValidationErrorLocItem::String(_) => "(a field the document does not list)".into(),
        })
        .collect();
    parts.join(".")
}

/// Every property name the document writes.
fn known_names() -> &'static BTreeSet<String> {
    static NAMES: OnceLock<BTreeSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = BTreeSet::new();
        collect_names(document(), &mut names);
        names
    })
}

fn collect_names(value: &Value, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::Object(properties)) = fields.get("properties") {
                names.extend(properties.keys().cloned());
            }
            fields.values().for_each(|value| collect_names(value, names));
        }
        Value::Array(items) => items.iter().for_each(|item| collect_names(item, names)),
        _ => {}
    }
}

fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| serde_json::from_str(genapi::validate::EMBEDDED_DOCUMENT).unwrap_or_default())
}

/// The component the document names for an answer of `status` to `method`
/// at `path`: `None` when it lists no such answer.
fn answer_schema(path: &str, method: &http::Method, status: u16) -> Option<String> {
    static SCHEMAS: OnceLock<HashMap<(String, String, String), String>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        let mut schemas = HashMap::new();
        let paths = document().get("paths").and_then(Value::as_object);
        for (path, operations) in paths.into_iter().flatten() {
            for (method, operation) in operations.as_object().into_iter().flatten() {
                for (status, answer) in operation["responses"].as_object().into_iter().flatten() {
                    let reference = answer["content"]["application/json"]["schema"]["$ref"].as_str();
                    let name = reference.and_then(|r| r.rsplit('/').next()).unwrap_or_default();
                    schemas.insert(
                        (path.clone(), method.to_ascii_uppercase(), status.clone()),
                        name.to_string(),
                    );
                }
            }
        }
        schemas
    });
    let key = |status: &str| (path.to_string(), method.as_str().to_string(), status.to_string());
    let name = schemas
        .get(&key(&status.to_string()))
        .or_else(|| schemas.get(&key(&format!("{}XX", status / 100))))
        .or_else(|| schemas.get(&key("default")))?;
    // An answer listed without a JSON body (an empty one) has nothing to check.
    Some(name.clone()).filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_the_document_refuses_is_named_by_operation_and_field() {
        let found = request(&http::Method::POST, "/v1/gen-2-pro", br#"{"prompt":"x","width":99999}"#);
        assert!(
            found
                .iter()
                .any(|m| m.operation == "gen_2_pro" && m.direction == "request" && m.field == "body.width"),
            "{found:?}"
        );
        assert!(request(&http::Method::POST, "/v1/gen-2-pro", br#"{"prompt":"x"}"#).is_empty());
    }

    #[test]
    fn a_field_the_document_does_not_list_is_never_named() {
        let found = request(
            &http::Method::POST,
            "/v1/gen-2-pro",
            br#"{"prompt":"x","sk-PASTED7731q9ZcX2vB8":1}"#,
        );
        for mismatch in &found {
            assert!(!mismatch.to_string().contains("PASTED"), "{mismatch}");
        }
    }

    #[test]
    fn an_answer_is_checked_against_its_status_schema() {
        let ok = br#"{"id":"t","polling_url":"https://api.example.com/v1/get_result?id=t"}"#;
        assert_eq!(answer(&http::Method::POST, "/v1/gen-2-pro", 200, ok), Vec::new());
        let poll = answer(&http::Method::GET, "/v1/get_result", 200, br#"{"id":"t","status":7}"#);
        assert!(poll.iter().any(|m| m.field.starts_with("body.status")), "{poll:?}");
        let odd = answer(&http::Method::GET, "/v1/get_result", 203, b"{}");
        assert_eq!(odd[0].kind, "undocumented_status");
        assert!(answer(&http::Method::POST, "/v1/gen-2-pro", 429, b"{}").is_empty());
    }
}
