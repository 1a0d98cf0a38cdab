//! Invalid requests are caught before sending, in the service's 422 shape;
//! the mock applies the same rules from the same document, read on its own.

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
    let error = Document::parse(&doc.to_string()).unwrap_err().to_string();
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

/// Bodies that break one rule each of `schema_name`: a wrong type, each
/// bound just passed, a value outside an enum, a string too long or of the
/// wrong pattern, an image that is not one or is too large, a missing
/// required field, an unknown field.
fn rule_breakers(doc: &Value, schema_name: &str) -> Vec<Value> {
    let schema = &doc["components"]["schemas"][schema_name];
    let valid = common::body(doc, schema_name, false);
    let mut bodies = vec![valid.clone(), common::body(doc, schema_name, true)];
    let with = |name: &str, value: Value| {
        let mut body = valid.clone();
        body[name] = value;
        body
    };
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let property = match property["allOf"].get(0) {
            Some(first) => first,
            None => property,
        };
        let property = genapi_document::resolve(doc, property).unwrap();
        let property = property["anyOf"]
            .get(0)
            .map_or(property, |first| genapi_document::resolve(doc, first).unwrap());
        match property["type"].as_str() {
            Some("string") => {
                bodies.push(with(name, json!(12345)));
                bodies.push(with(name, json!("not-one-of-the-values !")));
                if let Some(max) = property["maxLength"].as_u64() {
                    bodies.push(with(name, json!("a".repeat(max as usize + 1))));
                }
                if property.get("x-image").is_some() {
                    bodies.push(with(name, json!("data:image/png;base64,AAAA")));
                    bodies.push(with(name, json!(b64(b"plain text, not an image"))));
                    bodies.push(with(name, json!(b64(&png_header(5000, 5000)))));
                    // Headers the two readings could read apart: a GIF of
                    // no known version, a PNG whose first chunk is not IHDR.
                    bodies.push(with(name, json!(b64(b"GIF80a\x00\x01\x00\x01\x00\x00\x00"))));
                    let mut no_ihdr = png_header(32, 32);
                    no_ihdr[12..16].copy_from_slice(b"IDAT");
                    bodies.push(with(name, json!(b64(&no_ihdr))));
                    bodies.push(with(name, json!("https://example.com/a.png")));
                }
            }
            Some("integer" | "number") => {
                bodies.push(with(name, json!("seven")));
                bodies.push(with(name, json!(1.5)));
                if let Some(min) = property["minimum"].as_f64() {
                    bodies.push(with(name, json!(min - 1.0)));
                }
                if let Some(max) = property["maximum"].as_f64() {
                    bodies.push(with(name, json!(max + 1.0)));
                }
                if let Some(step) = property["multipleOf"].as_f64() {
                    bodies.push(with(
                        name,
                        json!(property["minimum"].as_f64().unwrap_or(0.0) + step + 1.0),
                    ));
                }
            }
            Some("boolean") => bodies.push(with(name, json!("yes"))),
            Some("array") => {
                bodies.push(with(name, json!("one")));
                bodies.push(with(name, json!([])));
                bodies.push(with(name, json!((0..12).map(|_| PNG_1X1).collect::<Vec<_>>())));
            }
            _ => {}
        }
    }
    for required in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let mut body = valid.clone();
        body.as_object_mut().unwrap().remove(required);
        bodies.push(body);
    }
    bodies.push(with("an_unknown_field", json!(1)));
    bodies.push(with("input_image_9", json!(PNG_1X1)));
    bodies
}

/// The client checks requests with its own reading of the document and the
/// mock with another, written apart so that a misread rule cannot hide in
/// both: over every operation and a body breaking each rule, they agree on
/// what is refused and why (place, kind and message).
#[tokio::test]
async fn the_client_and_the_mock_refuse_the_same_bodies_for_the_same_reasons() {
    let mock = MockService::start_with(
        MockConfig::default().max_active_tasks(100_000),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let http = common::http();
    let doc = common::document();
    let origins: Vec<String> = std::iter::once(mock.base_url().to_string())
        .chain(mock.trusted_origins())
        .collect();
    let (mut refused, mut accepted) = (0, 0);
    for operation in Document::embedded().catalog().operations() {
        let (Some(schema), "POST") = (operation.request_schema.as_deref(), operation.method.as_str()) else {
            continue;
        };
        for body in rule_breakers(&doc, schema) {
            let local: std::collections::BTreeSet<(String, String, String)> =
                errors(schema, body.clone()).into_iter().collect();
            let mut answer = None;
            for origin in &origins {
                let response = http
                    .post(format!("{origin}{}", operation.path))
                    .header("x-key", mock.key())
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                if response.status() != 404 {
                    answer = Some((response.status().as_u16(), response.json::<Value>().await.unwrap()));
                    break;
                }
            }
            let (status, answer) = answer.unwrap_or_else(|| panic!("no host of the mock serves {}", operation.path));
            if local.is_empty() {
                // One rule is the service's and not the document's: an
                // expansion whose output passes 4 MP is refused by the mock
                // alone, and the client reads that 422 like any other.
                let beyond_the_document = answer.to_string().contains("the expanded image");
                assert!(
                    status == 200 || (status == 422 && beyond_the_document),
                    "{} {body}: the client lets it through, the mock answered {status} {answer}",
                    operation.path
                );
                accepted += 1;
                continue;
            }
            assert_eq!(
                status, 422,
                "{} {body}: the client refuses it ({local:?}), the mock answered {status}",
                operation.path
            );
            let remote: std::collections::BTreeSet<(String, String, String)> = answer["detail"]
                .as_array()
                .unwrap()
                .iter()
                .map(|problem| {
                    let loc: Vec<String> = problem["loc"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|part| part.as_str().map_or_else(|| part.to_string(), str::to_string))
                        .collect();
                    let text = |key: &str| problem[key].as_str().unwrap().to_string();
                    (loc.join("."), text("type"), text("msg"))
                })
                .collect();
            assert_eq!(local, remote, "{} {body}", operation.path);
            refused += 1;
        }
    }
    eprintln!("compared {refused} refused and {accepted} accepted bodies");
    assert!(
        refused > 300 && accepted > 40,
        "{refused} refused and {accepted} accepted bodies compared"
    );
}

#[test]
fn a_request_type_check_takes_any_name_of_a_submission_and_names_what_is_not_one() {
    let body = json!({"prompt": "a red fox"});
    for name in ["gen_2_pro", "gen-2-pro", "/v1/gen-2-pro"] {
        assert!(genapi::check_request_type(name, body.clone()).is_ok(), "{name}");
    }
    let not_a_submission = genapi::check_request_type("get_result", body.clone()).unwrap_err();
    assert!(
        matches!(&not_a_submission, genapi::Error::InvalidArgument { argument: "operation", problem }
            if problem.contains("not a submission")),
        "{not_a_submission}"
    );
    let typo = genapi::check_request_type("gen_2_prp", body).unwrap_err();
    assert!(typo.to_string().contains("did you mean"), "{typo}");
    assert_eq!(typo.class(), genapi::FailureClass::Validation);
}
