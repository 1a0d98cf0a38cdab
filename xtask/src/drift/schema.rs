//! Compares one JSON value with the document's schema for it and says where
//! they part: fields the schema does not list, required fields missing,
//! values of another type, values of a closed or open enumeration that it
//! does not list. Bounds (minimum, pattern, …) are not drift of the shape
//! and are left to the library's validator.
//!
//! Every finding carries two pointers: where in the value it is (array
//! indexes written `*`, so every item's finding counts together) and where
//! in the document the schema that should describe it lives (for
//! `--propose` to patch).

use serde_json::{Map, Value};

use genapi_document as document;

/// What a value does that its schema does not say.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A field the schema does not list.
    UnknownField,
    /// A field the schema requires is absent.
    MissingRequired,
    /// The value is of another type; the schema's type.
    WrongType(String),
    /// A value the enumeration does not list; what it lists.
    UnlistedValue(Vec<String>),
    /// A status code the operation does not document; the documented ones.
    UndocumentedStatus(Vec<String>),
    /// A content type the answer does not document; the documented ones.
    UndocumentedContentType(Vec<String>),
    /// A body of a documented JSON type that is not JSON.
    NotJson,
    /// A polling or result address on a host the client does not trust.
    UntrustedHost,
    /// A request that is no operation of the document.
    UnknownOperation,
}

/// One place a value parts from its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Where in the value, e.g. `/result/sample`.
    pub pointer: String,
    /// What is wrong.
    pub kind: Kind,
    /// The value found there (`null` for a missing field).
    pub found: Value,
    /// The `x-correction` of the schema node it was found at: the document
    /// already knows the service differs there.
    pub correction: Option<String>,
    /// The document pointer of the schema to patch: the object for an
    /// unknown field, the enumeration for an unlisted value.
    pub schema_at: String,
}

/// Compares `value` with `schema`, found at `schema_at` in `root`.
pub fn compare(root: &Value, schema: &Value, schema_at: &str, value: &Value) -> Vec<Mismatch> {
    let mut found = Vec::new();
    walk(root, schema, schema_at, value, "", &mut found);
    found
}

fn correction_of(nodes: &[&Value]) -> Option<String> {
    nodes.iter().find_map(|node| match node.get("x-correction")? {
        Value::String(name) => Some(name.clone()),
        Value::Array(names) => Some(names.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")),
        _ => None,
    })
}

/// The document pointer of a local reference.
fn ref_pointer(reference: &str) -> String {
    reference.strip_prefix('#').unwrap_or(reference).to_string()
}

/// A key escaped for a JSON pointer.
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn is_null_branch(schema: &Value) -> bool {
    schema["type"] == "null"
        || schema["enum"]
            .as_array()
            .is_some_and(|v| v.len() == 1 && v[0].is_null())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(root: &Value, schema: &Value, at: &str, value: &Value, pointer: &str, found: &mut Vec<Mismatch>) {
    let (target, at) = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => match document::resolve(root, schema) {
            Ok(resolved) => (resolved, ref_pointer(reference)),
            Err(_) => return,
        },
        None => (schema, at.to_string()),
    };
    let at = at.as_str();
    let correction = correction_of(&[schema, target]);
    let mismatch = |kind: Kind, pointer: String, found_value: &Value, schema_at: String| Mismatch {
        pointer,
        kind,
        found: found_value.clone(),
        correction: correction.clone(),
        schema_at,
    };
    let branches: Vec<(usize, &Value)> = target["anyOf"]
        .as_array()
        .or_else(|| target["oneOf"].as_array())
        .map(|list| list.iter().enumerate().filter(|(_, b)| !is_null_branch(b)).collect())
        .unwrap_or_default();
    let nullable = target["nullable"] == true
        || schema["nullable"] == true
        || target["anyOf"].as_array().is_some_and(|b| b.iter().any(is_null_branch))
        || target["type"].as_array().is_some_and(|t| t.iter().any(|t| t == "null"));
    if value.is_null() {
        let typed = target.get("type").is_some() || !branches.is_empty() || target.get("allOf").is_some();
        if typed && !nullable {
            found.push(mismatch(
                Kind::WrongType(declared_type(root, target)),
                pointer.to_string(),
                value,
                at.to_string(),
            ));
        }
        return;
    }
    if let Some(all) = target["allOf"].as_array() {
        let parts: Vec<(usize, &Value)> = all.iter().enumerate().filter(|(_, b)| !is_null_branch(b)).collect();
        if let [(index, only)] = parts.as_slice() {
            walk(root, only, &format!("{at}/allOf/{index}"), value, pointer, found);
            return;
        }
        // Several parts: one object listing all their fields.
        let merged = merge(root, &parts);
        walk(root, &merged, at, value, pointer, found);
        return;
    }
    if !branches.is_empty() {
        let mut best: Option<Vec<Mismatch>> = None;
        for (index, branch) in branches {
            let mut tried = Vec::new();
            let branch_at = format!("{at}/anyOf/{index}");
            walk(root, branch, &branch_at, value, pointer, &mut tried);
            if tried.is_empty() {
                return;
            }
            if best.as_ref().is_none_or(|b| tried.len() < b.len()) {
                best = Some(tried);
            }
        }
        found.extend(best.unwrap_or_default());
        return;
    }
    if let Some(listed) = target["enum"].as_array() {
        if !listed.contains(value) {
            let names = listed.iter().filter(|v| !v.is_null()).map(text_of).collect();
            found.push(mismatch(
                Kind::UnlistedValue(names),
                pointer.to_string(),
                value,
                at.to_string(),
            ));
        }
    } else if let (Some(known), Some(text)) = (target["x-known-values"].as_object(), value.as_str()) {
        // An open enumeration (a task status): any value decodes, but one
        // it does not list is news about the service all the same.
        if !known.contains_key(text) {
            let names = known.keys().cloned().collect();
            found.push(mismatch(
                Kind::UnlistedValue(names),
                pointer.to_string(),
                value,
                at.to_string(),
            ));
        }
    }
    let declared: Vec<&str> = match &target["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let actual = type_name(value);
    let fits = declared.is_empty()
        || declared
            .iter()
            .any(|kind| *kind == actual || (*kind == "number" && actual == "integer"));
    if !fits {
        found.push(mismatch(
            Kind::WrongType(declared.join(" | ")),
            pointer.to_string(),
            value,
            at.to_string(),
        ));
        return;
    }
    match value {
        Value::Object(fields) => {
            let properties = target["properties"].as_object();
            let required = target["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str);
            for name in required {
                if !fields.contains_key(name) {
                    let property_correction = properties.and_then(|p| p.get(name)).and_then(|p| correction_of(&[p]));
                    found.push(Mismatch {
                        pointer: format!("{pointer}/{}", escape(name)),
                        kind: Kind::MissingRequired,
                        found: Value::Null,
                        correction: property_correction.or_else(|| correction.clone()),
                        schema_at: at.to_string(),
                    });
                }
            }
            for (name, item) in fields {
                let inner = format!("{pointer}/{}", escape(name));
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => {
                        let property_at = format!("{at}/properties/{}", escape(name));
                        walk(root, property, &property_at, item, &inner, found);
                    }
                    // A schema that lists no fields is free-form.
                    None if properties.is_some_and(|p| !p.is_empty()) => found.push(Mismatch {
                        pointer: inner,
                        kind: Kind::UnknownField,
                        found: item.clone(),
                        correction: correction.clone(),
                        schema_at: at.to_string(),
                    }),
                    None => {
                        if let Some(extra) = target.get("additionalProperties").filter(|s| s.is_object()) {
                            let extra_at = format!("{at}/additionalProperties");
                            walk(root, extra, &extra_at, item, &inner, found);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(each) = target.get("items") {
                let items_at = format!("{at}/items");
                for item in items {
                    walk(root, each, &items_at, item, &format!("{pointer}/*"), found);
                }
            }
        }
        _ => {}
    }
}

/// One object schema with the fields of several `allOf` parts.
fn merge(root: &Value, parts: &[(usize, &Value)]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (_, part) in parts {
        let part = document::resolve(root, part).unwrap_or(&Value::Null);
        if let Some(listed) = part["properties"].as_object() {
            properties.extend(listed.clone());
        }
        required.extend(part["required"].as_array().into_iter().flatten().cloned());
    }
    serde_json::json!({"type": "object", "properties": properties, "required": required})
}

fn declared_type(root: &Value, schema: &Value) -> String {
    match &schema["type"] {
        Value::String(kind) => kind.clone(),
        _ => schema["allOf"][0]
            .as_object()
            .and_then(|_| document::resolve(root, &schema["allOf"][0]).ok())
            .map(|s| declared_type(root, s))
            .unwrap_or_else(|| "a value".to_string()),
    }
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_name_the_field_and_array_items_count_together() {
        let root =
            json!({"components": {"schemas": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}}}});
        let schema = json!({"type": "object", "required": ["list"], "properties": {
            "list": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}});
        let found = compare(&root, &schema, "/s", &json!({"list": [{"n": "1"}, {"n": 2, "m": 3}]}));
        let seen: Vec<(&str, &Kind)> = found.iter().map(|m| (m.pointer.as_str(), &m.kind)).collect();
        assert_eq!(
            seen,
            [
                ("/list/*/n", &Kind::WrongType("integer".into())),
                ("/list/*/m", &Kind::UnknownField)
            ]
        );
        assert_eq!(found[1].schema_at, "/components/schemas/Item");
    }
}
