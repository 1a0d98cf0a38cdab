//! Invalid requests are caught before sending, in the service's 422 shape;
//! the mock applies the same rules from the same document.

use genapi::api::types;
use genapi::validate::Document;
use genapi::{Checked, Error};
use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::{b64, png_header, PNG_1X1};

fn errors(schema: &str, body: Value) -> Vec<(String, String, String)> {
    Document::embedded()
        .validate(schema, &body)
        .into_iter()
        .map(|e| (genapi_loc(&e.loc), e.type_, e.msg))
        .collect()
}

fn genapi_loc(loc: &[types::ValidationErrorLocItem]) -> String {
    loc.iter().map(ToString::to_string).collect::<Vec<_>>().join(".")
}

fn assert_error(schema: &str, body: Value, loc: &str, kind: &str) {
    let found = errors(schema, body);
    assert!(
        found.iter().any(|(l, k, _)| l == loc && k == kind),
        "expected {loc} {kind}, got {found:#?}"
    );
}

#[test]
fn ranges_multiples_and_the_zero_size_rule() {
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "safety_tolerance": 6}),
        "body.safety_tolerance",
        "less_than_equal",
    );
    assert_error(
        "GenKontextProRequest",
        json!({"prompt": "x", "safety_tolerance": 7}),
        "body.safety_tolerance",
        "less_than_equal",
    );
    assert!(errors("GenKontextProRequest", json!({"prompt": "x", "safety_tolerance": 6})).is_empty());
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "width": 32}),
        "body.width",
        "greater_than_equal",
    );
    assert!(
        errors("Gen2ProRequest", json!({"prompt": "x", "width": 0, "height": 64})).is_empty(),
        "0 lets the model choose"
    );
    assert_error("GenDevRequest", json!({"width": 1000}), "body.width", "multiple_of");
    assert_error("GenDevRequest", json!({"width": 1472}), "body.width", "less_than_equal");
    assert_error(
        "GenDevRequest",
        json!({"guidance": 5.5}),
        "body.guidance",
        "less_than_equal",
    );
    assert_error(
        "Gen2FlexRequest",
        json!({"prompt": "x", "steps": 0}),
        "body.steps",
        "greater_than_equal",
    );
    assert_error(
        "GenPro1p0FillRequest",
        json!({"image": PNG_1X1, "steps": 14}),
        "body.steps",
        "greater_than_equal",
    );
    assert_error(
        "GenPro1p1UltraRequest",
        json!({"image_prompt_strength": 1.5}),
        "body.image_prompt_strength",
        "less_than_equal",
    );
    assert_error(
        "GenPro1p0ExpandRequest",
        json!({"image": PNG_1X1, "top": 2049}),
        "body.top",
        "less_than_equal",
    );
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "width": 4096, "height": 4096}),
        "body",
        "value_error",
    );
}

#[test]
fn required_fields_types_enums_lengths_and_all_errors_at_once() {
    let found = errors(
        "Gen2ProRequest",
        json!({"seed": "one", "output_format": "gif", "webhook_url": "x".repeat(2084)}),
    );
    let kinds: Vec<(&str, &str)> = found.iter().map(|(l, k, _)| (l.as_str(), k.as_str())).collect();
    assert!(kinds.contains(&("body.prompt", "missing")), "{found:#?}");
    assert!(kinds.contains(&("body.seed", "int_type")), "{found:#?}");
    assert!(kinds.contains(&("body.output_format", "enum")), "{found:#?}");
    assert!(kinds.contains(&("body.webhook_url", "string_too_long")), "{found:#?}");
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "webhook_url": "not a url"}),
        "body.webhook_url",
        "url_parsing",
    );
    assert_error(
        "OutpaintingV1Request",
        json!({"input_image": PNG_1X1, "width": 64, "height": 64, "extra": 1}),
        "body.extra",
        "extra_forbidden",
    );
}

#[test]
fn reference_image_counts_and_image_encodings() {
    assert_error(
        "Gen2Klein9bRequest",
        json!({"prompt": "x", "input_image_5": PNG_1X1}),
        "body.input_image_5",
        "extra_forbidden",
    );
    assert!(errors("Gen2ProRequest", json!({"prompt": "x", "input_image_8": PNG_1X1})).is_empty());
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "input_image_9": PNG_1X1}),
        "body.input_image_9",
        "extra_forbidden",
    );
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "input_image": format!("data:image/png;base64,{PNG_1X1}")}),
        "body.input_image",
        "value_error",
    );
    assert_error(
        "Gen2ProRequest",
        json!({"prompt": "x", "input_image": "%%%"}),
        "body.input_image",
        "value_error",
    );
    assert!(errors(
        "Gen2ProRequest",
        json!({"prompt": "x", "input_image": "https://example.com/cat.png"})
    )
    .is_empty());
    assert_error(
        "GenDevRequest",
        json!({"image_prompt": "https://example.com/cat.png"}),
        "body.image_prompt",
        "value_error",
    );
    assert_error(
        "GenDevRequest",
        json!({"image_prompt": b64(b"plain text, not an image")}),
        "body.image_prompt",
        "value_error",
    );
}

#[test]
fn megapixel_limits_mask_sizes_aspect_ratios_finetune_ids_and_video_modes() {
    let big = b64(&png_header(3000, 3000));
    assert_error("DeblurV1Request", json!({"image": big}), "body.image", "value_error");
    assert!(errors("DeblurV1Request", json!({"image": b64(&png_header(2048, 2048))})).is_empty());
    let (image, mask) = (b64(&png_header(100, 80)), b64(&png_header(100, 81)));
    assert_error(
        "GenPro1p0FillRequest",
        json!({"image": image, "mask": mask}),
        "body.mask",
        "value_error",
    );
    assert_error(
        "GenKontextProRequest",
        json!({"prompt": "x", "aspect_ratio": "4:1"}),
        "body.aspect_ratio",
        "value_error",
    );
    assert!(errors("GenKontextProRequest", json!({"prompt": "x", "aspect_ratio": "21:9"})).is_empty());
    assert_error(
        "Gen2Klein9bFinetunedRequest",
        json!({"prompt": "x", "finetune_id": "My LoRA"}),
        "body.finetune_id",
        "string_pattern_mismatch",
    );
    assert!(errors(
        "Gen2Klein9bFinetunedRequest",
        json!({"prompt": "x", "finetune_id": "org_1/my-lora"})
    )
    .is_empty());
    assert_error("Gen3VideoRequest", json!({"mode": "i2v"}), "body.keyframes", "missing");
    assert_error(
        "Gen3VideoRequest",
        json!({"mode": "t2v", "start_video": "v"}),
        "body.start_video",
        "extra_forbidden",
    );
    assert_error(
        "Gen3VideoRequest",
        json!({"mode": "t2v", "duration": 25}),
        "body.duration",
        "union_tag_invalid",
    );
    assert!(errors(
        "Gen3VideoRequest",
        json!({"mode": "t2v", "duration": "auto", "prompt": "waves"})
    )
    .is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_client_refuses_an_invalid_request_without_sending_it() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("x").safety_tolerance(9u8))
        .await
        .unwrap_err();
    let Error::Validation { errors, checked } = &error else {
        panic!("{error}")
    };
    assert_eq!(*checked, Checked::Locally);
    assert_eq!(errors[0].type_, "less_than_equal");
    assert!(error.to_string().contains("body.safety_tolerance"), "{error}");
    // A builder missing its required field is refused the same way.
    let error = client.submit(types::Gen2ProRequest::builder()).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Validation {
                checked: Checked::Locally,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn the_mock_validates_from_its_document_and_the_client_reads_its_422() {
    // A fixture document with a stricter bound: the mock now refuses what the
    // client's own (embedded) document allows, and the error comes back typed.
    let mut doc: Value = common::document();
    doc["components"]["schemas"]["Gen2ProRequest"]["properties"]["safety_tolerance"]["maximum"] = json!(1);
    let config = MockConfig::default().document(Some(doc.to_string()));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let error = mock
        .client()
        .unwrap()
        .submit(types::Gen2ProRequest::builder().prompt("x").safety_tolerance(3u8))
        .await
        .unwrap_err();
    let Error::Validation { errors, checked } = &error else {
        panic!("{error}")
    };
    assert_eq!(*checked, Checked::ByService);
    assert_eq!(errors[0].msg, "Input should be less than or equal to 1");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);

    // The default document accepts the same request.
    let plain = MockService::start().await.unwrap();
    plain
        .client()
        .unwrap()
        .submit(types::Gen2ProRequest::builder().prompt("x").safety_tolerance(3u8))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_mock_reports_every_problem_in_fastapi_shape() {
    let mock = MockService::start().await.unwrap();
    let response = common::http()
        .post(format!("{}/v1/gen-dev", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"width": 1000, "steps": 99}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    let detail = body["detail"].as_array().unwrap();
    assert_eq!(detail.len(), 2, "{body}");
    let width = detail
        .iter()
        .find(|d| d["loc"] == json!(["body", "width"]))
        .expect("width reported");
    assert_eq!(width["type"], "multiple_of");
    assert_eq!(width["input"], 1000);
    assert!(width["msg"].as_str().unwrap().contains("multiple of 32"));
    assert!(detail
        .iter()
        .any(|d| d["loc"] == json!(["body", "steps"]) && d["type"] == "less_than_equal"));
    let bad_json = common::http()
        .post(format!("{}/v1/gen-dev", mock.base_url()))
        .header("x-key", mock.key())
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 422);
}

#[tokio::test(start_paused = true)]
async fn a_document_with_a_pattern_that_does_not_compile_is_refused_up_front() {
    let mut doc: Value = common::document();
    doc["components"]["schemas"]["FinetuneId"]["pattern"] = json!("([unclosed");
    let error = Document::parse(&doc.to_string()).unwrap_err();
    assert!(error.contains("([unclosed"), "{error}");
    let config = MockConfig::default().document(Some(doc.to_string()));
    let error = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("does not compile"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn an_unfinished_builder_is_reported_in_the_services_shape() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let error = client.submit(types::Gen2ProRequest::builder()).await.unwrap_err();
    let errors = error.validation_errors().unwrap();
    assert_eq!(genapi_loc(&errors[0].loc), "body.prompt");
    assert_eq!(
        (errors[0].type_.as_str(), errors[0].msg.as_str()),
        ("missing", "Field required")
    );
    let error = client
        .submit(types::GenDevRequest::builder().prompt("x").output_format("gif"))
        .await
        .unwrap_err();
    let errors = error.validation_errors().unwrap();
    assert_eq!(genapi_loc(&errors[0].loc), "body.output_format");
    assert_eq!(errors[0].type_, "value_error");
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro") + mock.count("POST", "/v1/gen-dev"),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn every_unfinished_field_of_a_builder_is_named_at_once() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().output_format("gif").width(1024))
        .await
        .unwrap_err();
    let errors = error.validation_errors().unwrap();
    let found: Vec<(String, &str)> = errors.iter().map(|e| (genapi_loc(&e.loc), e.type_.as_str())).collect();
    assert_eq!(
        found,
        [
            ("body.output_format".to_string(), "value_error"),
            ("body.prompt".to_string(), "missing")
        ]
    );
    let said = &errors[0].msg;
    assert!(said.contains("\"gif\"") && said.contains("\"png\""), "{said}");
    assert_eq!(error.class(), genapi::FailureClass::Validation);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
}
