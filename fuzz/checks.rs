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

/// The Standard Webhooks secret of the published test vector.
const WEBHOOK_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// A raw secret, for the echo scheme.
const WEBHOOK_RAW_SECRET: &str = "a-raw-secret-for-the-echo-scheme";

/// Webhook verification: the first lines are header values (id, timestamp,
/// signature, echoed secret), the rest is the body. Checked with a `whsec_`
/// verifier (signatures required) and a raw-secret one (echo accepted); when
/// either accepts, the headers must really carry the right signature or the
/// right secret, else the check panics: random bytes never authenticate.
pub fn webhook_verify(data: &[u8]) {
    use genapi::webhook::{sign, Scheme, Verifier};
    let mut parts = data.splitn(5, |b| *b == b'\n');
    let mut field = || parts.next().map(|p| String::from_utf8_lossy(p).into_owned());
    let (id, timestamp, signature, echo) = (field(), field(), field(), field());
    let body = field().unwrap_or_default();
    let now = || std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_649_367_553);
    let lookup = |name: &str| match name {
        "webhook-id" => id.as_deref(),
        "webhook-timestamp" => timestamp.as_deref(),
        "webhook-signature" => signature.as_deref().filter(|s| !s.is_empty()),
        "x-webhook-secret" => echo.as_deref(),
        _ => None,
    };
    for (secret, verifier) in [
        (WEBHOOK_SECRET, Verifier::new(WEBHOOK_SECRET).map(|v| v.wall_clock(now))),
        (
            WEBHOOK_RAW_SECRET,
            Verifier::new(WEBHOOK_RAW_SECRET).map(|v| v.wall_clock(now).require_signature(false)),
        ),
    ] {
        let Ok(verifier) = verifier else {
            panic!("the fuzzing secrets are valid");
        };
        let Ok(event) = verifier.verify_lookup(lookup, body.as_bytes()) else {
            continue;
        };
        match event.scheme {
            Scheme::StandardWebhooks => {
                let sent = timestamp.as_deref().and_then(|t| t.trim().parse::<i64>().ok());
                let expected = sent.and_then(|t| sign(&secret.into(), id.as_deref()?, t, body.as_bytes()).ok());
                let carried = signature.as_deref().unwrap_or_default();
                assert!(
                    expected.is_some_and(|e| carried.split_whitespace().any(|s| s == e)),
                    "authenticated without the right signature"
                );
            }
            Scheme::SharedSecret => assert_eq!(echo.as_deref(), Some(secret), "authenticated without the secret"),
        }
    }
}

/// The request validator on any body, for every request schema of the
/// embedded document: the first byte picks the schema, the rest is the body
/// (JSON, or else text put in the usual string fields).
pub fn validator(data: &[u8]) {
    let document = genapi::validate::Document::embedded();
    // Sorted by path, then method: the order the kept inputs were found
    // under, so each still picks the schema it picked then.
    let mut operations = document.catalog().operations().to_vec();
    operations.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
    let schemas: Vec<String> = operations
        .into_iter()
        .filter_map(|operation| operation.request_schema)
        .collect();
    let Some((selector, rest)) = data.split_first() else {
        return;
    };
    if schemas.is_empty() {
        return;
    }
    let schema = &schemas[usize::from(*selector) % schemas.len()];
    let body = serde_json::from_slice::<serde_json::Value>(rest).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(rest);
        serde_json::json!({ "prompt": text, "image": text, "mask": text, "webhook_url": text })
    });
    let _ = document.validate(schema, &body);
}

/// Image sniffing and header sizes, and the same bytes as a base64 image
/// field (decoding, sniffing, size limits, equal-size masks).
pub fn image_inputs(data: &[u8]) {
    let _ = genapi::ImageFormat::sniff(data);
    let _ = genapi::fuzzing::image_size(data);
    let text = String::from_utf8_lossy(data).into_owned();
    let document = genapi::validate::Document::embedded();
    let _ = document.validate("DeblurV1Request", &serde_json::json!({ "image": text }));
    let _ = document.validate(
        "GenPro1p0FillRequest",
        &serde_json::json!({ "image": text, "mask": text }),
    );
}

/// The transport's reading of an answer: two bytes of status, `name: value`
/// header lines up to a blank line, then the body.
pub fn transport(data: &[u8]) {
    let Some((status, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let status = 100 + u16::from_be_bytes(*status) % 500;
    let split = rest.windows(2).position(|w| w == b"\n\n").unwrap_or(rest.len());
    let headers = String::from_utf8_lossy(&rest[..split]);
    let body = rest.get(split + 2..).unwrap_or_default();
    genapi::fuzzing::answer(status, &headers, body);
}
