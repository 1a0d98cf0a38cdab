//! The parts of HAR 1.2 a recording writes: one entry per attempt of an
//! exchange, with the fields HAR requires and the `_genapi` note HAR allows
//! as a custom field (names starting with `_`). Readers of HAR (browsers'
//! developer tools, proxies, OpenAPI tools) skip what they do not know.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The head of the file: everything of `log` but its entries.
#[derive(Serialize)]
pub(crate) struct Head<'a> {
    pub(crate) version: &'static str,
    pub(crate) creator: Creator,
    /// Where the client sent its key, so a checker knows the trusted hosts.
    #[serde(rename = "_genapi")]
    pub(crate) genapi: Origins<'a>,
}

/// The program that wrote the file.
#[derive(Serialize)]
pub(crate) struct Creator {
    pub(crate) name: &'static str,
    pub(crate) version: &'static str,
}

/// The origins the recording client trusts with its key.
#[derive(Serialize)]
pub(crate) struct Origins<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) regional_base_url: &'a str,
    pub(crate) trusted_origins: Vec<&'a str>,
}

/// One attempt of one exchange.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    pub(crate) started_date_time: String,
    /// Milliseconds from sending to the end of the answer.
    pub(crate) time: f64,
    pub(crate) request: Request,
    pub(crate) response: Response,
    pub(crate) cache: Empty,
    pub(crate) timings: Timings,
    #[serde(rename = "_genapi")]
    pub(crate) genapi: Note,
}

/// What HAR cannot say about an attempt.
#[derive(Serialize)]
pub(crate) struct Note {
    /// The operationId, or `download` for a result address.
    pub(crate) operation: String,
    /// 1 for the first attempt, 2 for the first retry, …
    pub(crate) attempt: u32,
    /// Whether the key went with the request.
    pub(crate) keyed: bool,
    /// Why there is no answer, or why the answer was not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// A request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) http_version: &'static str,
    pub(crate) cookies: [Empty; 0],
    pub(crate) headers: Vec<Pair>,
    pub(crate) query_string: Vec<Pair>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) post_data: Option<PostData>,
    pub(crate) headers_size: i64,
    pub(crate) body_size: i64,
}

/// A header or a query parameter.
#[derive(Serialize)]
pub(crate) struct Pair {
    pub(crate) name: String,
    pub(crate) value: String,
}

/// A request body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PostData {
    pub(crate) mime_type: String,
    pub(crate) text: String,
}

/// An answer; status 0 when there was none (as browsers write it).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) status_text: String,
    pub(crate) http_version: &'static str,
    pub(crate) cookies: [Empty; 0],
    pub(crate) headers: Vec<Pair>,
    pub(crate) content: Content,
    #[serde(rename = "redirectURL")]
    pub(crate) redirect_url: String,
    pub(crate) headers_size: i64,
    pub(crate) body_size: i64,
}

/// An answer's body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Content {
    /// Bytes of the body as received; -1 when it was not read.
    pub(crate) size: i64,
    pub(crate) mime_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    /// `base64` when `text` holds kept image bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) encoding: Option<&'static str>,
    /// What replaced a body that was not kept (an image's summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
}

/// An empty object (HAR's `cache`, which a client without one leaves empty).
#[derive(Serialize)]
pub(crate) struct Empty {}

/// HAR's timings: the whole time counts as waiting, as the client does not
/// see sending and receiving apart; -1 is HAR's "not known".
#[derive(Serialize)]
pub(crate) struct Timings {
    pub(crate) send: f64,
    pub(crate) wait: f64,
    pub(crate) receive: f64,
}

/// `time` as HAR's ISO 8601 date, in UTC with milliseconds
/// (`2026-01-31T09:05:00.123Z`).
pub(crate) fn iso_8601(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let seconds = since.as_secs();
    let (days, of_day) = ((seconds / 86_400) as i64, seconds % 86_400);
    // Days to a civil date (proleptic Gregorian), by eras of 400 years.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_iso_8601_in_utc() {
        let at = |seconds: u64, millis: u64| UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis);
        assert_eq!(iso_8601(at(0, 0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_8601(at(951_782_400, 5)), "2000-02-29T00:00:00.005Z");
        assert_eq!(iso_8601(at(1_798_761_599, 999)), "2026-12-31T23:59:59.999Z");
    }
}
