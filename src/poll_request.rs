//! The request every poll is, built once per client by the generated
//! `get_result`.

use std::sync::{Mutex, OnceLock};

use reqwest::{Request, Url};

use crate::transport::bodiless_copy;

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
///
/// (A `Mutex` because a request may hold a streamed body and is not `Sync`;
/// this one has none, and the lock is only held while it is copied.)
#[derive(Debug, Default)]
pub(crate) struct PollRequest(OnceLock<Mutex<Request>>);

impl PollRequest {
    /// Whether the generated request was kept already.
    pub(crate) fn is_kept(&self) -> bool {
        self.0.get().is_some()
    }

    /// The kept request, sent to `polling_url`, once one was kept.
    pub(crate) fn to(&self, polling_url: &Url) -> Option<Request> {
        let kept = self.0.get()?.lock().ok()?;
        Some(bodiless_copy(&kept, polling_url.clone()))
    }

    /// Keeps what the generated code built, if the poll sent a request.
    pub(crate) fn keep(&self, sent: Option<Request>) {
        if let Some(request) = sent {
            let _ = self.0.set(Mutex::new(request));
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
