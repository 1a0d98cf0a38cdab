//! # genapi-domain
//!
//! Which hosts belong to one owner, in one place.
//!
//! Anyone may register a name directly under `com`, but also under `co.uk`
//! or, as a customer of a hosting service, under `github.io`: these are
//! **public suffixes**, listed in the [Public Suffix List] that browsers use
//! to keep one site's cookies from another's. A host's **registrable
//! domain** is its public suffix and one label more: `example.co.uk` for
//! `api.eu4.example.co.uk`, `alice.github.io` for `www.alice.github.io`.
//! Hosts with the same registrable domain have one owner; `alice.github.io`
//! and `bob.github.io` do not.
//!
//! A host under a suffix the list does not know (`cluster.local`,
//! `corp.internal`, a made-up top-level domain) has **no** registrable
//! domain here. The list's default rule would make the last label the
//! suffix, so `team-a.svc.cluster.local` and `team-b.svc.cluster.local`
//! would both belong to `cluster.local`: one owner for every namespace of
//! a cluster. Nothing says who owns such names, so nothing is shared:
//! whoever trusts hosts by this crate must name them one by one. The same
//! holds for wildcard-DNS services (`nip.io`, `sslip.io`, …), under which
//! anyone's name resolves to an address written in it.
//!
//! The client sends its API key to https hosts inside the base host's
//! registrable domain (and to the origins configured), and `cargo xtask
//! drift` judges a recording's hosts the same way, so both ask this crate.
//! Host names are taken as a URL parser leaves them: ASCII, international
//! names in punycode (`xn--…`).
//!
//! [Public Suffix List]: https://publicsuffix.org/
//!
//! ```
//! use genapi_domain::{registrable_domain, same_registrable_domain};
//!
//! assert_eq!(registrable_domain("api.eu4.example.com").as_deref(), Some("example.com"));
//! assert_eq!(registrable_domain("shop.example.co.uk").as_deref(), Some("example.co.uk"));
//! assert!(same_registrable_domain("api.example.com", "delivery-eu.example.com"));
//! assert!(!same_registrable_domain("api.example.com", "example.com.evil.net"));
//! ```

use std::net::IpAddr;

/// The registrable domain of a host name, in lower case and without a
/// trailing dot; `None` for an IP literal, a public suffix itself (`co.uk`),
/// a host whose suffix the list does not know (only its default rule
/// matches: `api.svc.cluster.local`, `build.corp.internal`) and anything that is not a host name as a URL parser leaves it (ASCII
/// letters, digits, `-` and `_` in labels that are not empty, one trailing
/// dot at most; international names in punycode).
///
/// ```
/// use genapi_domain::registrable_domain;
///
/// assert_eq!(registrable_domain("API.Example.COM.").as_deref(), Some("example.com"));
/// assert_eq!(registrable_domain("xn--bcher-kva.de").as_deref(), Some("xn--bcher-kva.de"));
/// assert_eq!(registrable_domain("co.uk"), None);
/// assert_eq!(registrable_domain("api.team-a.svc.cluster.local"), None);
/// assert_eq!(registrable_domain("127.0.0.1"), None);
/// assert_eq!(registrable_domain(" example.com"), None);
/// ```
pub fn registrable_domain(host: &str) -> Option<String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let is_name = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !is_name || host.parse::<IpAddr>().is_ok() {
        return None;
    }
    let host = host.to_ascii_lowercase();
    if under_wildcard_dns(&host) {
        return None;
    }
    let found = psl2::lookup(&host)?;
    // The default rule answers for any name; only a listed suffix says
    // where one owner's names end.
    if !found.is_known() {
        return None;
    }
    found.registrable_domain().map(str::to_string)
}

/// Services whose every name resolves to an address written in it
/// (`10.0.0.5.nip.io` is 10.0.0.5): anyone can point a name under them at
/// a machine of theirs, so no two names there are one owner's. They are
/// not on the public-suffix list.
const WILDCARD_DNS: [&str; 7] = [
    "nip.io",
    "sslip.io",
    "xip.io",
    "traefik.me",
    "localtest.me",
    "lvh.me",
    "vcap.me",
];

/// Whether `host` (lower case, no trailing dot) is under a wildcard-DNS
/// service.
fn under_wildcard_dns(host: &str) -> bool {
    WILDCARD_DNS
        .iter()
        .any(|service| host == *service || host.strip_suffix(service).is_some_and(|rest| rest.ends_with('.')))
}

/// Whether two host names have the same registrable domain; never for IP
/// literals, public suffixes or names under a suffix the list does not
/// know, whose owner the list does not tell.
///
/// ```
/// use genapi_domain::same_registrable_domain;
///
/// assert!(same_registrable_domain("api.example.com", "api.eu4.example.com"));
/// assert!(!same_registrable_domain("api.example.com", "evilexample.com"));
/// assert!(!same_registrable_domain("127.0.0.1", "127.0.0.1"));
/// ```
pub fn same_registrable_domain(a: &str, b: &str) -> bool {
    match (registrable_domain(a), registrable_domain(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_private_suffix_is_its_own_owner() {
        // github.io is on the list's private part: each user's site is a
        // registrable domain of its own.
        assert!(!same_registrable_domain("alice.github.io", "bob.github.io"));
        assert_eq!(
            registrable_domain("alice.github.io").as_deref(),
            Some("alice.github.io")
        );
    }

    #[test]
    fn look_alikes_are_other_owners() {
        for other in ["evilexample.com", "example.com.evil.net", "example.org", "com"] {
            assert!(!same_registrable_domain("api.example.com", other), "{other}");
        }
    }

    /// Host names made of labels the list has rules for (wildcards,
    /// exceptions, private suffixes, country codes), 1 to 5 of them.
    fn host() -> impl Strategy<Value = String> {
        const LABELS: &[&str] = &[
            "a",
            "api",
            "www",
            "example",
            "com",
            "co",
            "uk",
            "jp",
            "kawasaki",
            "city",
            "github",
            "io",
            "blogspot",
            "ck",
            "s3",
            "amazonaws",
            "k12",
            "ma",
            "us",
            "pvt",
            "ai",
            "xn--p1ai",
            "appspot",
            "net",
            "cloudfront",
            "dev",
            "herokuapp",
            "netlify",
            "app",
            "vercel",
            "pages",
            "workers",
            "run",
            "web",
            "gitlab",
            "fly",
            "bd",
            "kobe",
            "nom",
            "gov",
            "edu",
            "au",
            "br",
            "mil",
        ];
        proptest::collection::vec(proptest::sample::select(LABELS), 1..=5).prop_map(|labels| labels.join("."))
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x6765_6e61_7069),
            ..ProptestConfig::default()
        })]

        /// The list as data answers as the list compiled into code does,
        /// where that list knows the suffix; where it knows none, there is
        /// no domain.
        #[test]
        fn agrees_with_the_established_list(host in host()) {
            let established = psl::domain(host.as_bytes())
                .filter(|domain| domain.suffix().is_known())
                .and_then(|domain| std::str::from_utf8(domain.as_bytes()).ok().map(str::to_string));
            prop_assert_eq!(registrable_domain(&host), established, "{}", host);
        }
    }

    /// The default rule would give every namespace of a cluster (or every
    /// host of a made-up top-level domain) one owner.
    #[test]
    fn names_under_an_unknown_suffix_have_no_owner() {
        for host in [
            "api.team-a.svc.cluster.local",
            "evil.team-b.svc.cluster.local",
            "cluster.local",
            "build.corp.internal",
            "api.example.madeuptld",
            "localhost",
            "xn--bcher-kva.example",
        ] {
            assert_eq!(registrable_domain(host), None, "{host}");
        }
        assert!(!same_registrable_domain(
            "api.team-a.svc.cluster.local",
            "evil.team-b.svc.cluster.local"
        ));
        assert!(!same_registrable_domain("a.corp.internal", "a.corp.internal"));
    }

    /// Any name under a wildcard-DNS service points where its name says:
    /// none is anyone's own.
    #[test]
    fn names_under_wildcard_dns_have_no_owner() {
        for host in [
            "api.10.0.0.5.nip.io",
            "x.6.6.6.6.nip.io",
            "127.0.0.1.sslip.io",
            "nip.io",
            "a.lvh.me",
        ] {
            assert_eq!(registrable_domain(host), None, "{host}");
        }
        assert!(!same_registrable_domain("api.10.0.0.5.nip.io", "x.6.6.6.6.nip.io"));
        assert_eq!(registrable_domain("notnip.io").as_deref(), Some("notnip.io"));
    }

    #[test]
    fn suffixes_and_empty_names_have_no_domain() {
        for odd in ["", ".", "uk", "co.uk", "com."] {
            assert_eq!(registrable_domain(odd), None, "{odd:?}");
        }
    }

    /// A list that lost one of these would widen who gets the key for a
    /// service hosted under it: each must stay a suffix of its own.
    #[test]
    fn well_known_suffixes_are_each_their_own() {
        for suffix in [
            "co.uk",
            "com.au",
            "co.jp",
            "com.br",
            "github.io",
            "gitlab.io",
            "herokuapp.com",
            "blogspot.com",
            "appspot.com",
            "cloudfront.net",
            "s3.amazonaws.com",
            "netlify.app",
            "vercel.app",
            "pages.dev",
            "workers.dev",
            "web.app",
            "firebaseapp.com",
            "azurewebsites.net",
            "fly.dev",
        ] {
            assert_eq!(registrable_domain(suffix), None, "{suffix}");
            let owner = format!("tenant.{suffix}");
            assert_eq!(registrable_domain(&owner), Some(owner.clone()), "{owner}");
            assert_eq!(
                registrable_domain(&format!("api.{owner}")),
                Some(owner.clone()),
                "api.{owner}"
            );
            assert!(!same_registrable_domain(&owner, &format!("other.{suffix}")), "{owner}");
        }
    }

    /// Only host names as a URL parser leaves them have a domain: text
    /// around a name, brackets, empty labels and non-ASCII letters do not.
    #[test]
    fn what_is_not_a_host_name_has_no_domain() {
        for text in [
            " example.com",
            "example.com ",
            "\texample.com",
            "[example.com]",
            "example.com..",
            "a..example.com",
            ".example.com",
            "bücher.example",
            "exa mple.com",
            "example.com/",
            "user@example.com",
            "example.com:443",
            "[::1]",
            "::1",
        ] {
            assert_eq!(registrable_domain(text), None, "{text:?}");
        }
        assert_eq!(
            registrable_domain("under_score.example.com").as_deref(),
            Some("example.com")
        );
    }
}
