//! What a recording leaves out, decided from the document rather than from a
//! list kept here: the fields of every request schema marked `x-secret` are
//! redacted and those marked `x-image` summarised, as the document reader
//! ([`genapi_document::Field`]) reads them. Headers that carry credentials,
//! and the query of every address but its task id, are redacted by name.
//!
//! A last pass replaces, anywhere in an entry's text, every secret the
//! client's scrubber knows (the key, every webhook secret and address token
//! the client has sent, in this entry or any earlier one) and every query
//! value of the entry's own addresses (a signed download address): a service
//! that echoes one back, or an error message that quotes an address, cannot
//! bring it into the file. Answers reach the recorder already scrubbed, and
//! their `x-secret` fields redacted, as they reach everything else.

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine as _;
use reqwest::Url;
use serde_json::Value;

use crate::input::{dimensions, ImageFormat};
use crate::scrub::{secret_fields, Scrubber, REDACTED, SHORTEST_SECRET, TASK_ID_QUERY};

/// Headers whose values are credentials, lowercase.
const SECRET_HEADERS: [&str; 6] = [
    "x-key",
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-webhook-secret",
];

/// The one query parameter kept in addresses: the task id a poll names,
/// which identifies the task and grants nothing.
const KEPT_QUERY: &str = TASK_ID_QUERY;

/// Redacts one client's exchanges.
pub(crate) struct Redactor {
    scrubber: Arc<Scrubber>,
    image_fields: BTreeSet<String>,
    keep_images: bool,
}

impl Redactor {
    /// A redactor scrubbing with the client's scrubber, reading which fields
    /// are images from the embedded document (and which are secret, as the
    /// scrubber does). The fields of every model are taken together: a body
    /// sent to an address the document does not know (`Client::submit_raw`)
    /// is redacted all the same.
    pub(crate) fn new(scrubber: Arc<Scrubber>, keep_images: bool) -> Redactor {
        let catalog = crate::validate::Document::embedded().catalog();
        Redactor {
            scrubber,
            image_fields: catalog
                .models()
                .iter()
                .flat_map(|model| model.fields.iter())
                .filter(|field| field.image().is_some())
                .map(|field| field.name.clone())
                .collect(),
            keep_images,
        }
    }

    /// Whether image bytes are kept as they are.
    pub(crate) fn keeps_images(&self) -> bool {
        self.keep_images
    }

    /// A header's value as recorded; an address in it (a redirect's
    /// `location`) is redacted as [`Redactor::url`] does.
    pub(crate) fn header(&self, name: &str, value: &[u8], secrets: &mut Vec<String>) -> String {
        let text = String::from_utf8_lossy(value);
        if SECRET_HEADERS.contains(&name) || self.scrubber.finds(value) {
            return REDACTED.to_string();
        }
        match Url::parse(&text).ok().filter(|u| u.has_host()) {
            Some(url) => self.url(&url, secrets),
            None => text.into_owned(),
        }
    }

    /// An address as recorded ([`masked_address`]), a task id this
    /// client handles kept wherever it stands in the path.
    pub(crate) fn url(&self, url: &Url, secrets: &mut Vec<String>) -> String {
        masked_address(url, secrets, &|text| self.scrubber.is_a_known_task_id(text))
    }

    /// A JSON request body as recorded: secret fields redacted (their values
    /// added to `secrets`), image data summarised unless kept, image
    /// addresses redacted as addresses are. A body that is not a JSON object
    /// is summarised, since nothing says what in it is secret.
    pub(crate) fn request_body(&self, body: &[u8], secrets: &mut Vec<String>) -> String {
        let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(body) else {
            return format!("[{} bytes, not a JSON object, sha256:{}]", body.len(), sha256(body));
        };
        for (name, value) in fields.iter_mut() {
            if secret_fields().contains(name) {
                if let Value::String(secret) = value {
                    secrets.push(std::mem::take(secret));
                }
                *value = Value::String(REDACTED.to_string());
            } else if self.image_fields.contains(name) {
                if let Value::String(data) = value {
                    *data = self.image_input(data, secrets);
                }
            } else {
                // Any other address (a webhook's, with a token in its query)
                // is redacted as addresses are.
                self.mask_addresses(value, secrets);
            }
        }
        serde_json::to_string(&fields).unwrap_or_default()
    }

    /// An image field's value: an address, or base64 data.
    fn image_input(&self, data: &str, secrets: &mut Vec<String>) -> String {
        if let Some(url) = Url::parse(data).ok().filter(|u| matches!(u.scheme(), "http" | "https")) {
            return self.url(&url, secrets);
        }
        if self.keep_images {
            return data.to_string();
        }
        match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
            Ok(bytes) => image_summary(&bytes),
            Err(_) => format!(
                "[{} characters, not base64, sha256:{}]",
                data.len(),
                sha256(data.as_bytes())
            ),
        }
    }

    /// A JSON answer as recorded: `x-secret` fields redacted and every
    /// address in it redacted as [`Redactor::url`] does (a result's signed
    /// address above all). A body that is not JSON is kept as text (error
    /// pages), scrubbed later.
    pub(crate) fn answer_body(&self, body: &[u8], secrets: &mut Vec<String>) -> String {
        match serde_json::from_slice::<Value>(body) {
            Ok(mut value) => {
                // The task an answer names is no secret, in its polling
                // address's path either (`/v1/tasks/<id>`): known as one
                // before its addresses are masked, as the client knows it
                // once it reads the answer.
                if let Some(id) = value.get("id").and_then(Value::as_str) {
                    self.scrubber.is_a_task_id(id);
                }
                self.scrubber.scrub_json(&mut value);
                self.mask_addresses(&mut value, secrets);
                serde_json::to_string(&value).unwrap_or_default()
            }
            Err(_) => String::from_utf8_lossy(body).into_owned(),
        }
    }

    fn mask_addresses(&self, value: &mut Value, secrets: &mut Vec<String>) {
        match value {
            Value::String(text) => match Url::parse(text).ok().filter(|u| u.has_host()) {
                Some(url) => *text = self.url(&url, secrets),
                // An address the service quotes in its words (an input
                // image it could not fetch) is kept as the rule shows it.
                None => *text = genapi_text::addresses_shown(text),
            },
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_addresses(item, secrets)),
            Value::Object(fields) => fields.values_mut().for_each(|item| self.mask_addresses(item, secrets)),
            _ => {}
        }
    }

    /// Every string value of `value` scrubbed as [`Redactor::scrub`] does,
    /// so the JSON around them cannot be touched. (The keys are the
    /// recording's own names; bodies are kept as text values.)
    pub(crate) fn scrub_strings(&self, value: &mut Value, secrets: &[String]) {
        match value {
            Value::String(text) => *text = self.scrub(std::mem::take(text), secrets),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_strings(item, secrets)),
            Value::Object(fields) => fields.values_mut().for_each(|item| self.scrub_strings(item, secrets)),
            _ => {}
        }
    }

    /// `text` with every secret the client's scrubber knows, and every value
    /// of `secrets` (this entry's own), replaced.
    pub(crate) fn scrub(&self, text: String, secrets: &[String]) -> String {
        let mut text = self.scrubber.scrub(&text);
        let mut values: Vec<&str> = secrets.iter().map(String::as_str).collect();
        // Longest first, so a secret containing another is replaced whole.
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        for value in values.into_iter().filter(|v| v.len() >= SHORTEST_SECRET) {
            if text.contains(value) {
                text = text.replace(value, REDACTED);
            }
            // JSON text escapes some characters; look for that spelling too.
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != value && text.contains(escaped) {
                text = text.replace(escaped, REDACTED);
            }
        }
        text
    }
}

/// What replaces a body kept out of a recording: its size and hash.
pub(crate) fn opaque_summary(bytes: &[u8]) -> String {
    format!("[{} bytes, sha256:{}]", bytes.len(), sha256(bytes))
}

/// What replaces image bytes: `[image png 1024x768, 183456 bytes, sha256:…]`.
pub(crate) fn image_summary(bytes: &[u8]) -> String {
    summary(bytes, bytes.len() as u64, &sha256(bytes))
}

/// A summary from the first bytes of an image, its size and its hash.
pub(crate) fn summary(head: &[u8], size: u64, sha256: &str) -> String {
    let format = ImageFormat::sniff(head).map_or("unknown format", |f| match f {
        ImageFormat::Jpeg => "jpeg",
        ImageFormat::Png => "png",
        ImageFormat::Webp => "webp",
        ImageFormat::Gif => "gif",
    });
    let size_text = dimensions(head).map(|(w, h)| format!(" {w}x{h}")).unwrap_or_default();
    format!("[image {format}{size_text}, {size} bytes, sha256:{sha256}]")
}

/// The SHA-256 of `bytes`, in hex.
/// An address as recorded: scheme, host and path kept, but for a path
/// segment that reads as a token (not a task id, by `is_task_id`) and the
/// values of path parameters ([`redacted_path`]); every query value but the
/// task id redacted (the names stay, to show the address was signed); no
/// user name, password or fragment. What was left out is added to
/// `secrets`, to be searched for in the rest of what is kept.
pub(crate) fn masked_address(url: &Url, secrets: &mut Vec<String>, is_task_id: &dyn Fn(&str) -> bool) -> String {
    let mut url = url.clone();
    for part in [
        url.username().to_string(),
        url.password().unwrap_or_default().to_string(),
    ]
    .into_iter()
    .chain(url.fragment().map(str::to_string))
    {
        if !part.is_empty() {
            secrets.push(part);
        }
    }
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_fragment(None);
    let path = redacted_path(url.path(), secrets, is_task_id);
    url.set_path(&path);
    let url = &url;
    if url.query().is_none() {
        return url.to_string();
    }
    // `id` names a task where the service's polls take it, or where its value
    // is one: elsewhere (a delivery host's `?id=` signature) it is a value
    // like any other.
    let polled = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .is_some_and(|last| last.split(';').next() == Some("get_result"));
    let kept = |name: &str, value: &str| name == KEPT_QUERY && (polled || is_task_id(value));
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    if pairs.iter().all(|(name, value)| kept(name, value)) {
        // Nothing to redact: the address stays as it was given, and its
        // query is no secret to search the entry for.
        return url.to_string();
    }
    let mut masked = url.clone();
    {
        let mut query = masked.query_pairs_mut();
        query.clear();
        for (name, value) in pairs {
            if kept(&name, &value) {
                query.append_pair(&name, &value);
            } else if value.is_empty() {
                // A parameter with no value (`?S3CRETTOKEN`) is a token
                // itself: its name is what is left out.
                query.append_pair(REDACTED, "");
                secrets.push(name);
            } else {
                query.append_pair(&name, REDACTED);
                secrets.push(value);
            }
        }
    }
    if let Some(raw) = url.query() {
        // Each value as written too (`sig=Ab9x%2FCd7q`), which a text may
        // quote without the rest of the query.
        let written = raw
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((_, "")) | None => (name_of(pair), pair.trim_end_matches('=')),
                Some((name, value)) => (name, value),
            })
            .filter(|(name, value)| !kept(name, value));
        secrets.extend(written.map(|(_, value)| value.to_string()));
        secrets.push(raw.to_string());
    }
    masked.set_fragment(None);
    masked.to_string()
}

/// `text` (an error a layer or the network wrote) without `secrets` (what
/// an address of its exchange held: [`masked_address`]) in the spellings an
/// address writes them (as they are and `%`-escaped), and with every address
/// it quotes whole shown by the one rule: so a result's signature does not
/// reach what is shown or kept, in whatever form the text quotes it.
pub(crate) fn without_address_secrets(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    let mut secrets: Vec<&String> = secrets.iter().filter(|secret| secret.len() >= 4).collect();
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    for secret in secrets {
        let escaped: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        // Escaped again, as an address quoting an address escapes its `%`.
        let twice: String = url::form_urlencoded::byte_serialize(escaped.as_bytes()).collect();
        for spelling in [secret.clone(), escaped.replace('+', "%20"), escaped, twice] {
            if !spelling.is_empty() {
                text = text.replace(&spelling, REDACTED);
            }
        }
    }
    genapi_text::addresses_shown(&text)
}

/// The name of a query pair as written (`name=value`, or a bare `name`).
fn name_of(pair: &str) -> &str {
    pair.split('=').next().unwrap_or(pair)
}

/// `path` as recorded: a segment that reads as a token (a signed
/// delivery path's, a receiver's `/hook/3f9c…`), and not a task's id,
/// becomes `redacted-` and
/// the first eight hex digits of its digest, the same for the same token
/// wherever it stands (a download is matched to the poll that named it), and
/// a path parameter's value (`;jsessionid=…`, a query by another name)
/// becomes `redacted`. What is replaced is added to `secrets`.
fn redacted_path(path: &str, secrets: &mut Vec<String>, is_task_id: &dyn Fn(&str) -> bool) -> String {
    let segments: Vec<String> = path
        .split('/')
        .map(|segment| {
            let mut parts = segment.split(';');
            let head = parts.next().unwrap_or_default();
            let decoded = percent_encoding::percent_decode_str(head).decode_utf8_lossy();
            // A task id is no secret, and a recording keeps it (a poll's
            // `id`, a result address naming its task): `<id>`, `<id>.jpg`.
            let stem = decoded.split('.').next().unwrap_or_default();
            let names_a_task = is_task_id(&decoded) || is_task_id(stem);
            let mut kept = if !names_a_task && crate::scrub::is_token_like_segment(&decoded) {
                secrets.push(head.to_string());
                secrets.push(decoded.into_owned());
                format!("redacted-{}", &sha256(head.as_bytes())[..8])
            } else {
                head.to_string()
            };
            for parameter in parts {
                let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
                if !value.is_empty() {
                    secrets.push(value.to_string());
                }
                kept.push(';');
                kept.push_str(name);
                if !value.is_empty() {
                    kept.push_str("=redacted");
                }
            }
            kept
        })
        .collect();
    segments.join("/")
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// Bytes in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_the_secret_and_image_fields() {
        let redactor = redactor();
        assert!(secret_fields().contains("webhook_secret"), "{:?}", secret_fields());
        assert!(redactor.image_fields.contains("input_image"));
        assert!(!secret_fields().contains("prompt"));
    }

    #[test]
    fn addresses_keep_host_path_and_task_id() {
        let redactor = redactor();
        let mut secrets = Vec::new();
        // A delivery address naming its task keeps it (a task this client
        // handles), as a poll does.
        redactor.scrubber.is_a_task_id("t1");
        let url = Url::parse("https://delivery.example.com/r/1.png?id=t1&expires=99&signature=abcdef").unwrap();
        assert_eq!(
            redactor.url(&url, &mut secrets),
            "https://delivery.example.com/r/1.png?id=t1&expires=%5Bredacted%5D&signature=%5Bredacted%5D"
        );
        assert!(secrets.contains(&"abcdef".to_string()));
        let mut none = Vec::new();
        let poll = Url::parse("https://api.eu.example.com/v1/get_result?id=t1").unwrap();
        assert_eq!(redactor.url(&poll, &mut none), poll.to_string());
        assert!(none.is_empty(), "a task id is no secret: {none:?}");
    }

    #[test]
    fn path_tokens_and_path_parameters_are_redacted_alike_wherever_they_stand() {
        let redactor = redactor();
        let mut secrets = Vec::new();
        let poll = Url::parse("https://api.example.com/v1/get_result;jsessionid=PATHSECRETAAAA1111?id=t1").unwrap();
        let recorded = redactor.url(&poll, &mut secrets);
        assert_eq!(
            recorded,
            "https://api.example.com/v1/get_result;jsessionid=redacted?id=t1"
        );
        let download = "https://cdn.example.com/dl/Tk9xZ3Rva2VuU2VjcmV0MTIzNDU2Nzg5/img.jpg;sig=PATHSIG5555";
        let first = redactor.url(&Url::parse(download).unwrap(), &mut secrets);
        for secret in ["PATHSECRETAAAA1111", "Tk9xZ3Rva2VuU2VjcmV0MTIzNDU2Nzg5", "PATHSIG5555"] {
            assert!(!first.contains(secret), "{first}");
            assert!(
                secrets.iter().any(|kept| kept == secret),
                "{secret} is searched for in the entry"
            );
        }
        // The same token, the same mark: a download still meets the poll
        // that named it.
        assert_eq!(redactor.url(&Url::parse(download).unwrap(), &mut Vec::new()), first);
        assert!(first.starts_with("https://cdn.example.com/dl/redacted-"), "{first}");
        assert!(first.ends_with("/img.jpg;sig=redacted"), "{first}");
    }

    #[test]
    fn a_task_id_in_a_result_path_is_kept_as_the_poll_that_names_it_is() {
        let redactor = redactor();
        let id = "0adc3f5e-9b1d-4b6c-9d7e-5a4f3b2c1d0e";
        redactor.scrubber.is_a_task_id(id);
        let mut secrets = Vec::new();
        for sample in [
            format!("https://cdn.example.com/results/{id}/sample.jpeg?se=1&sig=S1GNATURE99"),
            format!("https://cdn.example.com/mock/results/{id}.jpg?sig=S1GNATURE99"),
        ] {
            let recorded = redactor.url(&Url::parse(&sample).unwrap(), &mut secrets);
            assert!(recorded.contains(id), "{recorded}");
            assert!(!recorded.contains("S1GNATURE99"), "{recorded}");
        }
        assert!(!secrets.iter().any(|secret| secret.contains(id)), "{secrets:?}");
    }

    #[test]
    fn an_error_quoting_its_address_in_any_form_keeps_none_of_its_secrets() {
        let url =
            Url::parse("https://cdn.example.com/r/sample.jpeg?se=2026&sig=Ab9x%2FCd7q%2BEf4w%3D%3DGh12345678").unwrap();
        let mut secrets = Vec::new();
        masked_address(&url, &mut secrets, &|_| false);
        let escaped: String = url::form_urlencoded::byte_serialize(url.as_str().as_bytes()).collect();
        for quoted in [
            format!("GET {url} failed"),
            format!("{url:?}"),
            escaped,
            format!("raw {}", url.query().unwrap().replace('&', " ")),
            format!("decoded {:?}", url.query_pairs().collect::<Vec<_>>()),
        ] {
            let shown = without_address_secrets(&quoted, &secrets);
            for secret in ["Ab9x", "Gh12345678"] {
                assert!(!shown.contains(secret), "{quoted} -> {shown}");
            }
        }
    }

    #[test]
    fn an_id_in_a_query_is_kept_only_where_it_names_a_task() {
        let redactor = redactor();
        let mut secrets = Vec::new();
        let sample = Url::parse("https://cdn.example.com/results/sample.jpeg?id=S3CRETTOKENxyz123456").unwrap();
        assert!(!redactor.url(&sample, &mut secrets).contains("S3CRETTOKEN"));
        let poll = Url::parse("https://api.example.com/v1/get_result?id=t-7").unwrap();
        assert_eq!(redactor.url(&poll, &mut secrets), poll.as_str());
    }

    #[test]
    fn a_token_written_as_a_bare_query_name_is_left_out() {
        let redactor = redactor();
        let url = Url::parse("https://cdn.example.com/r/sample.jpeg?v=1&S3CRETTOKENxyz123456").unwrap();
        let mut secrets = Vec::new();
        let recorded = redactor.url(&url, &mut secrets);
        assert!(!recorded.contains("S3CRETTOKEN"), "{recorded}");
        let quoted = format!("{:?}", url.query_pairs().collect::<Vec<_>>());
        assert!(!without_address_secrets(&quoted, &secrets).contains("S3CRETTOKEN"));
    }

    #[test]
    fn a_submissions_answer_keeps_its_task_where_its_polling_address_names_it() {
        let redactor = redactor();
        let answer =
            br#"{"id":"tk_9f3a7c21d4e8b6a0","polling_url":"https://api.example.com/v1/tasks/tk_9f3a7c21d4e8b6a0"}"#;
        let mut secrets = Vec::new();
        let recorded = redactor.answer_body(answer, &mut secrets);
        assert_eq!(recorded.matches("tk_9f3a7c21d4e8b6a0").count(), 2, "{recorded}");
    }

    #[test]
    fn credential_headers_and_signed_redirects_are_redacted() {
        let redactor = redactor();
        let mut secrets = Vec::new();
        assert_eq!(redactor.header("x-key", b"k-123456", &mut secrets), REDACTED);
        assert_eq!(redactor.header("cookie", b"session=1", &mut secrets), REDACTED);
        assert_eq!(redactor.header("x-echo", b"was k-123456", &mut secrets), REDACTED);
        let moved = redactor.header("location", b"https://cdn.example.com/a.png?token=t0k3n", &mut secrets);
        assert_eq!(moved, "https://cdn.example.com/a.png?token=%5Bredacted%5D");
        assert!(secrets.contains(&"t0k3n".to_string()));
        assert_eq!(
            redactor.header("content-type", b"application/json", &mut secrets),
            "application/json"
        );
    }

    #[test]
    fn secrets_and_images_leave_the_body() {
        let redactor = redactor();
        let png = base64::engine::general_purpose::STANDARD.encode(genapi_png());
        let body = serde_json::json!({"prompt": "p", "webhook_secret": "s3cret-value", "input_image": png});
        let mut secrets = Vec::new();
        let text = redactor.request_body(body.to_string().as_bytes(), &mut secrets);
        assert!(!text.contains("s3cret-value") && !text.contains(&png), "{text}");
        assert!(text.contains("[image png 3x2, "), "{text}");
        let scrubbed = redactor.scrub("echo s3cret-value and k-123456".into(), &secrets);
        assert_eq!(scrubbed, "echo [redacted] and [redacted]");
    }

    fn redactor() -> Redactor {
        Redactor::new(Arc::new(Scrubber::new("k-123456")), false)
    }

    fn genapi_png() -> Vec<u8> {
        let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(&2u32.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        bytes
    }
}
