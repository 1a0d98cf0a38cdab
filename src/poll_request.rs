//! The request every poll is, built once per client by the generated
//! `get_result`.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, Request, Url, Version};

/// The request every poll of a client is, as the generated `get_result`
/// built it for the client's first poll, less its address.
///
/// A poll is always the same request but for its address: the generated
/// code formats `{origin}/v1/get_result`, parses it, encodes the `id` query
/// and adds its headers, and then the `pre` hook replaces the address with
/// the task's `polling_url` as the service gave it. Building all that again
/// for every poll was most of what a poll cost the client beyond reqwest's
/// own send, so the first poll keeps what the generated code made (method,
/// headers, version, timeout) and every later poll is that request at its
/// own polling URL, sent through the same exchange, its answer read the way
/// a generated answer that does not fit the document is read. The key is
/// never part of it: the exchange adds it beneath, for trusted origins
/// only, on every attempt.
#[derive(Debug, Default)]
pub(crate) struct PollRequest(OnceLock<Shape>);

/// A request without its address and body.
#[derive(Debug)]
struct Shape {
    method: Method,
    headers: HeaderMap,
    version: Version,
    timeout: Option<Duration>,
}

impl PollRequest {
    /// Whether the generated request was kept already.
    pub(crate) fn is_kept(&self) -> bool {
        self.0.get().is_some()
    }

    /// The kept request, sent to `polling_url`, once one was kept.
    pub(crate) fn to(&self, polling_url: &Url) -> Option<Request> {
        let shape = self.0.get()?;
        let mut request = Request::new(shape.method.clone(), polling_url.clone());
        *request.headers_mut() = shape.headers.clone();
        *request.version_mut() = shape.version;
        *request.timeout_mut() = shape.timeout;
        Some(request)
    }

    /// Keeps what the generated code built, if the poll sent a request.
    pub(crate) fn keep(&self, sent: Option<Request>) {
        if let Some(request) = sent {
            let _ = self.0.set(Shape {
                method: request.method().clone(),
                headers: request.headers().clone(),
                version: request.version(),
                timeout: request.timeout().copied(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_poll_request_goes_to_each_polling_url_as_given() {
        let first = Url::parse("https://api.example/v1/get_result?id=a").unwrap();
        let kept = PollRequest::default();
        assert!(kept.to(&first).is_none(), "nothing kept yet");
        kept.keep(None);
        assert!(!kept.is_kept());
        let mut request = Request::new(reqwest::Method::GET, first.clone());
        request
            .headers_mut()
            .insert("api-version", reqwest::header::HeaderValue::from_static("0.0.1"));
        kept.keep(Some(request));
        assert!(kept.is_kept());
        let other = Url::parse("https://eu.api.example/v1/get_result?shard=7&id=b").unwrap();
        for url in [&first, &other, &first] {
            let copy = kept.to(url).unwrap();
            assert_eq!(copy.method(), reqwest::Method::GET);
            assert_eq!(copy.url(), url);
            assert_eq!(copy.headers()["api-version"], "0.0.1");
            assert!(copy.body().is_none());
        }
    }
}
