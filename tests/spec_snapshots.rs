//! Drift made visible: any change to `openapi.json` or to the generator shows
//! up here as a snapshot diff to review.

use genapi::api::types;
use genapi::api::OPERATIONS;
use genapi::validate::Document;
use serde_json::{json, Map, Value};

/// A 1x1 PNG, the smallest valid image input.
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn document() -> Value {
    serde_json::from_str(genapi::validate::EMBEDDED_DOCUMENT).expect("embedded document is JSON")
}

#[test]
fn api_surface() {
    insta::assert_snapshot!("api_surface", xtask::surface(&document()));
}

#[test]
fn generated_code() {
    insta::assert_snapshot!("generated_code", include_str!(concat!(env!("OUT_DIR"), "/codegen.rs")));
}

/// A valid value for a field schema.
fn sample(doc: &Value, schema: &Value) -> Value {
    let schema = match schema["allOf"][0]["$ref"].as_str().or(schema["$ref"].as_str()) {
        Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
        None => schema,
    };
    if let Some(first) = schema["anyOf"].as_array().and_then(|b| b.first()) {
        return sample(doc, first);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") if schema.get("x-image").is_some() => json!(PNG_1X1),
        Some("string") if schema["format"] == "uri" => json!("https://example.com/hook"),
        Some("string") if schema.get("pattern").is_some() => json!("my-lora"),
        Some("string") if schema.get("x-aspect-ratio-range").is_some() => json!("16:9"),
        Some("string") => json!("text"),
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(1)),
        Some("number") => json!(schema["minimum"].as_f64().unwrap_or(1.5)),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(doc, &schema["items"])]),
        _ => json!("any"),
    }
}

fn body(doc: &Value, schema_name: &str, all: bool) -> Value {
    let schema = &doc["components"]["schemas"][schema_name];
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = Map::new();
    for (name, property) in schema["properties"].as_object().unwrap() {
        if all || required.contains(&name.as_str()) {
            out.insert(name.clone(), sample(doc, property));
        }
    }
    Value::Object(out)
}

type Reencode = fn(Value) -> Result<Value, String>;

/// Decodes into the generated type and encodes again.
macro_rules! reencoders {
    ($($t:ident),* $(,)?) => {
        [$((stringify!($t), (|v: Value| -> Result<Value, String> {
            let typed: types::$t = serde_json::from_value(v).map_err(|e| e.to_string())?;
            serde_json::to_value(typed).map_err(|e| e.to_string())
        }) as Reencode)),*]
    };
}

fn reencoders() -> Vec<(&'static str, Reencode)> {
    reencoders![
        Gen2ProRequest, Gen2ProPreviewRequest, Gen2FlexRequest, Gen2Klein9bRequest, Gen2Klein9bPreviewRequest,
        Gen2Klein4bRequest, GenKontextProRequest, GenDevRequest, GenPro11Request, GenPro11UltraRequest,
        GenPro11UltraFinetunedRequest, GenPro10FillRequest, GenPro10FillFinetunedRequest, GenPro10ExpandRequest,
        DeblurV1Request, EraseV1Request, VtoV1Request, VtoV2Request, OutpaintingV1Request, Gen3VideoRequest,
        Gen2Klein4bFinetunedRequest, Gen2Klein9bFinetunedRequest, Gen2Klein9bKvFinetunedRequest,
        Gen2Klein9bKvBf16FinetunedRequest, Gen2KleinBase4bFinetunedRequest, Gen2KleinBase9bFinetunedRequest,
    ]
    .to_vec()
}

/// Per operation: a request with only its required fields goes out as exactly
/// those fields (no defaults added), and one with every field keeps them all.
#[test]
fn wire() {
    let doc = document();
    let reencoders = reencoders();
    let mut listing = String::new();
    for op in OPERATIONS.iter().filter(|op| op.method == "POST") {
        let schema = op.request_schema.expect("every submission has a request schema");
        let (_, reencode) = reencoders
            .iter()
            .find(|(name, _)| *name == schema)
            .unwrap_or_else(|| panic!("{schema} is not covered by this test; add it to reencoders![]"));
        let minimal = body(&doc, schema, false);
        assert_eq!(reencode(minimal.clone()).unwrap(), minimal, "{schema}: required-only body changed on the wire");
        assert!(Document::embedded().validate(schema, &minimal).is_empty(), "{schema}: required-only sample is invalid");
        let full = body(&doc, schema, true);
        assert_eq!(reencode(full.clone()).unwrap(), full, "{schema}: full body changed on the wire");
        listing.push_str(&format!("{} {}\n  required: {}\n  all: {}\n", op.method, op.path, minimal, full));
    }
    insta::assert_snapshot!("wire", listing);
}

#[test]
fn a_builder_with_only_the_prompt_sends_only_the_prompt() {
    let request: types::Gen2ProRequest = types::Gen2ProRequest::builder().prompt("a cat").try_into().unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), json!({"prompt": "a cat"}));
    let request: types::GenPro11UltraRequest = types::GenPro11UltraRequest::builder().try_into().unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), json!({}));
}
