// The bodies of the fuzz targets, shared with `tests/fuzz_regressions.rs`,
// which replays the kept corpus through them on every `cargo test`.
// Each must never panic, whatever the bytes.

/// Everything the client decodes from the network, and the validator the
/// mock runs on request bodies.
pub fn decode_responses(data: &[u8]) {
    use genapi::api::types::{HttpValidationError, PollResult, SubmissionResponse};
    let _ = serde_json::from_slice::<PollResult>(data);
    let _ = serde_json::from_slice::<SubmissionResponse>(data);
    let _ = serde_json::from_slice::<HttpValidationError>(data);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        for schema in [
            "Gen2ProRequest",
            "Gen3VideoRequest",
            "GenPro1p0FillRequest",
            "OutpaintingV1Request",
        ] {
            let _ = genapi::validate::Document::embedded().validate(schema, &value);
        }
    }
}

/// Webhook verification: the first lines are header values (id, timestamp,
/// signature, echoed secret), the rest is the body.
pub fn webhook_verify(data: &[u8]) {
    let mut parts = data.splitn(5, |b| *b == b'\n');
    let mut field = || parts.next().map(|p| String::from_utf8_lossy(p).into_owned());
    let (id, timestamp, signature, echo) = (field(), field(), field(), field());
    let body = field().unwrap_or_default();
    let verifier = genapi::webhook::Verifier::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
        .clock(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_649_367_553));
    let lookup = |name: &str| match name {
        "webhook-id" => id.as_deref(),
        "webhook-timestamp" => timestamp.as_deref(),
        "webhook-signature" => signature.as_deref().filter(|s| !s.is_empty()),
        "x-webhook-secret" => echo.as_deref(),
        _ => None,
    };
    let _ = verifier.verify_with(lookup, body.as_bytes());
}

/// Image sniffing and header sizes, and the same bytes as a base64 image
/// field (decoding, sniffing, size limits, equal-size masks).
pub fn image_inputs(data: &[u8]) {
    let _ = genapi::ImageFormat::sniff(data);
    let _ = genapi::dimensions(data);
    let text = String::from_utf8_lossy(data).into_owned();
    let document = genapi::validate::Document::embedded();
    let _ = document.validate("DeblurV1Request", &serde_json::json!({ "image": text }));
    let _ = document.validate(
        "GenPro1p0FillRequest",
        &serde_json::json!({ "image": text, "mask": text }),
    );
}
