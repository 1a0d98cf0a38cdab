//! What the command knows about models and their fields, read from the
//! OpenAPI document (the embedded one, or the file named by
//! `GENAPI_DOCUMENT`). Nothing here is hand-listed.

use std::fmt;

use genapi::validate::{Document, EMBEDDED_DOCUMENT};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// The hidden variable naming another document file (used by tests).
const DOCUMENT_VARIABLE: &str = "GENAPI_DOCUMENT";

/// A submittable operation.
#[derive(Clone, Debug)]
pub struct Model {
    /// Name the user types: the path without `/v1/`, e.g. `gen-tools/deblur-v1`.
    pub name: String,
    /// Path, e.g. `/v1/gen-tools/deblur-v1`.
    pub path: String,
    /// operationId.
    pub id: String,
    /// The document's summary.
    pub summary: String,
    /// Marked deprecated in the document.
    pub deprecated: bool,
    /// Request body schema name.
    schema: Option<String>,
}

/// One field of a model's request.
#[derive(Clone, Debug)]
pub struct Field {
    /// JSON name.
    pub name: String,
    /// Type as shown: `integer`, `string (enum: jpeg, png, webp)`, …
    pub kind: String,
    /// Bounds as shown: `64..`, `0..5`, `pattern …`.
    pub bounds: String,
    /// Default, as JSON text, if the document states one.
    pub default: Option<String>,
    /// Required by the document.
    pub required: bool,
    /// Takes an image: `Some(true)` when a URL is accepted as well as base64.
    pub image: Option<bool>,
    /// The document's description.
    pub description: String,
    /// Allowed values, when the field is an enum.
    pub choices: Vec<String>,
}

/// The document, with the order of its keys (which `serde_json` forgets).
pub struct Catalog {
    document: &'static Document,
    order: Ordered,
}

impl Catalog {
    /// The embedded document, or the one `GENAPI_DOCUMENT` names.
    pub fn load() -> Result<Catalog, String> {
        match std::env::var_os(DOCUMENT_VARIABLE) {
            None => Ok(Catalog {
                document: Document::embedded(),
                order: Ordered::read(EMBEDDED_DOCUMENT),
            }),
            Some(file) => {
                let text = crate::files::read_to_string(std::path::Path::new(&file), crate::files::DOCUMENT_LIMIT)
                    .map_err(|e| format!("{DOCUMENT_VARIABLE}={}: {e}", file.to_string_lossy()))?;
                let document = Document::parse(&text)
                    .map_err(|e| format!("{DOCUMENT_VARIABLE}={}: {e}", file.to_string_lossy()))?;
                Ok(Catalog {
                    document: Box::leak(Box::new(document)),
                    order: Ordered::read(&text),
                })
            }
        }
    }

    /// Every operation that takes a request body, in document order.
    pub fn models(&self) -> Vec<Model> {
        let mut models: Vec<Model> = self
            .document
            .operations()
            .into_iter()
            .filter(|op| op.method == "POST" && op.request_schema.is_some())
            .map(|op| {
                let info = self.order.operation(&op.path, &op.method);
                Model {
                    name: op.path.strip_prefix("/v1/").unwrap_or(&op.path).to_string(),
                    summary: info.summary,
                    deprecated: info.deprecated,
                    path: op.path,
                    id: op.id,
                    schema: op.request_schema,
                }
            })
            .collect();
        models.sort_by_key(|m| self.order.path_position(&m.path));
        models
    }

    /// The model called `name` (its path, its last segment, or its operationId).
    pub fn find(&self, name: &str) -> Result<Model, String> {
        let models = self.models();
        let wanted = name.trim().trim_start_matches('/');
        let wanted = wanted.strip_prefix("v1/").unwrap_or(wanted);
        if let Some(model) = models.iter().find(|m| m.name == wanted || m.id == wanted) {
            return Ok(model.clone());
        }
        let by_last: Vec<&Model> = models
            .iter()
            .filter(|m| m.name.rsplit('/').next() == Some(wanted))
            .collect();
        if let [model] = by_last.as_slice() {
            return Ok((*model).clone());
        }
        let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
        let hint = suggest(wanted, names.iter().copied())
            .map(|s| format!("did you mean {s}? "))
            .unwrap_or_default();
        Err(format!(
            "unknown model {:?}; {hint}known models: {} (see `genapi models`)",
            crate::out::clean(name),
            names.join(", ")
        ))
    }

    /// The model's request fields, in document order.
    pub fn fields(&self, model: &Model) -> Vec<Field> {
        let Some(schema_name) = &model.schema else {
            return Vec::new();
        };
        let Some(schema) = self.document.schema(schema_name) else {
            return Vec::new();
        };
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut fields: Vec<Field> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, property)| self.field(name, property, required.contains(&name.as_str())))
            .collect();
        fields.sort_by_key(|f| self.order.property_position(schema_name, &f.name));
        fields
    }

    fn field(&self, name: &str, property: &Value, required: bool) -> Field {
        // `allOf: [{$ref}]` or `$ref` point at a shared schema (enums, patterns).
        let referenced = property["allOf"][0]["$ref"]
            .as_str()
            .or_else(|| property["$ref"].as_str())
            .and_then(|r| r.rsplit('/').next())
            .and_then(|n| self.document.schema(n));
        let look = |key: &str| -> Option<&Value> {
            property
                .get(key)
                .or_else(|| referenced.and_then(|r| r.get(key)))
                .filter(|v| !v.is_null())
        };
        let choices: Vec<String> = look("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect();
        let mut kind = look("type").and_then(Value::as_str).unwrap_or("any").to_string();
        if let Some(format) = look("format").and_then(Value::as_str) {
            kind = format!("{kind} ({format})");
        }
        if !choices.is_empty() {
            kind = format!("{kind}: {}", choices.join(" | "));
        }
        let number = |key: &str| look(key).map(|v| v.to_string());
        let mut bounds = match (number("minimum"), number("maximum")) {
            (Some(min), Some(max)) => format!("{min}..{max}"),
            (Some(min), None) => format!("≥ {min}"),
            (None, Some(max)) => format!("≤ {max}"),
            (None, None) => String::new(),
        };
        let lengths = match (number("minLength"), number("maxLength")) {
            (Some(min), Some(max)) => format!("length {min}..{max}"),
            (Some(min), None) => format!("length ≥ {min}"),
            (None, Some(max)) => format!("length ≤ {max}"),
            (None, None) => String::new(),
        };
        for extra in [
            lengths,
            look("pattern").map(|p| format!("pattern {p}")).unwrap_or_default(),
        ] {
            if !extra.is_empty() {
                if !bounds.is_empty() {
                    bounds.push_str(", ");
                }
                bounds.push_str(&extra);
            }
        }
        Field {
            name: name.to_string(),
            kind,
            bounds,
            default: look("default").or_else(|| look("x-default")).map(Value::to_string),
            required,
            image: look("x-image").and_then(Value::as_str).map(|k| k == "base64-or-url"),
            description: look("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            choices,
        }
    }
}

/// The closest of `candidates` to `wanted`, when close enough to be a typo.
pub fn suggest<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (distance(wanted, c), c))
        .filter(|(d, c)| *d <= threshold(c) || (wanted.len() >= 3 && c.contains(wanted)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// How many edits still read as a typo of `candidate`.
fn threshold(candidate: &str) -> usize {
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

/// Summary and deprecation of one operation.
#[derive(Default)]
struct OperationInfo {
    summary: String,
    deprecated: bool,
}

/// Key order of the document's paths and schema properties, plus what
/// `genapi models` shows of each operation. A document this cannot read
/// falls back to alphabetical order.
#[derive(Default)]
struct Ordered {
    paths: Vec<(String, Value)>,
    properties: Vec<(String, Vec<String>)>,
}

impl Ordered {
    fn read(text: &str) -> Ordered {
        #[derive(serde::Deserialize, Default)]
        struct Raw {
            #[serde(default)]
            paths: Keyed<Value>,
            #[serde(default)]
            components: Components,
        }
        #[derive(serde::Deserialize, Default)]
        struct Components {
            #[serde(default)]
            schemas: Keyed<Schema>,
        }
        #[derive(serde::Deserialize, Default)]
        struct Schema {
            #[serde(default)]
            properties: Keyed<IgnoredAny>,
        }
        let raw: Raw = serde_json::from_str(text).unwrap_or_default();
        Ordered {
            paths: raw.paths.0,
            properties: raw
                .components
                .schemas
                .0
                .into_iter()
                .map(|(name, schema)| (name, schema.properties.0.into_iter().map(|(k, _)| k).collect()))
                .collect(),
        }
    }

    fn path_position(&self, path: &str) -> usize {
        self.paths.iter().position(|(p, _)| p == path).unwrap_or(usize::MAX)
    }

    fn property_position(&self, schema: &str, property: &str) -> usize {
        self.properties
            .iter()
            .find(|(name, _)| name == schema)
            .and_then(|(_, keys)| keys.iter().position(|k| k == property))
            .unwrap_or(usize::MAX)
    }

    fn operation(&self, path: &str, method: &str) -> OperationInfo {
        let Some((_, item)) = self.paths.iter().find(|(p, _)| p == path) else {
            return OperationInfo::default();
        };
        let op = &item[method.to_lowercase()];
        OperationInfo {
            summary: op["summary"].as_str().unwrap_or_default().to_string(),
            deprecated: op["deprecated"].as_bool().unwrap_or(false),
        }
    }
}

/// A JSON object read as a list of entries, in the order written.
struct Keyed<T>(Vec<(String, T)>);

impl<T> Default for Keyed<T> {
    fn default() -> Self {
        Keyed(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Keyed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Entries<T> {
            type Value = Keyed<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keyed<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, T>()? {
                    entries.push((key, value));
                }
                Ok(Keyed(entries))
            }
        }
        deserializer.deserialize_map(Entries(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_fields_keep_document_order() {
        let catalog = Catalog::load().unwrap();
        let vto = catalog.find("vto-v1").unwrap();
        let images: Vec<String> = catalog
            .fields(&vto)
            .into_iter()
            .filter(|f| f.image.is_some())
            .map(|f| f.name)
            .collect();
        assert_eq!(images, ["person", "garment"]);
    }

    #[test]
    fn names_resolve_and_typos_get_a_suggestion() {
        let catalog = Catalog::load().unwrap();
        assert_eq!(catalog.find("deblur-v1").unwrap().name, "gen-tools/deblur-v1");
        assert_eq!(catalog.find("/v1/gen-2-pro").unwrap().name, "gen-2-pro");
        let error = catalog.find("gen-2-prp").unwrap_err();
        assert!(error.contains("did you mean gen-2-pro?"), "{error}");
        assert_eq!(suggest("widht", ["width", "height", "seed"].into_iter()), Some("width"));
        assert_eq!(suggest("zzzz", ["width", "height"].into_iter()), None);
    }
}
