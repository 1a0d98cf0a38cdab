//! Every string field of every request type is settable from `&str`: the
//! calls below are generated from `openapi.json` by `build.rs`, one builder
//! per request type with every string field set. A setter that refused `&str`
//! would make this file fail to compile.

// Generated: one call for each string field of every request type.
#![allow(clippy::too_many_lines)]

include!(concat!(env!("OUT_DIR"), "/string_setters.rs"));

#[test]
fn every_string_field_of_every_request_type_takes_str() {
    every_string_field_takes_str();
}

#[test]
fn optional_text_fields_take_str_string_option_and_their_own_type() {
    use genapi::api::types::{GenDevRequest, OutputFormat};
    let request: GenDevRequest = GenDevRequest::builder()
        .prompt("a fox")
        .output_format("webp")
        .webhook_secret("s3cret")
        .try_into()
        .unwrap();
    assert_eq!(request.prompt.as_deref(), Some("a fox"));
    assert_eq!(request.output_format, Some(OutputFormat::Webp));
    let request: GenDevRequest = GenDevRequest::builder()
        .prompt(String::from("b"))
        .output_format(None::<OutputFormat>)
        .try_into()
        .unwrap();
    assert_eq!((request.prompt.as_deref(), request.output_format), (Some("b"), None));
    // Text that does not parse is a builder error, not a panic.
    let refused: Result<GenDevRequest, _> = GenDevRequest::builder().output_format("gif").try_into();
    assert!(refused.unwrap_err().to_string().contains("output_format"));
}

#[test]
fn counts_and_sizes_take_plain_integers_on_every_model() {
    use genapi::api::types::{Gen2FlexRequest, GenDevRequest, GenPro1p1Request};
    // The same u32 feeds every model's size; steps take a plain integer.
    let side: u32 = 1024;
    let dev: GenDevRequest = GenDevRequest::builder()
        .width(side)
        .height(768u32)
        .steps(28)
        .try_into()
        .unwrap();
    let pro: GenPro1p1Request = GenPro1p1Request::builder().width(side).try_into().unwrap();
    let flex: Gen2FlexRequest = Gen2FlexRequest::builder()
        .prompt("x")
        .width(side)
        .steps(28)
        .try_into()
        .unwrap();
    assert_eq!(
        (dev.width, dev.steps, pro.width, flex.steps),
        (Some(1024), Some(28), Some(1024), Some(28))
    );
}
