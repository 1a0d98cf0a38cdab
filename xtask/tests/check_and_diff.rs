//! `cargo xtask check` and `diff-upstream` on the real document and on
//! documents broken on purpose.

use serde_json::{json, Value};

fn document() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json")).expect("openapi.json");
    serde_json::from_str(&text).expect("json")
}

fn problems(doc: &Value) -> Vec<String> {
    xtask::check(&doc.to_string())
}

fn assert_flags(doc: &Value, needle: &str) {
    let found = problems(doc);
    assert!(
        found.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {found:#?}"
    );
}

#[test]
fn the_document_passes() {
    assert_eq!(problems(&document()), Vec::<String>::new());
}

#[test]
fn a_missing_operation_id_fails() {
    let mut doc = document();
    doc["paths"]["/v1/gen-dev"]["post"]
        .as_object_mut()
        .unwrap()
        .remove("operationId");
    assert_flags(&doc, "POST /v1/gen-dev: no operationId");
}

#[test]
fn a_default_in_a_request_schema_fails() {
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["steps"]["default"] = json!(28);
    assert_flags(&doc, "GenDevRequest).steps: has a `default` keyword");
}

#[test]
fn an_inline_response_schema_fails() {
    let mut doc = document();
    doc["paths"]["/v1/gen-dev"]["post"]["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"type": "object"});
    assert_flags(&doc, "POST /v1/gen-dev: the 200 response schema must be a $ref");
}

#[test]
fn the_31_null_idiom_fails() {
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["seed"] =
        json!({"anyOf": [{"type": "integer"}, {"type": "null"}]});
    assert_flags(&doc, "`type: null` (3.1 null idiom)");
}

#[test]
fn a_31_version_a_wrong_info_version_and_a_missing_path_fail() {
    let mut doc = document();
    doc["openapi"] = json!("3.1.0");
    doc["info"]["version"] = json!("0.0.2");
    doc["paths"].as_object_mut().unwrap().remove("/v1/gen-tools/vto-v2");
    assert_flags(&doc, "openapi must be 3.0.x");
    assert_flags(&doc, "info.version must be \"0.0.1\"");
    assert_flags(&doc, "POST /v1/gen-tools/vto-v2: missing");
}

#[test]
fn a_changed_bound_changes_the_surface() {
    let before = xtask::surface(&document());
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["steps"]["maximum"] = json!(60);
    let after = xtask::surface(&doc);
    assert_ne!(before, after);
    assert!(
        after.contains("steps: integer(uint8); nullable; min 1; max 60"),
        "{after}"
    );
}

#[test]
fn the_document_agrees_with_itself() {
    assert!(xtask::diff(&document(), &document(), &[]).is_empty());
}

#[test]
fn diff_upstream_lists_operations_and_field_changes_of_a_31_document() {
    let upstream: Value = serde_json::from_str(include_str!("fixtures/upstream-3.1.json")).unwrap();
    let rename = [("/v1/flux-".to_string(), "/v1/gen-".to_string())];
    let lines = xtask::diff(&document(), &upstream, &rename);
    let has = |needle: &str| {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "missing {needle:?} in {lines:#?}"
        )
    };
    has("+ operation POST /v1/gen-2-max (not in openapi.json)");
    has("- operation POST /v1/gen-dev (not in the other document)");
    assert!(!lines.iter().any(|l| l.contains("gen-2-pro user")), "{lines:#?}");
    has("- field POST /v1/gen-2-pro disable_pup");
    has("~ field POST /v1/gen-2-pro safety_tolerance: bounds [min 0, max 5] -> [min 0, max 6]");
    has("~ field POST /v1/gen-2-pro output_format: enum [jpeg, png, webp] -> [jpeg, png]");
    // Corrected to the service's multiples of 16: no longer a difference.
    assert!(!lines.iter().any(|l| l.contains("gen-2-pro width")), "{lines:#?}");
    // The 3.1 null idiom reads as nullable, like ours: no change reported.
    assert!(!lines.iter().any(|l| l.contains("gen-2-pro seed")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("gen-2-pro height")), "{lines:#?}");
}

#[test]
fn a_ref_cycle_and_a_shared_request_schema_are_reported() {
    let mut doc = document();
    doc["components"]["schemas"]["Loop"] = json!({"$ref": "#/components/schemas/Loop"});
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["loop"] = json!({"$ref": "#/components/schemas/Loop"});
    doc["paths"]["/v1/gen-pro-1.1"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/GenDevRequest"});
    assert_flags(&doc, "$ref cycle: Loop -> Loop");
    assert_flags(
        &doc,
        "request schema GenDevRequest is shared by operations gen_dev, gen_pro_1_1",
    );
    // The surface and the diff still finish on such a document.
    assert!(xtask::surface(&doc).contains("loop: any"));
}
