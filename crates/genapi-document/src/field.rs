//! One field of a request (or one query parameter), as the document
//! declares it, flattened: its type, nullability, bounds, allowed values,
//! default and this project's `x-` rules, wherever the schema puts them (on
//! the property itself, behind a `$ref`, or in an `allOf`/`anyOf`/`oneOf`
//! branch).
//!
//! Both null idioms fold into [`Field::nullable`]: 3.0's `nullable: true` and
//! 3.1's `anyOf: [.., {type: null}]` or `type: [.., "null"]`, so a 3.0 and a
//! 3.1 description of the same field read the same. That is what lets
//! `cargo xtask` compare this project's document with the service's own.

use serde_json::Value;

use crate::resolve;

/// The schema keywords that bound a value, in the order a reader expects
/// them.
const BOUNDS: [&str; 10] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
];

/// The `x-` key that states a default the service applies without the
/// schema's `default` (which the generator would serialise on every request).
const DOCUMENTED_DEFAULT: &str = "x-default";

/// One field of a request schema, or one query parameter.
///
/// ```
/// use serde_json::json;
/// let root = json!({"components": {"schemas": {"Size": {"type": "integer", "minimum": 64}}}});
/// let schema = json!({"allOf": [{"$ref": "#/components/schemas/Size"}], "nullable": true, "x-default": 1024});
/// let width = genapi_document::Field::read(&root, "width", &schema, false);
/// assert_eq!(width.kind, "integer");
/// assert!(width.nullable);
/// assert_eq!(width.bound("minimum"), Some(&json!(64)));
/// assert_eq!(width.default, Some(json!(1024)));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Field {
    /// The JSON name, e.g. `prompt`.
    pub name: String,
    /// The type as a reader names it: `string`, `integer(uint32)`, a named
    /// schema for an object or an enum (`OutputFormat`), or `string |
    /// integer` when branches differ; `any` when the schema says nothing.
    pub kind: String,
    /// Accepts `null`.
    pub nullable: bool,
    /// Listed in `required` (for a parameter: `required: true`).
    pub required: bool,
    /// Bounding keywords with their values (`minimum`, `maxLength`,
    /// `pattern`, …), each once.
    pub bounds: Vec<(String, Value)>,
    /// Allowed values, when the schema lists them (`null` left out: it is
    /// [`Field::nullable`]).
    pub choices: Vec<Value>,
    /// The default, from `default` or this project's `x-default`.
    pub default: Option<Value>,
    /// This project's rules (`x-` extensions other than `x-default`), on the
    /// property or on the schemas it refers to, each key and value once.
    pub rules: Vec<(String, Value)>,
    /// The document's description of the field (empty when it has none).
    pub description: String,
}

/// What an image field takes, from its `x-image` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageField {
    /// Base64 image data only.
    Base64Only,
    /// Base64 image data or an http(s) URL the service fetches.
    Base64OrUrl,
}

impl Field {
    /// Reads the field `name` whose schema is `schema` (a property, or a
    /// parameter's `schema`). References are followed with [`resolve`]; a
    /// dangling or cyclic one reads as an empty schema ([`crate::problems`]
    /// reports it).
    pub fn read(root: &Value, name: &str, schema: &Value, required: bool) -> Field {
        let mut field = Field {
            name: name.to_string(),
            required,
            nullable: schema["nullable"].as_bool().unwrap_or(false),
            ..Field::default()
        };
        let mut branches: Vec<&Value> = Vec::new();
        if let Some(all) = schema["allOf"].as_array() {
            branches.extend(all);
        }
        if let Some(any) = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array()) {
            for branch in any {
                if is_null_schema(branch) {
                    field.nullable = true;
                } else {
                    branches.push(branch);
                }
            }
        }
        // The schema's own keywords count beside its branches (`type` and
        // `maximum` next to an `allOf`), so it is always a part.
        let parts: Vec<&Value> = std::iter::once(schema).chain(branches).collect();
        let mut kinds: Vec<String> = Vec::new();
        // Seen values, as JSON text: an enum of thousands is read in one pass.
        let mut seen = std::collections::HashSet::new();
        field.note_default(schema);
        field.note_rules(schema);
        field.note_description(schema);
        for part in parts {
            let target = resolve(root, part).unwrap_or(&Value::Null);
            if let Some(kind) = field.kind_of(part, target) {
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            field.note_bounds(target);
            field.note_default(target);
            field.note_rules(part);
            field.note_rules(target);
            field.note_description(target);
            let listed = target["enum"].as_array().into_iter().flatten();
            for value in listed.chain(target.get("const")) {
                if value.is_null() {
                    field.nullable = true;
                } else if seen.insert(value.to_string()) {
                    field.choices.push(value.clone());
                }
            }
        }
        field.kind = if kinds.is_empty() {
            "any".to_string()
        } else {
            kinds.join(" | ")
        };
        field
    }

    /// The properties of an object schema as fields, sorted by name (the
    /// catalog puts a request's fields in the document's order).
    pub fn of_object(root: &Value, object: &Value) -> Vec<Field> {
        let mut required: Vec<&str> = Vec::new();
        let mut properties: Vec<(&String, &Value)> = Vec::new();
        collect_properties(root, object, &mut required, &mut properties, 0);
        let mut fields: Vec<Field> = Vec::new();
        for (name, schema) in properties {
            if !fields.iter().any(|field| field.name == *name) {
                fields.push(Field::read(root, name, schema, required.contains(&name.as_str())));
            }
        }
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        fields
    }

    /// The value of a bounding keyword (`minimum`, `pattern`, …).
    pub fn bound(&self, keyword: &str) -> Option<&Value> {
        self.bounds.iter().find(|(k, _)| k == keyword).map(|(_, value)| value)
    }

    /// The first value of one of this project's rules (`x-image`, …).
    pub fn rule(&self, key: &str) -> Option<&Value> {
        self.rules.iter().find(|(k, _)| k == key).map(|(_, value)| value)
    }

    /// What the field takes when it is an image field (`x-image`).
    pub fn image(&self) -> Option<ImageField> {
        match self.rule("x-image")?.as_str()? {
            "base64-or-url" => Some(ImageField::Base64OrUrl),
            "base64" => Some(ImageField::Base64Only),
            // A kind this reader does not know is not taken for an image
            // field it would fill wrongly.
            _ => None,
        }
    }

    /// The name of one part's type; a named object or enum keeps its name,
    /// which says more than `object` or `string`. `None` for a part that
    /// says nothing of the type (a wrapper of `allOf`, a bare `minimum`).
    fn kind_of(&mut self, part: &Value, target: &Value) -> Option<String> {
        let named = part["$ref"].as_str().and_then(|r| r.rsplit('/').next());
        match (&target["type"], named) {
            (_, Some(name)) if target["type"] == "object" || target.get("enum").is_some() => Some(name.to_string()),
            (Value::Array(types), _) => {
                if types.iter().any(|t| t == "null") {
                    self.nullable = true;
                }
                let names: Vec<&str> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .collect();
                Some(if names.is_empty() {
                    "null".to_string()
                } else {
                    names.join(" | ")
                })
            }
            (Value::String(kind), _) => Some(match target["format"].as_str() {
                Some(format) => format!("{kind}({format})"),
                None => kind.clone(),
            }),
            _ if *target == Value::Bool(false) => Some("nothing".to_string()),
            _ => None,
        }
    }

    fn note_bounds(&mut self, schema: &Value) {
        for keyword in BOUNDS {
            if let Some(value) = schema.get(keyword) {
                let entry = (keyword.to_string(), value.clone());
                if !self.bounds.contains(&entry) {
                    self.bounds.push(entry);
                }
            }
        }
    }

    fn note_rules(&mut self, schema: &Value) {
        for (key, value) in schema.as_object().into_iter().flatten() {
            let entry = (key.clone(), value.clone());
            if key.starts_with("x-") && key != DOCUMENTED_DEFAULT && !self.rules.contains(&entry) {
                self.rules.push(entry);
            }
        }
    }

    fn note_default(&mut self, schema: &Value) {
        if self.default.is_none() {
            self.default = schema
                .get("default")
                .or_else(|| schema.get(DOCUMENTED_DEFAULT))
                .cloned();
        }
    }

    fn note_description(&mut self, schema: &Value) {
        if self.description.is_empty() {
            if let Some(text) = schema["description"].as_str() {
                self.description = text.to_string();
            }
        }
    }
}

/// The properties and required names of an object schema, its `allOf`
/// parts' included (a request schema may be composed so). `depth` stops a
/// composition that refers to itself ([`crate::problems`] reports it).
fn collect_properties<'a>(
    root: &'a Value,
    object: &'a Value,
    required: &mut Vec<&'a str>,
    properties: &mut Vec<(&'a String, &'a Value)>,
    depth: usize,
) {
    let Ok(object) = resolve(root, object) else { return };
    if depth > 16 {
        return;
    }
    required.extend(
        object["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str),
    );
    properties.extend(object["properties"].as_object().into_iter().flatten());
    for part in object["allOf"].as_array().into_iter().flatten() {
        collect_properties(root, part, required, properties, depth + 1);
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema["type"] == "null"
        || schema["enum"]
            .as_array()
            .is_some_and(|values| values.len() == 1 && values[0].is_null())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_null_idioms_read_as_nullable() {
        let root = json!({});
        let three_oh = json!({"type": "integer", "nullable": true, "minimum": 1});
        let three_one_any = json!({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]});
        let three_one_list = json!({"type": ["integer", "null"], "minimum": 1});
        for schema in [three_oh, three_one_any, three_one_list] {
            let field = Field::read(&root, "n", &schema, true);
            assert_eq!((field.kind.as_str(), field.nullable), ("integer", true), "{schema}");
            assert_eq!(field.bound("minimum"), Some(&json!(1)), "{schema}");
        }
    }

    #[test]
    fn rules_and_descriptions_come_from_the_property_or_what_it_refers_to() {
        let root = json!({"components": {"schemas": {
            "Format": {"type": "string", "enum": ["jpeg", "png", null], "description": "the format", "x-open-enum": true}
        }}});
        let property = json!({"allOf": [{"$ref": "#/components/schemas/Format"}], "x-default": "jpeg"});
        let field = Field::read(&root, "output_format", &property, false);
        assert_eq!(field.kind, "Format");
        assert_eq!(field.choices, [json!("jpeg"), json!("png")]);
        assert_eq!(field.default, Some(json!("jpeg")));
        assert_eq!(field.rule("x-open-enum"), Some(&json!(true)));
        assert_eq!(field.rule("x-default"), None, "the default is not a rule");
        assert_eq!(field.description, "the format");
        assert_eq!(field.image(), None);
    }

    #[test]
    fn keywords_beside_a_composition_count_and_null_in_any_form_is_nullable() {
        let root = json!({"components": {"schemas": {"Item": {"type": "object", "required": ["a"],
            "properties": {"a": {"type": "string"}}}}}});
        let beside = Field::read(
            &root,
            "n",
            &json!({"type": "integer", "maximum": 10, "allOf": [{"minimum": 1}]}),
            false,
        );
        assert_eq!(beside.kind, "integer");
        assert_eq!(
            (beside.bound("minimum"), beside.bound("maximum")),
            (Some(&json!(1)), Some(&json!(10)))
        );
        let any = Field::read(
            &root,
            "n",
            &json!({"anyOf": [{"type": "integer"}, {"type": "null"}], "minimum": 3}),
            false,
        );
        assert_eq!(
            (any.kind.as_str(), any.nullable, any.bound("minimum")),
            ("integer", true, Some(&json!(3)))
        );
        let listed_null = Field::read(&root, "s", &json!({"type": "string", "enum": ["a", null]}), false);
        assert!(listed_null.nullable);
        assert_eq!(listed_null.choices, [json!("a")]);
        let only_null = Field::read(&root, "z", &json!({"type": ["null"]}), false);
        assert_eq!((only_null.kind.as_str(), only_null.nullable), ("null", true));
        let constant = Field::read(&root, "c", &json!({"const": "fixed"}), false);
        assert_eq!(constant.choices, [json!("fixed")]);
        let composed = json!({"allOf": [{"$ref": "#/components/schemas/Item"},
            {"type": "object", "required": ["b"], "properties": {"b": {"type": "integer"}}}]});
        let fields = Field::of_object(&root, &composed);
        let named: Vec<(&str, bool)> = fields.iter().map(|f| (f.name.as_str(), f.required)).collect();
        assert_eq!(
            named,
            [("a", true), ("b", true)],
            "the parts of a composed request are its fields"
        );
    }

    #[test]
    fn a_large_enum_is_read_in_one_pass() {
        let values: Vec<Value> = (0..30_000).map(|n| json!(n)).collect();
        let field = Field::read(&json!({}), "n", &json!({"type": "integer", "enum": values}), false);
        assert_eq!(field.choices.len(), 30_000);
    }

    #[test]
    fn an_image_field_says_whether_it_takes_urls() {
        let root = json!({});
        let data = Field::read(&root, "a", &json!({"type": "string", "x-image": "base64"}), true);
        let either = Field::read(&root, "b", &json!({"type": "string", "x-image": "base64-or-url"}), true);
        assert_eq!(data.image(), Some(ImageField::Base64Only));
        assert_eq!(either.image(), Some(ImageField::Base64OrUrl));
    }
}
