//! Which hosts a recording's client trusted, as the client itself decides
//! (`ClientBuilder::trust_origin`): the origins the recording's head lists
//! (base, regional and the ones added), and https hosts inside the base
//! host's registrable domain, where the service keeps its regional polling
//! and delivery hosts. A base on an IP address or `localhost` (a local mock)
//! also covers that host's other ports, where such a mock serves its
//! regional and delivery origins.

use serde_json::Value;
use url::Url;

/// The hosts a recording trusted.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    listed: Vec<String>,
    base: Option<Url>,
}

impl Trust {
    /// Reads the trusted origins from a recording's `log`: its `_genapi`
    /// head when it has one, else the origin of its first submission.
    pub fn of_log(log: &Value) -> Trust {
        let first_submission = log["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| entry["request"]["method"] == "POST")
            .and_then(|entry| entry["request"]["url"].as_str());
        Trust::of_head(log, first_submission)
    }

    /// [`Trust::of_log`] from the log's head (its fields but the entries)
    /// and the address of its first submission, for a recording read entry
    /// by entry.
    pub fn of_head(head: &Value, first_submission: Option<&str>) -> Trust {
        let genapi = &head["_genapi"];
        let mut listed: Vec<String> = [&genapi["base_url"], &genapi["regional_base_url"]]
            .into_iter()
            .chain(genapi["trusted_origins"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .filter_map(|text| Url::parse(text).ok())
            .map(|url| url.origin().ascii_serialization())
            .collect();
        let base = genapi["base_url"]
            .as_str()
            .or(first_submission)
            .and_then(|text| Url::parse(text).ok());
        if let Some(base) = &base {
            listed.push(base.origin().ascii_serialization());
        }
        Trust { listed, base }
    }

    /// Whether `address` is on a trusted host.
    pub fn trusts(&self, address: &str) -> bool {
        let Ok(url) = Url::parse(address) else {
            return false;
        };
        if self.listed.contains(&url.origin().ascii_serialization()) {
            return true;
        }
        let (Some(base), Some(host)) = (&self.base, url.host_str()) else {
            return false;
        };
        let Some(base_host) = base.host_str() else {
            return false;
        };
        let local = matches!(base.host(), Some(url::Host::Ipv4(_) | url::Host::Ipv6(_))) || base_host == "localhost";
        if local {
            return host == base_host;
        }
        url.scheme() == "https" && genapi_domain::same_registrable_domain(host, base_host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_service_domain_and_listed_origins_are_trusted() {
        let trust = Trust::of_log(&json!({"_genapi": {"base_url": "https://api.example.com/",
            "regional_base_url": "https://api.example.com/", "trusted_origins": ["https://poll.partner.net"]}}));
        assert!(trust.trusts("https://api.eu4.example.com/v1/get_result?id=1"));
        assert!(trust.trusts("https://delivery-eu.example.com/r.png"));
        assert!(trust.trusts("https://poll.partner.net/x"));
        assert!(!trust.trusts("http://api.eu4.example.com/x"), "plain http");
        assert!(!trust.trusts("https://example.com.evil.net/x"));
        let local = Trust::of_log(&json!({"_genapi": {"base_url": "http://127.0.0.1:4000/"}}));
        assert!(local.trusts("http://127.0.0.1:4002/mock/results/t.png"));
        assert!(!local.trusts("http://10.0.0.1:4002/"));
    }
}
