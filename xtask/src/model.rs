//! A flat view of an OpenAPI document (3.0 or 3.1): every operation of the
//! document reader's [`Catalog`], with its request fields, query parameters,
//! responses, security and corrections. Fields are the reader's own
//! [`Field`] (the one the library's catalog and the command read), shown
//! here as text. The surface listing and the upstream diff both read
//! documents through this view, so they agree on what a field is.

use std::collections::BTreeMap;

pub use genapi_document::Field;
use genapi_document::{Catalog, Operation};
use serde_json::Value;

/// What the listing and the diff read of one operation: the catalog's
/// [`Operation`], and what they compare besides.
#[derive(Clone, Debug, PartialEq)]
pub struct Details {
    /// The operation as the catalog lists it (operationId, tag, deprecated,
    /// …), its path as its document writes it: the [`Model`]'s key holds
    /// the path `rename` made of it.
    pub operation: Operation,
    /// Request fields by name (empty for a body-less operation).
    pub fields: BTreeMap<String, Field>,
    /// Query parameters by name.
    pub parameters: BTreeMap<String, Field>,
    /// Unknown fields accepted.
    pub open: bool,
    /// `status: schema` of each response.
    pub responses: Vec<String>,
    /// Served from another server.
    pub server: Option<String>,
    /// Body-level rules of this project's document (`x-` extensions).
    pub rules: Vec<String>,
    /// Security scheme names that apply (the operation's, else the document's).
    pub security: Vec<String>,
    /// `x-correction` entries on the operation (they explain differences of
    /// security, responses or the operation's presence).
    pub corrections: Vec<String>,
    /// `x-correction` entries on the request body schema (they explain
    /// differences of fields without a correction of their own).
    pub body_corrections: Vec<String>,
}

/// The entry names of an `x-correction` value (one name or a list).
pub fn correction_names(value: &Value) -> Vec<String> {
    match value {
        Value::String(name) => vec![name.clone()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// Operations keyed by `METHOD path`.
pub type Model = BTreeMap<String, Details>;

/// Reads a document. `rename` rewrites path prefixes (`FROM`, `TO`) of the
/// other document's paths, so a description using other model names lines up.
pub fn read(doc: &Value, rename: &[(String, String)]) -> Model {
    let mut model = Model::new();
    for listed in Catalog::of_value(doc).operations() {
        let op = &doc["paths"][&listed.path][listed.method.to_lowercase()];
        let mut path = listed.path.clone();
        for (from, to) in rename {
            if let Some(rest) = path.strip_prefix(from.as_str()) {
                path = format!("{to}{rest}");
            }
        }
        let body = resolve(doc, &op["requestBody"]["content"]["application/json"]["schema"]);
        let mut details = Details {
            operation: listed.clone(),
            fields: BTreeMap::new(),
            parameters: BTreeMap::new(),
            open: body["additionalProperties"] != Value::Bool(false),
            responses: Vec::new(),
            server: op["servers"][0]["url"].as_str().map(str::to_string),
            rules: Vec::new(),
            security: Vec::new(),
            corrections: correction_names(&op["x-correction"]),
            body_corrections: correction_names(&body["x-correction"]),
        };
        for (key, value) in body
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("x-"))
        {
            details.rules.push(format!("{key} {value}"));
        }
        let security = if op.get("security").is_some() {
            &op["security"]
        } else {
            &doc["security"]
        };
        for requirement in security.as_array().into_iter().flatten() {
            details
                .security
                .extend(requirement.as_object().into_iter().flatten().map(|(k, _)| k.clone()));
        }
        for field in Field::of_object(doc, body) {
            details.fields.insert(field.name.clone(), field);
        }
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap_or("");
            let required = parameter["required"].as_bool().unwrap_or(false);
            let field = Field::read(doc, name, &parameter["schema"], required);
            details.parameters.insert(name.to_string(), field);
        }
        for (status, response) in op["responses"].as_object().into_iter().flatten() {
            let schema = &response["content"]["application/json"]["schema"];
            let name = schema["$ref"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
                .unwrap_or(if schema.is_null() { "-" } else { "inline" });
            details.responses.push(format!("{status}: {name}"));
        }
        model.insert(format!("{} {path}", listed.method), details);
    }
    model
}

/// Follows `$ref`s with the crate's document reader; a dangling or cyclic
/// reference reads as an empty schema (`cargo xtask check` reports it).
pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    static EMPTY: Value = Value::Null;
    crate::document::resolve(doc, schema).unwrap_or(&EMPTY)
}

/// How a bounding keyword is labelled in listings and diffs.
fn bound_label(keyword: &str) -> &str {
    match keyword {
        "minimum" => "min",
        "maximum" => "max",
        "exclusiveMinimum" => "exclusiveMin",
        "exclusiveMaximum" => "exclusiveMax",
        other => other,
    }
}

/// A JSON value as text: strings without quotes.
fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// The field's bounds as `label value` (`min 64`, `pattern ^a$`).
pub fn bounds(field: &Field) -> Vec<String> {
    field
        .bounds
        .iter()
        .map(|(keyword, value)| format!("{} {}", bound_label(keyword), text(value)))
        .collect()
}

/// The field's `x-` rules as `key value`; `x-rust-type` shows the Rust type
/// it picks.
pub fn rules(field: &Field) -> Vec<String> {
    field
        .rules
        .iter()
        .map(|(key, value)| format!("{key} {}", text(value.get("path").unwrap_or(value))))
        .collect()
}

/// The field's allowed values as text.
pub fn choices(field: &Field) -> Vec<String> {
    field.choices.iter().map(text).collect()
}

/// The field's default as JSON text.
pub fn default(field: &Field) -> Option<String> {
    field.default.as_ref().map(Value::to_string)
}
