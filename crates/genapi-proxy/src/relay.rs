//! One request, relayed to the service's host.
//!
//! **Who gets the key.** The proxy asks the client's own trust rule
//! ([`genapi::Client::sends_key_to`]): a host it trusts gets the key the
//! caller sent, or the proxy's configured key when the caller sent none (so
//! a key can live in the proxy alone); any other host (a delivery host, a
//! polling host outside the service's domain) gets no key at all, whatever
//! the caller sent.
//!
//! **What passes.** The method, path, query, body and the caller's headers,
//! but those of one connection (`Connection`, `Transfer-Encoding`…), its
//! `Host`, and `Accept-Encoding` (the proxy reads answers to rewrite their
//! addresses and take the key out, so it asks for them plain, `identity`). Nothing is retried here: a
//! submission is sent once, and a caller's retry is the caller's.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use url::Url;

/// The header that carries the key.
pub(crate) const KEY_HEADER: &str = "x-key";

/// How long a request to the service may take, its answer included: past
/// any task's acceptance, and an end to a host that never answers.
pub(crate) const SERVICE_TIMEOUT: Duration = Duration::from_secs(300);

/// Headers of one connection, never relayed (RFC 9110, 7.6.1).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The service, as the proxy reaches it.
pub(crate) struct Service {
    pub(crate) base: Url,
    pub(crate) key: Option<genapi::ApiKey>,
    pub(crate) client: genapi::Client,
    pub(crate) http: reqwest::Client,
    /// Where each exchange is recorded, when asked (`--record`).
    pub(crate) recording: Option<genapi::RelayRecording>,
}

/// An answer of the service, and its exchange's record to finish.
pub(crate) struct Sent {
    pub(crate) response: reqwest::Response,
    pub(crate) record: Option<genapi::RecordedExchange>,
}

impl Service {
    /// A reqwest client for the service's hosts, with the client crate's TLS.
    pub(crate) fn http() -> genapi::Result<reqwest::Client> {
        genapi::http_client_builder()?
            .timeout(SERVICE_TIMEOUT)
            .connect_timeout(Duration::from_secs(15))
            // The proxy relays what it is answered; a redirect is the caller's
            // to follow (through the proxy or not).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| genapi::Error::Config(format!("the proxy's HTTP client: {}", e.without_url())))
    }

    /// The key this request is sent with, as the service would see it: the
    /// caller's, or the configured one.
    pub(crate) fn key_of<'h>(&'h self, headers: &'h HeaderMap) -> Option<&'h str> {
        headers
            .get(KEY_HEADER)
            .and_then(|value| value.to_str().ok())
            // An empty key is none: the configured one is sent.
            .filter(|key| !key.trim().is_empty())
            .or(self.key.as_ref().map(genapi::ApiKey::expose))
    }

    /// The base URL's address for `path_and_query`.
    pub(crate) fn at_base(&self, path_and_query: &str) -> Option<Url> {
        let mut base = self.base.as_str().trim_end_matches('/').to_string();
        base.push_str(path_and_query);
        Url::parse(&base).ok()
    }

    /// Sends one request to `target`, recorded as `operation` when the
    /// proxy records; a failure to get an answer is recorded here.
    pub(crate) async fn send(
        &self,
        method: Method,
        target: Url,
        headers: &HeaderMap,
        body: Bytes,
        operation: &str,
    ) -> Result<Sent, reqwest::Error> {
        // The key goes to the API: the base URL, and an operation of the
        // document on a host the trust rule gives it to (a regional polling
        // host); never to a download, though a delivery host may lie in the
        // service's domain, as the client never sends it there.
        let same_origin = target.origin() == self.base.origin();
        let an_operation = crate::contract::operation_id(target.path(), &method).is_some();
        let keyed = self.client.sends_key_to(&target) && (same_origin || an_operation);
        let key = keyed
            .then(|| self.key_of(headers))
            .flatten()
            .and_then(|key| HeaderValue::from_str(key).ok());
        let mut relayed = relayed_headers(headers);
        // Asked for plain: without the header any coding would do (RFC 9110,
        // 12.5.3).
        relayed.insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        relayed.remove(KEY_HEADER);
        if !keyed {
            // What the key may not go to gets no other credential either.
            for credential in [http::header::AUTHORIZATION, http::header::COOKIE] {
                relayed.remove(credential);
            }
        }
        if let Some(mut key) = key {
            key.set_sensitive(true);
            relayed.insert(HeaderName::from_static(KEY_HEADER), key);
        }
        let request = self
            .http
            .request(method, target)
            .headers(relayed)
            .body(body.clone())
            .build()?;
        let record = self.recording.as_ref().map(|recording| {
            // The caller's own key is left out of the recording as the
            // configured one is.
            if let Some(key) = self.key_of(headers) {
                recording.learn_key(key);
            }
            if !body.is_empty() {
                // What the caller sent as secret (a webhook's) is left out
                // of the recording, as the client leaves out its own.
                if let Ok(value) = serde_json::from_slice(&body) {
                    self.client.learn_secrets(&value);
                }
            }
            recording.sent(&request, (!body.is_empty()).then_some(&body[..]), operation)
        });
        match self.http.execute(request).await {
            Ok(response) => Ok(Sent { response, record }),
            Err(error) => {
                let error = error.without_url();
                if let Some(record) = record {
                    record.failed(&genapi_text::clean(&error.to_string()));
                }
                Err(error)
            }
        }
    }
}

/// `headers` without those of one connection, and without a length (the
/// body relayed sets its own).
pub(crate) fn relayed_headers(headers: &HeaderMap) -> HeaderMap {
    let mut relayed = headers.clone();
    // Headers a `Connection` header names are the connection's too.
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(',').map(|name| name.trim().to_ascii_lowercase()))
        .collect();
    for name in HOP_BY_HOP.iter().copied().chain(named.iter().map(String::as_str)) {
        relayed.remove(name);
    }
    relayed.remove(http::header::CONTENT_LENGTH);
    relayed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_of_one_connection_are_not_relayed() {
        let mut headers = HeaderMap::new();
        headers.insert("connection", HeaderValue::from_static("close, x-trace"));
        headers.insert("x-trace", HeaderValue::from_static("1"));
        headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        headers.insert("host", HeaderValue::from_static("127.0.0.1:9"));
        headers.insert("content-length", HeaderValue::from_static("3"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let relayed = relayed_headers(&headers);
        let names: Vec<&str> = relayed.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type"]);
    }
}
