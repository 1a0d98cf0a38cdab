//! `cargo xtask check`: what the generator needs of the document, checked
//! before it runs, with every problem listed at once.
//!
//! Two sets of rules:
//!
//! - The document's structure (paths, operationIds, `$ref`s that resolve and
//!   do not loop, one request schema per submission, patterns that compile)
//!   is `genapi_document::problems`, the very function `build.rs` refuses to
//!   build by and the validator refuses to parse by. This check neither
//!   repeats nor loosens it, so the three refuse the same documents.
//! - The rest is this check's own, and `build.rs` has no reason to apply it.
//!   Either the build already refuses such a document on its own, and this
//!   check only names the problem before a build does (a document that does
//!   not parse as OpenAPI 3.0, which the generator parses the same way; a
//!   response schema that is not a `$ref`, whose generated type the crate's
//!   code then fails to compile against), or the rule is about what the
//!   document says rather than whether a client can be built from it: the
//!   contract's paths and version, tags, request schemas by `$ref` so each
//!   submission gets its request type, no `default` (it would put unset
//!   fields on the wire), no 3.1 idioms pasted from an upstream description,
//!   the webhook notification described once on every submission that takes
//!   `webhook_url` (`callbacks.rs`).
//!   A document breaking those still builds a working client, only not the
//!   intended one, and the library must keep reading such documents when a
//!   test or tool brings its own.

use serde_json::Value;

/// Every path of the contract, with its method.
pub const CONTRACT_PATHS: [(&str, &str); 27] = [
    ("post", "/v1/gen-2-pro"),
    ("post", "/v1/gen-2-pro-preview"),
    ("post", "/v1/gen-2-flex"),
    ("post", "/v1/gen-2-klein-9b"),
    ("post", "/v1/gen-2-klein-9b-preview"),
    ("post", "/v1/gen-2-klein-4b"),
    ("post", "/v1/gen-kontext-pro"),
    ("post", "/v1/gen-dev"),
    ("post", "/v1/gen-pro-1.1"),
    ("post", "/v1/gen-pro-1.1-ultra"),
    ("post", "/v1/gen-pro-1.1-ultra-finetuned"),
    ("post", "/v1/gen-pro-1.0-fill"),
    ("post", "/v1/gen-pro-1.0-fill-finetuned"),
    ("post", "/v1/gen-pro-1.0-expand"),
    ("get", "/v1/get_result"),
    ("post", "/v1/gen-tools/deblur-v1"),
    ("post", "/v1/gen-tools/erase-v1"),
    ("post", "/v1/gen-tools/vto-v1"),
    ("post", "/v1/gen-tools/vto-v2"),
    ("post", "/v1/gen-tools/outpainting-v1"),
    ("post", "/v1/gen-3-video"),
    ("post", "/v1/gen-2-klein-4b-finetuned"),
    ("post", "/v1/gen-2-klein-9b-finetuned"),
    ("post", "/v1/gen-2-klein-9b-kv-finetuned"),
    ("post", "/v1/gen-2-klein-9b-kv-bf16-finetuned"),
    ("post", "/v1/gen-2-klein-base-4b-finetuned"),
    ("post", "/v1/gen-2-klein-base-9b-finetuned"),
];

/// Problems found in a document's text; empty when it is fit to generate from.
pub fn check(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let doc: Value = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(e) => return vec![format!("not JSON: {e}")],
    };
    if !doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.0.")) {
        problems.push(format!(
            "openapi must be 3.0.x (the generator refuses 3.1), found {}",
            doc["openapi"]
        ));
    }
    if let Err(e) = serde_json::from_value::<openapiv3::OpenAPI>(doc.clone()) {
        problems.push(format!("does not parse as OpenAPI 3.0: {e}"));
    }
    if doc["info"]["version"] != "0.0.1" {
        problems.push(format!(
            "info.version must be \"0.0.1\", found {}",
            doc["info"]["version"]
        ));
    }
    for (method, path) in CONTRACT_PATHS {
        if doc["paths"][path][method].is_null() {
            problems.push(format!(
                "{} {path}: missing (the contract lists it)",
                method.to_uppercase()
            ));
        }
    }
    let catalog = crate::document::Catalog::of_value(&doc);
    for operation in catalog.operations() {
        let (method, path) = (operation.method.to_lowercase(), operation.path.clone());
        {
            let op = &doc["paths"][&path][&method];
            let at = format!("{} {path}", operation.method);
            if op["tags"].as_array().is_none_or(Vec::is_empty) {
                problems.push(format!("{at}: no tag"));
            }
            for status in ["200", "422"] {
                let response = &op["responses"][status];
                if response.is_null() {
                    problems.push(format!("{at}: no {status} response"));
                } else if response["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .is_none()
                {
                    problems.push(format!("{at}: the {status} response schema must be a $ref (inline schemas of one operation get one generated name)"));
                }
            }
            let request = &op["requestBody"]["content"]["application/json"]["schema"];
            if !request.is_null() {
                if request["$ref"].as_str().is_none() {
                    problems.push(format!("{at}: the request schema must be a $ref"));
                }
                let mut seen = Vec::new();
                find_defaults(&doc, request, &format!("{at} request"), &mut seen, &mut problems);
            }
        }
    }
    problems.extend(crate::callbacks::problems(&doc, catalog.operations()));
    // The document's structure: exactly what build.rs and the validator
    // refuse (see the module comment).
    problems.extend(crate::document::problems(&doc));
    find_31_constructs(&doc, "#", &mut problems);
    problems
}

/// `default` in a request schema puts unset fields on the wire.
fn find_defaults(doc: &Value, schema: &Value, at: &str, seen: &mut Vec<String>, problems: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        if seen.iter().any(|s| s == reference) {
            return;
        }
        seen.push(reference.to_string());
        let name = reference.rsplit('/').next().unwrap_or("");
        find_defaults(
            doc,
            &doc["components"]["schemas"][name],
            &format!("{at} ({name})"),
            seen,
            problems,
        );
        return;
    }
    if schema.get("default").is_some() {
        problems.push(format!(
            "{at}: has a `default` keyword; use x-default (the generator always serializes defaults)"
        ));
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        find_defaults(doc, property, &format!("{at}.{name}"), seen, problems);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for branch in schema[key].as_array().into_iter().flatten() {
            find_defaults(doc, branch, at, seen, problems);
        }
    }
    if schema.get("items").is_some() {
        find_defaults(doc, &schema["items"], &format!("{at}[]"), seen, problems);
    }
}

/// OpenAPI 3.1 / JSON Schema 2020 idioms the 3.0 generator cannot read.
fn find_31_constructs(value: &Value, at: &str, problems: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if map.get("type").is_some_and(Value::is_array) {
                problems.push(format!(
                    "{at}: `type` is a list (3.1); use one type and `nullable: true`"
                ));
            }
            if map.get("type").and_then(Value::as_str) == Some("null") {
                problems.push(format!(
                    "{at}: `type: null` (3.1 null idiom); use `nullable: true` on the other schema"
                ));
            }
            for key in [
                "const",
                "prefixItems",
                "$defs",
                "jsonSchemaDialect",
                "unevaluatedProperties",
            ] {
                if map.contains_key(key) {
                    problems.push(format!("{at}: `{key}` is not OpenAPI 3.0"));
                }
            }
            for key in ["exclusiveMinimum", "exclusiveMaximum"] {
                if map.get(key).is_some_and(Value::is_number) {
                    problems.push(format!(
                        "{at}: numeric `{key}` is 3.1; 3.0 takes a boolean beside minimum/maximum"
                    ));
                }
            }
            if at == "#" && map.contains_key("webhooks") {
                problems.push("#: top-level `webhooks` is 3.1".to_string());
            }
            for (key, child) in map {
                // Extensions hold free-form data, not schemas.
                if !key.starts_with("x-") {
                    find_31_constructs(child, &format!("{at}/{key}"), problems);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_31_constructs(item, &format!("{at}/{i}"), problems);
            }
        }
        _ => {}
    }
}
