//! # genapi-domain
//!
//! Which hosts belong to one owner, in one place: a host's **registrable
//! domain** by the public-suffix list (`example.co.uk` for
//! `api.eu4.example.co.uk`, since `co.uk` is a suffix anyone may register
//! under). The client sends its API key to https hosts inside the base host's
//! registrable domain, and `cargo xtask drift` judges a recording's hosts the
//! same way, so both ask this crate.
//!
//! The list is read from data compiled in (the `psl2` crate), not compiled
//! into code: the established `psl` crate, whose answers the tests hold this
//! one to, cost a first build of the client about 5 s of CPU.
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
/// trailing dot; `None` for an IP literal (bracketed or not), a public
/// suffix itself (`co.uk`) or a name the list cannot place.
///
/// ```
/// use genapi_domain::registrable_domain;
///
/// assert_eq!(registrable_domain("API.Example.COM.").as_deref(), Some("example.com"));
/// assert_eq!(registrable_domain("co.uk"), None);
/// assert_eq!(registrable_domain("127.0.0.1"), None);
/// assert_eq!(registrable_domain("[::1]"), None);
/// ```
pub fn registrable_domain(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.');
    let unbracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if unbracketed.parse::<IpAddr>().is_ok() {
        return None;
    }
    let host = host.to_ascii_lowercase();
    psl2::registrable_domain(&host)
}

/// Whether two host names have the same registrable domain; never for IP
/// literals or public suffixes, whose owner the list does not tell.
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
    fn host() -> impl proptest::strategy::Strategy<Value = String> {
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
        ];
        proptest::collection::vec(proptest::sample::select(LABELS), 1..=5).prop_map(|labels| labels.join("."))
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x6765_6e61_7069),
            ..ProptestConfig::default()
        })]

        /// The list as data answers as the list compiled into code does.
        #[test]
        fn agrees_with_the_established_list(host in host()) {
            prop_assert_eq!(registrable_domain(&host), psl::domain_str(&host).map(str::to_string), "{}", host);
        }
    }

    #[test]
    fn suffixes_and_empty_names_have_no_domain() {
        for odd in ["", ".", "uk", "co.uk", "com."] {
            assert_eq!(registrable_domain(odd), None, "{odd:?}");
        }
    }
}
