//! What a client and everything it hands out share: the transport, the
//! configured hosts, the active-task limit, the wait options and what was
//! learned about task durations. Tasks and outputs hold the session, not the
//! client, so they need nothing from the client's module.

use std::sync::{Arc, Mutex};

use reqwest::Url;

use crate::error::{Error, Result};
use crate::limit::ActiveTasks;
use crate::poll_request::PollRequest;
use crate::transport::Transport;
use crate::wait::{Learned, Quartiles, WaitOptions};

/// The state behind a [`crate::Client`] and its clones.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) transport: Arc<Transport>,
    pub(crate) base_url: Url,
    pub(crate) regional_url: Url,
    pub(crate) active: Option<Arc<ActiveTasks>>,
    pub(crate) wait: WaitOptions,
    pub(crate) learned: Mutex<Learned>,
    /// The request every poll is, once the first poll built it.
    pub(crate) poll_request: PollRequest,
}

impl Session {
    /// The task was seen final: its place under the limit is free.
    pub(crate) fn seen_final(&self, id: &str) {
        if let Some(active) = &self.active {
            active.finished(id);
        }
    }

    pub(crate) fn quartiles(&self, operation: &str) -> Option<Quartiles> {
        self.learned.lock().ok()?.quartiles(operation)
    }

    pub(crate) fn learn(&self, operation: &str, seconds: f64) {
        if let Ok(mut learned) = self.learned.lock() {
            learned.observe(operation, seconds);
        }
    }

    /// `{origin}/v1/get_result?id=…` on each API host configured by name,
    /// base first: where a task known only by its id may be (a regional
    /// host answers only for its own tasks, the global one 404 for them).
    pub(crate) fn polling_candidates(&self, id: &str) -> Result<Vec<Url>> {
        self.transport
            .named_origins()
            .iter()
            .map(|origin| {
                let mut url = join(origin, "/v1/get_result")?;
                url.query_pairs_mut().append_pair("id", id);
                Ok(url)
            })
            .collect()
    }

    /// `{base}/v1/get_result?id=…`, where a task without a `polling_url` is
    /// polled.
    pub(crate) fn fallback_polling_url(&self, id: &str) -> Result<Url> {
        let mut url = join(&self.base_url, "/v1/get_result")?;
        url.query_pairs_mut().append_pair("id", id);
        Ok(url)
    }
}

/// `base` + `path`, keeping any path prefix of the base. `path` must be an
/// absolute path (`/v1/…`): anything that would leave the base's origin
/// (`//host`, `@host`, a scheme) is refused.
pub(crate) fn join(base: &Url, path: &str) -> Result<Url> {
    let refuse = || Error::InvalidArgument {
        argument: "path",
        problem: format!("{path:?} is not a path of the service; give a path such as /v1/gen-2-pro"),
    };
    // Only a plain path: no query or fragment, no `.` or `..` segment that
    // the URL parser would fold into another operation's path.
    let dot_segment = path.split('/').any(|segment| segment == "." || segment == "..");
    if !path.starts_with('/') || path.starts_with("//") || path.contains(['\\', '@', '?', '#']) || dot_segment {
        return Err(refuse());
    }
    let text = format!("{}{}", base.as_str().trim_end_matches('/'), path);
    let url = Url::parse(&text).map_err(|_| refuse())?;
    // The parser folds what the check above cannot see (`%2e%2e` is `..`)
    // and encodes what a path should not hold: the path sent must be the
    // base's path and `path`, exactly as written.
    let expected = format!("{}{}", base.path().trim_end_matches('/'), path);
    if url.path() != expected {
        return Err(refuse());
    }
    let same_origin = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.username().is_empty();
    if same_origin {
        Ok(url)
    } else {
        Err(refuse())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_of_the_service_can_be_joined() {
        let base = Url::parse("https://api.example.com/prefix/").unwrap();
        assert_eq!(
            join(&base, "/v1/gen-2-pro").unwrap().as_str(),
            "https://api.example.com/prefix/v1/gen-2-pro"
        );
        for hostile in [
            "/v1/%2e%2e/admin",
            "/v1/.%2E/admin",
            "/v1/%2e/x",
            "/v1/a b",
            "@evil.example/x",
            "//evil.example/x",
            "https://evil.example/x",
            "v1/x",
            "/\\evil",
            "/x@y",
            "/v1/./gen-2-pro",
            "/v1/x/../gen-2-pro",
            "/v1/gen-2-pro?",
            "/v1/gen-2-pro#",
        ] {
            assert!(join(&base, hostile).is_err(), "{hostile}");
        }
    }
}
