//! Checks a request body against `openapi.json` before it is sent.
//!
//! The bounds live in one place, the document: this module walks its JSON
//! schemas (types, nullability, required fields, enums, ranges, multiples,
//! lengths, patterns, item counts) plus the few rules the document states in
//! `x-` extensions because OpenAPI cannot say them:
//!
//! - `x-zero-means-auto`: 0 is allowed below `minimum` (gen-2 sizes);
//! - `x-image`: `base64` or `base64-or-url` image data;
//! - `x-max-megapixels`: area limit of an image input;
//! - `x-aspect-ratio-range`: `W:H` between two ratios;
//! - `x-max-pixels`: `fields` whose product may not exceed `max`;
//! - `x-max-images`: at most `max` reference images named `prefix`, `prefix_2`, …;
//! - `x-same-dimensions`: image fields that must have equal sizes;
//! - `x-fields-by-mode` / `x-required-by-mode`: per-`mode` bodies (video).
//!
//! Errors come out in the service's 422 shape (pydantic v2 wording), so a
//! caller handles a local rejection and a remote one alike. The mock service
//! (`genapi-mock`) reads the same rules with code of its own, so a rule
//! misread here is not misread there too; a test compares the two readings
//! over every operation and a body breaking each rule.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use genapi_document as document;
use serde_json::{Map, Value};

use crate::api::types::{ValidationError, ValidationErrorLocItem};
use crate::input::{base64_dimensions, base64_problem};
/// The document's models and their fields, as every part of genapi reads
/// them: the document reader's own types.
pub use genapi_document::{closest, Catalog, Field, ImageField, Model, UnknownModel};
pub use sizes::Sizes;

mod sizes;

/// The document this crate was generated from.
pub const EMBEDDED_DOCUMENT: &str = include_str!("../openapi.json");

/// One pixel budget for "MP" limits: 4 MP is 2048 × 2048.
const PIXELS_PER_MEGAPIXEL: f64 = 1_048_576.0;

/// An OpenAPI document, ready to validate request bodies.
#[derive(Debug, Clone)]
pub struct Document {
    root: Value,
    /// Every `pattern` of the document, compiled once at parse time rather
    /// than on each request.
    patterns: Arc<HashMap<String, regress::Regex>>,
    /// The models, read once.
    catalog: Arc<Catalog>,
}

/// Why a document cannot be used: every problem found in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("; "))]
pub struct UnusableDocument {
    /// What is wrong, one problem each (a dangling or cyclic `$ref`, a
    /// pattern that does not compile, …).
    pub problems: Vec<String>,
}

/// An operation as the document declares it: the document reader's own
/// type, so every part of genapi speaks of an operation the same way.
pub use genapi_document::Operation;

impl Document {
    /// The embedded `openapi.json`, parsed once.
    ///
    /// `build.rs` refuses to build the crate from a document this cannot
    /// parse (dangling or cyclic `$ref`s, patterns that do not compile), so
    /// this never falls back to an empty document.
    pub fn embedded() -> &'static Document {
        static DOCUMENT: OnceLock<Document> = OnceLock::new();
        DOCUMENT.get_or_init(|| match Document::parse(EMBEDDED_DOCUMENT) {
            Ok(document) => document,
            // Unreachable: build.rs ran the same checks on the same text.
            Err(problem) => panic!("the embedded openapi.json is broken, though build.rs checked it: {problem}"),
        })
    }

    /// Parses a document (for tests and tools that bring their own). Fails
    /// on a document without paths, with a dangling or cyclic `$ref`, with a
    /// request schema shared by two operations, or with a pattern that does
    /// not compile: the problems `build.rs` refuses, found by the same
    /// `genapi_document::problems`.
    pub fn parse(text: &str) -> Result<Document, UnusableDocument> {
        let unusable = |problems| UnusableDocument { problems };
        let root: Value = serde_json::from_str(text).map_err(|e| unusable(vec![format!("not JSON: {e}")]))?;
        let problems = document::problems(&root);
        if !problems.is_empty() {
            return Err(unusable(problems));
        }
        // `problems` has just compiled every pattern, so this cannot fail;
        // an error would still be passed on rather than unwrapped.
        let patterns = document::patterns(&root)
            .into_iter()
            .map(|pattern| Ok((pattern.to_string(), document::compile_pattern(pattern)?)))
            .collect::<Result<HashMap<_, _>, String>>()
            .map_err(|problem| unusable(vec![problem]))?;
        let catalog = Catalog::read(&root, text).map_err(|problem| unusable(vec![problem]))?;
        Ok(Document {
            root,
            patterns: Arc::new(patterns),
            catalog: Arc::new(catalog),
        })
    }

    /// The document's catalog: every operation, and the models (its
    /// submissions) with their fields, in the document's order.
    ///
    /// ```
    /// let catalog = genapi::validate::Document::embedded().catalog();
    /// assert!(catalog.operations().iter().any(|op| op.id == "get_result"));
    /// let vto = catalog.find("vto-v1").unwrap();
    /// assert_eq!(vto.operation.path, "/v1/gen-tools/vto-v1");
    /// let images: Vec<&str> = vto.fields.iter().filter(|f| f.image().is_some()).map(|f| f.name.as_str()).collect();
    /// assert_eq!(images, ["person", "garment"]);
    /// let typo = catalog.find("gen-2-prp").unwrap_err();
    /// assert_eq!(typo.suggestion.as_deref(), Some("gen-2-pro"));
    /// ```
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The `width × height` sizes the named request schema accepts, read
    /// from the bounds [`Document::validate`] checks; `None` when it takes
    /// no width and height.
    pub fn sizes(&self, schema_name: &str) -> Option<Sizes> {
        let model = self.catalog.by_request_schema(schema_name)?;
        Sizes::read(&model.fields, self.resolve(self.schema(schema_name)?))
    }

    /// What to ask for instead when `body` asks the named request schema
    /// for a size it refuses: `the nearest sizes gen-2-pro takes: 992x768 or
    /// 1008x768` ([`Sizes::nearest`]); `None` when the size is accepted, the
    /// body names no whole `width` and `height`, or the schema takes none.
    ///
    /// ```
    /// let document = genapi::validate::Document::embedded();
    /// let body = serde_json::json!({ "prompt": "a fox", "width": 1000, "height": 768 });
    /// assert_eq!(
    ///     document.nearest_sizes_said("Gen2ProRequest", &body).as_deref(),
    ///     Some("the nearest sizes gen-2-pro takes: 992x768 or 1008x768")
    /// );
    /// let body = serde_json::json!({ "prompt": "a fox", "width": 1024, "height": 768 });
    /// assert_eq!(document.nearest_sizes_said("Gen2ProRequest", &body), None);
    /// ```
    pub fn nearest_sizes_said(&self, schema_name: &str, body: &Value) -> Option<String> {
        let side = |name: &str| {
            body.get(name)
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok())
        };
        let (width, height) = (side("width")?, side("height")?);
        let sizes = self.sizes(schema_name)?;
        if sizes.accepts(width, height) {
            return None;
        }
        let model = &self.catalog.by_request_schema(schema_name)?.name;
        let named: Vec<String> = sizes
            .nearest(width, height)
            .iter()
            .map(|(w, h)| format!("{w}x{h}"))
            .collect();
        match named.split_last()? {
            (last, []) => Some(format!("the nearest size {model} takes: {last}")),
            (last, rest) => Some(format!(
                "the nearest sizes {model} takes: {} or {last}",
                rest.join(", ")
            )),
        }
    }

    /// Every field name and enumerated value the schemas name (`polling_url`,
    /// `Ready`, `Task not found`): words the service writes in its answers.
    pub(crate) fn words(&self) -> std::collections::BTreeSet<String> {
        fn walk(value: &Value, words: &mut std::collections::BTreeSet<String>) {
            match value {
                Value::Object(fields) => {
                    if let Some(Value::Object(properties)) = fields.get("properties") {
                        words.extend(properties.keys().cloned());
                    }
                    if let Some(Value::Array(values)) = fields.get("enum") {
                        words.extend(values.iter().filter_map(Value::as_str).map(str::to_string));
                    }
                    fields.values().for_each(|field| walk(field, words));
                }
                Value::Array(items) => items.iter().for_each(|item| walk(item, words)),
                _ => {}
            }
        }
        let mut words = std::collections::BTreeSet::new();
        walk(&self.root["components"]["schemas"], &mut words);
        words
    }

    /// A named schema of `components/schemas`.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        document::schema(&self.root, name)
    }

    /// Validates `body` against the named schema; empty when valid.
    pub fn validate(&self, schema_name: &str, body: &Value) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        match self.schema(schema_name) {
            Some(schema) => self.check(schema, body, &mut vec![loc("body")], &mut errors),
            None => errors.push(error(
                vec![loc("body")],
                "value_error",
                format!("Value error, unknown request schema {schema_name}"),
                None,
            )),
        }
        errors
    }

    /// Follows `$ref`s; [`Document::parse`] has refused dangling and cyclic
    /// ones, so the fallback is never taken.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        document::resolve(&self.root, schema).unwrap_or(&Value::Null)
    }

    fn check(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut Vec<ValidationErrorLocItem>,
        out: &mut Vec<ValidationError>,
    ) {
        if value.is_null() && schema["nullable"].as_bool() == Some(true) {
            return;
        }
        let schema = self.resolve(schema);
        if let Some(parts) = schema["allOf"].as_array() {
            for part in parts {
                self.check(part, value, path, out);
            }
        }
        if let Some(branches) = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array()) {
            let matches = branches.iter().any(|b| {
                let mut scratch = Vec::new();
                self.check(b, value, &mut path.clone(), &mut scratch);
                scratch.is_empty()
            });
            if !matches {
                let forms: Vec<String> = branches.iter().map(|b| describe(self.resolve(b))).collect();
                out.push(error(
                    path.clone(),
                    "union_tag_invalid",
                    format!("Input should be {}", forms.join(" or ")),
                    Some(value),
                ));
            }
            return;
        }
        match schema["type"].as_str() {
            Some("string") => self.check_string(schema, value, path, out),
            Some("integer") | Some("number") => check_number(schema, value, path, out),
            Some("boolean") if !value.is_boolean() => out.push(error(
                path.clone(),
                "bool_type",
                "Input should be a valid boolean".into(),
                Some(value),
            )),
            Some("array") => self.check_array(schema, value, path, out),
            Some("object") => self.check_object(schema, value, path, out),
            _ => {}
        }
    }

    fn check_string(
        &self,
        schema: &Value,
        value: &Value,
        path: &[ValidationErrorLocItem],
        out: &mut Vec<ValidationError>,
    ) {
        let Some(text) = value.as_str() else {
            out.push(error(
                path.to_vec(),
                "string_type",
                "Input should be a valid string".into(),
                Some(value),
            ));
            return;
        };
        let mut fail = |kind: &str, msg: String| out.push(error(path.to_vec(), kind, msg, Some(value)));
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.iter().any(|a| a.as_str() == Some(text)) {
                fail("enum", format!("Input should be {}", quoted_list(allowed)));
                return;
            }
        }
        let length = text.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64().filter(|min| length < *min) {
            fail(
                "string_too_short",
                format!("String should have at least {min} character{}", plural(min)),
            );
        }
        if let Some(max) = schema["maxLength"].as_u64().filter(|max| length > *max) {
            fail(
                "string_too_long",
                format!("String should have at most {max} character{}", plural(max)),
            );
        }
        if let Some(pattern) = schema["pattern"].as_str() {
            if self.patterns.get(pattern).is_some_and(|re| re.find(text).is_none()) {
                fail(
                    "string_pattern_mismatch",
                    format!("String should match pattern '{pattern}'"),
                );
            }
        }
        if schema["format"].as_str() == Some("uri") && !is_http_url(text) {
            fail(
                "url_parsing",
                "Input should be a valid URL, an absolute http or https address".into(),
            );
        }
        if let Some(kind) = schema["x-image"].as_str() {
            if !(kind == "base64-or-url" && is_http_url(text)) {
                if let Some(problem) = base64_problem(text) {
                    let hint = if kind == "base64" && is_http_url(text) {
                        "this field takes base64 image data, not a URL"
                    } else {
                        problem
                    };
                    fail("value_error", format!("Value error, {hint}"));
                } else if let Some(max) = schema["x-max-megapixels"].as_f64() {
                    if let Some((w, h)) = base64_dimensions(text) {
                        if (w as f64) * (h as f64) > max * PIXELS_PER_MEGAPIXEL {
                            fail(
                                "value_error",
                                format!("Value error, the image is {w}x{h}, above the {max} MP limit; downscale it"),
                            );
                        }
                    }
                }
            }
        }
        if let Some([low, high]) = schema["x-aspect-ratio-range"].as_array().map(Vec::as_slice) {
            let bounds = (ratio(low.as_str().unwrap_or("")), ratio(high.as_str().unwrap_or("")));
            match (ratio(text), bounds) {
                (Some(r), (Some(lo), Some(hi))) if r >= lo.min(hi) - 1e-9 && r <= lo.max(hi) + 1e-9 => {}
                (Some(_), _) => fail(
                    "value_error",
                    format!(
                        "Value error, aspect ratio must be between {} and {}",
                        high.as_str().unwrap_or(""),
                        low.as_str().unwrap_or("")
                    ),
                ),
                (None, _) => fail("value_error", "Value error, aspect ratio must look like 16:9".into()),
            }
        }
    }

    fn check_array(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut Vec<ValidationErrorLocItem>,
        out: &mut Vec<ValidationError>,
    ) {
        let Some(items) = value.as_array() else {
            out.push(error(
                path.clone(),
                "list_type",
                "Input should be a valid list".into(),
                Some(value),
            ));
            return;
        };
        let count = items.len() as u64;
        if let Some(min) = schema["minItems"].as_u64().filter(|min| count < *min) {
            out.push(error(
                path.clone(),
                "too_short",
                format!(
                    "List should have at least {min} item{} after validation, not {count}",
                    plural(min)
                ),
                None,
            ));
        }
        if let Some(max) = schema["maxItems"].as_u64().filter(|max| count > *max) {
            out.push(error(
                path.clone(),
                "too_long",
                format!(
                    "List should have at most {max} item{} after validation, not {count}",
                    plural(max)
                ),
                None,
            ));
        }
        for (index, item) in items.iter().enumerate() {
            path.push(ValidationErrorLocItem::Int64(index as i64));
            self.check(&schema["items"], item, path, out);
            path.pop();
        }
    }

    fn check_object(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut Vec<ValidationErrorLocItem>,
        out: &mut Vec<ValidationError>,
    ) {
        let Some(object) = value.as_object() else {
            out.push(error(
                path.clone(),
                "model_attributes_type",
                "Input should be a valid dictionary or object".into(),
                Some(value),
            ));
            return;
        };
        let properties = schema["properties"].as_object();
        let mode = object.get("mode").and_then(Value::as_str);
        let mut required: Vec<&str> = names(&schema["required"]);
        if let Some(mode) = mode {
            required.extend(names(&schema["x-required-by-mode"][mode]));
        }
        for name in required {
            if !object.contains_key(name) {
                out.push(with_field(path, name, "missing", "Field required".into(), None));
            }
        }
        let allowed_in_mode = mode.and_then(|m| schema["x-fields-by-mode"].get(m)).map(names);
        for (name, field) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(property) => {
                    if let Some(allowed) = &allowed_in_mode {
                        if !allowed.contains(&name.as_str()) {
                            out.push(with_field(
                                path,
                                name,
                                "extra_forbidden",
                                format!("Extra inputs are not permitted in mode '{}'", mode.unwrap_or("")),
                                Some(field),
                            ));
                            continue;
                        }
                    }
                    path.push(loc(name));
                    self.check(property, field, path, out);
                    path.pop();
                }
                None if schema["additionalProperties"] == Value::Bool(false) => {
                    out.push(with_field(
                        path,
                        name,
                        "extra_forbidden",
                        "Extra inputs are not permitted".into(),
                        Some(field),
                    ));
                }
                None => {}
            }
        }
        check_max_images(schema, object, path, out);
        check_max_pixels(schema, object, path, out);
        check_same_dimensions(schema, object, path, out);
    }
}

fn check_number(schema: &Value, value: &Value, path: &[ValidationErrorLocItem], out: &mut Vec<ValidationError>) {
    let integer = schema["type"] == "integer";
    let Some(number) = value.as_f64() else {
        let (kind, msg) = if integer {
            ("int_type", "Input should be a valid integer")
        } else {
            ("float_type", "Input should be a valid number")
        };
        out.push(error(path.to_vec(), kind, msg.into(), Some(value)));
        return;
    };
    if integer && !(value.is_i64() || value.is_u64()) && number.fract() != 0.0 {
        out.push(error(
            path.to_vec(),
            "int_from_float",
            "Input should be a valid integer, got a number with a fractional part".into(),
            Some(value),
        ));
        return;
    }
    if integer {
        if let Some(problem) = outside_integer_range(schema, value) {
            out.push(error(path.to_vec(), problem.0, problem.1, Some(value)));
            return;
        }
    }
    if number == 0.0 && schema["x-zero-means-auto"] == Value::Bool(true) {
        return;
    }
    if let Some(min) = schema["minimum"].as_f64().filter(|min| number < *min) {
        out.push(error(
            path.to_vec(),
            "greater_than_equal",
            format!("Input should be greater than or equal to {}", show(min)),
            Some(value),
        ));
    }
    if let Some(max) = schema["maximum"].as_f64().filter(|max| number > *max) {
        out.push(error(
            path.to_vec(),
            "less_than_equal",
            format!("Input should be less than or equal to {}", show(max)),
            Some(value),
        ));
    }
    if let Some(step) = schema["multipleOf"].as_f64().filter(|s| *s > 0.0) {
        if (number / step).fract().abs() > 1e-9 {
            out.push(error(
                path.to_vec(),
                "multiple_of",
                format!("Input should be a multiple of {}", show(step)),
                Some(value),
            ));
        }
    }
}

/// `x-integer-range: [min, max]` (decimal strings, since OpenAPI 3.0 bounds
/// are 64-bit signed): exact integer bounds beyond what `minimum`/`maximum`
/// can state, e.g. a seed from -2^63 to 2^64-1.
fn outside_integer_range(schema: &Value, value: &Value) -> Option<(&'static str, String)> {
    let [low, high] = schema["x-integer-range"].as_array().map(Vec::as_slice)? else {
        return None;
    };
    let (low, high): (i128, i128) = (low.as_str()?.parse().ok()?, high.as_str()?.parse().ok()?);
    // serde_json holds integers beyond the 64-bit ranges as floats.
    let exact = value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from));
    match exact {
        Some(n) if n < low => Some((
            "greater_than_equal",
            format!("Input should be greater than or equal to {low}"),
        )),
        Some(n) if n > high => Some((
            "less_than_equal",
            format!("Input should be less than or equal to {high}"),
        )),
        Some(_) => None,
        None => match value.as_f64() {
            Some(f) if f < low as f64 => Some((
                "greater_than_equal",
                format!("Input should be greater than or equal to {low}"),
            )),
            Some(f) if f >= high as f64 => Some((
                "less_than_equal",
                format!("Input should be less than or equal to {high}"),
            )),
            _ => None,
        },
    }
}

/// `input_image_9` on an endpoint that takes 8 images is an error even where
/// unknown fields are allowed.
fn check_max_images(
    schema: &Value,
    object: &Map<String, Value>,
    path: &[ValidationErrorLocItem],
    out: &mut Vec<ValidationError>,
) {
    let rule = &schema["x-max-images"];
    let (Some(prefix), Some(max)) = (rule["prefix"].as_str(), rule["max"].as_u64()) else {
        return;
    };
    for name in object.keys() {
        let index = match name.strip_prefix(prefix) {
            Some("") => 1,
            Some(rest) => match rest.strip_prefix('_').and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => n,
                None => continue,
            },
            None => continue,
        };
        if index > max {
            out.push(with_field(
                path,
                name,
                "extra_forbidden",
                format!("This endpoint takes at most {max} reference images"),
                None,
            ));
        }
    }
}

fn check_max_pixels(
    schema: &Value,
    object: &Map<String, Value>,
    path: &[ValidationErrorLocItem],
    out: &mut Vec<ValidationError>,
) {
    let rule = &schema["x-max-pixels"];
    let (Some(max), fields) = (rule["max"].as_f64(), names(&rule["fields"])) else {
        return;
    };
    let sizes: Option<Vec<f64>> = fields.iter().map(|f| object.get(*f).and_then(Value::as_f64)).collect();
    if let Some(sizes) = sizes {
        let area: f64 = sizes.iter().product();
        if area > max {
            out.push(error(
                path.to_vec(),
                "value_error",
                format!(
                    "Value error, {} is {} pixels, above the limit of {} ({:.1} MP)",
                    fields.join(" x "),
                    show(area),
                    show(max),
                    max / PIXELS_PER_MEGAPIXEL
                ),
                None,
            ));
        }
    }
}

fn check_same_dimensions(
    schema: &Value,
    object: &Map<String, Value>,
    path: &[ValidationErrorLocItem],
    out: &mut Vec<ValidationError>,
) {
    let fields = names(&schema["x-same-dimensions"]);
    let sizes: Vec<(&str, (u32, u32))> = fields
        .iter()
        .filter_map(|f| {
            let text = object.get(*f)?.as_str()?;
            Some((*f, base64_dimensions(text)?))
        })
        .collect();
    if let [(first, size), rest @ ..] = sizes.as_slice() {
        for (other, other_size) in rest {
            if other_size != size {
                out.push(with_field(
                    path,
                    other,
                    "value_error",
                    format!(
                        "Value error, {other} is {}x{} but {first} is {}x{}; they must have the same dimensions",
                        other_size.0, other_size.1, size.0, size.1
                    ),
                    None,
                ));
            }
        }
    }
}

fn names(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn loc(name: &str) -> ValidationErrorLocItem {
    ValidationErrorLocItem::String(name.to_string())
}

fn with_field(
    path: &[ValidationErrorLocItem],
    field: &str,
    kind: &str,
    msg: String,
    input: Option<&Value>,
) -> ValidationError {
    let mut at = path.to_vec();
    at.push(loc(field));
    error(at, kind, msg, input)
}

fn error(loc: Vec<ValidationErrorLocItem>, kind: &str, msg: String, input: Option<&Value>) -> ValidationError {
    // Large inputs (images) are not echoed back.
    let input = input.map(|v| match v {
        Value::String(s) if s.len() > 200 => Value::String(format!("{}…", s.chars().take(200).collect::<String>())),
        other => other.clone(),
    });
    ValidationError {
        loc,
        msg,
        type_: kind.to_string(),
        input,
    }
}

fn describe(schema: &Value) -> String {
    if let Some(values) = schema["enum"].as_array() {
        return quoted_list(values);
    }
    let kind = schema["type"].as_str().unwrap_or("a value");
    match (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
        (Some(lo), Some(hi)) => format!("an {kind} from {} to {}", show(lo), show(hi)),
        _ => format!("a valid {kind}"),
    }
}

fn quoted_list(values: &[Value]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| format!("'{}'", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

fn show(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{}", number as i64)
    } else {
        format!("{number}")
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn ratio(text: &str) -> Option<f64> {
    let (w, h) = text.split_once(':')?;
    let (w, h): (f64, f64) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
    (w > 0.0 && h > 0.0).then(|| w / h)
}

fn is_http_url(text: &str) -> bool {
    reqwest::Url::parse(text)
        .map(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .unwrap_or(false)
}
