//! Who may receive the API key.
//!
//! One task involves three kinds of host: the API host that takes the
//! submission (the base URL), a **regional API host** named in `polling_url`,
//! and a **delivery host** that serves `result.sample`. All three live inside
//! the service's one registrable domain and use https. The key must reach the
//! API hosts and nothing else: the delivery host needs none, and a key sent to
//! a look-alike host is a leaked key.
//!
//! So the key goes to:
//!
//! 1. the base origin and the regional base origin, exactly as configured;
//! 2. origins the user adds (`ClientBuilder::trust_origin`,
//!    `GENAPI_TRUSTED_ORIGINS`, the command's `--trust-origin`);
//! 3. **https** origins on the default port whose host lies inside the base
//!    host's registrable domain, as the public-suffix list defines it: base
//!    `https://api.example.com` trusts `https://api.eu4.example.com`, never
//!    `https://evilexample.com`, `https://example.com.evil.net`,
//!    `http://eu4.example.com` or a host under a public suffix such as `co.uk`.
//!    A host whose suffix the list does not know has no registrable domain,
//!    so this rule trusts nothing there: base
//!    `https://api.team-a.svc.cluster.local` does not trust
//!    `https://evil.team-b.svc.cluster.local`, another namespace of the
//!    cluster; such hosts are trusted only as configured origins (2).
//!
//! Hosts are compared after the URL parser's normalisation (lower case,
//! punycode for international names) and without a trailing dot. Addresses
//! with user information (`https://user@host`) are never trusted, and IP
//! literals only by exact origin. Plain http is accepted for configured
//! origins only on loopback (the mock service), unless the builder opts in.
//!
//! A `polling_url` outside this set is still polled, without the key; if that
//! host then refuses (401/403), the error names the host, the task and the
//! setting that trusts it.

use std::net::IpAddr;

use reqwest::Url;

/// `scheme`, host without a trailing dot, port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    /// The host as an address, when it is an IP literal (parsed once here,
    /// not for every request it is compared with).
    ip: Option<IpAddr>,
    port: u16,
}

impl Origin {
    fn of(url: &Url) -> Option<Origin> {
        if has_user_info(url) {
            return None;
        }
        // The host as compared: lower case (the parser already folds it), no
        // trailing dot, IPv6 without brackets; an IP literal also as an address.
        let (host, ip) = match url.host()? {
            url::Host::Domain(name) => (name.trim_end_matches('.').to_ascii_lowercase(), None),
            url::Host::Ipv4(ip) => (ip.to_string(), Some(IpAddr::V4(ip))),
            url::Host::Ipv6(ip) => (ip.to_string(), Some(IpAddr::V6(ip))),
        };
        Some(Origin {
            scheme: url.scheme().to_string(),
            host,
            ip,
            port: url.port_or_known_default()?,
        })
    }

    /// Whether `url` is at this origin: `Origin::of(url) == Some(self)`,
    /// compared in place, since it is asked for every request. The port,
    /// held in the origin itself, is compared first: another origin of the
    /// same host (the mock's regional one, a staging port) is passed over
    /// without reading its text.
    fn holds(&self, url: &Url) -> bool {
        if url.port_or_known_default() != Some(self.port) {
            return false;
        }
        let same_host = match url.host() {
            Some(url::Host::Domain(name)) => name.trim_end_matches('.').eq_ignore_ascii_case(&self.host),
            Some(url::Host::Ipv4(ip)) => self.ip == Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.ip == Some(IpAddr::V6(ip)),
            None => false,
        };
        same_host && !has_user_info(url) && url.scheme() == self.scheme
    }
}

fn has_user_info(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// `scheme://host:port` of an address, for messages and logs.
pub(crate) fn origin_text(url: &Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// Whether the address's host is a loopback address or `localhost`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(url::Host::Domain(name)) => name.trim_end_matches('.').eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The set of origins the key may be sent to (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct TrustPolicy {
    exact: Vec<Origin>,
    /// The configured origins as given: base, regional, then added ones.
    named: Vec<Url>,
    /// Registrable domain of the base host, when it has one.
    domain: Option<String>,
}

impl TrustPolicy {
    /// Trusts `base`, `regional`, the `extra` origins, and https hosts inside
    /// the base host's registrable domain.
    pub(crate) fn new(base: &Url, regional: &Url, extra: &[Url]) -> TrustPolicy {
        let exact = [base, regional]
            .into_iter()
            .chain(extra)
            .filter_map(Origin::of)
            .collect();
        let domain = Origin::of(base).and_then(|o| genapi_domain::registrable_domain(&o.host));
        let mut named: Vec<Url> = Vec::new();
        for url in [base, regional].into_iter().chain(extra) {
            if !named.contains(url) {
                named.push(url.clone());
            }
        }
        TrustPolicy { exact, domain, named }
    }

    /// The API hosts configured by name (base first), where a task known only
    /// by its id can be looked for.
    pub(crate) fn named_origins(&self) -> &[Url] {
        &self.named
    }

    /// Whether the key may be sent to this address.
    pub(crate) fn trusts(&self, url: &Url) -> bool {
        if self.exact.iter().any(|origin| origin.holds(url)) {
            return true;
        }
        let Some(domain) = &self.domain else { return false };
        let Some(origin) = Origin::of(url) else { return false };
        origin.scheme == "https"
            && origin.port == 443
            && origin.ip.is_none()
            && (origin.host == *domain || origin.host.strip_suffix(domain.as_str()).is_some_and(|sub| sub.ends_with('.')))
            // A public suffix below the base's domain (a private registry
            // entry) is someone else's namespace.
            && genapi_domain::registrable_domain(&origin.host).as_deref() == Some(domain.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn policy(base: &str) -> TrustPolicy {
        TrustPolicy::new(&url(base), &url(base), &[])
    }

    #[test]
    fn the_base_and_regional_hosts_of_the_service_domain_are_trusted() {
        let p = policy("https://api.example.com");
        for trusted in [
            "https://api.example.com/v1/get_result?id=1",
            "https://api.eu4.example.com/v1/get_result?id=1",
            "https://eu4.example.com/x",
            "https://example.com/x",
            "https://API.EU4.EXAMPLE.COM/x",
            "https://api.eu4.example.com./x",
            "https://api.eu4.example.com:443/x",
        ] {
            assert!(p.trusts(&url(trusted)), "{trusted}");
        }
    }

    #[test]
    fn look_alikes_downgrades_ports_and_userinfo_are_not() {
        let p = policy("https://api.example.com");
        for untrusted in [
            "https://evilexample.com/x",
            "https://example.com.evil.net/x",
            "https://api.example.com@evil.net/x",
            "https://user:pw@api.example.com/x",
            "https://user@eu4.example.com/x",
            "http://eu4.example.com/x",
            "http://api.example.com/x",
            "https://eu4.example.com:8443/x",
            "https://api.example.com:8443/x",
            "https://[::1]/x",
            "https://93.184.216.34/x",
            "https://example.org/x",
            "https://xn--exmple-cua.com/x",
            "https://exämple.com/x",
        ] {
            assert!(!p.trusts(&url(untrusted)), "{untrusted}");
        }
    }

    #[test]
    fn a_base_under_a_public_suffix_trusts_only_its_own_domain() {
        let p = policy("https://api.example.co.uk");
        assert!(p.trusts(&url("https://eu.example.co.uk/x")));
        assert!(!p.trusts(&url("https://other.co.uk/x")));
        assert!(!p.trusts(&url("https://co.uk/x")));
        // A base that is itself a public suffix has no domain to share.
        let bare = policy("https://co.uk");
        assert!(!bare.trusts(&url("https://example.co.uk/x")));
        // Private registry entries are separate owners.
        let pages = policy("https://mine.github.io");
        assert!(!pages.trusts(&url("https://theirs.github.io/x")));
    }

    /// The list's default rule would make `cluster.local` (or `internal`)
    /// one owner's, and the key would reach every namespace of a cluster.
    #[test]
    fn a_base_under_an_unknown_suffix_trusts_only_configured_origins() {
        for (base, neighbour) in [
            (
                "https://api.team-a.svc.cluster.local",
                "https://evil.team-b.svc.cluster.local/v1/get_result?id=1",
            ),
            (
                "https://api.team-a.corp.internal",
                "https://evil.team-b.corp.internal/x",
            ),
            ("https://api.example.madeuptld", "https://eu.example.madeuptld/x"),
        ] {
            let p = policy(base);
            assert!(p.trusts(&url(&format!("{base}/v1/get_result?id=1"))), "{base}");
            assert!(!p.trusts(&url(neighbour)), "{base} must not trust {neighbour}");
        }
        let base = url("https://api.team-a.svc.cluster.local");
        let named = TrustPolicy::new(&base, &base, &[url("https://poll.team-a.svc.cluster.local")]);
        assert!(named.trusts(&url("https://poll.team-a.svc.cluster.local/x")));
        assert!(!named.trusts(&url("https://other.team-a.svc.cluster.local/x")));
    }

    #[test]
    fn international_names_compare_in_punycode() {
        let p = policy("https://api.exämple.com");
        assert!(p.trusts(&url("https://eu.xn--exmple-cua.com/x")));
        assert!(p.trusts(&url("https://eu.exämple.com/x")));
        assert!(!p.trusts(&url("https://eu.example.com/x")));
    }

    #[test]
    fn ip_and_loopback_bases_trust_exact_origins_only() {
        let p = policy("http://127.0.0.1:8787");
        assert!(p.trusts(&url("http://127.0.0.1:8787/v1/get_result?id=1")));
        assert!(!p.trusts(&url("http://127.0.0.1:8788/v1/get_result?id=1")));
        assert!(!p.trusts(&url("https://127.0.0.1:8787/x")));
        let v6 = policy("http://[::1]:8787");
        assert!(v6.trusts(&url("http://[::1]:8787/x")));
        assert!(!v6.trusts(&url("http://[::2]:8787/x")));
    }

    #[test]
    fn added_origins_are_trusted_exactly() {
        let base = url("https://api.example.com");
        let p = TrustPolicy::new(
            &base,
            &base,
            &[url("https://poll.partner.net"), url("http://127.0.0.1:9000")],
        );
        assert!(p.trusts(&url("https://poll.partner.net/v1/get_result?id=1")));
        assert!(!p.trusts(&url("https://other.partner.net/x")));
        assert!(p.trusts(&url("http://127.0.0.1:9000/x")));
        assert!(!p.trusts(&url("http://127.0.0.1:9001/x")));
    }

    #[test]
    fn an_origin_holds_exactly_the_addresses_it_is_the_origin_of() {
        let addresses = [
            "https://api.example.com/v1/get_result?id=1",
            "https://API.Example.COM./x",
            "https://api.example.com:443/x",
            "https://api.example.com:8443/x",
            "http://api.example.com/x",
            "https://user@api.example.com/x",
            "https://:secret@api.example.com/x",
            "https://api.example.com.evil.net/x",
            "http://127.0.0.1:8080/x",
            "http://127.0.0.1:8081/x",
            "http://[::1]:8080/x",
            "http://[0:0:0:0:0:0:0:1]:8080/x",
            "http://localhost:8080/x",
        ];
        for origin in addresses.iter().filter_map(|a| Origin::of(&url(a))) {
            for address in addresses {
                let address = url(address);
                assert_eq!(
                    origin.holds(&address),
                    Origin::of(&address).as_ref() == Some(&origin),
                    "{origin:?} and {address}"
                );
            }
        }
    }

    #[test]
    fn loopback_is_recognised() {
        for yes in [
            "http://127.0.0.1:1",
            "http://127.8.9.1",
            "http://[::1]:5",
            "http://localhost:3",
            "http://LOCALHOST.",
        ] {
            assert!(is_loopback(&url(yes)), "{yes}");
        }
        for no in ["http://10.0.0.1", "http://localhost.evil.net", "http://[::2]"] {
            assert!(!is_loopback(&url(no)), "{no}");
        }
    }
}
