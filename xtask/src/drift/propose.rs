//! `--propose`: a patched document for the additive findings of a drift
//! check, for a maintainer to review (then `cargo xtask regen`). Only what
//! cannot break a caller is proposed: a field the document does not list
//! becomes an optional, nullable property of the observed type, and a value
//! an enumeration does not list is added to it (to `x-known-values` for an
//! open one such as the task status). Everything else is left to a person.

use serde_json::{json, Value};

use super::ordered::{arranged, Ordered};
use super::report::Finding;
use super::schema::Kind;

/// The proposal as text: the document `text` (whose value is `root`)
/// patched for the additive findings, written in the text's own key order
/// and layout, so the proposal's diff is the additions alone. The second
/// value counts them.
pub fn proposal(text: &str, root: &Value, findings: &[Finding]) -> Result<(String, usize), String> {
    let order: Ordered = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let (patched, applied) = patched(root, findings);
    let written = serde_json::to_string_pretty(&arranged(&order, &patched)).map_err(|e| e.to_string())?;
    Ok((written + "\n", applied))
}

/// `root` with the additive findings applied; the second value counts them.
pub fn patched(root: &Value, findings: &[Finding]) -> (Value, usize) {
    let mut patched = root.clone();
    let mut applied = 0;
    for finding in findings.iter().filter(|f| f.correction.is_none()) {
        let Some(at) = finding.schema_at.as_deref() else {
            continue;
        };
        let Some(node) = patched.pointer_mut(at) else {
            continue;
        };
        // What a recording says is the service's text: a name or value with
        // a character no document should hold (controls, bidi and
        // zero-width ones) is left to a person.
        let unsafe_text = |text: &str| text.chars().any(genapi_text::is_unsafe_to_show);
        match &finding.kind {
            Kind::UnknownField => {
                let name = finding.pointer.rsplit('/').next().unwrap_or_default();
                let name = name.replace("~1", "/").replace("~0", "~");
                if unsafe_text(&name) {
                    continue;
                }
                let properties = &mut node["properties"];
                if properties.get(&name).is_none() && properties.is_object() {
                    properties[&name] = json!({
                        "type": observed_type(&finding.found),
                        "nullable": true,
                        "description": "Seen in recorded traffic; not in the reference.",
                    });
                    applied += 1;
                }
            }
            Kind::UnlistedValue(_) => {
                if let Some(known) = node.get_mut("x-known-values").and_then(Value::as_object_mut) {
                    if let Some(text) = finding.found.as_str().filter(|text| !unsafe_text(text)) {
                        if !known.contains_key(text) {
                            known.insert(text.to_string(), json!("seen in recorded traffic"));
                            applied += 1;
                        }
                    }
                } else if let Some(listed) = node.get_mut("enum").and_then(Value::as_array_mut) {
                    let safe = finding.found.as_str().is_none_or(|text| !unsafe_text(text));
                    if safe && !listed.contains(&finding.found) {
                        listed.push(finding.found.clone());
                        applied += 1;
                    }
                }
            }
            _ => {}
        }
    }
    (patched, applied)
}

fn observed_type(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        _ => "string",
    }
}
