//! # genapi-text
//!
//! What genapi's crates do to text before a person sees it, in one place:
//!
//! - [`clean`]: characters that should not reach a terminal as they are
//!   ([`is_unsafe_to_show`]: control characters, escape sequences, and the
//!   invisible ones that reorder or hide text) become spaces. The command
//!   passes every text from the service, a job file or the user through it
//!   before printing it.
//! - [`scrubbed`] (and [`scrub`], in place): a JSON value as it is shown in
//!   messages and `Debug` output, without the values of fields whose name
//!   says they are secret, with long strings (images) cut and deep nesting
//!   folded.
//! - [`shown_address`]: an address without what may hold a secret in it
//!   (a user and password, a query or a fragment), the one rule for every
//!   address shown ([`address_alone`] is the same without the marks of
//!   what was left out).
//! - [`cut`]: a long text as its start and its length, `… (300000
//!   characters)`, so what shows it holds little whatever the text.
//! - [`debug_error`]: an error's Debug form, its advice first and then its
//!   causes, so `?` in `main` prints what to do ([`causes`] is the chain
//!   alone).
//!
//! The client's scrubber, which removes the secrets it knows by value (the
//! key, webhook secrets) from every answer, is another thing: this crate
//! knows no secret, only what a field's name says.

use serde_json::Value;

mod error_report;

pub use error_report::{causes, debug_error};

/// Whether a character should not reach a terminal as it is: control
/// characters, the line and paragraph separators (which some terminals and
/// log viewers break lines at, so a field could forge a line of its own),
/// and the invisible ones that reorder or hide text (bidi controls,
/// zero-width characters, the byte-order mark).
///
/// ```
/// assert!(genapi_text::is_unsafe_to_show('\u{1b}'));
/// assert!(genapi_text::is_unsafe_to_show('\u{202e}'));
/// assert!(genapi_text::is_unsafe_to_show('\u{2028}'));
/// assert!(!genapi_text::is_unsafe_to_show('é'));
/// ```
pub fn is_unsafe_to_show(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
                | '\u{061c}'
        )
}

/// An address as it may be shown: its user information (`user:password@`)
/// replaced by `…@`, its query and fragment by `?…`, and [`clean`]. Text
/// without a scheme is shown only when it has the shape of a host name
/// (`api.example.com`, `127.0.0.1:8787`), after its last `@`: anything else
/// may be a key pasted where an address belongs, and is not shown.
///
/// This is the one rule by which genapi's crates show an address anywhere
/// (a message, a progress line, a span's field): no query (nor path
/// parameters, `;…`), no user information, no fragment. [`address_alone`] applies the same rule
/// without the marks of what was left out, for a field a program reads.
///
/// ```
/// assert_eq!(
///     genapi_text::shown_address("https://me:pa55@api.example.com/v1?token=t0k"),
///     "https://…@api.example.com/v1?…"
/// );
/// assert_eq!(genapi_text::shown_address("https://cdn.example.com/@ana/x.png"), "https://cdn.example.com/@ana/x.png");
/// assert_eq!(genapi_text::shown_address("api.example.com"), "api.example.com");
/// assert_eq!(genapi_text::shown_address("sk-SECRET9x"), "(not an address; not shown)");
/// ```
pub fn shown_address(text: &str) -> String {
    match Address::of(text) {
        None => NOT_AN_ADDRESS.to_string(),
        Some(address) => {
            let mut shown = match address.scheme {
                Some(scheme) if address.had_user => format!("{scheme}://…@{}", address.rest),
                Some(scheme) => format!("{scheme}://{}", address.rest),
                None => address.rest,
            };
            if address.had_query {
                shown.push_str("?…");
            }
            shown
        }
    }
}

/// An address by the rule of [`shown_address`] (no query, no user
/// information, no fragment), with nothing in their place: what a field
/// a program reads carries, such as a span's `url.full`. Text that is no
/// address is not shown, as there.
///
/// ```
/// assert_eq!(
///     genapi_text::address_alone("https://me:pa55@api.example.com/v1?X-Amz-Signature=s1g#top"),
///     "https://api.example.com/v1"
/// );
/// assert_eq!(genapi_text::address_alone("http://127.0.0.1:8787/v1/get_result?id=7"), "http://127.0.0.1:8787/v1/get_result");
/// assert_eq!(genapi_text::address_alone("sk-SECRET9x"), "(not an address; not shown)");
/// ```
pub fn address_alone(text: &str) -> String {
    match Address::of(text) {
        None => NOT_AN_ADDRESS.to_string(),
        Some(Address {
            scheme: Some(scheme),
            rest,
            ..
        }) => format!("{scheme}://{rest}"),
        Some(address) => address.rest,
    }
}

/// A task's polling address as a record a person may share keeps it
/// (results.jsonl, `--json` output, a resume line): the rule of
/// [`address_alone`], except that the query's `id` parameter stays. The
/// service's polling addresses name their task by it, and a task id is no
/// credential; any other parameter (a token a user's own address carried)
/// may be one, and is left out. Only a state file a program keeps for
/// itself, owner-only, holds the address whole.
///
/// ```
/// assert_eq!(
///     genapi_text::task_address("https://api.eu1.example.com/v1/get_result?id=t-7&token=s3cret"),
///     "https://api.eu1.example.com/v1/get_result?id=t-7"
/// );
/// assert_eq!(genapi_text::task_address("https://poll.example.com/t/7?token=s3cret"), "https://poll.example.com/t/7");
/// assert_eq!(
///     genapi_text::task_address("http://127.0.0.1:8/v1/get_result;token=TOK3?id=t-7"),
///     "http://127.0.0.1:8/v1/get_result?id=t-7"
/// );
/// assert_eq!(genapi_text::task_address("https://me:pw@poll.example.com/t?id=a%20b"), "https://poll.example.com/t?id=a%20b");
/// ```
pub fn task_address(text: &str) -> String {
    let alone = address_alone(text);
    if alone == NOT_AN_ADDRESS {
        return alone;
    }
    let query = text
        .split('#')
        .next()
        .unwrap_or_default()
        .split_once('?')
        .map(|(_, query)| query);
    let id = query.and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("id="))
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.~%".contains(c)))
    });
    match id {
        Some(id) => format!("{alone}?id={id}"),
        None => alone,
    }
}

/// What is said of text that is not shown because it is no address.
const NOT_AN_ADDRESS: &str = "(not an address; not shown)";

/// An address taken apart by the one rule: what may be shown of it, and
/// whether something that may not was there.
struct Address {
    /// The scheme, when the text has one, cleaned.
    scheme: Option<String>,
    /// The host (with its port) and path, cleaned.
    rest: String,
    /// Whether user information was left out.
    had_user: bool,
    /// Whether a query or fragment was left out.
    had_query: bool,
}

impl Address {
    /// `None` when `text` is no address (see [`shown_address`]).
    fn of(text: &str) -> Option<Address> {
        let text = text.trim();
        if !text.contains("://") && !looks_like_a_host(text.split('@').next_back().unwrap_or_default()) {
            return None;
        }
        // User information first: a password may hold `/`, `?`, `#` or `;`,
        // which would otherwise end the host before its `@` is seen.
        let (scheme, after, had_user) = match text.split_once("://") {
            None => (None, text.split('@').next_back().unwrap_or_default(), false),
            Some((scheme, after)) => match user_information_end(after) {
                Some(at) => (Some(scheme), &after[at + 1..], true),
                None => (Some(scheme), after, false),
            },
        };
        // A path parameter (`/get_result;token=…`, `;jsessionid=…`) is a
        // query in all but name: cut with it.
        let (rest, had_query) = match after.find(['?', '#', ';']) {
            Some(at) => (&after[..at], true),
            None => (after, false),
        };
        Some(Address {
            scheme: scheme.map(clean),
            rest: clean(rest),
            had_user,
            had_query,
        })
    }
}

/// Where the user information of `after` (an address after its `://`)
/// ends, so that no password is ever shown, whatever it holds (`/`, `?`,
/// `#`, `;`, `@`) and whatever host follows it: the last `@` of the
/// address, but for an `@` just after a `/` (a path's `/@user`) and one in
/// the query or fragment of an address that opens with a host
/// (`https://api.example.com/v1?to=a@b.example.com`). So an address with an
/// `@` in its path (`https://api.example.com/p@x`) is shown from there:
/// short, never with a password.
fn user_information_end(after: &str) -> Option<usize> {
    let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    if !surely_a_host(&after[..authority_end]) {
        // The user information holds an `@`, `/`, `?` or `#` of its own:
        // it ends at the last `@` followed by a host, as sure a one as
        // there is. Never at an `@` of the query (`?to=a@b.example`),
        // which would show the rest of the query.
        let followed_by = |at: usize, host_rule: fn(&str) -> bool| {
            let rest = &after[at + 1..];
            host_rule(&rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())])
        };
        let ats = || after.rmatch_indices('@').map(|(at, _)| at);
        return ats()
            .find(|&at| followed_by(at, surely_a_host))
            .or_else(|| ats().find(|&at| followed_by(at, looks_like_an_authority)))
            .or_else(|| after.rfind('@'));
    }
    let query_start = after.find(['?', '#']).unwrap_or(after.len());
    after[..query_start]
        .rmatch_indices('@')
        .map(|(at, _)| at)
        .find(|&at| !after[..at].ends_with('/'))
}

/// Whether `host` (an authority: a host and perhaps its port) surely is
/// one: a dot, brackets or `localhost`, and a port a port can be.
/// `admin:S3cret/`, `admin:8675309#` and `Xy9#` are user information cut
/// short, not hosts.
fn surely_a_host(host: &str) -> bool {
    let port_ok = host
        .rsplit_once(':')
        .filter(|_| !host.ends_with(']'))
        .is_none_or(|(_, port)| port.parse::<u16>().is_ok());
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    looks_like_an_authority(host)
        && port_ok
        && (name.contains('.') || host.starts_with('[') || name.eq_ignore_ascii_case("localhost"))
}

/// Whether `text` has the shape of a host and perhaps its port: names of
/// letters, digits, `-` and `_` joined by dots (a trailing one too), or a
/// bracketed IPv6 address; nothing else (no `@`, no space, no escape).
fn looks_like_an_authority(text: &str) -> bool {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inside, after))
                if !inside.is_empty() && inside.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') =>
            {
                return after.is_empty()
                    || after
                        .strip_prefix(':')
                        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            }
            _ => return false,
        },
        None => match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        },
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let name = host.strip_suffix('.').unwrap_or(host);
    port_ok
        && !name.is_empty()
        && name
            .split('.')
            .all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
}

/// `text` with every address in it (`scheme://…`, up to a space, a
/// double quote or a bracket: a password may hold a `'`) shown by the rule of [`shown_address`]: for free text that may
/// quote an address whole, as an error a program's own code wrote may.
///
/// ```
/// assert_eq!(
///     genapi_text::addresses_shown("GET https://cdn.example.com/r/1.jpg?sig=s1g failed: refused"),
///     "GET https://cdn.example.com/r/1.jpg?… failed: refused"
/// );
/// assert_eq!(genapi_text::addresses_shown("no address here"), "no address here");
/// ```
pub fn addresses_shown(text: &str) -> String {
    let unescaped = escapes_of_addresses_read(text);
    let mut shown = String::with_capacity(unescaped.len());
    let mut rest: &str = &unescaped;
    while let Some(found) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` just before.
        let start = rest[..found]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || "+-.".contains(*c))
            .last()
            .map_or(found, |(at, _)| at);
        let end = rest[found..]
            .find(|c: char| c.is_whitespace() || "\"<>`".contains(c))
            .map_or(rest.len(), |at| found + at);
        shown.push_str(&rest[..start]);
        if start == found {
            // No scheme: not an address, kept as it is.
            shown.push_str(&rest[start..end]);
        } else {
            shown.push_str(&shown_address(&rest[start..end]));
        }
        rest = &rest[end..];
    }
    shown.push_str(rest);
    shown
}

/// `text` with the escapes an address may be spelled with read as the
/// characters they stand for: JSON's (`https:\/\/`, `\u0040`) and HTML's
/// (`&#x2F;`, `&#64;`, `&commat;`), escaped again too (`&amp;#64;`), so a
/// service that quotes JSON or HTML in its text still has its addresses
/// shown by the rule. Only the characters that shape an address are read.
fn escapes_of_addresses_read(text: &str) -> std::borrow::Cow<'_, str> {
    let mut read = std::borrow::Cow::Borrowed(text);
    // Escapes escaped again, a few levels deep.
    for _ in 0..4 {
        if !read.contains(['\\', '&']) {
            break;
        }
        let once = escapes_read_once(&read);
        if once == *read {
            break;
        }
        read = std::borrow::Cow::Owned(once);
    }
    read
}

/// The characters an address is shaped by.
fn shapes_an_address(c: char) -> bool {
    "/:@?#&=;%".contains(c)
}

/// One level of [`escapes_of_addresses_read`].
fn escapes_read_once(text: &str) -> String {
    const NAMED: [(&str, char); 8] = [
        ("&sol;", '/'),
        ("&commat;", '@'),
        ("&colon;", ':'),
        ("&quest;", '?'),
        ("&num;", '#'),
        ("&equals;", '='),
        ("&semi;", ';'),
        ("&amp;", '&'),
    ];
    let mut read = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['\\', '&']) {
        read.push_str(&rest[..at]);
        let escape = &rest[at..];
        let numeric = |digits: &str, radix: u32| {
            u32::from_str_radix(digits, radix)
                .ok()
                .and_then(char::from_u32)
                .filter(|c| shapes_an_address(*c))
        };
        let found: Option<(char, usize)> = if let Some(json) = escape.strip_prefix("\\") {
            if json.starts_with('/') {
                Some(('/', 2))
            } else {
                json.strip_prefix(['u', 'U'])
                    .and_then(|hex| hex.get(..4))
                    .and_then(|hex| numeric(hex, 16))
                    .map(|c| (c, 6))
            }
        } else if let Some(reference) = escape.strip_prefix("&#") {
            let end = reference.find(';').filter(|end| *end <= 8);
            end.and_then(|end| {
                let body = &reference[..end];
                let c = match body.strip_prefix(['x', 'X']) {
                    Some(hex) => numeric(hex, 16),
                    None => numeric(body, 10),
                };
                c.map(|c| (c, end + 3))
            })
        } else {
            NAMED
                .iter()
                .find(|(name, _)| {
                    escape
                        .get(..name.len())
                        .is_some_and(|head| head.eq_ignore_ascii_case(name))
                })
                .map(|(name, c)| (*c, name.len()))
        };
        match found {
            Some((c, length)) => {
                read.push(c);
                rest = &escape[length..];
            }
            None => {
                let first = escape.chars().next().map_or(1, char::len_utf8);
                read.push_str(&escape[..first]);
                rest = &escape[first..];
            }
        }
    }
    read.push_str(rest);
    read
}

/// Whether `text` has the shape of a host name or address, with a port
/// and a path perhaps: labels of letters, digits and `-` joined by dots (at
/// least one dot, or `localhost`).
fn looks_like_a_host(text: &str) -> bool {
    let host = text.split(['/', '?', '#']).next().unwrap_or_default();
    let name = host.rsplit_once(':').map_or(host, |(name, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            name
        } else {
            host
        }
    });
    let labels_ok = name
        .split('.')
        .all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    labels_ok && (name.contains('.') || name.eq_ignore_ascii_case("localhost"))
}

/// `text` with every character [`is_unsafe_to_show`] replaced by a space;
/// nothing else changes.
///
/// ```
/// assert_eq!(genapi_text::clean("ok\u{1b}[31m red"), "ok [31m red");
/// ```
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if is_unsafe_to_show(c) { ' ' } else { c })
        .collect()
}

/// The most characters the end of a cut text takes: `… (`, a length of
/// up to 20 digits and ` characters)`.
const CUT_MARK: usize = 35;

/// `text` cut to its first `most` characters followed by `… (N
/// characters)`, N its length; whole when it has at most `most` characters,
/// or so few more that the end of a cut would take as many. So a cut text
/// holds at most `most` and 35 characters, and cutting it again to the same
/// `most` leaves it as it is.
///
/// ```
/// let prompt = "a fox ".repeat(50_000);
/// assert_eq!(genapi_text::cut(&prompt, 10), "a fox a fo… (300000 characters)");
/// assert_eq!(genapi_text::cut("a fox", 10), "a fox");
/// let once = genapi_text::cut(&prompt, 10);
/// assert_eq!(genapi_text::cut(&once, 10), once);
/// ```
pub fn cut(text: &str, most: usize) -> std::borrow::Cow<'_, str> {
    if text.char_indices().nth(most.saturating_add(CUT_MARK)).is_none() {
        return text.into();
    }
    let end = text.char_indices().nth(most).map_or(text.len(), |(at, _)| at);
    format!("{}… ({} characters)", &text[..end], text.chars().count()).into()
}

/// Longest string kept of a value shown.
const SHOWN_STRING: usize = 120;
/// Deepest nesting kept of a value shown.
const SHOWN_DEPTH: usize = 8;

/// Whether a field's name says its value is a secret.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["secret", "key", "token", "password", "authorization", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

/// What replaces a secret in any text genapi shows or keeps: the fields
/// [`scrubbed`] leaves out, and the secrets the client scrubs from what the
/// service says. A program comparing a text it sent with the one the
/// service reports (a prompt) reads it as "some text was here".
pub const REDACTED: &str = "[redacted]";

/// A JSON value as genapi shows one in messages and `Debug` output: fields
/// whose name says secret, key, token, password, authorization or
/// credential replaced, long strings (images) cut, deep nesting folded.
///
/// ```
/// let shown = genapi_text::scrubbed(&serde_json::json!({"prompt": "a fox", "webhook_secret": "s3cret"}));
/// assert_eq!(shown["prompt"], "a fox");
/// assert!(!shown.to_string().contains("s3cret"));
/// ```
pub fn scrubbed(value: &Value) -> Value {
    let mut shown = value.clone();
    scrub(&mut shown);
    shown
}

/// [`scrubbed`], in place.
pub fn scrub(value: &mut Value) {
    scrub_at(value, 0);
}

fn scrub_at(value: &mut Value, depth: usize) {
    if depth > SHOWN_DEPTH {
        *value = Value::String("…".into());
        return;
    }
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(shorter) = cut(text, SHOWN_STRING) {
                *text = shorter;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| scrub_at(item, depth + 1)),
        Value::Object(map) => {
            for (name, field) in map.iter_mut() {
                if is_secret_name(name) && !field.is_null() {
                    *field = Value::String(REDACTED.into());
                } else {
                    scrub_at(field, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_password_holding_the_characters_that_end_a_host_is_never_shown() {
        for password in [
            "Xy9/Qw7Zk2Lp",
            "Xy9;Qw7Zk2Lp",
            "Xy9#Qw7Zk2Lp",
            "Xy9?Qw7Zk2Lp",
            "Xy9/?#;Qw7Zk2Lp",
        ] {
            for address in [
                format!("https://bob:{password}@api.example.com"),
                format!("https://bob:{password}@api.example.com/v1?id=7"),
                format!("https://{password}@api.example.com:8443/v1"),
            ] {
                for shown in [
                    shown_address(&address),
                    address_alone(&address),
                    addresses_shown(&address),
                ] {
                    assert!(
                        !shown.contains("Qw7Zk2Lp") && !shown.contains("Xy9"),
                        "{address} -> {shown}"
                    );
                }
            }
        }
        // An `@` opening a path's segment is no user information, nor one in
        // the query of an address that opens with a host; any other is.
        assert_eq!(
            shown_address("https://cdn.example.com/@ana/x.png"),
            "https://cdn.example.com/@ana/x.png"
        );
        assert_eq!(shown_address("https://api.example.com/p@x"), "https://…@x");
        // A user name and digits are no host and port (`admin:8675309#…`).
        for address in [
            "https://admin:8675309#Zq@api.example.com",
            "https://admin:1234?Summer@api.example.com",
        ] {
            assert_eq!(shown_address(address), "https://…@api.example.com", "{address}");
        }
        assert_eq!(
            address_alone("https://api.example.com/v1?to=a@b.example.com"),
            "https://api.example.com/v1"
        );
        // An `@` in the query of an address with user information ends
        // nothing: the query stays unshown, and so does the password.
        for address in [
            "https://u:pw@files.example.com/in.png?e=a@b.example.com&X-Amz-Signature=SIGSECRET",
            "https://u:pw@files.example.com/in.png#to=a@b.example.com&sig=SIGSECRET",
            "https://u:pw@intranet/in.png?e=a@b&sig=SIGSECRET",
        ] {
            for shown in [shown_address(address), address_alone(address), addresses_shown(address)] {
                assert!(
                    !shown.contains("SIGSECRET") && !shown.contains("pw"),
                    "{address} -> {shown}"
                );
            }
        }
        // A host-shaped user name is still one: the address goes after it.
        assert_eq!(
            address_alone("https://api.example.com@evil.example/v1"),
            "https://evil.example/v1"
        );
    }

    #[test]
    fn an_address_spelled_with_json_escapes_is_shown_by_the_rule() {
        for text in [
            r#"{"title":"could not fetch https:\/\/ana:correcthorse@files.example.com\/in.png?X-Amz-Signature=SIGSECRET"}"#,
            r#"could not fetch https://ana:correcthorse\u0040files.example.com/in.png\u003FX-Amz-Signature=SIGSECRET"#,
            r#"upstream said {"upstream": "https:\/\/ana:correcthorse@files.example.com\/x?sig=SIGSECRET"}"#,
        ] {
            let shown = addresses_shown(text);
            assert!(
                !shown.contains("correcthorse") && !shown.contains("SIGSECRET"),
                "{shown}"
            );
            assert!(shown.contains("files.example.com"), "{shown}");
        }
        assert_eq!(addresses_shown(r"a \ b \n"), r"a \ b \n", "other escapes are kept");
    }

    #[test]
    fn every_address_in_a_text_is_shown_by_the_rule() {
        let text =
            "copy of https://u:p4ssw0rd@a.example.com/x?sig=S1G failed, then 'http://b.example.com/y;tok=T0K' too";
        let shown = addresses_shown(text);
        for secret in ["p4ssw0rd", "S1G", "T0K"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.starts_with("copy of https://…@a.example.com/x?… failed"),
            "{shown}"
        );
    }

    #[test]
    fn long_strings_are_cut_deep_values_folded_and_nulls_kept() {
        let long = "x".repeat(500);
        let mut deep = json!("bottom");
        for _ in 0..12 {
            deep = json!([deep]);
        }
        let shown = scrubbed(&json!({"image": long, "deep": deep, "api_key": null, "Token": 7}));
        assert!(shown["image"].as_str().unwrap().ends_with("… (500 characters)"));
        assert!(shown.to_string().contains('…'));
        assert!(!shown.to_string().contains("bottom"), "{shown}");
        assert_eq!(shown["api_key"], Value::Null, "an absent secret is shown absent");
        assert_eq!(shown["Token"], "[redacted]");
    }
}
