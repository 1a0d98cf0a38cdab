//! `cargo xtask diff-upstream`: what differs between our document and another
//! description of the service (3.0 or 3.1), in the terms a maintainer needs
//! to update `openapi.json`.

use serde_json::Value;

use crate::model::{read, Field};

fn changes(ours: &Field, theirs: &Field) -> Vec<String> {
    let mut out = Vec::new();
    if ours.kind != theirs.kind {
        out.push(format!("type {} -> {}", ours.kind, theirs.kind));
    }
    if ours.nullable != theirs.nullable {
        out.push(format!("nullable {} -> {}", ours.nullable, theirs.nullable));
    }
    if ours.required != theirs.required {
        out.push(format!("required {} -> {}", ours.required, theirs.required));
    }
    if ours.bounds != theirs.bounds {
        out.push(format!(
            "bounds [{}] -> [{}]",
            ours.bounds.join(", "),
            theirs.bounds.join(", ")
        ));
    }
    if ours.enumeration != theirs.enumeration {
        out.push(format!(
            "enum [{}] -> [{}]",
            ours.enumeration.join(", "),
            theirs.enumeration.join(", ")
        ));
    }
    if ours.default != theirs.default {
        let show = |d: &Option<String>| d.clone().unwrap_or_else(|| "none".into());
        out.push(format!("default {} -> {}", show(&ours.default), show(&theirs.default)));
    }
    out
}

/// One line per difference; empty when the documents agree.
pub fn diff(ours: &Value, theirs: &Value, rename: &[(String, String)]) -> Vec<String> {
    let (ours, theirs) = (read(ours, &[]), read(theirs, rename));
    let mut lines = Vec::new();
    for key in theirs.keys().filter(|k| !ours.contains_key(*k)) {
        lines.push(format!("+ operation {key} (not in openapi.json)"));
    }
    for key in ours.keys().filter(|k| !theirs.contains_key(*k)) {
        lines.push(format!("- operation {key} (not in the other document)"));
    }
    for (key, op) in &ours {
        let Some(other) = theirs.get(key) else { continue };
        for (name, field) in &other.fields {
            match op.fields.get(name) {
                None => lines.push(format!("+ field {key} {name}: {}", field.kind)),
                Some(mine) => {
                    let changed = changes(mine, field);
                    if !changed.is_empty() {
                        lines.push(format!("~ field {key} {name}: {}", changed.join("; ")));
                    }
                }
            }
        }
        for name in op.fields.keys().filter(|n| !other.fields.contains_key(*n)) {
            lines.push(format!("- field {key} {name}"));
        }
    }
    lines
}
