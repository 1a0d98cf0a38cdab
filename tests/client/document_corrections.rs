//! The corrections of docs/spec-corrections.md, as a caller sees them: the
//! seed range, the finetune_id pattern, gen-2 size multiples, the `user`
//! field, and the request types' renamed names.

use genapi::api::types;
use genapi::validate::Document;
use serde_json::{json, Value};

fn kinds(schema: &str, body: Value) -> Vec<String> {
    Document::embedded()
        .validate(schema, &body)
        .into_iter()
        .map(|e| e.type_)
        .collect()
}

#[test]
fn seed_holds_every_integer_up_to_2_pow_64_minus_1_in_requests_and_results() {
    // `.seed(42)` stays a plain integer on builders.
    let request: types::GenDevRequest = types::GenDevRequest::builder().seed(42).try_into().unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), json!({"seed": 42}));
    let top: types::Gen2ProRequest = types::Gen2ProRequest::builder()
        .prompt("x")
        .seed(i128::from(u64::MAX))
        .try_into()
        .unwrap();
    assert_eq!(
        serde_json::to_string(&top).unwrap(),
        r#"{"prompt":"x","seed":18446744073709551615}"#
    );
    let poll: types::PollResult = serde_json::from_str(
        r#"{"id":"t","status":"Ready","result":{"sample":"https://d.example/x","seed":18446744073709551615}}"#,
    )
    .unwrap();
    assert_eq!(poll.result.and_then(|r| r.seed), Some(i128::from(u64::MAX)));

    assert!(kinds("Gen2ProRequest", json!({"prompt": "x", "seed": u64::MAX})).is_empty());
    assert!(kinds("Gen2ProRequest", json!({"prompt": "x", "seed": i64::MIN})).is_empty());
    let too_big: Value = serde_json::from_str(r#"{"prompt":"x","seed":18446744073709551616}"#).unwrap();
    assert_eq!(kinds("Gen2ProRequest", too_big), ["less_than_equal"]);
    assert_eq!(
        kinds("Gen2ProRequest", json!({"prompt": "x", "seed": 1.5})),
        ["int_from_float"]
    );
}

#[test]
fn finetune_id_pattern_applies_to_managed_lora_endpoints_only() {
    let image = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    // Deprecated finetuning API: the reference states no pattern.
    assert!(kinds("GenPro1p1UltraFinetunedRequest", json!({"finetune_id": "MyLoRA"})).is_empty());
    assert!(kinds(
        "GenPro1p0FillFinetunedRequest",
        json!({"image": image, "finetune_id": "MyLoRA"})
    )
    .is_empty());
    assert_eq!(
        kinds("GenPro1p1UltraFinetunedRequest", json!({"finetune_id": ""})),
        ["string_too_short"]
    );
    // Managed LoRA: lowercase, digits, `-`, `_`, optional `<org_id>/`.
    let klein = |id: &str| kinds("Gen2Klein9bFinetunedRequest", json!({"prompt": "x", "finetune_id": id}));
    assert!(klein("my-lora_2").is_empty());
    assert!(klein("org_1/my-lora").is_empty());
    assert_eq!(klein("MyLoRA"), ["string_pattern_mismatch"]);
    assert_eq!(klein("a/b/c"), ["string_pattern_mismatch"]);
    // The generated types agree: the legacy id takes any case.
    let legacy: Result<types::LegacyFinetuneId, _> = "MyLoRA".parse();
    assert!(legacy.is_ok());
    assert!("MyLoRA".parse::<types::FinetuneId>().is_err());
}

#[test]
fn gen_2_sizes_are_multiples_of_16_and_zero_lets_the_model_choose() {
    for schema in [
        "Gen2ProRequest",
        "Gen2Klein4bRequest",
        "Gen2KleinBase9bFinetunedRequest",
    ] {
        let mut body = json!({"prompt": "x", "width": 1000, "height": 0});
        if schema.contains("Finetuned") {
            body["finetune_id"] = json!("my-lora");
        }
        assert_eq!(kinds(schema, body.clone()), ["multiple_of"], "{schema}");
        body["width"] = json!(1024);
        assert!(kinds(schema, body).is_empty(), "{schema}");
    }
    // The Rust type stays unsigned.
    let request: types::Gen2ProRequest = types::Gen2ProRequest::builder()
        .prompt("x")
        .width(1024u32)
        .try_into()
        .unwrap();
    assert_eq!(request.width, Some(1024u32));
}

#[test]
fn newer_request_schemas_take_an_optional_user() {
    let request: types::Gen2FlexRequest = types::Gen2FlexRequest::builder()
        .prompt("x")
        .user(Some("end-user-7".to_string()))
        .try_into()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({"prompt": "x", "user": "end-user-7"})
    );
    assert!(Document::embedded().schema("Gen2FlexRequest").unwrap()["properties"]["user"].is_object());
    assert!(Document::embedded().schema("GenDevRequest").unwrap()["properties"]["user"].is_null());
}

#[test]
#[allow(deprecated)]
fn old_request_type_names_are_deprecated_aliases_of_the_new_ones() {
    use std::any::TypeId;
    let pairs = [
        (
            TypeId::of::<types::GenPro11Request>(),
            TypeId::of::<types::GenPro1p1Request>(),
        ),
        (
            TypeId::of::<types::GenPro11UltraRequest>(),
            TypeId::of::<types::GenPro1p1UltraRequest>(),
        ),
        (
            TypeId::of::<types::GenPro11UltraFinetunedRequest>(),
            TypeId::of::<types::GenPro1p1UltraFinetunedRequest>(),
        ),
        (
            TypeId::of::<types::GenPro10FillRequest>(),
            TypeId::of::<types::GenPro1p0FillRequest>(),
        ),
        (
            TypeId::of::<types::GenPro10FillFinetunedRequest>(),
            TypeId::of::<types::GenPro1p0FillFinetunedRequest>(),
        ),
        (
            TypeId::of::<types::GenPro10ExpandRequest>(),
            TypeId::of::<types::GenPro1p0ExpandRequest>(),
        ),
        (
            TypeId::of::<types::builder::GenPro11Request>(),
            TypeId::of::<types::builder::GenPro1p1Request>(),
        ),
    ];
    for (old, new) in pairs {
        assert_eq!(old, new);
    }
    // The old name still builds and submits to the same operation.
    let request: types::GenPro11Request = types::GenPro11Request::builder().prompt("x").try_into().unwrap();
    assert_eq!(
        <types::GenPro11Request as genapi::Submit>::OPERATION.path,
        "/v1/gen-pro-1.1"
    );
    assert_eq!(serde_json::to_value(request).unwrap(), json!({"prompt": "x"}));
}

#[test]
fn a_document_with_a_ref_cycle_is_refused_with_the_cycle_named() {
    let mut doc: Value = serde_json::from_str(genapi::validate::EMBEDDED_DOCUMENT).unwrap();
    doc["components"]["schemas"]["OutputFormat"] = json!({"$ref": "#/components/schemas/WebhookUrl"});
    doc["components"]["schemas"]["WebhookUrl"] = json!({"$ref": "#/components/schemas/OutputFormat"});
    let error = Document::parse(&doc.to_string()).unwrap_err().to_string();
    assert!(
        error.contains("$ref cycle: OutputFormat -> WebhookUrl -> OutputFormat"),
        "{error}"
    );
    // The embedded document passed the same checks at build time.
    assert!(Document::parse(genapi::validate::EMBEDDED_DOCUMENT).is_ok());
    assert!(!Document::embedded().catalog().operations().is_empty());
}
