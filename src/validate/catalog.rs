//! What the document offers a user who names things: the submission a model
//! name means, the fields of its request, and the closest known name to a
//! typo. The `genapi` command and job files (`genapi_batch::JobFile`) both
//! look names up here, so a name means the same thing everywhere.

use serde_json::Value;

use super::{Document, Operation};

/// One field of a request schema, as the document declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestField {
    /// The JSON name, e.g. `prompt`.
    pub name: String,
    /// Listed in the schema's `required`.
    pub required: bool,
    /// `Some` for an image field (`x-image`): `Some(true)` when it takes an
    /// http(s) URL as well as base64 image data.
    pub image: Option<bool>,
}

/// No submission of the document has the name a user gave.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown model {name:?}; {}known models: {}",
    suggestion.as_ref().map(|s| format!("did you mean {s}? ")).unwrap_or_default(),
    known.join(", ")
)]
pub struct UnknownModel {
    /// The name as given.
    pub name: String,
    /// The known name closest to it, when it reads as a typo.
    pub suggestion: Option<String>,
    /// Every model name, sorted.
    pub known: Vec<String>,
}

impl Document {
    /// The model name of a submission: its path without `/v1/`, e.g.
    /// `gen-tools/deblur-v1`.
    pub fn model_name(operation: &Operation) -> &str {
        operation.path.strip_prefix("/v1/").unwrap_or(&operation.path)
    }

    /// The submission a model name means: its path with or without `/v1/`,
    /// its operationId, or the last segment of its path when only one
    /// submission ends so.
    ///
    /// ```
    /// let document = genapi::validate::Document::embedded();
    /// assert_eq!(document.submission("deblur-v1").unwrap().path, "/v1/gen-tools/deblur-v1");
    /// let typo = document.submission("gen-2-prp").unwrap_err();
    /// assert_eq!(typo.suggestion.as_deref(), Some("gen-2-pro"));
    /// ```
    pub fn submission(&self, name: &str) -> Result<Operation, UnknownModel> {
        let submissions: Vec<Operation> = self
            .operations()
            .into_iter()
            .filter(|op| op.method == "POST" && op.request_schema.is_some())
            .collect();
        let wanted = name.trim().trim_start_matches('/');
        let wanted = wanted.strip_prefix("v1/").unwrap_or(wanted);
        let exact = submissions
            .iter()
            .find(|op| Document::model_name(op) == wanted || op.id == wanted);
        let by_last: Vec<&Operation> = submissions
            .iter()
            .filter(|op| op.path.rsplit('/').next() == Some(wanted))
            .collect();
        match (exact, by_last.as_slice()) {
            (Some(op), _) => Ok(op.clone()),
            (None, [op]) => Ok((*op).clone()),
            _ => {
                let mut known: Vec<String> = submissions
                    .iter()
                    .map(|op| Document::model_name(op).to_string())
                    .collect();
                known.sort();
                Err(UnknownModel {
                    name: name.to_string(),
                    suggestion: closest(wanted, known.iter().map(String::as_str)).map(str::to_string),
                    known,
                })
            }
        }
    }

    /// The fields of a request schema, sorted by name; empty for a schema the
    /// document lacks. (The command lists them in the document's order,
    /// which it reads itself.)
    ///
    /// ```
    /// let document = genapi::validate::Document::embedded();
    /// let fields = document.request_fields("VtoV1Request");
    /// let person = fields.iter().find(|f| f.name == "person").unwrap();
    /// assert!(person.required);
    /// assert!(person.image.is_some());
    /// ```
    pub fn request_fields(&self, schema_name: &str) -> Vec<RequestField> {
        let Some(schema) = self.schema(schema_name) else {
            return Vec::new();
        };
        let required = super::names(&schema["required"]);
        let mut fields: Vec<RequestField> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, property)| RequestField {
                name: name.clone(),
                required: required.contains(&name.as_str()),
                image: self
                    .property_rule(property, "x-image")
                    .and_then(Value::as_str)
                    .map(|kind| kind == "base64-or-url"),
            })
            .collect();
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        fields
    }

    /// A rule of a property, written on it or on the shared schema it points
    /// at (`$ref`, or `allOf: [{$ref}]`, the form OpenAPI 3.0 needs beside
    /// a description).
    pub fn property_rule<'a>(&'a self, property: &'a Value, key: &str) -> Option<&'a Value> {
        let referenced = property["allOf"][0]["$ref"]
            .as_str()
            .or_else(|| property["$ref"].as_str())
            .and_then(|reference| reference.rsplit('/').next())
            .and_then(|name| self.schema(name));
        property
            .get(key)
            .or_else(|| referenced.and_then(|r| r.get(key)))
            .filter(|value| !value.is_null())
    }
}

/// The closest of `candidates` to `wanted`, when close enough to read as a
/// typo of it (a few edits, or a part of it).
///
/// ```
/// use genapi::validate::closest;
/// assert_eq!(closest("widht", ["width", "height", "seed"].into_iter()), Some("width"));
/// assert_eq!(closest("zzzz", ["width", "height"].into_iter()), None);
/// ```
pub fn closest<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|candidate| (distance(wanted, candidate), candidate))
        .filter(|(d, candidate)| *d <= typo_edits(candidate) || (wanted.len() >= 3 && candidate.contains(wanted)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
}

/// How many edits still read as a typo of `candidate`.
fn typo_edits(candidate: &str) -> usize {
    let length = candidate.chars().count();
    if length >= 5 {
        (length / 3).max(2)
    } else {
        1
    }
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}
