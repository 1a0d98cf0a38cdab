//! `cargo xtask diff-upstream`: what differs between our document and another
//! description of the service (3.0 or 3.1), in the terms a maintainer needs
//! to update `openapi.json`.
//!
//! Values are compared, not spellings: numbers numerically (`64` is `64.0`),
//! enums as sets, formats only where they change the Rust type the generator
//! picks. A difference on a node of ours that carries an `x-correction` is
//! "known" (docs/spec-corrections.md explains it) and listed apart.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::model::{self, read, Details, Field};

/// The differences, unknown ones (to act on) apart from known ones.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    /// Differences no `x-correction` explains.
    pub unknown: Vec<String>,
    /// Differences on corrected nodes, each with its correction entries.
    pub known: Vec<(String, String)>,
    /// Operations present in both documents and compared.
    pub compared: usize,
}

impl Report {
    /// No difference at all.
    pub fn is_empty(&self) -> bool {
        self.unknown.is_empty() && self.known.is_empty()
    }

    /// The text `diff-upstream` prints, ending with a one-line summary.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.unknown {
            out.push_str(line);
            out.push('\n');
        }
        if !self.known.is_empty() {
            out.push_str("known (explained by x-correction, see docs/spec-corrections.md):\n");
            for (line, entries) in &self.known {
                out.push_str(&format!("  {line} [known: {entries}]\n"));
            }
        }
        out.push_str(&format!(
            "{} unknown difference(s), {} known, {} operation(s) compared\n",
            self.unknown.len(),
            self.known.len(),
            self.compared
        ));
        out
    }
}

/// The Rust type the generator would pick for one `kind` part
/// (`integer(uint32)`, `number`, `string(uri)`), or the part itself.
fn rust_type(part: &str) -> String {
    let (base, format) = match part.split_once('(') {
        Some((base, format)) => (base, Some(format.trim_end_matches(')'))),
        None => (part, None),
    };
    let ty = match (base, format) {
        ("integer", Some("int8")) => "i8",
        ("integer", Some("int16")) => "i16",
        ("integer", Some("int32" | "int")) => "i32",
        ("integer", Some("uint8")) => "u8",
        ("integer", Some("uint16")) => "u16",
        ("integer", Some("uint32" | "uint")) => "u32",
        ("integer", Some("uint64")) => "u64",
        ("integer", _) => "i64",
        ("number", Some("float")) => "f32",
        ("number", _) => "f64",
        ("string", Some("date-time")) => "DateTime",
        ("string", Some("date")) => "NaiveDate",
        ("string", Some("uuid")) => "Uuid",
        ("string", Some("ip" | "ipv4" | "ipv6")) => "IpAddr",
        ("string", _) => "String",
        _ => return part.to_string(),
    };
    format!("{base} as {ty}")
}

/// The field's type as the generator sees it.
fn kind(field: &Field) -> String {
    let rules = model::rules(field);
    if let Some(path) = rules.iter().find_map(|r| r.strip_prefix("x-rust-type ")) {
        let base = field.kind.split('(').next().unwrap_or("");
        return format!("{base} as {}", path.rsplit("::").next().unwrap_or(path));
    }
    let parts: BTreeSet<String> = field.kind.split(" | ").map(rust_type).collect();
    parts.into_iter().collect::<Vec<_>>().join(" | ")
}

/// A number as a canonical text (`64.0` and `64` alike), else the text.
fn canonical(text: &str) -> String {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() => format!("{n}"),
        _ => text.trim().to_string(),
    }
}

fn bounds(field: &Field) -> BTreeMap<String, String> {
    model::bounds(field)
        .iter()
        .map(|b| match b.split_once(' ') {
            Some((label, value)) if label != "pattern" => (label.to_string(), canonical(value)),
            Some((label, value)) => (label.to_string(), value.to_string()),
            None => (b.clone(), String::new()),
        })
        .collect()
}

fn default(field: &Field) -> Option<String> {
    Some(match field.default.as_ref()? {
        Value::Number(n) => canonical(&n.to_string()),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn show_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k} {v}") })
        .collect::<Vec<_>>()
        .join(", ")
}

fn changes(ours: &Field, theirs: &Field) -> Vec<String> {
    let mut out = Vec::new();
    let (k1, k2) = (kind(ours), kind(theirs));
    if k1 != k2 {
        out.push(format!("type {k1} -> {k2}"));
    }
    if ours.nullable != theirs.nullable {
        out.push(format!("nullable {} -> {}", ours.nullable, theirs.nullable));
    }
    if ours.required != theirs.required {
        out.push(format!("required {} -> {}", ours.required, theirs.required));
    }
    let (b1, b2) = (bounds(ours), bounds(theirs));
    if b1 != b2 {
        out.push(format!("bounds [{}] -> [{}]", show_map(&b1), show_map(&b2)));
    }
    let (c1, c2) = (model::choices(ours), model::choices(theirs));
    let (e1, e2): (BTreeSet<&String>, BTreeSet<&String>) = (c1.iter().collect(), c2.iter().collect());
    if e1 != e2 {
        let list = |set: &BTreeSet<&String>| set.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        out.push(format!("enum [{}] -> [{}]", list(&e1), list(&e2)));
    }
    let (d1, d2) = (default(ours), default(theirs));
    if d1 != d2 {
        let show = |d: &Option<String>| d.clone().unwrap_or_else(|| "none".into());
        out.push(format!("default {} -> {}", show(&d1), show(&d2)));
    }
    out
}

/// `x-correction` entries of a field of ours.
fn field_corrections(field: &Field) -> Vec<String> {
    field
        .rules
        .iter()
        .filter(|(key, _)| key == "x-correction")
        .flat_map(|(_, value)| model::correction_names(value))
        .collect()
}

fn statuses(op: &Details) -> BTreeSet<String> {
    op.responses
        .iter()
        .map(|r| r.split(':').next().unwrap_or("").to_string())
        .collect()
}

/// Compares our document with another description of the service. `rename`
/// rewrites path prefixes (`FROM`, `TO`) of the other document's paths.
pub fn diff(ours: &Value, theirs: &Value, rename: &[(String, String)]) -> Report {
    let (ours, theirs) = (read(ours, &[]), read(theirs, rename));
    let mut report = Report::default();
    let mut push = |line: String, corrections: &[String]| {
        if corrections.is_empty() {
            report.unknown.push(line);
        } else {
            report.known.push((line, corrections.join(", ")));
        }
    };
    for key in theirs.keys().filter(|k| !ours.contains_key(*k)) {
        push(format!("+ operation {key} (not in openapi.json)"), &[]);
    }
    for (key, op) in ours.iter().filter(|(k, _)| !theirs.contains_key(*k)) {
        push(
            format!("- operation {key} (not in the other document)"),
            &op.corrections,
        );
    }
    let mut compared = 0;
    for (key, op) in &ours {
        let Some(other) = theirs.get(key) else { continue };
        compared += 1;
        for (what, mine, their) in [
            ("field", &op.fields, &other.fields),
            ("query", &op.parameters, &other.parameters),
        ] {
            for (name, field) in their {
                match mine.get(name) {
                    None if what == "field" => {
                        push(format!("+ {what} {key} {name}: {}", kind(field)), &op.body_corrections)
                    }
                    None => push(format!("+ {what} {key} {name}: {}", kind(field)), &[]),
                    Some(m) => {
                        let changed = changes(m, field);
                        if !changed.is_empty() {
                            let mut corrections = field_corrections(m);
                            if corrections.is_empty() && what == "field" {
                                corrections = op.body_corrections.clone();
                            }
                            push(format!("~ {what} {key} {name}: {}", changed.join("; ")), &corrections);
                        }
                    }
                }
            }
            for (name, field) in mine.iter().filter(|(n, _)| !their.contains_key(*n)) {
                let mut corrections = field_corrections(field);
                if corrections.is_empty() && what == "field" {
                    corrections = op.body_corrections.clone();
                }
                push(format!("- {what} {key} {name}"), &corrections);
            }
        }
        let (s1, s2) = (statuses(op), statuses(other));
        if s1 != s2 {
            let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            push(format!("~ responses {key}: [{}] -> [{}]", list(&s1), list(&s2)), &[]);
        }
        let (sec1, sec2): (BTreeSet<&String>, BTreeSet<&String>) =
            (op.security.iter().collect(), other.security.iter().collect());
        if sec1 != sec2 {
            let list = |s: &BTreeSet<&String>| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            push(
                format!("~ security {key}: [{}] -> [{}]", list(&sec1), list(&sec2)),
                &op.corrections,
            );
        }
    }
    report.compared = compared;
    report
}
