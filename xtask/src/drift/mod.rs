//! `cargo xtask drift FILE...`: checks recorded traffic (HAR files written by
//! `ClientBuilder::record` or `genapi --record`) against `openapi.json`.
//!
//! Each entry is matched to its operation (the `_genapi` note names it; a
//! HAR from elsewhere is matched by method and path), then its request body
//! is compared with the request schema, its status and content type with the
//! documented responses, and its answer with the response schema
//! ([`schema::compare`]). Polling and result addresses are checked against
//! the hosts the recording trusted ([`hosts::Trust`]). Findings that an
//! `x-correction` of the document covers are reported apart and are not
//! drift. A download is no operation of the document: only its host is
//! checked.

pub mod hosts;
pub mod ordered;
pub mod propose;
pub mod report;
pub mod schema;
pub mod stream;

use genapi_document::{Catalog, Operation};
use serde_json::Value;

pub use report::{Finding, Group, Report};
pub use schema::Kind;
pub use stream::check_file;

use schema::escape;

/// What a recording's `_genapi` note calls a download.
const DOWNLOAD: &str = "download";

/// Reads a recording: a HAR file, as the `har` crate (a reader that is not
/// this project's) reads one, then as JSON, which keeps the `_genapi` notes
/// the `har` crate's types have no place for.
pub fn read(name: &str, text: &str) -> Result<Value, String> {
    // One reading at a time: the `har` crate's is dropped before the JSON
    // value is made. (A file on disk is checked as a stream: `check_file`.)
    if let Err(not_har) = har::from_str(text) {
        return Err(match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Err(not_json) => format!("{name} is not JSON: {not_json}"),
            Ok(_) => format!("{name} is not a HAR file: {not_har}"),
        });
    }
    let har: Value = serde_json::from_str(text).map_err(|e| format!("{name} is not JSON: {e}"))?;
    if !har["log"]["entries"].is_array() {
        return Err(format!("{name} is not a HAR file: it has no log.entries"));
    }
    Ok(har)
}

/// Checks recordings (each a HAR file read with [`read`]) against the
/// document `root`.
pub fn check(root: &Value, recordings: &[Value]) -> Report {
    let mut report = Report::default();
    let catalog = Catalog::of_value(root);
    for har in recordings {
        let log = &har["log"];
        let trust = hosts::Trust::of_log(log);
        for entry in log["entries"].as_array().into_iter().flatten() {
            report.exchanges += 1;
            check_entry(root, &catalog, &trust, entry, &mut report);
        }
    }
    report
}

/// The operation of the document `entry` exercised (the one its
/// `_genapi.operation` names, else the one at its method and path), from the
/// document reader's catalog, with its JSON.
fn operation<'a>(root: &'a Value, catalog: &Catalog, entry: &Value) -> Option<(Operation, &'a Value)> {
    let named = entry["_genapi"]["operation"].as_str();
    let method = entry["request"]["method"].as_str().unwrap_or_default().to_uppercase();
    let path = entry["request"]["url"]
        .as_str()
        .and_then(|u| url::Url::parse(u).ok())
        .map(|u| u.path().to_string())
        .unwrap_or_default();
    let found = catalog.operations().iter().find(|op| {
        !op.id.is_empty()
            && match named {
                Some(name) => name == op.id,
                None => op.method == method && op.path == path,
            }
    })?;
    let item = &root["paths"][&found.path][found.method.to_lowercase()];
    Some((found.clone(), item))
}

pub(crate) fn check_entry(root: &Value, catalog: &Catalog, trust: &hosts::Trust, entry: &Value, report: &mut Report) {
    let request = &entry["request"];
    let response = &entry["response"];
    let status = response["status"].as_u64().unwrap_or(0);
    let url = request["url"].as_str().unwrap_or_default();
    let named = entry["_genapi"]["operation"].as_str();
    let mut add = |operation: &str, place: String, mismatch: schema::Mismatch| {
        report.findings.push(Finding {
            operation: operation.to_string(),
            place,
            pointer: mismatch.pointer,
            kind: mismatch.kind,
            found: mismatch.found,
            correction: mismatch.correction,
            schema_at: Some(mismatch.schema_at).filter(|s| !s.is_empty()),
        })
    };
    let plain = |pointer: &str, kind: Kind, found: Value| schema::Mismatch {
        pointer: pointer.to_string(),
        kind,
        found,
        correction: None,
        schema_at: String::new(),
    };
    if named == Some(DOWNLOAD) {
        if !trust.trusts(url) {
            add(
                DOWNLOAD,
                "request".into(),
                plain("url", Kind::UntrustedHost, Value::String(url.into())),
            );
        }
        if status == 0 {
            report.unanswered += 1;
        }
        return;
    }
    let Some((op, item)) = operation(root, catalog, entry) else {
        let name = named.unwrap_or("(unknown)");
        let place = format!("{} {}", request["method"].as_str().unwrap_or("?"), url_path(url));
        add(name, place, plain("", Kind::UnknownOperation, Value::Null));
        return;
    };
    let op_at = format!("/paths/{}/{}", escape(&op.path), op.method.to_lowercase());
    if op.method == "GET" && !trust.trusts(url) {
        add(
            &op.id,
            "request".into(),
            plain("url", Kind::UntrustedHost, Value::String(url.into())),
        );
    }
    // The request body, as sent.
    if let Some(text) = request["postData"]["text"].as_str() {
        let schema = &item["requestBody"]["content"]["application/json"]["schema"];
        if let (false, Ok(body)) = (schema.is_null(), serde_json::from_str::<Value>(text)) {
            let at = format!("{op_at}/requestBody/content/application~1json/schema");
            for mismatch in schema::compare(root, schema, &at, &body) {
                add(&op.id, "request".into(), mismatch);
            }
        }
    }
    if status == 0 {
        report.unanswered += 1;
        return;
    }
    let responses = &item["responses"];
    let code = status.to_string();
    let class = format!("{}XX", status / 100);
    let Some((key, documented)) = [code.as_str(), class.as_str(), "default"]
        .into_iter()
        .find_map(|key| responses.get(key).map(|r| (key, r)))
    else {
        let listed = responses
            .as_object()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default();
        let reason = response["statusText"].as_str().unwrap_or_default();
        let found = Value::String(format!("{status} {reason}").trim().to_string());
        add(
            &op.id,
            format!("response {status}"),
            plain("", Kind::UndocumentedStatus(listed), found),
        );
        return;
    };
    let place = format!("response {status}");
    let content = &response["content"];
    let mime = content["mimeType"]
        .as_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase();
    let Some(kinds) = documented["content"].as_object() else {
        return;
    };
    let Some(media) = kinds.get(&mime) else {
        if content["size"].as_i64() != Some(-1) {
            let listed = kinds.keys().cloned().collect();
            add(
                &op.id,
                place,
                plain("", Kind::UndocumentedContentType(listed), Value::String(mime)),
            );
        }
        return;
    };
    // Proxies and browsers store some bodies as base64.
    let text = match (content["text"].as_str(), content["encoding"].as_str()) {
        (Some(text), Some("base64")) => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default()
        }
        (Some(text), _) => text.to_string(),
        (None, _) => return,
    };
    // A body left out of the recording (a summary in brackets) says nothing.
    if text.starts_with('[') && text.ends_with(']') && serde_json::from_str::<Value>(&text).is_err() {
        return;
    }
    let Ok(body) = serde_json::from_str::<Value>(&text) else {
        add(&op.id, place, plain("", Kind::NotJson, Value::String(text)));
        return;
    };
    let at = format!("{op_at}/responses/{key}/content/{}/schema", escape(&mime));
    for mismatch in schema::compare(root, &media["schema"], &at, &body) {
        add(&op.id, place.clone(), mismatch);
    }
    // Where the task is polled and its result fetched.
    for pointer in ["/polling_url", "/result/sample"] {
        if let Some(address) = body.pointer(pointer).and_then(Value::as_str) {
            if !trust.trusts(address) {
                add(
                    &op.id,
                    place.clone(),
                    plain(pointer, Kind::UntrustedHost, Value::String(address.into())),
                );
            }
        }
    }
}

fn url_path(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| u.path().to_string())
        .unwrap_or_else(|_| url.to_string())
}
