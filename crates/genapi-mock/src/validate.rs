//! What the service refuses with 422: a request body checked against the
//! document's JSON schemas, every problem at once, in the service's
//! framework's words (`{"type", "loc", "msg", "input"}`).
//!
//! The rules are the document's: types, nullability, required fields,
//! enums, ranges, multiples, lengths, patterns, item counts, and the `x-`
//! extensions that say what OpenAPI cannot (`x-zero-means-auto`, `x-image`,
//! `x-max-megapixels`, `x-aspect-ratio-range`, `x-max-pixels`,
//! `x-max-images`, `x-same-dimensions`, `x-fields-by-mode`,
//! `x-required-by-mode`, `x-integer-range`).
//!
//! The client checks the same rules before it sends, with code of its own.
//! This is a second reading of the document, written apart on purpose: a
//! rule both misread the same way would let every test pass, while two
//! readings that disagree make the client's local refusals and the mock's
//! 422s differ, which the tests compare.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

/// 4 MP is 2048 x 2048: the service counts megapixels in binary.
const MEGAPIXEL: f64 = 1_048_576.0;

/// Longest input echoed whole in an error; longer text (an image) is cut.
const ECHOED_CHARS: usize = 200;

/// The document, read once, with its patterns compiled.
#[derive(Debug)]
pub(crate) struct Rules {
    root: Value,
    catalog: genapi_document::Catalog,
    patterns: HashMap<String, regress::Regex>,
}

impl Rules {
    /// Reads a document; refuses one the client's build would refuse too
    /// (the document reader's `problems`).
    pub(crate) fn parse(text: &str) -> Result<Rules, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let problems = genapi_document::problems(&root);
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let catalog = genapi_document::Catalog::read(&root, text)?;
        let mut patterns = HashMap::new();
        for pattern in genapi_document::patterns(&root) {
            patterns.insert(pattern.to_string(), genapi_document::compile_pattern(pattern)?);
        }
        Ok(Rules {
            root,
            catalog,
            patterns,
        })
    }

    /// The document the client was generated from, read once per process.
    pub(crate) fn embedded() -> Result<std::sync::Arc<Rules>, String> {
        static EMBEDDED: std::sync::OnceLock<Result<std::sync::Arc<Rules>, String>> = std::sync::OnceLock::new();
        EMBEDDED
            .get_or_init(|| Rules::parse(genapi::validate::EMBEDDED_DOCUMENT).map(std::sync::Arc::new))
            .clone()
    }

    /// The document's operations, in its order (the catalog's list).
    pub(crate) fn operations(&self) -> &[genapi_document::Operation] {
        self.catalog.operations()
    }

    /// A schema of `components/schemas`.
    pub(crate) fn schema(&self, name: &str) -> Option<&Value> {
        genapi_document::schema(&self.root, name)
    }

    /// What is wrong with `body` as the named schema; empty when nothing.
    pub(crate) fn problems(&self, schema_name: &str, body: &Value) -> Vec<Value> {
        let mut check = Check {
            rules: self,
            found: Vec::new(),
        };
        match self.schema(schema_name) {
            Some(schema) => check.value(schema, body, &mut vec![json!("body")]),
            None => check.found.push(problem(
                &[json!("body")],
                "value_error",
                format!("Value error, unknown request schema {schema_name}"),
                None,
            )),
        }
        check.found
    }
}

/// One check of one body.
struct Check<'a> {
    rules: &'a Rules,
    found: Vec<Value>,
}

impl Check<'_> {
    fn fail(&mut self, at: &[Value], kind: &str, msg: String, input: Option<&Value>) {
        self.found.push(problem(at, kind, msg, input));
    }

    fn value(&mut self, schema: &Value, value: &Value, at: &mut Vec<Value>) {
        if value.is_null() && schema["nullable"] == true {
            return;
        }
        let rules = self.rules;
        let schema = genapi_document::resolve(&rules.root, schema).unwrap_or(&Value::Null);
        for part in schema["allOf"].as_array().into_iter().flatten() {
            self.value(part, value, at);
        }
        if let Some(branches) = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array()) {
            let fits = |branch: &Value| {
                let mut alone = Check {
                    rules,
                    found: Vec::new(),
                };
                alone.value(branch, value, &mut at.clone());
                alone.found.is_empty()
            };
            if !branches.iter().any(fits) {
                let forms: Vec<String> = branches
                    .iter()
                    .map(|branch| expected(genapi_document::resolve(&rules.root, branch).unwrap_or(&Value::Null)))
                    .collect();
                self.fail(
                    at,
                    "union_tag_invalid",
                    format!("Input should be {}", forms.join(" or ")),
                    Some(value),
                );
            }
            return;
        }
        match schema["type"].as_str() {
            Some("string") => self.string(schema, value, at),
            Some("integer" | "number") => self.number(schema, value, at),
            Some("boolean") if !value.is_boolean() => {
                self.fail(at, "bool_type", "Input should be a valid boolean".into(), Some(value));
            }
            Some("array") => self.array(schema, value, at),
            Some("object") => self.object(schema, value, at),
            _ => {}
        }
    }

    fn string(&mut self, schema: &Value, value: &Value, at: &[Value]) {
        let Some(text) = value.as_str() else {
            return self.fail(at, "string_type", "Input should be a valid string".into(), Some(value));
        };
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.iter().any(|a| a == value) {
                return self.fail(at, "enum", format!("Input should be {}", one_of(allowed)), Some(value));
            }
        }
        let chars = text.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64().filter(|min| chars < *min) {
            let msg = format!("String should have at least {min} character{}", plural(min));
            self.fail(at, "string_too_short", msg, Some(value));
        }
        if let Some(max) = schema["maxLength"].as_u64().filter(|max| chars > *max) {
            let msg = format!("String should have at most {max} character{}", plural(max));
            self.fail(at, "string_too_long", msg, Some(value));
        }
        if let Some(pattern) = schema["pattern"].as_str() {
            let matches = self
                .rules
                .patterns
                .get(pattern)
                .is_none_or(|re| re.find(text).is_some());
            if !matches {
                let msg = format!("String should match pattern '{pattern}'");
                self.fail(at, "string_pattern_mismatch", msg, Some(value));
            }
        }
        if schema["format"] == "uri" && !is_web_address(text) {
            let msg = "Input should be a valid URL, an absolute http or https address".to_string();
            self.fail(at, "url_parsing", msg, Some(value));
        }
        if let Some(accepted) = schema["x-image"].as_str() {
            self.image(schema, accepted, text, value, at);
        }
        if let Some([wide, tall]) = schema["x-aspect-ratio-range"].as_array().map(Vec::as_slice) {
            let (wide, tall) = (wide.as_str().unwrap_or(""), tall.as_str().unwrap_or(""));
            match (ratio(text), ratio(wide), ratio(tall)) {
                (Some(r), Some(a), Some(b)) if (a.min(b) - 1e-9..=a.max(b) + 1e-9).contains(&r) => {}
                (Some(_), _, _) => {
                    let msg = format!("Value error, aspect ratio must be between {tall} and {wide}");
                    self.fail(at, "value_error", msg, Some(value));
                }
                (None, _, _) => {
                    let msg = "Value error, aspect ratio must look like 16:9".to_string();
                    self.fail(at, "value_error", msg, Some(value));
                }
            }
        }
    }

    /// An image field: base64 of a known format (or, where allowed, a web
    /// address), within its megapixel limit.
    fn image(&mut self, schema: &Value, accepted: &str, text: &str, value: &Value, at: &[Value]) {
        if accepted == "base64-or-url" && is_web_address(text) {
            return;
        }
        let trouble = if accepted == "base64" && is_web_address(text) {
            Some("this field takes base64 image data, not a URL")
        } else {
            not_an_image(text)
        };
        if let Some(trouble) = trouble {
            return self.fail(at, "value_error", format!("Value error, {trouble}"), Some(value));
        }
        let (Some(limit), Some((width, height))) = (schema["x-max-megapixels"].as_f64(), image_size(text)) else {
            return;
        };
        if width as f64 * height as f64 > limit * MEGAPIXEL {
            let msg = format!("Value error, the image is {width}x{height}, above the {limit} MP limit; downscale it");
            self.fail(at, "value_error", msg, Some(value));
        }
    }

    fn number(&mut self, schema: &Value, value: &Value, at: &[Value]) {
        let integer = schema["type"] == "integer";
        let Some(number) = value.as_f64() else {
            return match integer {
                true => self.fail(at, "int_type", "Input should be a valid integer".into(), Some(value)),
                false => self.fail(at, "float_type", "Input should be a valid number".into(), Some(value)),
            };
        };
        let whole = value.is_i64() || value.is_u64() || number.fract() == 0.0;
        if integer && !whole {
            let msg = "Input should be a valid integer, got a number with a fractional part".to_string();
            return self.fail(at, "int_from_float", msg, Some(value));
        }
        if integer {
            if let Some((kind, msg)) = beyond_integer_range(schema, value) {
                return self.fail(at, kind, msg, Some(value));
            }
        }
        if number == 0.0 && schema["x-zero-means-auto"] == true {
            return;
        }
        if let Some(min) = schema["minimum"].as_f64().filter(|min| number < *min) {
            let msg = format!("Input should be greater than or equal to {}", decimal(min));
            self.fail(at, "greater_than_equal", msg, Some(value));
        }
        if let Some(max) = schema["maximum"].as_f64().filter(|max| number > *max) {
            let msg = format!("Input should be less than or equal to {}", decimal(max));
            self.fail(at, "less_than_equal", msg, Some(value));
        }
        if let Some(step) = schema["multipleOf"].as_f64().filter(|step| *step > 0.0) {
            if (number / step).fract().abs() > 1e-9 {
                let msg = format!("Input should be a multiple of {}", decimal(step));
                self.fail(at, "multiple_of", msg, Some(value));
            }
        }
    }

    fn array(&mut self, schema: &Value, value: &Value, at: &mut Vec<Value>) {
        let Some(items) = value.as_array() else {
            return self.fail(at, "list_type", "Input should be a valid list".into(), Some(value));
        };
        let count = items.len() as u64;
        if let Some(min) = schema["minItems"].as_u64().filter(|min| count < *min) {
            let msg = format!(
                "List should have at least {min} item{} after validation, not {count}",
                plural(min)
            );
            self.fail(at, "too_short", msg, None);
        }
        if let Some(max) = schema["maxItems"].as_u64().filter(|max| count > *max) {
            let msg = format!(
                "List should have at most {max} item{} after validation, not {count}",
                plural(max)
            );
            self.fail(at, "too_long", msg, None);
        }
        for (index, item) in items.iter().enumerate() {
            at.push(json!(index));
            self.value(&schema["items"], item, at);
            at.pop();
        }
    }

    fn object(&mut self, schema: &Value, value: &Value, at: &mut Vec<Value>) {
        let Some(fields) = value.as_object() else {
            let msg = "Input should be a valid dictionary or object".to_string();
            return self.fail(at, "model_attributes_type", msg, Some(value));
        };
        let mode = fields.get("mode").and_then(Value::as_str);
        let mut required = strings(&schema["required"]);
        if let Some(mode) = mode {
            required.extend(strings(&schema["x-required-by-mode"][mode]));
        }
        for name in required.into_iter().filter(|name| !fields.contains_key(*name)) {
            self.fail(&within(at, name), "missing", "Field required".into(), None);
        }
        let in_this_mode = mode.and_then(|mode| schema["x-fields-by-mode"].get(mode)).map(strings);
        for (name, field) in fields {
            let Some(property) = schema["properties"].get(name) else {
                if schema["additionalProperties"] == false {
                    let msg = "Extra inputs are not permitted".to_string();
                    self.fail(&within(at, name), "extra_forbidden", msg, Some(field));
                }
                continue;
            };
            if in_this_mode
                .as_ref()
                .is_some_and(|allowed| !allowed.contains(&name.as_str()))
            {
                let msg = format!("Extra inputs are not permitted in mode '{}'", mode.unwrap_or(""));
                self.fail(&within(at, name), "extra_forbidden", msg, Some(field));
                continue;
            }
            at.push(json!(name));
            self.value(property, field, at);
            at.pop();
        }
        self.image_count(schema, fields, at);
        self.pixel_budget(schema, fields, at);
        self.same_sizes(schema, fields, at);
    }

    /// `input_image_9` where 8 are taken is refused even where unknown
    /// fields are let through.
    fn image_count(&mut self, schema: &Value, fields: &Map<String, Value>, at: &[Value]) {
        let rule = &schema["x-max-images"];
        let (Some(prefix), Some(max)) = (rule["prefix"].as_str(), rule["max"].as_u64()) else {
            return;
        };
        for name in fields.keys() {
            let number = match name.strip_prefix(prefix) {
                Some("") => 1,
                Some(rest) => match rest.strip_prefix('_').map(str::parse::<u64>) {
                    Some(Ok(number)) => number,
                    _ => continue,
                },
                None => continue,
            };
            if number > max {
                let msg = format!("This endpoint takes at most {max} reference images");
                self.fail(&within(at, name), "extra_forbidden", msg, None);
            }
        }
    }

    fn pixel_budget(&mut self, schema: &Value, fields: &Map<String, Value>, at: &[Value]) {
        let rule = &schema["x-max-pixels"];
        let Some(max) = rule["max"].as_f64() else { return };
        let names = strings(&rule["fields"]);
        let mut area = 1.0;
        for name in &names {
            match fields.get(*name).and_then(Value::as_f64) {
                Some(side) => area *= side,
                None => return,
            }
        }
        if area > max {
            let msg = format!(
                "Value error, {} is {} pixels, above the limit of {} ({:.1} MP)",
                names.join(" x "),
                decimal(area),
                decimal(max),
                max / MEGAPIXEL
            );
            self.fail(at, "value_error", msg, None);
        }
    }

    fn same_sizes(&mut self, schema: &Value, fields: &Map<String, Value>, at: &[Value]) {
        let mut sized = strings(&schema["x-same-dimensions"])
            .into_iter()
            .filter_map(|name| Some((name, image_size(fields.get(name)?.as_str()?)?)));
        let Some((first, (width, height))) = sized.next() else {
            return;
        };
        for (other, (w, h)) in sized {
            if (w, h) != (width, height) {
                let msg = format!(
                    "Value error, {other} is {w}x{h} but {first} is {width}x{height}; they must have the same dimensions"
                );
                self.fail(&within(at, other), "value_error", msg, None);
            }
        }
    }
}

/// One entry of a 422's `detail`; a long input (an image) is cut.
fn problem(at: &[Value], kind: &str, msg: String, input: Option<&Value>) -> Value {
    let mut entry = json!({"type": kind, "loc": at, "msg": msg});
    if let Some(input) = input {
        entry["input"] = match input.as_str() {
            Some(text) if text.len() > ECHOED_CHARS => {
                Value::String(format!("{}…", text.chars().take(ECHOED_CHARS).collect::<String>()))
            }
            _ => input.clone(),
        };
    }
    entry
}

fn within(at: &[Value], name: &str) -> Vec<Value> {
    let mut inner = at.to_vec();
    inner.push(json!(name));
    inner
}

/// `x-integer-range: ["low", "high"]`: exact bounds of integers wider than
/// `minimum`/`maximum` can state (a seed up to 2^64 - 1).
fn beyond_integer_range(schema: &Value, value: &Value) -> Option<(&'static str, String)> {
    let [low, high] = schema["x-integer-range"].as_array()?.as_slice() else {
        return None;
    };
    let low: i128 = low.as_str()?.parse().ok()?;
    let high: i128 = high.as_str()?.parse().ok()?;
    let (below, above) = match value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
    {
        Some(exact) => (exact < low, exact > high),
        // Beyond 64 bits serde_json keeps a float.
        None => {
            let float = value.as_f64()?;
            (float < low as f64, float >= high as f64)
        }
    };
    if below {
        Some((
            "greater_than_equal",
            format!("Input should be greater than or equal to {low}"),
        ))
    } else if above {
        Some((
            "less_than_equal",
            format!("Input should be less than or equal to {high}"),
        ))
    } else {
        None
    }
}

/// Why text is not base64 of a PNG, JPEG, WebP or GIF image.
fn not_an_image(text: &str) -> Option<&'static str> {
    if text.starts_with("data:") {
        return Some("remove the `data:…;base64,` prefix: the field takes raw base64");
    }
    if text.is_empty() {
        return Some("the image is empty");
    }
    let base64_alphabet = |c: char| c.is_ascii_alphanumeric() || "+/=\r\n".contains(c);
    if !text.chars().all(base64_alphabet) {
        return Some("not valid base64");
    }
    let Some(head) = crate::image_size::head(text) else {
        return Some("not valid base64");
    };
    if !crate::image_size::is_image(&head) {
        return Some("the data is not a PNG, JPEG, WebP or GIF image");
    }
    None
}

fn image_size(text: &str) -> Option<(u32, u32)> {
    crate::image_size::of(&crate::image_size::head(text)?)
}

/// What a branch of a union takes, for the message when none fits.
fn expected(schema: &Value) -> String {
    if let Some(values) = schema["enum"].as_array() {
        return one_of(values);
    }
    let kind = schema["type"].as_str().unwrap_or("a value");
    match (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
        (Some(low), Some(high)) => format!("an {kind} from {} to {}", decimal(low), decimal(high)),
        _ => format!("a valid {kind}"),
    }
}

/// `'a', 'b' or 'c'`.
fn one_of(values: &[Value]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|value| match value.as_str() {
            Some(text) => format!("'{text}'"),
            None => format!("'{value}'"),
        })
        .collect();
    match quoted.as_slice() {
        [] => String::new(),
        [only] => only.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A bound as the framework writes it: no `.0` on whole numbers.
fn decimal(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        (number as i64).to_string()
    } else {
        number.to_string()
    }
}

fn plural(count: u64) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `W:H` as a number.
fn ratio(text: &str) -> Option<f64> {
    let (width, height) = text.split_once(':')?;
    let (width, height): (f64, f64) = (width.trim().parse().ok()?, height.trim().parse().ok()?);
    (width > 0.0 && height > 0.0).then_some(width / height)
}

/// An absolute http or https address with a host.
fn is_web_address(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
}
