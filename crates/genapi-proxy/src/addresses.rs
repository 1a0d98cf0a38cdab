//! The service's addresses, passed through the proxy.
//!
//! An acceptance names a `polling_url`, and a poll result a
//! `result.sample`, on hosts the SDK would otherwise call directly: a
//! regional polling host, a delivery host. The proxy rewrites each to an
//! address of its own, so the SDK polls and downloads through it (and a
//! regional host works for an SDK that would refuse it). An address on
//! another host is written `/_genapi/origin/{origin}/{path}`, the origin in
//! URL-safe base64; the proxy relays there only to origins the service
//! itself handed out, or that the client's trust rule gives the key to, so
//! it is never a relay to anywhere a caller names.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;
use url::Url;

use crate::memory::Memory;

/// The path prefix of addresses relayed to another origin.
pub(crate) const ORIGIN_PREFIX: &str = "/_genapi/origin/";

/// Where a request to the proxy goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// To the service's base URL, at this path and query.
    Base,
    /// To this origin (`scheme://host[:port]`), at this path and query.
    Origin { origin: String, path_and_query: String },
    /// An origin part that is not one.
    Unreadable,
}

/// Where `path_and_query` (a request to the proxy) goes.
pub(crate) fn route(path_and_query: &str) -> Route {
    let Some(rest) = path_and_query.strip_prefix(ORIGIN_PREFIX) else {
        return Route::Base;
    };
    let (token, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(token) else {
        return Route::Unreadable;
    };
    match String::from_utf8(bytes).ok().and_then(|text| Url::parse(&text).ok()) {
        Some(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Route::Origin {
            origin: url.origin().ascii_serialization(),
            path_and_query: path,
        },
        _ => Route::Unreadable,
    }
}

/// Rewrites service addresses to the proxy's.
pub(crate) struct Rewriter<'a> {
    /// The service's base URL.
    pub(crate) base: &'a Url,
    /// The proxy's own origin, as callers reach it (`http://127.0.0.1:PORT`).
    pub(crate) proxy: &'a str,
    /// Where the origins handed out are remembered.
    pub(crate) memory: &'a Memory,
}

impl Rewriter<'_> {
    /// `address`, through the proxy; as it is when it is no http(s) address.
    pub(crate) fn address(&self, address: &str) -> Option<String> {
        let url = Url::parse(address).ok()?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return None;
        }
        let mut path_and_query = url.path().to_string();
        if let Some(query) = url.query() {
            path_and_query.push('?');
            path_and_query.push_str(query);
        }
        let origin = url.origin().ascii_serialization();
        if origin == self.base.origin().ascii_serialization() && self.base.path() == "/" {
            return Some(format!("{}{path_and_query}", self.proxy));
        }
        self.memory.learn_origin(&origin);
        Some(format!(
            "{}{ORIGIN_PREFIX}{}{path_and_query}",
            self.proxy,
            URL_SAFE_NO_PAD.encode(origin.as_bytes())
        ))
    }

    /// An answer's JSON body with its `polling_url` and `result.sample`
    /// through the proxy; `None` when it has neither (or is no JSON), to be
    /// passed on as it came.
    pub(crate) fn body(&self, body: &[u8]) -> Option<Vec<u8>> {
        let mut value: Value = serde_json::from_slice(body).ok()?;
        let mut changed = false;
        for place in [&["polling_url"][..], &["result", "sample"][..]] {
            if let Some(Value::String(address)) = pointer_mut(&mut value, place) {
                if let Some(rewritten) = self.address(address) {
                    *address = rewritten;
                    changed = true;
                }
            }
        }
        if !changed {
            return None;
        }
        serde_json::to_vec(&value).ok()
    }
}

fn pointer_mut<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, key| value.get_mut(*key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewriter<'a>(base: &'a Url, memory: &'a Memory) -> Rewriter<'a> {
        Rewriter {
            base,
            proxy: "http://127.0.0.1:9",
            memory,
        }
    }

    #[test]
    fn an_address_on_the_base_host_keeps_its_path_at_the_proxy() {
        let base = Url::parse("https://api.example.com").unwrap();
        let memory = Memory::local(None).unwrap();
        let shown = rewriter(&base, &memory).address("https://api.example.com/v1/get_result?id=7");
        assert_eq!(shown.as_deref(), Some("http://127.0.0.1:9/v1/get_result?id=7"));
        assert_eq!(route("/v1/get_result?id=7"), Route::Base);
    }

    #[tokio::test]
    async fn an_address_on_another_host_goes_there_through_the_proxy_and_back() {
        let base = Url::parse("https://api.example.com").unwrap();
        let memory = Memory::local(None).unwrap();
        let shown = rewriter(&base, &memory)
            .address("https://delivery.eu4.example.com/results/x.png?sig=abc")
            .unwrap();
        let path = shown.strip_prefix("http://127.0.0.1:9").unwrap();
        assert_eq!(
            route(path),
            Route::Origin {
                origin: "https://delivery.eu4.example.com".into(),
                path_and_query: "/results/x.png?sig=abc".into()
            }
        );
        assert!(memory.knows_origin("https://delivery.eu4.example.com").await);
    }

    #[test]
    fn an_origin_part_that_is_no_origin_is_unreadable() {
        for path in ["/_genapi/origin/!!!/x", "/_genapi/origin/Zm9v/x"] {
            assert_eq!(route(path), Route::Unreadable, "{path}");
        }
    }

    #[test]
    fn answers_are_rewritten_where_they_name_addresses_only() {
        let base = Url::parse("http://127.0.0.1:5").unwrap();
        let memory = Memory::local(None).unwrap();
        let rewriter = rewriter(&base, &memory);
        let body = br#"{"id":"t","polling_url":"http://127.0.0.1:5/v1/get_result?id=t","note":"http://127.0.0.1:5/x"}"#;
        let rewritten: Value = serde_json::from_slice(&rewriter.body(body).unwrap()).unwrap();
        assert_eq!(rewritten["polling_url"], "http://127.0.0.1:9/v1/get_result?id=t");
        assert_eq!(rewritten["note"], "http://127.0.0.1:5/x");
        assert_eq!(rewriter.body(br#"{"id":"t"}"#), None);
        assert_eq!(rewriter.body(b"not json"), None);
    }
}
