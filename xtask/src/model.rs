//! A flat view of an OpenAPI document (3.0 or 3.1): operations and their
//! request fields with type, nullability, required flag, bounds, enum and
//! documented default. The surface listing and the upstream diff both read
//! documents through it, so they agree on what a field is.

use std::collections::BTreeMap;

use serde_json::Value;

/// One request field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Field {
    /// `string`, `integer(uint32)`, `OutputFormat`, `string | integer`, …
    pub kind: String,
    /// Accepts null.
    pub nullable: bool,
    /// Listed in `required`.
    pub required: bool,
    /// Bounds such as `min 64`, `max 5`, `multipleOf 32`, `maxLength 2083`.
    pub bounds: Vec<String>,
    /// Allowed values.
    pub enumeration: Vec<String>,
    /// `default` or `x-default`, as JSON text.
    pub default: Option<String>,
    /// Rules only this project's document states (`x-` extensions).
    pub rules: Vec<String>,
}

/// One operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Operation {
    /// operationId.
    pub id: String,
    /// Tag.
    pub tag: String,
    /// Request fields by name (empty for a body-less operation).
    pub fields: BTreeMap<String, Field>,
    /// Query parameters by name.
    pub parameters: BTreeMap<String, Field>,
    /// Unknown fields accepted.
    pub open: bool,
    /// `status: schema` of each response.
    pub responses: Vec<String>,
    /// Marked deprecated.
    pub deprecated: bool,
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
pub type Model = BTreeMap<String, Operation>;

/// Reads a document. `rename` rewrites path prefixes (`FROM`, `TO`) of the
/// other document's paths, so a description using other model names lines up.
pub fn read(doc: &Value, rename: &[(String, String)]) -> Model {
    let mut model = Model::new();
    for listed in crate::document::operations(doc) {
        let op = &doc["paths"][&listed.path][listed.method.to_lowercase()];
        let mut path = listed.path.clone();
        for (from, to) in rename {
            if let Some(rest) = path.strip_prefix(from.as_str()) {
                path = format!("{to}{rest}");
            }
        }
        {
            let method = &listed.method;
            let body = resolve(doc, &op["requestBody"]["content"]["application/json"]["schema"]);
            let mut operation = Operation {
                id: op["operationId"].as_str().unwrap_or("").to_string(),
                tag: op["tags"][0].as_str().unwrap_or("").to_string(),
                open: body["additionalProperties"] != Value::Bool(false),
                deprecated: op["deprecated"].as_bool().unwrap_or(false),
                server: op["servers"][0]["url"].as_str().map(str::to_string),
                ..Operation::default()
            };
            for (key, value) in body
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.starts_with("x-"))
            {
                operation.rules.push(format!("{key} {value}"));
            }
            let security = if op.get("security").is_some() {
                &op["security"]
            } else {
                &doc["security"]
            };
            for requirement in security.as_array().into_iter().flatten() {
                operation
                    .security
                    .extend(requirement.as_object().into_iter().flatten().map(|(k, _)| k.clone()));
            }
            operation.corrections.extend(correction_names(&op["x-correction"]));
            operation
                .body_corrections
                .extend(correction_names(&body["x-correction"]));
            let required: Vec<&str> = body["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for (name, schema) in body["properties"].as_object().into_iter().flatten() {
                let mut field = field(doc, schema);
                field.required = required.contains(&name.as_str());
                operation.fields.insert(name.clone(), field);
            }
            for parameter in op["parameters"].as_array().into_iter().flatten() {
                let mut field = field(doc, &parameter["schema"]);
                field.required = parameter["required"].as_bool().unwrap_or(false);
                operation
                    .parameters
                    .insert(parameter["name"].as_str().unwrap_or("").to_string(), field);
            }
            for (status, response) in op["responses"].as_object().into_iter().flatten() {
                let schema = &response["content"]["application/json"]["schema"];
                let name = schema["$ref"]
                    .as_str()
                    .and_then(|r| r.rsplit('/').next())
                    .unwrap_or(if schema.is_null() { "-" } else { "inline" });
                operation.responses.push(format!("{status}: {name}"));
            }
            model.insert(format!("{method} {path}"), operation);
        }
    }
    model
}

/// Follows `$ref`s with the crate's document reader; a dangling or cyclic
/// reference reads as an empty schema (`cargo xtask check` reports it).
pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    static EMPTY: Value = Value::Null;
    crate::document::resolve(doc, schema).unwrap_or(&EMPTY)
}

fn is_null_schema(schema: &Value) -> bool {
    schema["type"] == "null"
        || schema["enum"]
            .as_array()
            .is_some_and(|e| e.len() == 1 && e[0].is_null())
}

/// Describes a field schema, folding both null idioms (3.0 `nullable`, 3.1
/// `anyOf [.., {type: null}]` or `type: [.., "null"]`) into `nullable`.
fn field(doc: &Value, schema: &Value) -> Field {
    let mut field = Field {
        nullable: schema["nullable"].as_bool().unwrap_or(false),
        default: schema
            .get("default")
            .or_else(|| schema.get("x-default"))
            .map(Value::to_string),
        ..Field::default()
    };
    let mut branches: Vec<&Value> = Vec::new();
    if let Some(all) = schema["allOf"].as_array() {
        branches.extend(all);
    }
    if let Some(any) = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array()) {
        for branch in any {
            if is_null_schema(branch) {
                field.nullable = true;
            } else {
                branches.push(branch);
            }
        }
    }
    let mut kinds = Vec::new();
    let own = if schema.get("$ref").is_some() {
        vec![schema]
    } else {
        vec![]
    };
    let parts: Vec<&Value> = if branches.is_empty() {
        vec![schema]
    } else {
        own.into_iter().chain(branches).collect()
    };
    for part in parts {
        let named = part["$ref"].as_str().and_then(|r| r.rsplit('/').next());
        let target = resolve(doc, part);
        let kind = match (&target["type"], named) {
            (_, Some(name)) if target["type"] == "object" || target.get("enum").is_some() => name.to_string(),
            (Value::Array(types), _) => {
                let names: Vec<&str> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .collect();
                if types.iter().any(|t| t == "null") {
                    field.nullable = true;
                }
                names.join(" | ")
            }
            (Value::String(t), _) => match target["format"].as_str() {
                Some(format) => format!("{t}({format})"),
                None => t.clone(),
            },
            _ => "any".to_string(),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        for (key, label) in [
            ("minimum", "min"),
            ("maximum", "max"),
            ("exclusiveMinimum", "exclusiveMin"),
            ("exclusiveMaximum", "exclusiveMax"),
            ("multipleOf", "multipleOf"),
            ("minLength", "minLength"),
            ("maxLength", "maxLength"),
            ("minItems", "minItems"),
            ("maxItems", "maxItems"),
            ("pattern", "pattern"),
        ] {
            if let Some(value) = target.get(key) {
                let text = format!(
                    "{label} {}",
                    value.as_str().map_or_else(|| value.to_string(), str::to_string)
                );
                if !field.bounds.contains(&text) {
                    field.bounds.push(text);
                }
            }
        }
        for key in [
            "x-image",
            "x-max-megapixels",
            "x-aspect-ratio-range",
            "x-zero-means-auto",
            "x-integer-range",
            "x-rust-type",
            "x-correction",
        ] {
            for source in [schema, target] {
                if let Some(value) = source.get(key) {
                    // `x-rust-type` shows as the Rust type it picks.
                    let value = value.get("path").unwrap_or(value);
                    let text = format!(
                        "{key} {}",
                        value.as_str().map_or_else(|| value.to_string(), str::to_string)
                    );
                    if !field.rules.contains(&text) {
                        field.rules.push(text);
                    }
                }
            }
        }
        if let Some(values) = target["enum"].as_array() {
            for value in values.iter().filter(|v| !v.is_null()) {
                let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
                if !field.enumeration.contains(&text) {
                    field.enumeration.push(text);
                }
            }
        }
        if field.default.is_none() {
            field.default = target
                .get("default")
                .or_else(|| target.get("x-default"))
                .map(Value::to_string);
        }
    }
    field.kind = kinds.join(" | ");
    field
}
