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

impl Model {
    /// The name of its request body's schema in the document.
    pub fn schema_name(&self) -> Option<&str> {
        self.schema.as_deref()
    }
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

    /// The model called `name` (its path, its last segment, or its
    /// operationId), as the library resolves it.
    pub fn find(&self, name: &str) -> Result<Model, String> {
        let found = self
            .document
            .submission(name)
            .map_err(|unknown| format!("{} (see `genapi models`)", crate::out::clean(&unknown.to_string())))?;
        self.models()
            .into_iter()
            .find(|model| model.path == found.path)
            .ok_or_else(|| format!("unknown model {:?} (see `genapi models`)", crate::out::clean(name)))
    }

    /// The model's request fields, in document order.
    pub fn fields(&self, model: &Model) -> Vec<Field> {
        let Some(schema_name) = &model.schema else {
            return Vec::new();
        };
        let Some(properties) = self
            .document
            .schema(schema_name)
            .and_then(|s| s["properties"].as_object())
        else {
            return Vec::new();
        };
        let mut fields: Vec<Field> = self
            .document
            .request_fields(schema_name)
            .into_iter()
            .filter_map(|field| {
                let property = properties.get(&field.name)?;
                Some(self.field(field, property))
            })
            .collect();
        fields.sort_by_key(|f| self.order.property_position(schema_name, &f.name));
        fields
    }

    fn field(&self, field: genapi::validate::RequestField, property: &Value) -> Field {
        let look = |key: &str| self.document.property_rule(property, key);
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
            name: field.name,
            kind,
            bounds,
            default: look("default").or_else(|| look("x-default")).map(Value::to_string),
            required: field.required,
            image: field.image,
            description: look("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            choices,
        }
    }
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
    }
}
