//! Walks the reference's tables: every path, field and bound the contract
//! states is in `openapi.json`, as the contract states it (or as corrected
//! in docs/spec-corrections.md).

use serde_json::Value;

fn doc() -> Value {
    serde_json::from_str(genapi::validate::EMBEDDED_DOCUMENT).unwrap()
}

fn schema_of<'a>(doc: &'a Value, path: &str) -> &'a Value {
    let op = &doc["paths"][path]["post"];
    let name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{path} has no request schema"));
    &doc["components"]["schemas"][name.rsplit('/').next().unwrap()]
}

/// The field's schema with a nullable `allOf` reference folded in.
fn field<'a>(doc: &'a Value, path: &str, name: &str) -> &'a Value {
    let property = &schema_of(doc, path)["properties"][name];
    assert!(!property.is_null(), "{path}: field {name} missing");
    property
}

fn required(doc: &Value, path: &str) -> Vec<String> {
    schema_of(doc, path)["required"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn assert_range(doc: &Value, path: &str, name: &str, min: f64, max: Option<f64>) {
    let f = field(doc, path, name);
    assert_eq!(f["minimum"].as_f64(), Some(min), "{path} {name} minimum");
    assert_eq!(f["maximum"].as_f64(), max, "{path} {name} maximum");
}

fn assert_default(doc: &Value, path: &str, name: &str, expected: Value) {
    let f = field(doc, path, name);
    assert!(f.get("default").is_none(), "{path} {name}: defaults go in x-default");
    assert_eq!(f["x-default"], expected, "{path} {name} default");
}

fn assert_images(doc: &Value, path: &str, count: usize, kind: &str) {
    for i in 1..=count {
        let name = if i == 1 {
            "input_image".to_string()
        } else {
            format!("input_image_{i}")
        };
        assert_eq!(field(doc, path, &name)["x-image"], kind, "{path} {name}");
    }
    let beyond = format!("input_image_{}", count + 1);
    assert!(
        schema_of(doc, path)["properties"][&beyond].is_null(),
        "{path} lists {beyond}"
    );
}

fn assert_webhook_and_format(doc: &Value, path: &str, format_default: &str) {
    let url = &doc["components"]["schemas"]["WebhookUrl"];
    assert_eq!(
        field(doc, path, "webhook_url")["allOf"][0]["$ref"],
        "#/components/schemas/WebhookUrl",
        "{path}"
    );
    assert_eq!(
        (url["minLength"].as_u64(), url["maxLength"].as_u64()),
        (Some(1), Some(2083))
    );
    assert!(!field(doc, path, "webhook_secret").is_null());
    assert_default(doc, path, "output_format", Value::from(format_default));
}

const GEN2: [(&str, usize); 6] = [
    ("/v1/gen-2-pro", 8),
    ("/v1/gen-2-pro-preview", 8),
    ("/v1/gen-2-flex", 8),
    ("/v1/gen-2-klein-9b", 4),
    ("/v1/gen-2-klein-9b-preview", 4),
    ("/v1/gen-2-klein-4b", 4),
];

#[test]
fn every_contract_path_is_an_operation_with_id_tag_and_description() {
    let doc = doc();
    for (method, path) in xtask::check::CONTRACT_PATHS {
        let op = &doc["paths"][path][method];
        for key in ["operationId", "description"] {
            assert!(op[key].as_str().is_some_and(|s| !s.is_empty()), "{path}: {key}");
        }
        let tag = op["tags"][0].as_str().unwrap_or("");
        assert!(
            ["generation", "editing", "tools", "finetuned", "video", "results"].contains(&tag),
            "{path}: tag {tag}"
        );
    }
    assert_eq!(doc["paths"].as_object().unwrap().len(), 27);
    assert_eq!(doc["info"]["version"], "0.0.1");
    assert_eq!(doc["components"]["securitySchemes"]["APIKeyHeader"]["name"], "x-key");
}

#[test]
fn gen_2_family_bounds() {
    let doc = doc();
    for (path, images) in GEN2 {
        assert_eq!(required(&doc, path), ["prompt"], "{path}");
        assert_images(&doc, path, images, "base64-or-url");
        assert_range(&doc, path, "safety_tolerance", 0.0, Some(5.0));
        assert_default(&doc, path, "safety_tolerance", 2.into());
        for side in ["width", "height"] {
            assert_range(&doc, path, side, 64.0, None);
            assert_default(&doc, path, side, 0.into());
            assert_eq!(field(&doc, path, side)["x-zero-means-auto"], true);
        }
        assert_webhook_and_format(&doc, path, "jpeg");
        assert!(field(&doc, path, "seed")["nullable"].as_bool().unwrap());
    }
    assert_default(&doc, "/v1/gen-2-pro", "disable_pup", false.into());
    assert!(schema_of(&doc, "/v1/gen-2-pro-preview")["properties"]["disable_pup"].is_null());
    assert_range(&doc, "/v1/gen-2-flex", "guidance", 1.5, Some(10.0));
    assert_default(&doc, "/v1/gen-2-flex", "guidance", 5.into());
    assert_range(&doc, "/v1/gen-2-flex", "steps", 1.0, Some(50.0));
    assert_default(&doc, "/v1/gen-2-flex", "steps", 50.into());
    assert_default(&doc, "/v1/gen-2-flex", "prompt_upsampling", true.into());
    assert!(!field(&doc, "/v1/gen-2-flex", "input_image_blob_path").is_null());
    assert_eq!(
        doc["components"]["schemas"]["OutputFormat"]["enum"],
        serde_json::json!(["jpeg", "png", "webp"])
    );
}

#[test]
fn kontext_bounds() {
    let doc = doc();
    let path = "/v1/gen-kontext-pro";
    assert_eq!(required(&doc, path), ["prompt"]);
    assert_images(&doc, path, 4, "base64-or-url");
    assert_range(&doc, path, "safety_tolerance", 0.0, Some(6.0));
    assert_eq!(
        field(&doc, path, "aspect_ratio")["x-aspect-ratio-range"],
        serde_json::json!(["9:21", "21:9"])
    );
    assert_default(&doc, path, "prompt_upsampling", false.into());
    assert_webhook_and_format(&doc, path, "png");
}

#[test]
fn dev_and_pro_1_1_bounds() {
    let doc = doc();
    for path in ["/v1/gen-dev", "/v1/gen-pro-1.1"] {
        assert!(required(&doc, path).is_empty(), "{path}");
        for side in ["width", "height"] {
            assert_range(&doc, path, side, 256.0, Some(1440.0));
            assert_eq!(field(&doc, path, side)["multipleOf"], 32, "{path} {side}");
        }
        assert_range(&doc, path, "safety_tolerance", 0.0, Some(6.0));
        assert_eq!(field(&doc, path, "image_prompt")["x-image"], "base64");
        assert_webhook_and_format(&doc, path, "jpeg");
    }
    assert_range(&doc, "/v1/gen-dev", "steps", 1.0, Some(50.0));
    assert_range(&doc, "/v1/gen-dev", "guidance", 1.5, Some(5.0));
    assert!(schema_of(&doc, "/v1/gen-pro-1.1")["properties"]["steps"].is_null());
}

#[test]
fn ultra_and_deprecated_finetuned_bounds() {
    let doc = doc();
    let ultra = "/v1/gen-pro-1.1-ultra";
    assert!(required(&doc, ultra).is_empty());
    assert_default(&doc, ultra, "aspect_ratio", "16:9".into());
    assert_default(&doc, ultra, "raw", false.into());
    assert_range(&doc, ultra, "image_prompt_strength", 0.0, Some(1.0));
    assert_default(&doc, ultra, "image_prompt_strength", 0.1.into());
    assert_range(&doc, ultra, "safety_tolerance", 0.0, Some(6.0));
    let tuned = "/v1/gen-pro-1.1-ultra-finetuned";
    assert!(schema_of(&doc, tuned)["properties"]["raw"].is_null());
    assert_eq!(required(&doc, tuned), ["finetune_id"]);
    assert_range(&doc, tuned, "finetune_strength", 0.0, Some(2.0));
    assert_default(&doc, tuned, "finetune_strength", 1.2.into());
    let fill_tuned = "/v1/gen-pro-1.0-fill-finetuned";
    assert_eq!(required(&doc, fill_tuned), ["image", "finetune_id"]);
    assert_default(&doc, fill_tuned, "finetune_strength", 1.1.into());
    for path in [tuned, fill_tuned] {
        let op = &doc["paths"][path]["post"];
        assert_eq!(op["deprecated"], true, "{path}");
        assert_eq!(op["servers"][0]["url"], "{regional_base_url}", "{path}");
        assert!(op["description"].as_str().unwrap().contains("Deprecated"), "{path}");
    }
}

#[test]
fn fill_and_expand_bounds() {
    let doc = doc();
    for path in ["/v1/gen-pro-1.0-fill", "/v1/gen-pro-1.0-expand"] {
        assert_eq!(required(&doc, path), ["image"], "{path}");
        assert_range(&doc, path, "steps", 15.0, Some(50.0));
        assert_default(&doc, path, "steps", 50.into());
        assert_range(&doc, path, "guidance", 1.5, Some(100.0));
        assert_default(&doc, path, "guidance", 60.into());
        assert_range(&doc, path, "safety_tolerance", 0.0, Some(6.0));
        assert_default(&doc, path, "prompt", "".into());
    }
    assert_eq!(
        schema_of(&doc, "/v1/gen-pro-1.0-fill")["x-same-dimensions"],
        serde_json::json!(["image", "mask"])
    );
    for side in ["top", "bottom", "left", "right"] {
        assert_range(&doc, "/v1/gen-pro-1.0-expand", side, 0.0, Some(2048.0));
        assert_default(&doc, "/v1/gen-pro-1.0-expand", side, 0.into());
    }
}

#[test]
fn tool_bounds() {
    let doc = doc();
    let deblur = "/v1/gen-tools/deblur-v1";
    assert_eq!(required(&doc, deblur), ["image"]);
    assert_eq!(field(&doc, deblur, "image")["x-max-megapixels"], 4);
    assert_eq!(field(&doc, deblur, "image")["x-image"], "base64-or-url");
    assert_range(&doc, deblur, "safety_tolerance", 0.0, Some(5.0));
    assert_webhook_and_format(&doc, deblur, "png");
    let erase = "/v1/gen-tools/erase-v1";
    assert_eq!(required(&doc, erase), ["image", "mask"]);
    assert_range(&doc, erase, "dilate_pixels", 0.0, Some(25.0));
    assert_default(&doc, erase, "dilate_pixels", 10.into());
    for vto in ["/v1/gen-tools/vto-v1", "/v1/gen-tools/vto-v2"] {
        assert_eq!(required(&doc, vto), ["prompt", "person", "garment"], "{vto}");
        assert_range(&doc, vto, "safety_tolerance", 0.0, Some(5.0));
    }
    let out = "/v1/gen-tools/outpainting-v1";
    assert_eq!(required(&doc, out), ["input_image", "width", "height"]);
    assert_eq!(schema_of(&doc, out)["additionalProperties"], false);
    assert_eq!(field(&doc, out, "mode")["enum"], serde_json::json!(["fast", "high"]));
    assert_default(&doc, out, "mode", "high".into());
    assert_eq!(schema_of(&doc, out)["x-max-pixels"]["max"], 4 * 1024 * 1024);
    assert!(schema_of(&doc, out)["properties"]["webhook_url"].is_null());
}

#[test]
fn video_and_managed_lora_bounds() {
    let doc = doc();
    let video = "/v1/gen-3-video";
    assert_eq!(required(&doc, video), ["mode"]);
    assert_eq!(
        field(&doc, video, "mode")["enum"],
        serde_json::json!(["t2v", "i2v", "v2v", "draft_enhance"])
    );
    assert_eq!(
        (
            field(&doc, video, "keyframes")["minItems"].as_u64(),
            field(&doc, video, "keyframes")["maxItems"].as_u64()
        ),
        (Some(1), Some(10))
    );
    assert_eq!(field(&doc, video, "duration")["anyOf"][1]["minimum"], 5);
    assert_eq!(field(&doc, video, "duration")["anyOf"][1]["maximum"], 20);
    assert_range(&doc, video, "batch", 1.0, Some(4.0));
    assert!(schema_of(&doc, video)["properties"]["seed"].is_null());
    for base in ["4b", "9b", "9b-kv", "9b-kv-bf16", "base-4b", "base-9b"] {
        let path = format!("/v1/gen-2-klein-{base}-finetuned");
        assert_eq!(required(&doc, &path), ["prompt", "finetune_id"], "{path}");
        assert_images(&doc, &path, 4, "base64-or-url");
        assert_range(&doc, &path, "finetune_strength", 0.0, Some(2.0));
        assert_eq!(doc["paths"][&path]["post"]["tags"][0], "finetuned");
    }
    // The generated newtype enforces the document's pattern.
    let accepts = |id: &str| genapi::api::types::FinetuneId::try_from(id).is_ok();
    assert!(accepts("my_lora-2") && accepts("org-1/my-lora") && !accepts("My Lora") && !accepts("a/b/c"));
}

#[test]
fn get_result_takes_the_id_and_answers_the_poll_result() {
    let doc = doc();
    let op = &doc["paths"]["/v1/get_result"]["get"];
    assert_eq!(op["parameters"][0]["name"], "id");
    assert_eq!(op["parameters"][0]["in"], "query");
    assert_eq!(op["parameters"][0]["required"], true);
    assert_eq!(op["security"][0]["APIKeyHeader"], serde_json::json!([]));
    let poll = &doc["components"]["schemas"]["PollResult"];
    for name in ["id", "status", "result", "progress", "details", "preview", "cost"] {
        assert!(!poll["properties"][name].is_null(), "PollResult.{name}");
    }
    assert_eq!(
        doc["components"]["schemas"]["SubmissionResponse"]["anyOf"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
