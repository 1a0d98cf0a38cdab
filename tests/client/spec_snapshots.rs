//! Drift made visible: any change to `openapi.json` or to the generator shows
//! up here as a snapshot diff to review.

use genapi::api::types;
use genapi::api::OPERATIONS;
use genapi::validate::Document;
use serde_json::{json, Value};

use crate::common;
use common::{body, document};

#[test]
fn api_surface() {
    insta::assert_snapshot!("api_surface", xtask::surface(&document()));
}

#[test]
fn generated_code() {
    insta::assert_snapshot!("generated_code", include_str!(concat!(env!("OUT_DIR"), "/codegen.rs")));
    // The table of operations and the sealed `Submit` impls `build.rs` writes
    // beside the generator's output.
    insta::assert_snapshot!(
        "generated_operations",
        include_str!(concat!(env!("OUT_DIR"), "/operations.rs"))
    );
}

/// `OPERATIONS` (built by build.rs) keeps the order the document lists its
/// operations in, read here as the order of their operationIds in the
/// document's text; the catalog the validator reads at run time lists the
/// same operations in the same order (both come from the one catalog).
#[test]
fn operations_keep_the_documents_order_in_the_table_and_the_catalog() {
    let in_text: Vec<&str> = genapi::validate::EMBEDDED_DOCUMENT
        .split("\"operationId\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1))
        .collect();
    let table: Vec<&str> = OPERATIONS.iter().map(|op| op.id).collect();
    assert_eq!(table, in_text);
    let listed: Vec<(&str, &str)> = OPERATIONS.iter().map(|op| (op.path, op.method)).collect();
    let read = Document::embedded().catalog().operations();
    let read: Vec<(&str, &str)> = read.iter().map(|op| (op.path.as_str(), op.method.as_str())).collect();
    assert_eq!(read, listed, "the catalog lists the operations in the table's order");
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
        Gen2ProRequest,
        Gen2ProPreviewRequest,
        Gen2FlexRequest,
        Gen2Klein9bRequest,
        Gen2Klein9bPreviewRequest,
        Gen2Klein4bRequest,
        GenKontextProRequest,
        GenDevRequest,
        GenPro1p1Request,
        GenPro1p1UltraRequest,
        GenPro1p1UltraFinetunedRequest,
        GenPro1p0FillRequest,
        GenPro1p0FillFinetunedRequest,
        GenPro1p0ExpandRequest,
        DeblurV1Request,
        EraseV1Request,
        VtoV1Request,
        VtoV2Request,
        OutpaintingV1Request,
        Gen3VideoRequest,
        Gen2Klein4bFinetunedRequest,
        Gen2Klein9bFinetunedRequest,
        Gen2Klein9bKvFinetunedRequest,
        Gen2Klein9bKvBf16FinetunedRequest,
        Gen2KleinBase4bFinetunedRequest,
        Gen2KleinBase9bFinetunedRequest,
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
        assert_eq!(
            reencode(minimal.clone()).unwrap(),
            minimal,
            "{schema}: required-only body changed on the wire"
        );
        assert!(
            Document::embedded().validate(schema, &minimal).is_empty(),
            "{schema}: required-only sample is invalid"
        );
        let full = body(&doc, schema, true);
        assert_eq!(
            reencode(full.clone()).unwrap(),
            full,
            "{schema}: full body changed on the wire"
        );
        listing.push_str(&format!(
            "{} {}\n  required: {}\n  all: {}\n",
            op.method, op.path, minimal, full
        ));
    }
    insta::assert_snapshot!("wire", listing);
}

#[test]
fn a_builder_with_only_the_prompt_sends_only_the_prompt() {
    let request: types::Gen2ProRequest = types::Gen2ProRequest::builder().prompt("a cat").try_into().unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), json!({"prompt": "a cat"}));
    let request: types::GenPro1p1UltraRequest = types::GenPro1p1UltraRequest::builder().try_into().unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), json!({}));
}
