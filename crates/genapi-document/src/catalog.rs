//! The catalog of the document: every operation, and among them the models
//! (every submission: a `POST` with a JSON request schema), by the name a
//! user types, with their fields.
//!
//! This is the one catalog of the project. `build.rs` emits the client's
//! table of operations from it, the mock routes by it, the library's
//! validation and job files resolve model names with it, the command's
//! `models` lists it and `cargo xtask` lists and compares documents through
//! it, so an operation, a name or a field means the same thing everywhere.
//! Operations, models and fields keep the order the document lists them in,
//! which is the order its author chose for readers (image fields, for one,
//! fill positional `--image` arguments in that order).

use std::fmt;

use serde_json::Value;

use crate::order::{self, Positions};
use crate::{closest, operations, schema, Field, Operation};

/// A submission of the document.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Model {
    /// The name a user types: the path without `/v1/`, e.g.
    /// `gen-tools/deblur-v1` (a path of another version without its leading
    /// `/`: `v2/x`).
    pub name: String,
    /// The operation itself (method, path, operationId, request schema, …).
    pub operation: Operation,
    /// The document's summary of the operation (empty when it has none).
    pub summary: String,
    /// The fields of its request schema, in the document's order.
    pub fields: Vec<Field>,
}

impl Model {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|field| field.name == name)
    }
}

/// Every operation of a document and every submission among them, in the
/// document's order.
///
/// ```
/// let text = r##"{"paths": {"/v1/gen-2-pro": {"post": {"operationId": "gen_2_pro", "summary": "Generate",
///     "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Req"}}}}}}},
///   "components": {"schemas": {"Req": {"type": "object", "required": ["prompt"],
///     "properties": {"prompt": {"type": "string"}, "input_image": {"type": "string", "x-image": "base64"}}}}}}"##;
/// let root: serde_json::Value = serde_json::from_str(text).unwrap();
/// let catalog = genapi_document::Catalog::read(&root, text).unwrap();
/// let model = catalog.find("gen-2-pro").unwrap();
/// let names: Vec<&str> = model.fields.iter().map(|f| f.name.as_str()).collect();
/// assert_eq!(names, ["prompt", "input_image"]); // the document's order
/// assert!(model.fields[1].image().is_some());
/// let typo = catalog.find("gen-2-prp").unwrap_err();
/// assert_eq!(typo.suggestion.as_deref(), Some("gen-2-pro"));
/// // Every operation, GET ones included; without the text, sorted by path.
/// let same = genapi_document::Catalog::of_value(&root);
/// assert_eq!(same.operations(), catalog.operations());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalog {
    operations: Vec<Operation>,
    models: Vec<Model>,
}

impl Catalog {
    /// Reads the operations and models of `root`, which is `text` read as
    /// JSON: their order, and the order of fields, is read from `text`, as a
    /// `serde_json::Value` keeps an object's keys sorted (a key written twice
    /// goes where its last copy is, as the value keeps that copy). Fails only
    /// when `text` is not JSON; a part that is not an object where one is
    /// expected holds no order, as it holds no operation or field in `root`.
    pub fn read(root: &Value, text: &str) -> Result<Catalog, String> {
        let order = order::of_document(text)?.positions();
        Ok(Catalog::with_order(root, &order))
    }

    /// Reads the operations and models of `root` when its text is not at
    /// hand, so the document's order is not known: operations come sorted
    /// by path and then by method, fields by name (both compared byte by
    /// byte). For comparing documents, where order does not matter.
    pub fn of_value(root: &Value) -> Catalog {
        Catalog::with_order(root, &Positions::default())
    }

    fn with_order(root: &Value, order: &Positions) -> Catalog {
        // Sorted by path and method first, so what the order does not place
        // keeps that order (the sort is stable).
        let mut operations = operations(root);
        operations.sort_by_key(|op| order.operation(&op.path, &op.method));
        let models: Vec<Model> = operations
            .iter()
            .filter(|op| op.method == "POST")
            .cloned()
            .filter_map(|operation| {
                let schema_name = operation.request_schema.clone()?;
                let request = schema(root, &schema_name)?;
                let mut fields = Field::of_object(root, request);
                fields.sort_by_key(|field| order.property(&schema_name, &field.name));
                let item = &root["paths"][&operation.path]["post"];
                Some(Model {
                    name: model_name(&operation.path),
                    summary: item["summary"].as_str().unwrap_or_default().to_string(),
                    fields,
                    operation,
                })
            })
            .collect();
        Catalog { operations, models }
    }

    /// Every operation, GET included, in the document's order: its paths in
    /// the order of `paths`, and each path's methods in the order of its
    /// path item.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// Every model, in the document's order.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The model whose request schema is `schema_name`.
    pub fn by_request_schema(&self, schema_name: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|model| model.operation.request_schema.as_deref() == Some(schema_name))
    }

    /// The model a name means: its path with or without `/v1/`, its
    /// operationId, or the last segment of its path when only one model's
    /// path ends so. An unknown name gets the closest known one, when it
    /// reads as a typo.
    pub fn find(&self, name: &str) -> Result<&Model, UnknownModel> {
        let wanted = name.trim().trim_start_matches('/');
        let wanted = wanted.strip_prefix("v1/").unwrap_or(wanted);
        // In turn, so a name never loses to another model's operationId.
        let by_name = || self.models.iter().find(|model| model.name == wanted);
        let by_id = || self.models.iter().find(|model| model.operation.id == wanted);
        if let Some(model) = by_name().or_else(by_id) {
            return Ok(model);
        }
        let by_last: Vec<&Model> = self
            .models
            .iter()
            .filter(|model| model.operation.path.rsplit('/').next() == Some(wanted))
            .collect();
        if let [model] = by_last.as_slice() {
            return Ok(model);
        }
        let mut known: Vec<String> = self.models.iter().map(|model| model.name.clone()).collect();
        known.sort();
        Err(UnknownModel {
            name: name.to_string(),
            suggestion: closest(wanted, known.iter().map(String::as_str)).map(str::to_string),
            known,
        })
    }
}

/// The name a user types for the model at `path`: the path without
/// `/v1/` (`gen-tools/deblur-v1`), or without its leading `/` for a path of
/// another version, so every listed name is one [`Catalog::find`] takes.
fn model_name(path: &str) -> String {
    let path = path.trim_start_matches('/');
    path.strip_prefix("v1/").unwrap_or(path).to_string()
}

/// No model of the document has the name a user gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownModel {
    /// The name as given.
    pub name: String,
    /// The known name closest to it, when it reads as a typo.
    pub suggestion: Option<String>,
    /// Every model name, sorted.
    pub known: Vec<String>,
}

impl fmt::Display for UnknownModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown model {:?}; ", self.name)?;
        // A typo's one likely fix says more than the whole list, which
        // would bury it in a results file or a gallery card.
        match &self.suggestion {
            Some(suggestion) => write!(f, "did you mean {suggestion}?"),
            None => write!(f, "known models: {}", self.known.join(", ")),
        }
    }
}

impl std::error::Error for UnknownModel {}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(text: &str) -> Catalog {
        let root: Value = serde_json::from_str(text).unwrap();
        Catalog::read(&root, text).unwrap()
    }

    const TWO_MODELS: &str = r##"{
        "paths": {
            "/v1/z-model": {"post": {"operationId": "z", "summary": "Zed",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Z"}}}}}},
            "/v1/tools/a-model": {"post": {"operationId": "a",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}},
                "get": {"operationId": "a_get"}},
            "/v1/get_result": {"get": {"operationId": "get_result"}}
        },
        "components": {"schemas": {
            "Z": {"type": "object", "properties": {"width": {"type": "integer"}, "prompt": {"type": "string"}, "height": {"type": "integer"}}},
            "A": true
        }}
    }"##;

    #[test]
    fn models_and_fields_keep_the_documents_order() {
        let catalog = catalog(TWO_MODELS);
        let names: Vec<&str> = catalog.models().iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["z-model", "tools/a-model"],
            "only submissions, in document order"
        );
        let fields: Vec<&str> = catalog.models()[0].fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(fields, ["width", "prompt", "height"]);
        assert_eq!(catalog.models()[0].summary, "Zed");
        assert!(catalog.models()[1].fields.is_empty(), "a boolean schema has no fields");
    }

    #[test]
    fn operations_keep_the_order_of_the_text_and_without_it_go_by_path_then_method() {
        let text = r#"{"info": {"title": "t"}, "paths": {
            "/v1/z": {"post": {"operationId": "z"}},
            "/v1/a-b": {"summary": "x", "post": {"operationId": "a_b_post"}, "get": {"operationId": "a_b_get"}},
            "/v1/a": {"put": {"operationId": "a"}}
        }, "components": {}}"#;
        let ids = |catalog: &Catalog| catalog.operations().iter().map(|op| op.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&catalog(text)), ["z", "a_b_post", "a_b_get", "a"]);
        let root: Value = serde_json::from_str(text).unwrap();
        assert_eq!(ids(&Catalog::of_value(&root)), ["a", "a_b_get", "a_b_post", "z"]);
    }

    #[test]
    fn values_that_are_not_objects_hold_no_order_and_the_text_reads_as_the_value_does() {
        let model = r##""/v1/m": {"post": {"operationId": "m",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/M"}}}}}}"##;
        let schemas = r#""M": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}"#;
        let documents = [
            format!(r#"{{"paths": {{{model}, "/v1/null": null}}, "components": {{"schemas": {{{schemas}}}}}}}"#),
            format!(r#"{{"paths": {{{model}}}, "components": {{"schemas": {{{schemas}, "S": "x", "N": 5}}}}}}"#),
            format!(
                r#"{{"paths": {{{model}}}, "components": {{"schemas": {{{schemas}, "U": {{"properties": null}}}}}}}}"#
            ),
            format!(
                r#"{{"paths": {{{model}}}, "components": {{"schemas": {{{schemas}, "L": {{"properties": [1]}}}}}}}}"#
            ),
            format!(r#"{{"paths": {{{model}}}, "components": {{"schemas": {{{schemas}}}}}, "x": 1.5}}"#),
            r#"{"paths": "none", "components": "x"}"#.to_string(),
            "[1, 2]".to_string(),
        ];
        for text in &documents {
            let root: Value = serde_json::from_str(text).unwrap();
            let read = Catalog::read(&root, text).unwrap_or_else(|e| panic!("{text}: {e}"));
            // The same operations, models and fields; only their order may differ.
            let content = |catalog: &Catalog| {
                let mut operations = catalog.operations().to_vec();
                operations.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
                let mut fields: Vec<(String, String)> = catalog
                    .models()
                    .iter()
                    .flat_map(|m| m.fields.iter().map(|f| (m.name.clone(), f.name.clone())))
                    .collect();
                fields.sort();
                (operations, fields)
            };
            assert_eq!(content(&read), content(&Catalog::of_value(&root)), "{text}");
        }
        assert!(Catalog::read(&Value::Null, "{not json").is_err());
    }

    #[test]
    fn a_key_written_twice_is_placed_where_its_last_copy_is() {
        let text = r##"{"paths": {
            "/v1/a": {"post": {"operationId": "first_a"}},
            "/v1/b": {"post": {"operationId": "b"}},
            "/v1/a": {"get": {"operationId": "a_get"}, "post": {"operationId": "a_post",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Z"}}}}}}
        }, "components": {"schemas": {
            "Z": {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}},
            "Z": {"type": "object", "properties": {"c": {}, "b": {}, "a": {}}}
        }}}"##;
        let catalog = catalog(text);
        let ids: Vec<&str> = catalog.operations().iter().map(|op| op.id.as_str()).collect();
        assert_eq!(ids, ["b", "a_get", "a_post"], "as the last copy of /v1/a lists them");
        let fields: Vec<&str> = catalog.models()[0].fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(fields, ["c", "b", "a"], "as the last copy of Z lists them");
    }

    #[test]
    fn a_name_wins_over_another_models_operation_id_and_every_listed_name_is_found() {
        let text = r##"{"paths": {
            "/v1/a": {"post": {"operationId": "b", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}},
            "/v1/b": {"post": {"operationId": "a", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/B"}}}}}},
            "/v2/x": {"post": {"operationId": "x2", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/X"}}}}}}
        }, "components": {"schemas": {"A": {"type": "object"}, "B": {"type": "object"}, "X": {"type": "object"}}}}"##;
        let catalog = catalog(text);
        assert_eq!(catalog.find("b").map(|m| m.operation.path.as_str()), Ok("/v1/b"));
        assert_eq!(catalog.find("a").map(|m| m.operation.path.as_str()), Ok("/v1/a"));
        for model in catalog.models() {
            assert_eq!(catalog.find(&model.name), Ok(model), "{}", model.name);
        }
        assert_eq!(catalog.find("/v2/x").map(|m| m.name.as_str()), Ok("v2/x"));
    }

    #[test]
    fn a_model_is_found_by_path_id_or_last_segment() {
        let catalog = catalog(TWO_MODELS);
        for name in ["z-model", "/v1/z-model", "v1/z-model", "z", " z-model "] {
            assert_eq!(catalog.find(name).map(|m| m.operation.id.as_str()), Ok("z"), "{name}");
        }
        assert_eq!(catalog.find("a-model").map(|m| m.name.as_str()), Ok("tools/a-model"));
        assert_eq!(catalog.by_request_schema("Z").map(|m| m.name.as_str()), Some("z-model"));
        let unknown = catalog.find("get_result").unwrap_err();
        assert_eq!(unknown.known, ["tools/a-model", "z-model"], "a GET is not a model");
        assert_eq!(
            catalog.find("z-modle").unwrap_err().to_string(),
            "unknown model \"z-modle\"; did you mean z-model?"
        );
        assert_eq!(
            catalog.find("nothing-like-it").unwrap_err().to_string(),
            "unknown model \"nothing-like-it\"; known models: tools/a-model, z-model"
        );
    }
}
