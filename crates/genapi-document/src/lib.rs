//! Reads the OpenAPI document `genapi` is generated from: its operations,
//! its `$ref`s, and the rules a document must keep for the crate to use it.
//!
//! One reader for everything that looks at `openapi.json`: the library's
//! validator, its build script (which emits the operations table from the
//! [`Catalog`] and refuses a document with [`problems`]), the mock service,
//! the command's `models` and the maintenance tasks in `xtask` (whose
//! `check` runs the same [`problems`]). The [`Catalog`] is the one list of
//! the document's operations and models they all read.
//!
//! The document is walked as JSON rather than as typed OpenAPI, so one reader
//! serves 3.0 and 3.1 descriptions alike.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

mod catalog;
mod closest;
mod field;
mod order;

pub use catalog::{Catalog, Model, UnknownModel};
pub use closest::closest;
pub use field::{Field, ImageField};

/// Where named schemas live: the prefix of a `$ref` to one of them.
pub const SCHEMA_PREFIX: &str = "#/components/schemas/";

/// The HTTP methods a path item can hold (its other keys are not operations).
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// An operation of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Operation {
    /// `POST`, `GET`, …
    pub method: String,
    /// Path as written, e.g. `/v1/gen-2-pro`.
    pub path: String,
    /// operationId; empty when the document gives none ([`problems`] reports it).
    pub id: String,
    /// First tag; empty when there is none.
    pub tag: String,
    /// Served from the regional base URL (`servers: [{url: "{regional_base_url}"}]`).
    pub regional: bool,
    /// Marked deprecated.
    pub deprecated: bool,
    /// Name of the JSON request body schema, when it is a `$ref` to a named schema.
    pub request_schema: Option<String>,
}

/// Every operation, sorted by path and then by method, both compared as
/// strings (byte by byte). [`Catalog`] puts them in the document's order.
///
/// `serde_json` keeps an object's keys sorted unless its `preserve_order`
/// feature is on, so the document's own order is not known from `root`; the
/// list is sorted explicitly, so it is the same whichever features
/// `serde_json` is built with.
fn operations(root: &Value) -> Vec<Operation> {
    let mut list = Vec::new();
    for (path, item) in root["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            list.push(Operation {
                method: method.to_uppercase(),
                path: path.clone(),
                id: op["operationId"].as_str().unwrap_or_default().to_string(),
                tag: op["tags"][0].as_str().unwrap_or_default().to_string(),
                regional: op["servers"][0]["url"].as_str() == Some("{regional_base_url}"),
                deprecated: op["deprecated"].as_bool().unwrap_or(false),
                request_schema: op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .and_then(|r| r.strip_prefix(SCHEMA_PREFIX))
                    .map(str::to_string),
            });
        }
    }
    list.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
    list
}

/// A named schema of `components/schemas`.
pub fn schema<'a>(root: &'a Value, name: &str) -> Option<&'a Value> {
    root["components"]["schemas"].get(name)
}

/// The target of a local reference (`#/…`), as a JSON pointer into the document.
pub fn target<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

/// Follows `$ref`s until a schema that is not a reference. Fails on a
/// dangling reference or a cycle of references, naming them.
pub fn resolve<'a>(root: &'a Value, schema: &'a Value) -> Result<&'a Value, String> {
    let mut current = schema;
    let mut seen: Vec<&str> = Vec::new();
    while let Some(reference) = current.get("$ref").and_then(Value::as_str) {
        if seen.contains(&reference) {
            seen.push(reference);
            return Err(format!("$ref cycle: {}", seen.join(" -> ")));
        }
        seen.push(reference);
        current = target(root, reference).ok_or_else(|| format!("$ref {reference} points nowhere"))?;
    }
    Ok(current)
}

/// Every `$ref` inside `value`, skipping `x-` extensions (free-form data).
pub fn references(value: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    out.insert(reference.to_string());
                }
                for (key, child) in map {
                    if !key.starts_with("x-") {
                        walk(child, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(value, &mut out);
    out
}

/// Cycles among the document's references, each as the chain of references
/// that leads back to its start (`A -> B -> A`). A schema that contains
/// itself, directly or not, is a cycle too: every walker of the document
/// (validator, sample bodies, xtask) assumes schemas are finite trees.
pub fn cycles(root: &Value) -> Vec<String> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pending: Vec<String> = references(root).into_iter().collect();
    while let Some(reference) = pending.pop() {
        if edges.contains_key(&reference) {
            continue;
        }
        let inner = target(root, &reference).map(references).unwrap_or_default();
        pending.extend(inner.iter().filter(|r| !edges.contains_key(*r)).cloned());
        edges.insert(reference, inner);
    }
    // Depth-first search; `stack` is the chain being explored.
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
        found: &mut Vec<String>,
    ) {
        if let Some(start) = stack.iter().position(|s| s == node) {
            let mut chain: Vec<&str> = stack[start..].iter().map(|s| short(s)).collect();
            chain.push(short(node));
            found.push(chain.join(" -> "));
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, done, stack, found);
        }
        stack.pop();
        done.insert(node.to_string());
    }
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for node in edges.keys() {
        visit(node, &edges, &mut done, &mut Vec::new(), &mut found);
    }
    found
}

fn short(reference: &str) -> &str {
    reference.strip_prefix(SCHEMA_PREFIX).unwrap_or(reference)
}

/// Request schemas used by more than one submission (POST) operation, with
/// the operationIds that share each. Every submission needs its own request
/// schema: the generated `Submit` impl ties one request type to one operation.
fn shared_request_schemas(operations: &[Operation]) -> Vec<(String, Vec<String>)> {
    let mut owners: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for op in operations.iter().filter(|op| op.method == "POST") {
        if let Some(schema) = &op.request_schema {
            owners.entry(schema).or_default().push(op.id.clone());
        }
    }
    owners
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(schema, ids)| (schema.to_string(), ids))
        .collect()
}

/// Every `pattern` of the document, each once. Extensions (`x-`) are
/// searched too: the validator compiles every string under a `pattern` key.
pub fn patterns(root: &Value) -> BTreeSet<&str> {
    fn walk<'a>(value: &'a Value, out: &mut BTreeSet<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
                    out.insert(pattern);
                }
                map.values().for_each(|child| walk(child, out));
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(root, &mut out);
    out
}

/// Compiles a `pattern` the way the validator matches it (ECMAScript syntax,
/// no flags). The error names the pattern.
pub fn compile_pattern(pattern: &str) -> Result<regress::Regex, String> {
    regress::Regex::new(pattern).map_err(|e| format!("pattern {pattern:?} does not compile: {e}"))
}

/// What makes the document unusable by this crate, every problem at once:
/// no paths, operations without an operationId, dangling references,
/// reference cycles, request schemas shared between operations, patterns
/// that do not compile.
///
/// These are the rules of the document's structure, and the only ones:
/// `build.rs` refuses to build from a document with any of them, the
/// library's validator refuses to parse one, and `cargo xtask check`
/// reports them all.
pub fn problems(root: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if !root["paths"].is_object() {
        problems.push("the document has no paths".to_string());
    }
    let operations = operations(root);
    for op in operations.iter().filter(|op| op.id.is_empty()) {
        problems.push(format!("{} {}: no operationId", op.method, op.path));
    }
    for reference in references(root) {
        if target(root, &reference).is_none() {
            problems.push(format!("$ref {reference} points nowhere"));
        }
    }
    for cycle in cycles(root) {
        problems.push(format!("$ref cycle: {cycle}"));
    }
    for (schema, ids) in shared_request_schemas(&operations) {
        problems.push(format!(
            "request schema {schema} is shared by operations {}: give each submission its own request schema \
             (one request type submits to one operation)",
            ids.join(", ")
        ));
    }
    for pattern in patterns(root) {
        if let Err(problem) = compile_pattern(pattern) {
            problems.push(problem);
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(schemas: Value) -> Value {
        json!({
            "paths": {"/v1/a": {"post": {"operationId": "a", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}}},
            "components": {"schemas": schemas}
        })
    }

    #[test]
    fn a_reference_cycle_is_reported_and_resolving_it_stops() {
        let root = doc(json!({"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}));
        assert_eq!(cycles(&root), vec!["A -> B -> A".to_string()]);
        let error = resolve(&root, &root["components"]["schemas"]["A"]).unwrap_err();
        assert!(error.starts_with("$ref cycle: #/components/schemas/B -> "), "{error}");
        assert!(problems(&root).iter().any(|p| p == "$ref cycle: A -> B -> A"));
    }

    #[test]
    fn a_schema_containing_itself_is_a_cycle() {
        let root = doc(json!({"A": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/A"}}}}));
        assert_eq!(cycles(&root), vec!["A -> A".to_string()]);
    }

    #[test]
    fn a_dangling_reference_is_reported() {
        let root = doc(json!({}));
        assert_eq!(
            problems(&root),
            vec!["$ref #/components/schemas/A points nowhere".to_string()]
        );
        assert!(resolve(&root, &json!({"$ref": "#/components/schemas/A"})).is_err());
    }

    #[test]
    fn a_shared_request_schema_names_the_schema_and_operations() {
        let mut root = doc(json!({"A": {"type": "object"}}));
        root["paths"]["/v1/b"]["post"] = root["paths"]["/v1/a"]["post"].clone();
        root["paths"]["/v1/b"]["post"]["operationId"] = json!("b");
        let found = problems(&root);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("request schema A is shared by operations a, b"),
            "{found:?}"
        );
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_a_problem() {
        let root = doc(json!({"A": {"type": "object", "properties": {
            "id": {"type": "string", "pattern": "^[a-z]+$"},
            "bad": {"type": "string", "pattern": "([unclosed"}
        }}}));
        assert_eq!(patterns(&root), BTreeSet::from(["^[a-z]+$", "([unclosed"]));
        let found = problems(&root);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("pattern \"([unclosed\" does not compile: "),
            "{found:?}"
        );
        assert!(compile_pattern("^[a-z]+$").is_ok_and(|re| re.find("lora").is_some()));
    }

    #[test]
    fn operations_are_sorted_by_path_then_method_not_in_document_order() {
        let text = r#"{"paths": {
            "/v1/z": {"post": {"operationId": "z"}},
            "/v1/a-b": {"post": {"operationId": "a_b_post"}, "get": {"operationId": "a_b_get"}},
            "/v1/a": {"put": {"operationId": "a"}}
        }}"#;
        let root: Value = serde_json::from_str(text).unwrap();
        let order: Vec<String> = operations(&root).into_iter().map(|op| op.id).collect();
        assert_eq!(order, ["a", "a_b_get", "a_b_post", "z"]);
    }

    #[test]
    fn operations_skip_path_item_keys_that_are_not_methods() {
        let mut root = doc(json!({"A": {"type": "object"}}));
        root["paths"]["/v1/a"]["parameters"] = json!([]);
        root["paths"]["/v1/a"]["x-note"] = json!("free-form");
        let ops = operations(&root);
        assert_eq!(ops.len(), 1);
        assert_eq!(
            (ops[0].method.as_str(), ops[0].request_schema.as_deref()),
            ("POST", Some("A"))
        );
        assert!(problems(&root).is_empty());
    }
}
