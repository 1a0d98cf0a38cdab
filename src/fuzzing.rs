//! Entry points for fuzzers (feature `fuzzing`): they run code the rest of
//! the API reaches only through the network (how an answer of the service is
//! read) on bytes given directly, so a fuzzer can try millions of answers a
//! minute without a server. This crate's own fuzz targets (`fuzz/`) and
//! their saved regressions use them; the promise is that nothing here
//! panics, whatever the bytes.

use std::sync::OnceLock;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::StatusCode;

use crate::api::types::SubmissionResponse;
use crate::transport::Answer;

/// Interprets an answer with this status, headers (`name: value` lines) and
/// body as every caller of the transport would: the error mapping, the
/// `Retry-After` reading, the lenient poll decoding and the submission
/// decoding. Must never panic.
///
/// ```
/// // A 503 with an absurd Retry-After and a truncated body: read, not panicked on.
/// genapi::fuzzing::answer(503, "retry-after: 99999999999999", b"{\"detail\": [");
/// ```
pub fn answer(status: u16, headers: &str, body: &[u8]) {
    static CLIENT: OnceLock<Option<crate::Client>> = OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        crate::Client::builder()
            .api_key("fuzz-key")
            .base_url("http://127.0.0.1:9")
            .build()
            .ok()
    });
    let Some(client) = client else { return };
    let Ok(status) = StatusCode::from_u16(status) else {
        return;
    };
    let mut map = HeaderMap::new();
    for line in headers.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.trim()), HeaderValue::from_str(value.trim())) {
            map.append(name, value);
        }
    }
    let answer = Answer {
        status,
        headers: map,
        body: Bytes::copy_from_slice(body),
    };
    let transport = &client.shared.transport;
    let _ = answer.retry_after();
    let _ = crate::response::error_from(transport, "fuzz", &answer);
    let _ = crate::poll::lenient_poll_result(body, "fuzz-task");
    // The generated client reads a submission's answer with serde_json into
    // the generated type, and a misfit becomes `decode_error`: the same here.
    let _ = serde_json::from_slice::<SubmissionResponse>(body)
        .map_err(|e| crate::response::decode_error(transport, "fuzz", e.to_string(), body));
    let _ = crate::task::Task::accepted(client.shared.clone(), "fuzz", body);
}

/// Reads an image's size from its header as the client does for every
/// image input (and a base64 field's start). Must never panic.
///
/// ```
/// // A JPEG cut inside its first marker: no size, not a panic.
/// assert_eq!(genapi::fuzzing::image_size(&[0xFF, 0xD8, 0xFF]), None);
/// ```
pub fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    crate::input::dimensions(bytes)
}
