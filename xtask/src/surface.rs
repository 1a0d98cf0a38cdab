//! The API surface as reviewable text: one block per operation with each
//! request field's type, required flag, bounds and documented default. The
//! snapshot of this text is what a reviewer reads when the document changes.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::{self, read, Field};

fn describe(name: &str, field: &Field) -> String {
    let mut parts = vec![field.kind.clone()];
    if field.required {
        parts.push("required".into());
    }
    if field.nullable {
        parts.push("nullable".into());
    }
    parts.extend(model::bounds(field));
    let choices = model::choices(field);
    if !choices.is_empty() {
        parts.push(format!("enum [{}]", choices.join(", ")));
    }
    if let Some(default) = model::default(field) {
        parts.push(format!("default {default}"));
    }
    parts.extend(model::rules(field));
    format!("    {name}: {}", parts.join("; "))
}

/// The listing of a whole document.
pub fn surface(doc: &Value) -> String {
    let mut out = String::new();
    for (key, op) in read(doc, &[]) {
        let mut flags = vec![op.operation.tag.clone()];
        if op.operation.deprecated {
            flags.push("deprecated".into());
        }
        if let Some(server) = &op.server {
            flags.push(format!("server {server}"));
        }
        if !op.fields.is_empty() && !op.open {
            flags.push("unknown fields rejected".into());
        }
        let _ = writeln!(out, "{key} ({}) [{}]", op.operation.id, flags.join(", "));
        for (name, field) in &op.parameters {
            let _ = writeln!(out, "{} (query)", describe(name, field));
        }
        for (name, field) in &op.fields {
            let _ = writeln!(out, "{}", describe(name, field));
        }
        for rule in &op.rules {
            let _ = writeln!(out, "  rule: {rule}");
        }
        let _ = writeln!(out, "  responses: {}", op.responses.join(", "));
    }
    out
}
