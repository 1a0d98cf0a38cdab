//! The webhook notification as the document describes it: one OpenAPI 3.0
//! callback, the same on every submission that takes `webhook_url`.
//!
//! The generator ignores callbacks, so nothing else would notice a
//! submission that lost its callback, one that gained a callback it cannot
//! send, or a copy edited on one operation only. The callback is written out
//! on each operation (the generator's parser takes no `$ref` for a callback),
//! so the copies are held to be equal here.

use serde_json::Value;

use crate::document::{resolve, Operation};

/// The callback's name on every operation.
pub const NAME: &str = "task_finished";

/// Where the service sends it: the submission's own `webhook_url`.
pub const EXPRESSION: &str = "{$request.body#/webhook_url}";

/// The named schema of the notification's body.
pub const BODY_SCHEMA: &str = "#/components/schemas/WebhookNotification";

/// Problems of the operations' callbacks, each naming its operation.
pub fn problems(doc: &Value, operations: &[Operation]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut first: Option<(String, &Value)> = None;
    for operation in operations {
        let at = format!("{} {}", operation.method, operation.path);
        let op = &doc["paths"][&operation.path][operation.method.to_lowercase()];
        let callbacks = &op["callbacks"];
        match (takes_webhook_url(doc, op), callbacks.is_null()) {
            (false, true) => continue,
            (false, false) => {
                problems.push(format!("{at}: has callbacks but no `webhook_url` to send them to"));
                continue;
            }
            (true, true) => {
                problems.push(format!("{at}: takes `webhook_url` but declares no `{NAME}` callback"));
                continue;
            }
            (true, false) => {}
        }
        match &first {
            Some((other, callback)) if *callback != callbacks => problems.push(format!(
                "{at}: its callbacks differ from those of {other} (one notification, one description)"
            )),
            Some(_) => {}
            None => {
                problems.extend(shape(doc, callbacks).into_iter().map(|p| format!("{at}: {p}")));
                first = Some((at, callbacks));
            }
        }
    }
    problems
}

/// Whether the operation's request body has a `webhook_url` field.
fn takes_webhook_url(doc: &Value, op: &Value) -> bool {
    let request = &op["requestBody"]["content"]["application/json"]["schema"];
    resolve(doc, request).is_ok_and(|schema| schema["properties"].get("webhook_url").is_some())
}

/// What one operation's callbacks must be: only `task_finished`, a POST to
/// the submission's `webhook_url`, its body the named notification schema,
/// its headers described by reference, a 2xx answer.
fn shape(doc: &Value, callbacks: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let names: Vec<&String> = callbacks.as_object().into_iter().flat_map(|m| m.keys()).collect();
    if names != [NAME] {
        problems.push(format!("its callbacks must be exactly `{NAME}`, found {names:?}"));
    }
    let item = &callbacks[NAME];
    let keys: Vec<&String> = item.as_object().into_iter().flat_map(|m| m.keys()).collect();
    if keys != [EXPRESSION] {
        problems.push(format!(
            "`{NAME}` must have the one address {EXPRESSION}, found {keys:?}"
        ));
    }
    let methods: Vec<&String> = item[EXPRESSION]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .collect();
    if methods != ["post"] {
        problems.push(format!("`{NAME}` must be a POST only, found {methods:?}"));
    }
    let post = &item[EXPRESSION]["post"];
    let body = resolve(doc, &post["requestBody"]).map(|b| &b["content"]["application/json"]["schema"]["$ref"]);
    if post["requestBody"]["$ref"].as_str().is_none() || body.ok().and_then(Value::as_str) != Some(BODY_SCHEMA) {
        problems.push(format!(
            "`{NAME}`'s requestBody must be a $ref to a body whose JSON schema is {BODY_SCHEMA}"
        ));
    }
    let parameters = post["parameters"].as_array().map(Vec::as_slice).unwrap_or_default();
    if parameters.is_empty() {
        problems.push(format!("`{NAME}` describes no headers"));
    }
    for parameter in parameters {
        let named = parameter["$ref"].as_str().unwrap_or("(inline)");
        if !named.starts_with("#/components/parameters/")
            || resolve(doc, parameter).map_or(true, |p| p["in"] != "header")
        {
            problems.push(format!(
                "`{NAME}` parameter {named}: must be a $ref to a header of components/parameters"
            ));
        }
    }
    let answers = post["responses"].as_object().into_iter().flat_map(|m| m.keys());
    if !answers.into_iter().any(|status| status.starts_with('2')) {
        problems.push(format!("`{NAME}` names no 2xx answer"));
    }
    problems
}
