//! Entry points for the fuzz targets (`fuzz/`), which drive code the public
//! API reaches only through the network. Not part of the API.

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
    let _ = crate::response::decode::<SubmissionResponse>(transport, "fuzz", body);
    let _ = crate::task::Task::accepted(client.shared.clone(), "fuzz", body);
}
