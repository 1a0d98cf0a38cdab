//! Findings of a drift check, grouped as a maintainer reads them: by
//! operation, then by where (request or answer, and the JSON pointer), with
//! a count and one example each. Examples are shortened and any address in
//! them loses its query values, so a report can be pasted into an issue even
//! when the recording came from a tool that redacts nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::schema::Kind;

/// One thing a recorded exchange did that the document does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The operationId (or `download` for a result address).
    pub operation: String,
    /// `request`, or `response 200`, `response 503`, …
    pub place: String,
    /// JSON pointer into the body (array items as `*`); `url` for the
    /// request's address, empty for the status or content type.
    pub pointer: String,
    /// What is wrong.
    pub kind: Kind,
    /// The value found (already redacted by [`example`] when shown).
    pub found: Value,
    /// The `x-correction` covering it: known, not drift.
    pub correction: Option<String>,
    /// Where the document describes the place (for `--propose`).
    pub schema_at: Option<String>,
}

/// Findings of one group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The first finding of the group.
    pub first: Finding,
    /// How many exchanges showed it.
    pub count: usize,
}

/// The outcome of a drift check.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Every finding, in the order of the recordings.
    pub findings: Vec<Finding>,
    /// Entries read.
    pub exchanges: usize,
    /// Entries without an answer (no status to check).
    pub unanswered: usize,
}

impl Report {
    /// Whether anything drifted (findings an `x-correction` covers do not count).
    pub fn drifted(&self) -> bool {
        self.findings.iter().any(|f| f.correction.is_none())
    }

    /// The findings grouped by operation, place, pointer and kind, sorted.
    pub fn groups(&self) -> Vec<Group> {
        let mut groups: BTreeMap<(String, String, String, Kind), Group> = BTreeMap::new();
        for finding in &self.findings {
            let key = (
                finding.operation.clone(),
                finding.place.clone(),
                finding.pointer.clone(),
                finding.kind.clone(),
            );
            groups
                .entry(key)
                .and_modify(|group| group.count += 1)
                .or_insert_with(|| Group {
                    first: finding.clone(),
                    count: 1,
                });
        }
        groups.into_values().collect()
    }

    /// What drifted, one line per group, without counts or examples: the
    /// text `--snapshot` keeps, which changes only when the kinds of drift
    /// do, not with the amount of traffic.
    pub fn shape(&self) -> String {
        let mut out = String::new();
        for group in self.groups().iter().filter(|g| g.first.correction.is_none()) {
            let finding = &group.first;
            let pointer = if finding.pointer.is_empty() {
                "(status)"
            } else {
                finding.pointer.as_str()
            };
            let _ = writeln!(
                out,
                "{} — {}  {pointer}  {}",
                finding.operation,
                finding.place,
                describe(&finding.kind)
            );
        }
        out
    }

    /// The report as text: drift first, then what `x-correction`s explain.
    pub fn render(&self) -> String {
        let groups = self.groups();
        let (drift, known): (Vec<&Group>, Vec<&Group>) = groups.iter().partition(|g| g.first.correction.is_none());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} exchange(s) read ({} without an answer): {} drift finding(s) in {} group(s), {} known",
            self.exchanges,
            self.unanswered,
            drift.iter().map(|g| g.count).sum::<usize>(),
            drift.len(),
            known.len()
        );
        render_groups(&mut out, &drift);
        if !known.is_empty() {
            let _ = writeln!(out, "\nknown (covered by an x-correction, not drift):");
            render_groups(&mut out, &known);
        }
        out
    }
}

fn render_groups(out: &mut String, groups: &[&Group]) {
    let mut last = None;
    for group in groups {
        let finding = &group.first;
        let heading = format!("{} — {}", finding.operation, finding.place);
        if last.as_ref() != Some(&heading) {
            let _ = writeln!(out, "\n{heading}");
            last = Some(heading);
        }
        let pointer = if finding.pointer.is_empty() {
            "(status)"
        } else {
            finding.pointer.as_str()
        };
        let _ = write!(out, "  {pointer}  {}  ×{}", describe(&finding.kind), group.count);
        if !finding.found.is_null() {
            let _ = write!(out, "  e.g. {}", example(&finding.found));
        }
        if let Some(correction) = &finding.correction {
            let _ = write!(out, "  (x-correction: {correction})");
        }
        out.push('\n');
    }
}

/// What a kind of finding means, in words.
pub fn describe(kind: &Kind) -> String {
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    match kind {
        Kind::UnknownField => "field the document does not list".into(),
        Kind::MissingRequired => "required field missing".into(),
        Kind::WrongType(expected) => format!("wrong type (the document says {expected})"),
        Kind::UnlistedValue(listed) => format!("value the document does not list (it lists {})", list(listed)),
        Kind::UndocumentedStatus(listed) => format!("undocumented status (documented: {})", list(listed)),
        Kind::UndocumentedContentType(listed) => {
            format!("undocumented content type (documented: {})", list(listed))
        }
        Kind::NotJson => "a body said to be JSON that is not JSON".into(),
        Kind::UntrustedHost => "address on a host outside the trusted origins".into(),
        Kind::UnknownOperation => "request to no operation of the document".into(),
    }
}

/// A value shortened for a report: long strings cut, addresses without
/// their query values.
pub fn example(value: &Value) -> String {
    const LONGEST: usize = 80;
    let shown = match value {
        Value::String(text) => Value::String(without_query(text)),
        other => other.clone(),
    };
    let text = shown.to_string();
    match text.char_indices().nth(LONGEST) {
        Some((at, _)) => format!("{}… ({} characters)", &text[..at], text.chars().count()),
        None => text,
    }
}

fn without_query(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut url) if url.has_host() && url.query().is_some() => {
            let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            url.query_pairs_mut().clear();
            for (name, value) in pairs {
                let value = if name == "id" { value } else { "[redacted]".into() };
                url.query_pairs_mut().append_pair(&name, &value);
            }
            url.to_string()
        }
        _ => text.to_string(),
    }
}
