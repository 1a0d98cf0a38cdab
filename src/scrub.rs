//! One scrubber for every text that comes from the service.
//!
//! A service may echo what it was sent: a poll's `details` quoting the
//! request headers, a 422 echoing the body, an error page quoting an
//! address, a notification carrying the webhook secret back. Whatever genapi
//! then shows (errors, `Debug`), records (HAR) or hands to a program that
//! stores it (a batch's journal, results and gallery, a shared ledger) must
//! hold none of the secrets the client holds or has sent. So there is one
//! [`Scrubber`] per client, and every text from the service passes it once,
//! where it enters:
//!
//! - **every answer the transport reads**, body and headers, before anything
//!   decodes, records or shows it (`Transport::read`); image bytes of a
//!   successful download are the one thing not searched, since they are
//!   never shown as text;
//! - **every webhook notification**: [`crate::webhook::Verifier`] scrubs an
//!   event of its own secret. A waiting task reads nothing else of it: a
//!   notification only wakes the wait ([`crate::WaitOptions::woken_by`]),
//!   and the poll it triggers is an answer like any other.
//!
//! # What it knows
//!
//! - the API key;
//! - every secret a submission carried: the fields the document marks
//!   `x-secret` (`webhook_secret`); the user name, password, and token-like
//!   query values, fragment and path segments of the user's own receiving
//!   address (the body's `webhook_url`, which the document marks
//!   `x-receiver`; a field of that name inside another is any address),
//!   its host when a name in it is a token (an endpoint's own subdomain:
//!   the host whole, as parsed and as written, and that name as a path
//!   segment would be), and, when a segment of its path is a token shorter
//!   than twelve bytes, which alone could be a word of any address
//!   (`flux2dev`), its path up to that token (`hook/ab12cd34`, or
//!   `me.example/ab12cd34` when the token opens it) and, when it holds
//!   more, its whole path (as parsed and as written); and of every other
//!   address (an input image, a video, an address in a prompt: a signed URL
//!   to the user's file), its user name and password, a token-like
//!   fragment and its long token-like query values only, since its short
//!   ones (`X-Amz-Algorithm=AWS4-HMAC-SHA256`, a date) may also stand in
//!   the result address the service signs, which must reach the download
//!   whole. Parts of addresses are decoded as addresses write them (`%`
//!   escapes only). All are learned before the body is sent, so even the
//!   answer to that very submission is scrubbed. What the service itself
//!   writes in the addresses the client must read whole is never learned,
//!   whoever sends it as a secret (one line of a batch must not break the
//!   others' tasks): its own addresses and the document's paths, and what
//!   names one of its hosts' registrable domains (see [`Scrubber::serving`]);
//!   a value that is an address itself (`?next=https://…`, whose own
//!   secrets are), a setting or a name (`region=us-east-1`, `1024x1024`:
//!   see `is_token_like`), what every address of the same signer repeats
//!   (a credential's scope, a signer's object id), and the id of a task
//!   this client handles (a webhook URL naming the task it follows up on),
//!   which is forgotten if it was learned first (the key and the `x-secret`
//!   fields never are, whatever a service names a task);
//! - the secrets of bodies sent by another process, when a program resuming
//!   its tasks hands them over ([`crate::Client::learn_secrets`]).
//!
//! A secret is found as it was sent, as an address encodes it (either case
//! of hex digits), and, in a JSON answer, in its strings and names as JSON
//! decodes them, however they were escaped (`\/`, `\u0041`); it is replaced
//! by `[redacted]`, never in the JSON's syntax. A number that spells the
//! key becomes the string `[redacted]`, and a field the document marks
//! `x-secret` is redacted whatever its value. What the client follows or
//! reads as the service wrote it (a task's id, status, polling and result
//! addresses, and numbers) is searched for the key alone: a request may
//! send anything as a secret, a piece of those among it (see `FOLLOWED`); a secret the JSON text holds
//! where no decoded value spells it (digits past what a float keeps, the
//! first of two fields of one name, which JSON drops) is gone from it as
//! well, unless it spans the JSON's own syntax (`","id":`), which holds no
//! secret and must stay JSON for the answer to be read. A text that is no
//! JSON (an error page cut at its limit, an HTML page, a header's value),
//! and a string of a JSON answer, which may quote one, are searched as
//! written and as their JSON escapes and HTML character references
//! (`&#43;`, `&plus;`) would decode, level by level when escapes were
//! escaped again, so a secret spelled with escapes there goes too, escapes
//! and all. A text cut short loses a secret's beginning at its end as well (written plainly or
//! with escapes, even when the cut went through one), and all of one that
//! begins inside another.
//!
//! A secret may also come back cut short inside a text (`"x-key:
//! 0c8a2f3e-1234…"`, a service shortening what it quotes): the first twelve
//! bytes or more of the key, of a field marked `x-secret` and of a token of
//! the user's receiving address are replaced where the text stops following
//! the secret at what ends a quote (the text's end, a space, `"`, `…` or
//! `...`, a bracket, `*`: what no address holds as it is), never where it
//! goes on as a word or an address may: a polling or result address that
//! begins as a secret does (`https://api.`, a JWT's fixed start, a date) is
//! read whole. Twelve bytes, not eight as at a cut, as every answer is
//! searched. The other
//! addresses' signatures are found whole only: a result address the
//! service signs may begin as the user's own did (the same signer's name,
//! a credential's fixed start).
//!
//! Secrets shorter than eight bytes are not searched for: such a secret
//! protects little, and replacing every `Ready` or `https` of the answers for
//! a webhook secret of that spelling would break the very fields the client
//! reads (a status, a polling URL).
//!
//! Secrets are indexed by their first sixteen bytes (eight for shorter
//! ones), so searching costs one look-up in a small table of first bytes
//! per byte of text, and a second, of first pairs, only where a secret may
//! begin, however many secrets there are (a batch whose every line has its
//! own `whsec_…` secret is scrubbed about as fast as one with none); only
//! secrets that share their first sixteen bytes are compared with each
//! other. Every answer passes here, so the usual one, which holds no
//! secret, costs one tight pass over its bytes and no allocation.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{OnceLock, RwLock};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::Url;
use serde_json::Value;

use escaped::View;

mod escaped;

/// The longest text whose secrets spelled with escapes are replaced where
/// they stand: finding where costs about twenty bytes for each byte of the
/// text. A longer one (possible only where the answer limits were raised)
/// that spells one is replaced whole.
const LONGEST_MAPPED: usize = 4 << 20;

/// What replaces a secret.
pub(crate) const REDACTED: &str = genapi_text::REDACTED;

/// Shortest secret searched for, in bytes (see the module documentation).
pub(crate) const SHORTEST_SECRET: usize = 8;

/// Shortest beginning of a secret searched for where a text goes on past it
/// (see the module documentation).
const SHORTEST_BEGINNING: usize = 12;

/// The one query parameter of an address that is never a secret: the task
/// id a poll names, which identifies the task and grants nothing.
pub(crate) const TASK_ID_QUERY: &str = "id";

/// The names of the fields, in every model of the document, that `marked`
/// picks.
fn fields_where(marked: impl Fn(&genapi_document::Field) -> bool) -> BTreeSet<String> {
    let catalog = crate::validate::Document::embedded().catalog();
    catalog
        .models()
        .iter()
        .flat_map(|model| model.fields.iter())
        .filter(|field| marked(field))
        .map(|field| field.name.clone())
        .collect()
}

/// The fields the document marks `x-secret`, in every model.
pub(crate) fn secret_fields() -> &'static BTreeSet<String> {
    static FIELDS: OnceLock<BTreeSet<String>> = OnceLock::new();
    FIELDS.get_or_init(|| fields_where(|field| field.rule("x-secret").is_some_and(|v| v != &Value::Bool(false))))
}

/// The fields the document marks `x-receiver` (the user's own receiving
/// address), in every model.
fn receiver_fields() -> &'static BTreeSet<String> {
    static FIELDS: OnceLock<BTreeSet<String>> = OnceLock::new();
    FIELDS.get_or_init(|| fields_where(|field| field.rule("x-receiver").is_some_and(|v| v == &Value::Bool(true))))
}

/// Whether a query value of the user's receiving address reads like a
/// credential (a token, a signature) rather than a setting or a name
/// (`format=png`, `region=us-east-1`, `model=flux-pro-1.1`, `1024x1024`,
/// `20261127T120000Z`, `HMACSHA256`, a number): it holds a run of eight
/// letters and digits or more with three letters or more, that goes from
/// letters to digits or back twice or more, as random tokens, hex digests,
/// UUIDs and JWTs nearly always do and words, sizes, dates and a name
/// ending in a number do not. Learning a setting would redact it wherever
/// the service's own addresses spell it, and break them. (A random token
/// of sixteen letters and digits fails this about once in eleven, mostly
/// for having no digit at all.)
fn is_token_like(value: &str) -> bool {
    let mixes = |run: &str| {
        let kinds: Vec<bool> = run.bytes().map(|b| b.is_ascii_digit()).collect();
        let letters = kinds.iter().filter(|digit| !**digit).count();
        letters >= 3 && kinds.windows(2).filter(|pair| pair[0] != pair[1]).count() >= 2
    };
    !value.chars().any(char::is_whitespace)
        && value
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|run| run.len() >= 8 && mixes(run))
}

/// Whether `value` is a UUID (`550e8400-e29b-41d4-a716-446655440000`), as
/// endpoints made for one user name themselves (a webhook's path, its
/// `token=`): random, though its runs of hex digits may hold too few
/// letters to read as a token ([`is_token_like`]).
fn is_uuid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, length)| group.len() == length && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The length from which a password of letters alone is no word an
/// address may hold (`production`, `delivery`) but a passphrase.
const PASSPHRASE: usize = 12;

/// The spellings a UUID comes back in: either case, dashes or none.
fn uuid_spellings(uuid: &str) -> [String; 4] {
    let bare = uuid.replace('-', "");
    let dashed = match bare
        .get(..8)
        .zip(bare.get(8..12))
        .zip(bare.get(12..16))
        .zip(bare.get(16..20))
    {
        Some((((a, b), c), d)) => format!("{a}-{b}-{c}-{d}-{}", &bare[20..]),
        None => uuid.to_string(),
    };
    [
        dashed.to_ascii_lowercase(),
        dashed.to_ascii_uppercase(),
        bare.to_ascii_lowercase(),
        bare.to_ascii_uppercase(),
    ]
}

/// Whether `value` is a UUID written with or without its dashes.
fn is_uuid_in_any_spelling(value: &str) -> bool {
    is_uuid(value) || (value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether a path segment of the user's own address is one long run of
/// letters or digits (`CorrectHorseBatteryStaple`, `83749283749283749283`):
/// sixteen or more with no separator, longer than the words of a path.
fn is_a_long_run(segment: &str) -> bool {
    segment.len() >= 16 && segment.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Whether a query parameter's name says its value is a credential
/// (`token`, `key`, `secret`, `sig`, `auth`, `password`, `code`,
/// `session`): the value of such a parameter of the user's own receiving
/// address is a secret whatever it looks like (a passphrase of words, a
/// token of letters then digits).
fn names_a_credential(name: &str) -> bool {
    const WORDS: [&str; 16] = [
        "token",
        "key",
        "secret",
        "sig",
        "auth",
        "pass",
        "pwd",
        "pw",
        "code",
        "session",
        "credential",
        "hash",
        "access",
        "hmac",
        "nonce",
        "jwt",
    ];
    let name = name.to_ascii_lowercase();
    WORDS.iter().any(|word| name.contains(word))
}

/// Whether a query parameter of an input address (a signed URL to the
/// user's file) is one every address the same signer issues repeats, so
/// no secret however long: a credential's scope, a signer's object and
/// tenant ids, dates, expiries, the signed headers. A result address the
/// service signs the same way names the same values.
fn is_signers_public_value(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let name = name
        .strip_prefix("x-amz-")
        .or_else(|| name.strip_prefix("x-goog-"))
        .unwrap_or(&name);
    matches!(
        name,
        "credential"
            | "security-token"
            | "policy"
            | "date"
            | "algorithm"
            | "signedheaders"
            | "expires"
            | "key-pair-id"
            | "skoid"
            | "sktid"
            | "skt"
            | "ske"
            | "sks"
            | "skv"
            | "sv"
            | "st"
            | "se"
            | "sp"
            | "sr"
            | "spr"
            | "srt"
            | "ss"
    )
}

/// Whether a path segment of an address the user owns reads like a token
/// (`/hook/3f9c1e…`): longer than a query token must be, as paths hold
/// words and dates (`2026-11-25`, `uploads`) more often than secrets.
pub(crate) fn is_token_like_segment(segment: &str) -> bool {
    (is_token_like(segment) && segment.len() >= 12) || is_uuid(segment)
}

/// The path of an address as `text` writes it: from the end of its
/// authority (the first `/` or `\` after the `://` that follows its
/// scheme) to its query or fragment. None when the text does not open with
/// a scheme and `://` (`https:host/…`, which the parser takes too, may hold
/// `://` only further on, in a query that is no part of its path) or when
/// the authority ends otherwise (no path).
fn written_path(text: &str) -> Option<&str> {
    let rest = after_scheme(text)?;
    let start = rest.find(['/', '\\', '?', '#'])?;
    let path = &rest[start..];
    if path.starts_with(['?', '#']) {
        return None;
    }
    Some(&path[..path.find(['?', '#']).unwrap_or(path.len())])
}

/// The path of the user's own receiving address up to a short token in it
/// ([`Scrubber::learn_address`]).
struct ThroughToken {
    /// Without its leading slash: `hook/T0KENCAN4RY`.
    path: String,
    /// Only empty segments stand before the token (`/T0KENCAN4RY/in`):
    /// the path alone would be the token alone, and is learned after the
    /// host only.
    opens: bool,
}

/// Whether the path of `url` holds more than one word (a token opening it
/// and nothing else, `/ab12cd34`, is learned after the host only: alone it
/// may stand in any address, `…/results/ab12cd34-….jpg`).
fn more_than_a_token(url: &Url) -> bool {
    url.path_segments()
        .into_iter()
        .flatten()
        .filter(|segment| !segment.is_empty())
        .count()
        > 1
}

/// What is learned of each path through a short token: the path, or after
/// each of `authorities` (`me.example/T0KENCAN4RY`) when the token opens it.
fn with_authorities(through: &[ThroughToken], authorities: &[String]) -> Vec<String> {
    through
        .iter()
        .flat_map(|token| match token.opens {
            true => authorities
                .iter()
                .map(|authority| format!("{authority}/{}", token.path))
                .collect(),
            false => vec![token.path.clone()],
        })
        .collect()
}

/// The host and port of an address as `text` writes them (after a scheme,
/// its `://` and any user information), when it opens with a scheme and
/// `://` (see [`written_path`]).
fn written_authority(text: &str) -> Option<&str> {
    let rest = after_scheme(text)?;
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    (!authority.is_empty()).then_some(authority)
}

/// What follows the scheme and its `://` that `text` opens with, if it
/// does.
fn after_scheme(text: &str) -> Option<&str> {
    let (scheme, rest) = text.split_once("://")?;
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    is_scheme.then_some(rest)
}

/// The shortest query value of an input address learned: signatures and
/// credentials are longer; algorithm names, dates and expiries, which a
/// result address signed the same way may repeat, are shorter.
const INPUT_ADDRESS_SECRET: usize = 32;

/// Which addresses a request names, for what is learned of them.
#[derive(Clone, Copy, PartialEq)]
enum Address {
    /// The user's own receiving address (`x-receiver`: a webhook URL): any
    /// token in it is a secret.
    Owned,
    /// Any other: a file the service fetches (an image, a video), an
    /// address in a prompt. Only its credentials and long signature-like
    /// values.
    Input,
}

/// Every secret a client holds or has sent, and the one place texts from
/// the service are scrubbed of them (see the module documentation).
pub(crate) struct Scrubber {
    known: RwLock<Known>,
    /// The key's spellings, the one secret searched for in what the client
    /// follows ([`FOLLOWED`]).
    key: Vec<String>,
    /// What the service writes in its own addresses ([`Scrubber::serving`]).
    service: ServiceWords,
}

/// What the service itself writes in the addresses and answers the client
/// must read whole: its configured addresses, the document's paths, field
/// names and enumerated values (`polling_url`, `Task not found`), and the
/// registrable domains of its hosts (where its results are delivered from
/// too), lowercased. None of it is ever learned as a secret, whoever sends
/// it as one (an address's password, a webhook secret of a job file's
/// line): redacted, every polling and result address would break, and the
/// tasks of every other line with them.
#[derive(Default)]
struct ServiceWords {
    texts: Vec<String>,
    domains: Vec<String>,
}

impl ServiceWords {
    fn of(addresses: &[&str]) -> ServiceWords {
        let mut texts: Vec<String> = addresses.iter().map(|address| address.to_ascii_lowercase()).collect();
        texts.extend(
            crate::api::OPERATIONS
                .iter()
                .map(|operation| operation.path.to_ascii_lowercase()),
        );
        texts.extend(
            crate::validate::Document::embedded()
                .words()
                .into_iter()
                .map(|word| word.to_ascii_lowercase()),
        );
        // A host with no registrable domain (an address, `localhost`, `api`)
        // is in the texts already, with its port.
        let domains = addresses
            .iter()
            .filter_map(|address| Url::parse(address).ok())
            .filter_map(|url| genapi_domain::registrable_domain(&url.host_str()?.to_ascii_lowercase()))
            .collect();
        ServiceWords { texts, domains }
    }

    /// Whether `secret` is written by the service: inside one of its texts,
    /// or, reading as no token, naming one of its domains (a token beside a
    /// domain, `ab12cd34.bfl.ai`, is no text of the service's).
    fn writes(&self, secret: &str) -> bool {
        let secret = secret.to_ascii_lowercase();
        self.texts.iter().any(|text| text.contains(&secret))
            || (!is_token_like(&secret) && self.domains.iter().any(|domain| secret.contains(domain.as_str())))
    }
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.known.read().map(|known| known.spellings.len()).unwrap_or(0);
        f.debug_struct("Scrubber").field("spellings", &count).finish()
    }
}

/// The spellings searched for, indexed for a search whose cost does not
/// grow with their number.
#[derive(Default)]
struct Known {
    spellings: HashSet<Box<[u8]>>,
    /// Spellings of [`LONG`] bytes or more by their first [`LONG`] bytes,
    /// longest first: secrets that share a prefix (`whsec_…`) part there.
    long: HashMap<[u8; LONG], Vec<Box<[u8]>>>,
    /// Shorter spellings by their first eight bytes, longest first.
    short: HashMap<[u8; SHORTEST_SECRET], Vec<Box<[u8]>>>,
    /// The spellings whose beginnings are found too ([`Found::FromItsStart`]),
    /// in order: the longest beginning of one that a text starts with is
    /// shared with one of the two spellings beside the text in that order.
    begun: BTreeSet<Box<[u8]>>,
    /// The first [`SHORTEST_BEGINNING`] bytes of those: most places a text
    /// may hold one are passed over on this look-up.
    begun_starts: HashSet<[u8; SHORTEST_BEGINNING]>,
    /// The ids of the latest tasks this client handles, which are never
    /// secrets ([`Scrubber::is_a_task_id`]), oldest first, and as a set.
    task_ids: std::collections::VecDeque<Box<str>>,
    task_id_set: HashSet<Box<str>>,
    /// The spellings of the secrets the user gave as such (the key, the
    /// `x-secret` fields), which a task id never unlearns.
    pinned: HashSet<Box<[u8]>>,
    /// Which bytes a spelling may begin with: most positions of a text are
    /// passed over on this one look-up in a small table.
    firsts: FirstBytes,
    /// One bit per possible pair of first two bytes, read only for a
    /// possible first byte.
    starts: Box<[u64]>,
}

/// Which bytes the spellings begin with.
struct FirstBytes([bool; 256]);

impl Default for FirstBytes {
    fn default() -> Self {
        FirstBytes([false; 256])
    }
}

/// The length of the longer index's keys.
const LONG: usize = 16;

/// How much of a secret is searched for.
#[derive(Clone, Copy, PartialEq)]
enum Found {
    /// The secret whole, or its first [`SHORTEST_BEGINNING`] bytes or more
    /// wherever they stand (a quote cut short).
    FromItsStart,
    /// The secret whole only (an input address's credentials and signatures).
    Whole,
}

/// The fields whose text the client follows or reads as the service wrote
/// it: a task's id, the address it is polled at, its status and its
/// result's address. A secret learned from a request is never searched
/// there, only the key: what a request sends (a job file's line may send
/// anything as its webhook secret: `get_result?id=`, `delivery-eu1`) could
/// be a piece of them, and a redacted address loses a paid task, another
/// line's too. The service never writes a request's secret in them; one
/// that does is shown there, and scrubbed wherever else it says it.
const FOLLOWED: [&str; 4] = ["id", "polling_url", "status", "sample"];

/// Where the string values of [`FOLLOWED`] fields stand in a JSON text
/// (`"polling_url": "…"`, between the quotes), in order and apart.
fn followed_values(body: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut values = Vec::new();
    for name in FOLLOWED {
        let quoted = format!("\"{name}\"");
        let mut from = 0;
        while let Some(found) = find(&body[from..], quoted.as_bytes()) {
            let mut at = from + found + quoted.len();
            from = at;
            let skip = |at: &mut usize| {
                while body.get(*at).is_some_and(u8::is_ascii_whitespace) {
                    *at += 1;
                }
            };
            skip(&mut at);
            if body.get(at) != Some(&b':') {
                continue;
            }
            at += 1;
            skip(&mut at);
            if body.get(at) != Some(&b'"') {
                continue;
            }
            let start = at + 1;
            let mut end = start;
            while let Some(&byte) = body.get(end) {
                match byte {
                    b'\\' => end += 2,
                    b'"' => break,
                    _ => end += 1,
                }
            }
            let end = end.min(body.len());
            values.push(start..end);
            from = end;
        }
    }
    values.sort_by_key(|value| value.start);
    let mut apart: Vec<std::ops::Range<usize>> = Vec::with_capacity(values.len());
    for value in values {
        if apart.last().is_none_or(|last| last.end <= value.start) {
            apart.push(value);
        }
    }
    apart
}

/// Where `needle` first stands in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Whether `a` and `b` differ only in the text of strings the client does
/// not follow: the same names, numbers and literals, each in its place,
/// and [`FOLLOWED`] fields as they were. A replacement in a JSON text that
/// keeps its shape went inside one such string, never across the syntax
/// between two (`","sample":"http`, which would fold a field into the one
/// before it).
fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(_), Value::String(_)) => true,
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_shape(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().all(|(name, a)| {
                    b.get(name).is_some_and(|b| match FOLLOWED.contains(&name.as_str()) {
                        true => a == b,
                        false => same_shape(a, b),
                    })
                })
        }
        (a, b) => a == b,
    }
}

/// The first `N` bytes of `bytes`, when it has as many.
fn start_of<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    bytes.get(..N)?.try_into().ok()
}

impl Known {
    fn add(&mut self, spelling: &[u8], found: Found) {
        if spelling.len() < SHORTEST_SECRET {
            return;
        }
        if let (Found::FromItsStart, Some(start)) = (found, start_of::<SHORTEST_BEGINNING>(spelling)) {
            self.begun_starts.insert(start);
            if !self.begun.contains(spelling) {
                self.begun.insert(spelling.into());
            }
        }
        if self.spellings.contains(spelling) {
            return;
        }
        if self.starts.is_empty() {
            self.starts = vec![0u64; 1024].into_boxed_slice();
        }
        self.firsts.0[usize::from(spelling[0])] = true;
        let pair = usize::from(spelling[0]) << 8 | usize::from(spelling[1]);
        self.starts[pair / 64] |= 1 << (pair % 64);
        let bucket = match (start_of::<LONG>(spelling), start_of::<SHORTEST_SECRET>(spelling)) {
            (Some(start), _) => self.long.entry(start).or_default(),
            (None, Some(start)) => self.short.entry(start).or_default(),
            (None, None) => return,
        };
        bucket.push(spelling.into());
        bucket.sort_by_key(|s| std::cmp::Reverse(s.len()));
        self.spellings.insert(spelling.into());
    }

    /// Drops a spelling (the tables of first bytes keep it: they only say
    /// where one may begin).
    fn forget(&mut self, spelling: &[u8]) {
        if self.pinned.contains(spelling) || !self.spellings.remove(spelling) {
            return;
        }
        self.begun.remove(spelling);
        let bucket = match (start_of::<LONG>(spelling), start_of::<SHORTEST_SECRET>(spelling)) {
            (Some(start), _) => self.long.get_mut(&start),
            (None, Some(start)) => self.short.get_mut(&start),
            (None, None) => None,
        };
        if let Some(bucket) = bucket {
            bucket.retain(|kept| &**kept != spelling);
        }
    }

    /// Whether a spelling may begin with these two bytes.
    #[inline]
    fn may_begin(&self, first: u8, second: u8) -> bool {
        let pair = usize::from(first) << 8 | usize::from(second);
        self.firsts.0[usize::from(first)]
            && self
                .starts
                .get(pair / 64)
                .is_some_and(|bits| bits & (1 << (pair % 64)) != 0)
    }

    /// The positions of `text` where a spelling may begin, by the tables
    /// alone: one tight pass over the first bytes, where the few candidates
    /// are then looked at more closely.
    fn candidates<'t>(&'t self, text: &'t [u8]) -> impl Iterator<Item = usize> + 't {
        // Where a spelling still fits.
        let fits = (text.len() + 1).saturating_sub(SHORTEST_SECRET);
        text[..fits]
            .iter()
            .enumerate()
            .filter(|(_, first)| self.firsts.0[usize::from(**first)])
            .map(|(at, _)| at)
            .filter(|&at| self.may_begin(text[at], text[at + 1]))
    }

    /// The longest spelling found at `text[at..]`.
    fn found_at(&self, text: &[u8], at: usize) -> Option<usize> {
        let rest = &text[at..];
        if rest.len() < SHORTEST_SECRET || !self.may_begin(rest[0], rest[1]) {
            return None;
        }
        let found = |bucket: Option<&Vec<Box<[u8]>>>| {
            bucket
                .and_then(|bucket| bucket.iter().find(|s| rest.starts_with(s)))
                .map(|s| s.len())
        };
        // A long spelling found is longer than any short one.
        let whole = start_of::<LONG>(rest)
            .and_then(|start| found(self.long.get(&start)))
            .or_else(|| found(self.short.get(&start_of::<SHORTEST_SECRET>(rest)?)));
        whole.max(self.begun_at(rest))
    }

    /// How many bytes of `rest`, [`SHORTEST_BEGINNING`] or more, begin a
    /// spelling found from its start, when the text stops following it
    /// where a quote ends ([`ends_a_quote`]): the spellings beside `rest` in
    /// their order share the longest such beginning, so two are compared
    /// however many there are.
    fn begun_at(&self, rest: &[u8]) -> Option<usize> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        if !self.begun_starts.contains(&start_of::<SHORTEST_BEGINNING>(rest)?) {
            return None;
        }
        let before = self.begun.range::<[u8], _>((Unbounded, Excluded(rest))).next_back();
        let after = self.begun.range::<[u8], _>((Included(rest), Unbounded)).next();
        before
            .into_iter()
            .chain(after)
            .map(|spelling| (spelling, spelling.iter().zip(rest).take_while(|(a, b)| a == b).count()))
            .filter(|&(spelling, shared)| shared == spelling.len() || ends_a_quote(&rest[shared..]))
            .map(|(_, shared)| shared)
            .max()
            .filter(|&shared| shared >= SHORTEST_BEGINNING)
    }

    /// How many bytes at the end of `text` begin a spelling (at least
    /// [`SHORTEST_SECRET`] of them): what is left of a secret a cut went
    /// through.
    fn partial_tail(&self, text: &[u8]) -> usize {
        self.spellings
            .iter()
            .filter_map(|spelling| {
                (SHORTEST_SECRET.min(spelling.len())..spelling.len())
                    .rev()
                    .find(|&length| text.ends_with(&spelling[..length]))
            })
            .max()
            .unwrap_or(0)
    }

    /// `text` with every spelling replaced, or `None` when none is in it.
    fn replaced(&self, text: &[u8]) -> Option<Vec<u8>> {
        redacted(text, self.found(text), text.len())
    }

    /// Where the spellings in `text` begin and end, in order.
    fn found<'t>(&'t self, text: &'t [u8]) -> impl Iterator<Item = (usize, usize)> + 't {
        self.candidates(text)
            .filter_map(move |at| self.found_at(text, at).map(|length| (at, at + length)))
    }

    /// A text read as text (a page that is no JSON, a header's value, a
    /// string JSON decoded) with every secret replaced, as written and as
    /// its JSON escapes spell it at every level (see `escaped.rs`), and,
    /// when it was `cut`, one the cut went through dropped from where it
    /// begins ([`Known::partial_tail`]), together with any replaced one it
    /// begins inside; `None` when there is none. The secrets of every
    /// level are replaced together, in order, so a secret that begins
    /// inside another, one written plainly and the other with escapes, is
    /// replaced with it and leaves no tail.
    ///
    /// Views that know where each byte came from cost nine bytes for each
    /// byte of the text, at each of two levels at once: they are made only
    /// when views made for searching alone, a byte for each byte, found
    /// something to replace, and not for a text longer than
    /// [`LONGEST_MAPPED`], which is then replaced whole.
    fn replaced_text(&self, text: &[u8], cut: bool) -> Option<Vec<u8>> {
        let mut kept = text.len() - if cut { self.partial_tail(text) } else { 0 };
        if !self.escapes_spell_any(text, cut) {
            return redacted(text, self.found(text), kept);
        }
        if text.len() > LONGEST_MAPPED {
            return Some(REDACTED.as_bytes().to_vec());
        }
        let Some(view) = View::of(text) else {
            return redacted(text, self.found(text), kept);
        };
        // What is left of a secret ends where the escapes that decode end:
        // in each view, and in the bytes the next one decodes otherwise.
        let mut tail_before = |before: &[u8], source: &dyn Fn(usize) -> usize| {
            let tail = self.partial_tail(before);
            if tail > 0 {
                kept = kept.min(source(before.len() - tail));
            }
        };
        if let Some(before) = view.before_cut(text).filter(|_| cut) {
            tail_before(before, &|at| at);
        }
        let mut found: Vec<(usize, usize)> = self.found(text).collect();
        let mut level = Some(view);
        while let Some(view) = level {
            let deeper = view.deeper();
            if cut {
                let before_cut = deeper.as_ref().and_then(|next| next.before_cut(&view.decoded));
                for before in view.ends().into_iter().chain(before_cut) {
                    tail_before(before, &|at| view.from[at]);
                }
            }
            found.extend(self.found(&view.decoded).map(|(start, end)| view.source(start, end)));
            level = deeper;
        }
        found.sort_unstable();
        redacted(text, found.into_iter(), kept)
    }

    /// Whether the escapes of `text`, at any level, spell a secret, or,
    /// when it was `cut`, what is left of one before the cut: what
    /// [`Known::replaced_text`] finds in its views, found in views made for
    /// searching alone.
    fn escapes_spell_any(&self, text: &[u8], cut: bool) -> bool {
        let mut level = View::searched(text);
        let tail_before = |before: &[u8]| cut && self.partial_tail(before) > 0;
        if level
            .as_ref()
            .and_then(|view| view.before_cut(text))
            .is_some_and(tail_before)
        {
            return true;
        }
        while let Some(view) = level {
            if self.contains(&view.decoded) {
                return true;
            }
            let deeper = view.deeper();
            let before_cut = deeper.as_ref().and_then(|next| next.before_cut(&view.decoded));
            if view.ends().into_iter().chain(before_cut).any(tail_before) {
                return true;
            }
            level = deeper;
        }
        false
    }

    fn contains(&self, text: &[u8]) -> bool {
        self.candidates(text).any(|at| self.found_at(text, at).is_some())
    }

    /// Whether `text` spells a secret through its escapes or references,
    /// at any level.
    fn contains_escaped(&self, text: &[u8]) -> bool {
        self.escapes_spell_any(text, false)
    }

    /// Whether `text` spells a secret, as written or through its escapes.
    fn spells(&self, text: &[u8]) -> bool {
        self.contains(text) || self.contains_escaped(text)
    }
}

/// Whether a text that stops following a secret here (`after`: what comes
/// next) ends a quote of it cut short: the text ends, or goes on with a
/// character no address holds as it is (a space, `"`, `<`, `>`, `[`, `]`,
/// `{`, `}`, `|`, `\`, `^`, a backquote, anything past ASCII such as `…`),
/// with an ellipsis of dots (`..`, or `.` then a space or the end), or
/// with `*` (masking). Any other character (a letter, a digit, `.`, `/`,
/// `%`, `-`, `,`, `;`, `(`) may go on an address, which is read whole: the
/// service's own addresses may begin as a secret does.
fn ends_a_quote(after: &[u8]) -> bool {
    match after {
        [] => true,
        [b'.', rest @ ..] => matches!(rest.first(), None | Some(b'.')) || rest[0].is_ascii_whitespace(),
        [next, ..] => {
            next.is_ascii_whitespace()
                || !next.is_ascii()
                || matches!(
                    next,
                    b'"' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'|' | b'\\' | b'^' | b'`' | b'*'
                )
        }
    }
}

/// `text[..kept]` with the ranges `found` (in order of their starts)
/// replaced, or `None` when there are none and nothing is dropped. A range
/// that begins inside one already replaced (two secrets that overlap) runs
/// the redaction on to its end, so no tail of the second is left showing;
/// one that runs past `kept` (a secret the one dropped there begins inside)
/// ends the text.
fn redacted(text: &[u8], found: impl Iterator<Item = (usize, usize)>, kept: usize) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for (start, end) in found.take_while(|&(start, _)| start < kept) {
        if start < copied {
            copied = copied.max(end);
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
        out.extend_from_slice(&text[copied..start]);
        out.extend_from_slice(REDACTED.as_bytes());
        copied = end;
    }
    if out.is_none() && kept == text.len() {
        return None;
    }
    let mut out = out.unwrap_or_default();
    out.extend_from_slice(&text[copied.min(kept)..kept]);
    Some(out)
}

/// Whether a JSON text names a field the document marks `x-secret`
/// (`"webhook_secret"`): only where a quote opens a string is it compared.
fn names_a_secret_field(body: &[u8]) -> bool {
    static QUOTED: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let names = QUOTED.get_or_init(|| {
        secret_fields()
            .iter()
            .map(|name| format!("\"{name}\"").into_bytes())
            .collect()
    });
    body.iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'"')
        .any(|(at, _)| names.iter().any(|name| body[at..].starts_with(name)))
}

impl Scrubber {
    /// A scrubber that knows the key.
    pub(crate) fn new(key: &str) -> Scrubber {
        let scrubber = Scrubber {
            known: RwLock::new(Known::default()),
            key: match key.len() >= SHORTEST_SECRET {
                true => spellings_of(key).into(),
                false => Vec::new(),
            },
            service: ServiceWords::default(),
        };
        scrubber.learn(key);
        for end in ends_of(key) {
            scrubber.learn_spellings(end, Found::Whole, true);
        }
        scrubber
    }

    /// The same scrubber, told the service's addresses (the base URL, the
    /// regional one, the trusted origins): what they and the document's
    /// paths hold is never learned ([`ServiceWords`]).
    pub(crate) fn serving(mut self, addresses: &[&str]) -> Scrubber {
        self.service = ServiceWords::of(addresses);
        self
    }

    /// Learns one secret the user gave as one (the key, a field marked
    /// `x-secret`), in every spelling it may come back in, to be found
    /// whole or by its beginning. Nothing the service says unlearns it: a
    /// service naming a task with it ([`Scrubber::is_a_task_id`]) does not.
    pub(crate) fn learn(&self, secret: &str) {
        self.learn_spellings(secret, Found::FromItsStart, true);
        for form in forms_of(secret) {
            self.learn_spellings(&form, Found::Whole, true);
        }
        // A webhook secret's encodings would all open alike (its common
        // `whsec_`); its key part, learned on its own, is encoded instead.
        if !starts_as_a_webhook_secret(secret) {
            for encoded in encodings_of(secret) {
                self.learn_spellings(&encoded, Found::Whole, true);
            }
        }
    }

    /// Learns a secret part of an address, in every spelling it may come
    /// back in, to be found as `found` says. A task's id is no secret,
    /// whatever address names it.
    fn learn_as(&self, secret: &str, found: Found) {
        self.learn_spellings(secret, found, false);
    }

    fn learn_spellings(&self, secret: &str, found: Found, pinned: bool) {
        if secret.len() < SHORTEST_SECRET || self.service.writes(secret) {
            return;
        }
        if let Ok(mut known) = self.known.write() {
            if !pinned && known.task_id_set.contains(secret) {
                return;
            }
            for spelling in spellings_of(secret) {
                known.add(spelling.as_bytes(), found);
                if pinned {
                    known.pinned.insert(spelling.into_bytes().into());
                }
            }
        }
    }

    /// Whether `text` is the id of a task this client handles
    /// ([`Scrubber::is_a_task_id`]).
    pub(crate) fn is_a_known_task_id(&self, text: &str) -> bool {
        self.known.read().is_ok_and(|known| known.task_id_set.contains(text))
    }

    /// A task this client handles is known by `id`, which the service
    /// writes in its answers (the id, the polling and result addresses):
    /// never a secret, even where a request's address named it (a webhook
    /// URL naming the task it follows up on), so it is forgotten if it was
    /// learned, and not learned later. The latest 4,096 ids are kept.
    pub(crate) fn is_a_task_id(&self, id: &str) {
        const KEPT: usize = 4096;
        let Ok(mut known) = self.known.write() else { return };
        if known.task_id_set.contains(id) {
            return;
        }
        if known.task_ids.len() == KEPT {
            if let Some(oldest) = known.task_ids.pop_front() {
                known.task_id_set.remove(&oldest);
            }
        }
        known.task_ids.push_back(id.into());
        known.task_id_set.insert(id.into());
        // The id as the service writes it, and no other spelling: another
        // spelling of it (`q%40ss` of `q@ss`) may be a secret of its own.
        known.forget(id.as_bytes());
    }

    /// Learns the secrets of a submission's body before it is sent: its
    /// `x-secret` fields, and what is secret in every address it names (the
    /// `x-receiver` field's as the user's own, any other as an input).
    pub(crate) fn learn_request(&self, body: &Value) {
        // Only the body's own receiving address is the user's: a field of
        // that name inside another (an item of a list) is any address.
        match body {
            Value::Object(fields) => {
                for (name, value) in fields {
                    match receiver_fields().contains(name) {
                        true => self.learn_value(value, Address::Owned),
                        false => self.learn_field(name, value, Address::Input),
                    }
                }
            }
            other => self.learn_value(other, Address::Input),
        }
    }

    /// Learns a field named `name`: its value if the document marks the
    /// field `x-secret`, else what is secret in it.
    fn learn_field(&self, name: &str, value: &Value, kind: Address) {
        match value {
            Value::String(secret) if secret_fields().contains(name) => {
                self.learn(secret);
                // A Standard Webhooks secret's key is what follows its
                // `whsec_`: the HMAC key itself, which a service may quote
                // alone (decoding it, or saying why it cannot).
                let prefixed = starts_as_a_webhook_secret(secret);
                if let Some(key) = secret.get(WEBHOOK_SECRET_PREFIX.len()..).filter(|_| prefixed) {
                    self.learn(key);
                    // Its padding dropped, its alphabet URL-safe, the bytes
                    // it encodes as hex: as a service may quote a key it
                    // decoded.
                    let bare = key.trim_end_matches('=');
                    self.learn(bare);
                    self.learn(&bare.replace('+', "-").replace('/', "_"));
                    use base64::Engine as _;
                    if let Ok(bytes) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(bare) {
                        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                        self.learn(&hex.to_ascii_uppercase());
                        self.learn(&hex);
                        // A key whose bytes are text (as examples' often
                        // are) may be quoted as that text.
                        if let Ok(text) = std::str::from_utf8(&bytes) {
                            if text.chars().all(|c| c.is_ascii_graphic()) {
                                self.learn(text);
                            }
                        }
                    }
                }
            }
            other => self.learn_value(other, kind),
        }
    }

    fn learn_value(&self, value: &Value, kind: Address) {
        match value {
            Value::Object(fields) => {
                for (name, value) in fields {
                    self.learn_field(name, value, kind);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| self.learn_value(item, kind)),
            Value::String(text) => {
                if let Some(url) = Url::parse(text).ok().filter(Url::has_host) {
                    self.learn_address(&url, kind);
                    // The path as the request wrote it, too: the parser
                    // changes some spellings (`/./`, a backslash, escapes
                    // it keeps or adds), and a service may echo the text
                    // it was sent.
                    if kind == Address::Owned {
                        self.learn_written(text, &url);
                    }
                }
            }
            _ => {}
        }
    }

    /// Learns what is secret in an address a request names: its fragment, a
    /// user name that reads as a token and a password that is no plain
    /// word; of the user's own address, its token-like query values and
    /// path segments; of an input address, its long query values that are
    /// not public to their signer (see the module documentation). A value
    /// that is an address is learned as one. Values are learned decoded and
    /// as written. The task id of a poll is no secret.
    #[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
    fn learn_address(&self, url: &Url, kind: Address) {
        let found = match kind {
            Address::Owned => Found::FromItsStart,
            Address::Input => Found::Whole,
        };
        // A user name is a secret only when it reads as a token, a
        // password unless it is a plain word (`production`), which the
        // service's own addresses may hold. Both are found whole only, as
        // written and decoded (`p%40ss` and `p@ss`).
        let username = url.username();
        if is_token_like(&decoded(username)) {
            self.learn_as(username, Found::Whole);
            self.learn_as(&decoded(username), Found::Whole);
        }
        // Of the user's own address, a password of letters alone too once
        // it is longer than a word of an address (a passphrase).
        let passphrase = |p: &str| kind == Address::Owned && decoded(p).len() >= PASSPHRASE;
        if let Some(password) = url
            .password()
            .filter(|p| passphrase(p) || !decoded(p).bytes().all(|b| b.is_ascii_alphabetic()))
        {
            self.learn_as(password, Found::Whole);
            self.learn_as(&decoded(password), Found::Whole);
        }
        // A fragment only when it reads as a token (`#access_token=eyJ…`):
        // any other is a place in a page, or words the service may write.
        // Of the user's own address, any fragment, and the value of a
        // `name=value` in it: the service never writes it.
        let owned_fragment = |fragment: &str| kind == Address::Owned && fragment.len() >= SHORTEST_SECRET;
        if let Some(fragment) = url
            .fragment()
            .filter(|fragment| is_token_like(&decoded(fragment)) || owned_fragment(fragment))
        {
            self.learn_as(fragment, found);
            self.learn_as(&decoded(fragment), found);
            for (_, value) in fragment.split('&').filter_map(|pair| pair.split_once('=')) {
                self.learn_as(value, found);
                self.learn_as(&decoded(value), found);
            }
        }
        // A value that is an address itself (`?next=https://…`) is no
        // token: its own secrets are, as an address of the same kind.
        let nested = |value: &str| Url::parse(value).ok().filter(Url::has_host);
        let secret = |name: &str, value: &str| match kind {
            _ if name == TASK_ID_QUERY => false,
            Address::Owned => is_token_like(value) || is_uuid(value) || names_a_credential(name),
            Address::Input => {
                value.len() >= INPUT_ADDRESS_SECRET
                    && !value.contains(char::is_whitespace)
                    && is_token_like(value)
                    && !is_signers_public_value(name)
            }
        };
        let take = |name: &str, value: &str| match nested(value) {
            Some(address) => self.learn_address(&address, kind),
            None if secret(name, value) => {
                self.learn_as(value, found);
                // A UUID comes back in either case, with or without its
                // dashes.
                if is_uuid_in_any_spelling(value) {
                    for spelling in uuid_spellings(value) {
                        self.learn_as(&spelling, found);
                    }
                }
            }
            None => {}
        };
        for (name, value) in url.query_pairs() {
            take(&name, &value);
        }
        for pair in url.query().unwrap_or_default().split('&') {
            if let Some((name, value)) = pair.split_once('=') {
                take(name, value);
            }
        }
        if kind == Address::Owned {
            for segment in url.path_segments().into_iter().flatten() {
                let decoded = decoded(segment);
                if let Some(address) = nested(&decoded) {
                    self.learn_address(&address, kind);
                } else if is_token_like_segment(segment)
                    || is_a_long_run(&decoded)
                    || is_a_long_run(decoded.split(';').next().unwrap_or_default())
                {
                    // Before its path parameters too (`/Abc…1234;token=…`).
                    if let Some(before) = segment.split(';').next().filter(|before| *before != segment) {
                        self.learn_as(before, Found::FromItsStart);
                    }
                    self.learn_as(segment, Found::FromItsStart);
                    self.learn_as(&decoded, Found::FromItsStart);
                    if is_uuid_in_any_spelling(&decoded) {
                        for spelling in uuid_spellings(&decoded) {
                            self.learn_as(&spelling, Found::FromItsStart);
                        }
                    }
                }
                // A path parameter (`/h;token=…`) is a query by another name.
                for (_, value) in segment.split(';').skip(1).filter_map(|param| param.split_once('=')) {
                    self.learn_as(value, found);
                    self.learn_as(&self::decoded(value), found);
                }
            }
            // A shorter token (`/hook/T0KENCAN4RY/in`) alone may be a
            // word of any address (`flux2dev`), and is not learned alone:
            // the path that holds it is, whole, and so is the path up to
            // it (`hook/T0KENCAN4RY`, or `me.example/T0KENCAN4RY` when it
            // opens the path), so an echo of the address loses it even cut
            // short after the token or with a slash added or dropped. No
            // address the service writes holds the user's own path.
            let through = self.paths_through_short_tokens(url);
            if !through.is_empty() && more_than_a_token(url) {
                self.learn_as(url.path(), Found::Whole);
                self.learn_as(&decoded(url.path()), Found::Whole);
            }
            // The host as the parser writes it, alone and with its port
            // (`me.example:443`, as the user may have written it).
            let host = url.host_str().unwrap_or_default();
            let mut authorities = vec![host.to_string()];
            authorities.extend(url.port_or_known_default().map(|port| format!("{host}:{port}")));
            for learned in with_authorities(&through, &authorities) {
                self.learn_as(&learned, Found::Whole);
                self.learn_as(&decoded(&learned), Found::Whole);
            }
            // A host named by a token (`ab12cd34ef.m.example.net`, an
            // endpoint's own subdomain) is the secret itself: the host
            // whole, and the token as a path segment would be (a long one
            // alone, a short one with the dot that follows it).
            let labels: Vec<&str> = host.split('.').collect();
            if labels.iter().any(|label| is_token_like(label)) {
                self.learn_as(host, Found::Whole);
            }
            for label in labels.iter().rev().skip(1).filter(|label| is_token_like(label)) {
                if label.len() >= 12 {
                    self.learn_as(label, Found::FromItsStart);
                } else {
                    self.learn_as(&format!("{label}."), Found::Whole);
                }
            }
        }
    }

    /// Learns what the user's own receiving address `text` (parsed as
    /// `url`) holds as written, where the parser spells it otherwise: its
    /// path (`/./`, a backslash, escapes it keeps or adds) when a short
    /// token is in it, and its host and port (their case, a default port)
    /// when a token names the host or opens the path.
    fn learn_written(&self, text: &str, url: &Url) {
        let through = self.paths_through_short_tokens(url);
        if !through.is_empty() && more_than_a_token(url) {
            if let Some(path) = written_path(text) {
                self.learn_as(path, Found::Whole);
            }
        }
        // The host as written, only where it spells the parsed one (a
        // backslash ends what this reads, not always what the parser does).
        let host = url.host_str().unwrap_or_default();
        let Some(authority) = written_authority(text).filter(|authority| {
            let written_host = authority.to_ascii_lowercase();
            written_host == host
                || written_host
                    .strip_prefix(host)
                    .is_some_and(|port| port.starts_with(':'))
        }) else {
            return;
        };
        for learned in with_authorities(&through, &[authority.to_string()]) {
            self.learn_as(&learned, Found::Whole);
        }
        if host.split('.').any(is_token_like) {
            self.learn_as(authority, Found::Whole);
        }
    }

    /// The path of the user's own receiving address up to each segment of
    /// it that is a token too short to be learned alone (see
    /// [`Scrubber::learn_address`]), without its leading slash
    /// (`hook/T0KENCAN4RY`), and whether the token opens the path (only
    /// empty segments before it), when it is learned after the host
    /// ([`with_authorities`]). The id of a task this client handles is no
    /// such token: the service writes it in that task's addresses
    /// (`…/results/{id}.jpg`), which a path `/{id}` would cut.
    fn paths_through_short_tokens(&self, url: &Url) -> Vec<ThroughToken> {
        let Ok(known) = self.known.read() else {
            return Vec::new();
        };
        let segments: Vec<&str> = url.path_segments().into_iter().flatten().collect();
        segments
            .iter()
            .enumerate()
            .filter(|(_, segment)| {
                is_token_like(segment) && segment.len() < 12 && !known.task_id_set.contains(**segment)
            })
            .map(|(at, _)| ThroughToken {
                path: segments[..=at].join("/"),
                opens: segments[..at].iter().all(|s| s.is_empty()),
            })
            .collect()
    }

    /// Whether `text` spells the key.
    fn holds_the_key(&self, text: &str) -> bool {
        self.key.iter().any(|spelling| text.contains(spelling.as_str()))
    }

    /// Whether `text` holds a secret.
    pub(crate) fn finds(&self, text: &[u8]) -> bool {
        self.known.read().is_ok_and(|known| known.contains(text))
    }

    /// Whether `text` spells a secret through its JSON escapes.
    fn finds_escaped(&self, text: &[u8]) -> bool {
        self.known.read().is_ok_and(|known| known.contains_escaped(text))
    }

    /// Whether `text` spells a secret, as written or through its escapes.
    fn spells(&self, text: &[u8]) -> bool {
        self.known.read().is_ok_and(|known| known.spells(text))
    }

    /// `text` with every secret replaced by `[redacted]`, as written and as
    /// its JSON escapes spell it: a text may quote JSON (a string of an
    /// answer holding an upstream's answer, a message quoting a page).
    pub(crate) fn scrub(&self, text: &str) -> String {
        let Ok(known) = self.known.read() else {
            return REDACTED.to_string();
        };
        match known.replaced_text(text.as_bytes(), false) {
            // Secrets are whole UTF-8 strings found in UTF-8 text, so their
            // ends are character boundaries, and the replacement is ASCII.
            Some(bytes) => {
                String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
            }
            None => text.to_string(),
        }
    }

    /// A JSON value scrubbed in place: fields the document marks `x-secret`
    /// redacted, every string and name scrubbed.
    pub(crate) fn scrub_json(&self, value: &mut Value) {
        match value {
            Value::String(text) if self.spells(text.as_bytes()) => *text = self.scrub(text),
            Value::Number(number) if self.holds_the_key(&number.to_string()) => {
                *value = Value::String(REDACTED.into());
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_json(item)),
            Value::Object(fields) => {
                if fields.keys().any(|name| self.spells(name.as_bytes())) {
                    *fields = std::mem::take(fields)
                        .into_iter()
                        .map(|(name, field)| (self.scrub(&name), field))
                        .collect();
                }
                for (name, field) in fields.iter_mut() {
                    match field {
                        _ if secret_fields().contains(name) && !field.is_null() => {
                            *field = Value::String(REDACTED.into());
                        }
                        Value::String(text) if FOLLOWED.contains(&name.as_str()) => {
                            if self.holds_the_key(text) {
                                *text = REDACTED.into();
                            }
                        }
                        _ => self.scrub_json(field),
                    }
                }
            }
            _ => {}
        }
    }

    /// An answer's body scrubbed: a JSON body in its strings, names and
    /// numbers as JSON decodes them (and its `x-secret` fields), any other
    /// as text. `None` when there was nothing to remove, the usual case: a
    /// body with no escape (`\\`, an HTML character reference), no secret
    /// and no secret field's name costs a pass over its bytes.
    pub(crate) fn scrub_body(&self, body: &[u8]) -> Option<Vec<u8>> {
        let escapes = escaped::may_hold_escapes(body);
        let found = self.finds(body);
        if !escapes && !found && !names_a_secret_field(body) {
            return None;
        }
        match serde_json::from_slice::<Value>(body) {
            Ok(mut value) => {
                let before = value.clone();
                self.scrub_json(&mut value);
                // A secret in the text that no decoded value spells (a
                // number past what a float keeps, a backslash of the secret
                // read as an escape, the first of two fields of one name,
                // which JSON drops, escapes and all) goes too: written
                // again, the number loses that spelling and the field is
                // gone; what still holds one, as text.
                if value == before && !found && !self.finds_escaped(body) {
                    return None;
                }
                let written = serde_json::to_vec(&value).ok()?;
                if self.finds(&written) {
                    // Inside a string's escapes, the text is replaced; a
                    // "secret" that spans the JSON's own syntax (`","id":`,
                    // which no value holds) is none, and the answer must
                    // stay JSON for its task to be read.
                    let replaced = self.known.read().ok()?.replaced(&written)?;
                    let kept_its_shape =
                        serde_json::from_slice::<Value>(&replaced).is_ok_and(|replaced| same_shape(&replaced, &value));
                    if kept_its_shape {
                        return Some(replaced);
                    }
                }
                Some(written)
            }
            // No JSON as a value holds it (a number past what a float
            // holds, a lone surrogate escape): searched as written and as
            // its escapes spell it, but for what the client follows, which
            // it may still read (`Task::accepted`).
            Err(_) => {
                let known = self.known.read().ok()?;
                let (mut scrubbed, mut changed) = (Vec::with_capacity(body.len()), false);
                let mut take = |part: &[u8], replaced: Option<Vec<u8>>| match replaced {
                    Some(replaced) => {
                        changed = true;
                        scrubbed.extend(replaced);
                    }
                    None => scrubbed.extend_from_slice(part),
                };
                let mut at = 0;
                for value in followed_values(body) {
                    let gap = &body[at..value.start];
                    take(gap, known.replaced_text(gap, false));
                    let followed = &body[value.clone()];
                    let holds_the_key = std::str::from_utf8(followed).is_ok_and(|text| self.holds_the_key(text));
                    take(followed, holds_the_key.then(|| REDACTED.as_bytes().to_vec()));
                    at = value.end;
                }
                take(&body[at..], known.replaced_text(&body[at..], false));
                changed.then_some(scrubbed)
            }
        }
    }

    /// A body cut at a limit, scrubbed ([`Scrubber::scrub_body`]), and rid
    /// of what is left of a secret the cut went through: its first bytes,
    /// at the end.
    pub(crate) fn scrub_cut(&self, body: &[u8]) -> Vec<u8> {
        // Searched as text first: a secret the cut went through may begin
        // inside a whole one, whose redaction would hide its beginning from
        // a look at the end alone. Then as JSON, should what is left parse;
        // written again, it may end otherwise, so its end is looked at once
        // more.
        let Ok(cut) = self.known.read().map(|known| known.replaced_text(body, true)) else {
            return Vec::new();
        };
        let cut = cut.unwrap_or_else(|| body.to_vec());
        let mut body = self.scrub_body(&cut).unwrap_or(cut);
        if let Some(scrubbed) = self
            .known
            .read()
            .ok()
            .and_then(|known| known.replaced_text(&body, true))
        {
            body = scrubbed;
        }
        body
    }

    /// Headers scrubbed in place: a value holding a secret is replaced by
    /// its scrubbed text.
    pub(crate) fn scrub_headers(&self, headers: &mut HeaderMap) {
        // The usual answer holds no secret: one look, under one lock.
        let clean = self.known.read().is_ok_and(|known| {
            !headers
                .iter()
                .any(|(name, value)| known.contains(name.as_str().as_bytes()) || known.spells(value.as_bytes()))
        });
        if clean {
            return;
        }
        // A header named with a secret (a service echoing one as a name)
        // goes whole: a name cannot be redacted in place.
        let named: Vec<_> = headers
            .keys()
            .filter(|name| self.finds(name.as_str().as_bytes()))
            .cloned()
            .collect();
        for name in named {
            headers.remove(name);
        }
        // A value is no JSON: searched as written and as its escapes spell
        // it, as a page is.
        for value in headers.values_mut() {
            let scrubbed = self
                .known
                .read()
                .ok()
                .and_then(|known| known.replaced_text(value.as_bytes(), false));
            if let Some(bytes) = scrubbed {
                *value = HeaderValue::from_bytes(&bytes).unwrap_or(HeaderValue::from_static(REDACTED));
            }
        }
    }
}

/// Every spelling a secret may come back in: as sent, JSON-escaped, and as
/// an address encodes it (`+` or `%20` for a space, either case of hex).
fn spellings_of(secret: &str) -> [String; 6] {
    let escaped = serde_json::to_string(secret).unwrap_or_default();
    let escaped = escaped.trim_matches('"');
    let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let percent = encoded.replace('+', "%20");
    [
        secret.to_string(),
        escaped.to_string(),
        lowercase_hex(&encoded),
        lowercase_hex(&percent),
        encoded,
        percent,
    ]
}

/// The other forms a secret the user gave (the key, an `x-secret` field)
/// takes in what a service writes back about it, each found whole:
///
/// - all in capitals, and all in small letters (a service normalising
///   what it quotes);
/// - a UUID's (a key of that shape) without its dashes, in either case,
///   and its sixteen bytes in base64 (standard and URL-safe): how a
///   service that parsed it as one writes it back;
/// - every byte as a `%` escape, in either case (an address escaping it
///   whole), but for a `whsec_` secret, whose key part is.
fn forms_of(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    let mut forms = vec![secret.to_ascii_uppercase(), secret.to_ascii_lowercase()];
    let bare: String = secret.chars().filter(|c| *c != '-').collect();
    if is_uuid(secret) || (bare.len() == 32 && bare.bytes().all(|b| b.is_ascii_hexdigit())) {
        forms.push(bare.to_ascii_lowercase());
        forms.push(bare.to_ascii_uppercase());
        if let Ok(value) = u128::from_str_radix(&bare, 16) {
            let bytes = value.to_be_bytes();
            forms.push(base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes));
            forms.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
        }
    }
    // A webhook secret's escapes would all open alike (`%77%68%73%65%63`);
    // its key part, learned on its own, is escaped instead.
    if !starts_as_a_webhook_secret(secret) {
        let escaped: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
        forms.push(escaped.to_ascii_lowercase());
        forms.push(escaped);
    }
    // Its letters and digits as they are, every other byte escaped (an
    // encoder that keeps only those: `0c8a2f3e%2D9b1d…`), in either case
    // of hex.
    for hex_case in [true, false] {
        let strict: String = secret
            .bytes()
            .map(|b| match (b.is_ascii_alphanumeric(), hex_case) {
                (true, _) => (b as char).to_string(),
                (false, true) => format!("%{b:02X}"),
                (false, false) => format!("%{b:02x}"),
            })
            .collect();
        forms.push(strict);
    }
    forms.retain(|form| form != secret);
    forms
}

/// The key's ends of sixteen bytes or more: the rest of a quote cut at its
/// front (a beginning cut short is found by [`Found::FromItsStart`]). For
/// the key alone, which every client has one of: a batch's thousands of
/// webhook secrets would each add as many.
fn ends_of(key: &str) -> impl Iterator<Item = &str> {
    key.char_indices()
        .map(|(at, _)| &key[at..])
        .filter(|end| end.len() >= 16 && end.len() < key.len())
}

/// Whether `secret` opens as a Standard Webhooks secret does (`whsec_`, in
/// either case).
fn starts_as_a_webhook_secret(secret: &str) -> bool {
    secret
        .get(..WEBHOOK_SECRET_PREFIX.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(WEBHOOK_SECRET_PREFIX))
}

/// A secret's bytes as an encoder writes them, wherever they stand in what
/// it encodes: hex in either case, and base64 (standard and URL-safe)
/// at each of the three alignments a longer text may put them at, the
/// characters their neighbours change left out.
fn encodings_of(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    let bytes = secret.as_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut encodings = vec![hex.to_ascii_uppercase(), hex];
    for engine in [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for before in 0..3 {
            let mut aligned = vec![0u8; before];
            aligned.extend_from_slice(bytes);
            let written = engine.encode(&aligned);
            // Four characters per three bytes: the first group holds the
            // padding bytes, the last may hold what follows.
            let start = if before == 0 { 0 } else { 4 };
            let end = written.len() - written.len() % 4;
            let end = if aligned.len() % 3 == 0 {
                written.len()
            } else {
                end.min(written.len())
            };
            if let Some(middle) = written.get(start..end).filter(|middle| middle.len() >= 12) {
                encodings.push(middle.to_string());
            }
        }
    }
    encodings
}

/// A part of an address (a path, a segment, a user name, a fragment) with
/// its `%` escapes decoded, and nothing else changed: not as a form's
/// values are (`&` and `=` cut it, `+` is a space), which would learn
/// whatever stands before an `&` the user's address holds
/// (`/mock/results&/ab12cd34`), a piece of the service's own addresses.
fn decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `text` with the hex digits after each `%` in lowercase.
fn lowercase_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut hex_left = 0;
    for c in text.chars() {
        if hex_left > 0 {
            hex_left -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            hex_left = if c == '%' { 2 } else { 0 };
            out.push(c);
        }
    }
    out
}

/// What opens a webhook secret in the Standard Webhooks form.
const WEBHOOK_SECRET_PREFIX: &str = "whsec_";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A key shaped as a UUID comes back as a service that parsed it
    /// writes it: in capitals, without dashes, in braces, as its sixteen
    /// bytes in base64, escaped whole, or the rest of it after a cut.
    #[test]
    fn a_key_is_found_in_the_forms_a_service_writes_it_back_in() {
        use base64::Engine as _;
        const KEY: &str = "0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e";
        let scrubber = Scrubber::new(KEY);
        let bytes = u128::from_str_radix(&KEY.replace('-', ""), 16).unwrap().to_be_bytes();
        let escaped: String = KEY.bytes().map(|b| format!("%{b:02x}")).collect();
        for quoted in [
            KEY.to_uppercase(),
            KEY.replace('-', ""),
            KEY.replace('-', "").to_uppercase(),
            format!("{{{}}}", KEY.to_uppercase()),
            base64::engine::general_purpose::STANDARD.encode(bytes),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
            escaped.clone(),
            escaped.to_uppercase(),
            KEY.replace('-', "%2D"),
            KEY.replace('-', "%2d"),
            KEY[9..].to_string(),
        ] {
            let said = scrubber.scrub(&format!("Invalid key: {quoted} (normalized)"));
            assert!(said.contains(REDACTED), "{quoted}: {said}");
            let left = quoted.replace(['{', '}'], "");
            assert!(!said.contains(&left[..12]), "{quoted}: {said}");
        }
    }

    /// A webhook secret comes back in capitals, its key part in small
    /// letters, or the text its key's bytes spell.
    #[test]
    fn a_webhook_secret_is_found_in_either_case_and_as_the_text_its_key_spells() {
        let scrubber = Scrubber::new("k3y-for-this-test");
        let secret = "whsec_MDEyMzQ1Njc4OTBhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm";
        scrubber.learn_request(&json!({ "prompt": "x", "webhook_secret": secret }));
        for quoted in [
            secret.to_uppercase(),
            secret["whsec_".len()..].to_lowercase(),
            "01234567890abcdef0123456789abcdef".to_string(),
        ] {
            let said = scrubber.scrub(&format!("bad secret {quoted}."));
            assert!(!said.contains(&quoted), "{quoted}: {said}");
        }
    }

    /// The user's receiving address keeps its credentials whatever their
    /// look: a UUID as a path or a `token=`, a parameter named as a
    /// credential holding words or letters then digits; and a webhook
    /// secret's key part is as secret as the whole.
    #[test]
    #[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
    fn credentials_of_the_receiving_address_and_the_webhook_key_are_learned_whatever_their_look() {
        for (sent, quoted) in [
            (
                "http://127.0.0.1:9/h?token=550e8400-e29b-41d4-a716-446655440000",
                "550e8400-e29b-41d4-a716-446655440000",
            ),
            (
                "https://webhook.example/550e8400-e29b-41d4-a716-446655440000",
                "550e8400-e29b-41d4-a716-446655440000",
            ),
            (
                "https://me.example/h?token=tok_AbCdEf1234567890",
                "tok_AbCdEf1234567890",
            ),
            (
                "https://me.example/h?pass=CorrectHorseBatteryStaple",
                "CorrectHorseBatteryStaple",
            ),
            (
                "https://me.example/h?key=ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            ),
            (
                "https://me.example/h?token=abcdefghijklmnopqrstuvwxyz0123456789",
                "abcdefghijklmnopqrstuvwxyz0123456789",
            ),
            (
                "https://me.example/h?pw=CorrectHorseBatteryStaple",
                "CorrectHorseBatteryStaple",
            ),
            (
                "http://user:CorrectHorseBatteryStaple@127.0.0.1:9/h",
                "CorrectHorseBatteryStaple",
            ),
            (
                "https://me.example/hooks/CorrectHorseBatteryStaple",
                "CorrectHorseBatteryStaple",
            ),
            (
                "https://me.example/services/83749283749283749283",
                "83749283749283749283",
            ),
            (
                "https://me.example/h;token=tok_AbCdEf1234567890x",
                "tok_AbCdEf1234567890x",
            ),
            (
                "https://me.example/h#token=CorrectHorseBatteryStaple",
                "CorrectHorseBatteryStaple",
            ),
            (
                "https://me.example/h?token=550E8400-E29B-41D4-A716-446655440000",
                "550e8400e29b41d4a716446655440000",
            ),
            (
                "https://me.example/hooks/3F2504E04F8911D39A0C0305E82C3301/in",
                "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            ),
            (
                "http://127.0.0.1:9/hooks/Abcdefghijklmnop1234;token=pathtokval/in",
                "Abcdefghijklmnop1234",
            ),
        ] {
            let scrubber = Scrubber::new("key-12345678");
            scrubber.learn_request(&json!({"prompt": "x", "webhook_url": sent}));
            let said = scrubber.scrub(&format!("cannot deliver to {quoted} now"));
            assert!(!said.contains(quoted), "{sent}: {said}");
        }
        // The key, the secret and its key part, encoded as another writer
        // would, wherever they stand in what it encodes.
        let scrubber = Scrubber::new("key-12345678");
        use base64::Engine as _;
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        for wrapped in [
            b64("key-12345678"),
            b64("x:key-12345678"),
            b64("{\"k\":\"key-12345678\"}"),
        ] {
            let said = scrubber.scrub(&format!("auth {wrapped} end"));
            assert!(said.contains("[redacted]"), "{wrapped}: {said}");
        }
        let key_part = "MDEyMzQ1Njc4OWFiY2RlZmdo++++////AQ==";
        scrubber.learn_request(&json!({"prompt": "x", "webhook_secret": format!("whsec_{key_part}")}));
        let said = scrubber.scrub(&format!("Value error, not base64: {key_part}"));
        assert!(!said.contains("MDEyMzQ1"), "{said}");
        for quoted in [
            "MDEyMzQ1Njc4OWFiY2RlZmdo++++////AQ,",
            "MDEyMzQ1Njc4OWFiY2RlZmdo----____AQ",
            "303132333435363738396162636465666768fbefbeffffff01",
            "303132333435363738396162636465666768FBEFBEFFFFFF01",
        ] {
            let said = scrubber.scrub(&format!("bad key {quoted} here"));
            assert!(
                !said.contains("MDEyMzQ1") && !said.contains("3031323334"),
                "{quoted}: {said}"
            );
        }
        let upper = Scrubber::new("key-12345678");
        upper.learn_request(&json!({"prompt": "x", "webhook_secret": format!("WHSEC_{key_part}")}));
        assert!(!upper.scrub(key_part).contains("MDEyMzQ1"));
        // Settings under other names stay as they are.
        let plain = Scrubber::new("key-12345678");
        plain.learn_request(&json!({"webhook_url": "https://me.example/h?region=us-east-1&format=png1024"}));
        assert_eq!(
            plain.scrub("region us-east-1, format png1024"),
            "region us-east-1, format png1024"
        );
    }

    #[test]
    fn every_spelling_of_a_secret_is_replaced() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec/\"quoted\" +plus");
        assert_eq!(
            scrubber.scrub("was key-12345678, twice: key-12345678"),
            "was [redacted], twice: [redacted]"
        );
        let json_text = json!({"echo": "whsec/\"quoted\" +plus"}).to_string();
        assert!(!scrubber.scrub(&json_text).contains("quoted"), "{json_text}");
        assert_eq!(scrubber.scrub("q=whsec%2F%22quoted%22+%2Bplus"), "q=[redacted]");
        assert_eq!(scrubber.scrub("q=whsec%2F%22quoted%22%20%2Bplus"), "q=[redacted]");
        assert_eq!(scrubber.scrub("nothing here"), "nothing here");
    }

    #[test]
    fn secrets_that_overlap_are_replaced_together_and_leave_no_tail() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("0123456789ab");
        scrubber.learn("6789abcdefghij");
        // The second begins inside the first and runs on past it.
        assert_eq!(scrubber.scrub("x 0123456789abcdefghij y"), "x [redacted] y");
        // A third nested in the first changes nothing; a fourth that
        // begins inside the second runs the one redaction on again.
        scrubber.learn("23456789");
        scrubber.learn("efghijKLMNOP");
        assert_eq!(scrubber.scrub("<0123456789abcdefghij>"), "<[redacted]>");
        assert_eq!(scrubber.scrub("<0123456789abcdefghijKLMNOP>"), "<[redacted]>");
        // Each alone, and side by side, as before.
        assert_eq!(scrubber.scrub("0123456789ab 6789abcdefghij"), "[redacted] [redacted]");
    }

    #[test]
    fn secrets_are_found_at_both_ends_and_side_by_side() {
        let scrubber = Scrubber::new("key-12345678");
        assert_eq!(scrubber.scrub("key-12345678"), "[redacted]");
        assert_eq!(scrubber.scrub("ends with key-12345678"), "ends with [redacted]");
        assert_eq!(scrubber.scrub("key-12345678key-12345678"), "[redacted][redacted]");
        assert_eq!(scrubber.scrub("kkey-1234567"), "kkey-1234567", "one byte short");
        assert!(scrubber.finds(b"xkey-12345678"));
        assert!(!scrubber.finds(b"key-1234567"));
        assert_eq!(scrubber.scrub_body(b""), None);
    }

    #[test]
    fn a_secret_cut_short_where_the_text_goes_on_loses_what_is_left_of_it() {
        let key = "0c8a2f3e-1234-4cde-9abc-def012345678";
        let scrubber = Scrubber::new(key);
        scrubber.learn_request(&json!({
            "webhook_secret": "whsec-canary-0123456789",
            "webhook_url": "https://hooks.example.com/in?token=t0k3nC4n4ry9-abcdef",
        }));
        assert_eq!(
            scrubber
                .scrub("header x-key: 0c8a2f3e-1234-4c… (shortened), secret whsec-canary-01..., token t0k3nC4n4ry9-a"),
            "header x-key: [redacted]… (shortened), secret [redacted]..., token [redacted]"
        );
        // Every beginning of twelve bytes or more, and none shorter.
        for length in SHORTEST_BEGINNING..key.len() {
            let text = format!("<{}>", &key[..length]);
            assert_eq!(scrubber.scrub(&text), "<[redacted]>", "{length} bytes");
        }
        assert_eq!(
            scrubber.scrub("<0c8a2f3e-12>"),
            "<0c8a2f3e-12>",
            "eleven bytes say little"
        );
        // In a JSON answer too, and with escapes.
        let answer = br#"{"status":"Error","details":"x-key was 0c8a2f3e-12\u0033"}"#;
        let scrubbed = String::from_utf8(scrubber.scrub_body(answer).unwrap()).unwrap();
        assert!(!scrubbed.contains("0c8a2f3e"), "{scrubbed}");
        assert!(scrubbed.contains("[redacted]"), "{scrubbed}");
        // The longest beginning wins where a short secret begins a longer one.
        scrubber.learn("0c8a2f3e-12");
        assert_eq!(scrubber.scrub("<0c8a2f3e-1234-4c>"), "<[redacted]>");
        assert_eq!(scrubber.scrub("<0c8a2f3e-12>"), "<[redacted]>", "the short one, whole");
    }

    #[test]
    fn an_address_that_begins_as_a_secret_does_is_read_whole() {
        let jwt_start = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ";
        let scrubber = Scrubber::new("https://api.acme.com/key-in-a-url");
        scrubber.learn_request(&json!({
            "webhook_url": format!(
                "https://hooks.acme.com/in/2026-11-27T13-40-00Z?next=https://api.acme.com/genapi/done&t={jwt_start}c3ViIjoiYWNtZSJ9.sig"
            ),
            "webhook_secret": "delivery-us1-secret-xyz",
            "start_video": "https://bucket.s3.amazonaws.com/in.mp4?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261127T130000Z",
        }));
        for address in [
            "https://api.acme.com/v1/get_result?id=7c1f".to_string(),
            "https://delivery-us1.bfl.ai/results/7c1f/sample.jpeg".to_string(),
            format!("https://cdn.example.com/r.png?jwt={jwt_start}leHAiOjF9.sig"),
            "https://cdn.example.com/r.png?se=2026-11-27T13%3A40%3A00Z&sp=r".to_string(),
            "https://bucket.s3.amazonaws.com/r.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261127T130000Z"
                .to_string(),
        ] {
            assert_eq!(scrubber.scrub(&address), address);
            let answer = json!({"status": "Ready", "result": {"sample": address}}).to_string();
            assert_eq!(scrubber.scrub_body(answer.as_bytes()), None, "{answer}");
        }
        // The same beginnings, where a quote of them ends, go.
        assert_eq!(
            scrubber.scrub("the key https://api.acme.com/ke… was refused"),
            "the key [redacted]… was refused"
        );
        assert_eq!(scrubber.scrub("secret delivery-us1-se..."), "secret [redacted]...");
    }

    #[test]
    fn a_secret_holding_another_is_replaced_whole() {
        let scrubber = Scrubber::new("abcdefgh");
        scrubber.learn("abcdefghijkl");
        assert_eq!(scrubber.scrub("xabcdefghijklx abcdefghx"), "x[redacted]x [redacted]x");
    }

    #[test]
    fn short_secrets_are_not_searched() {
        let scrubber = Scrubber::new("Ready");
        scrubber.learn("https");
        scrubber.learn("");
        let answer = br#"{"status":"Ready","polling_url":"https://api.example.com/x"}"#;
        assert_eq!(scrubber.scrub_body(answer), None);
    }

    #[test]
    fn a_submission_teaches_its_secret_fields_and_address_tokens() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({
            "prompt": "a fox",
            "webhook_secret": "whsec-canary-1",
            "webhook_url": "https://hooks.example.com/in?token=t0k3nC4n4ry9&env=production&id=task-7",
            "input_image": "https://user:pa55word@images.example.com/a.png?sig=abc123def456",
        }));
        // An input address's short signature is not learned (see the module
        // documentation): a result address may repeat such values.
        let text = "whsec-canary-1 t0k3nC4n4ry9 pa55word abc123def456 production task-7 a fox";
        assert_eq!(
            scrubber.scrub(text),
            "[redacted] [redacted] [redacted] abc123def456 production task-7 a fox"
        );
    }

    #[test]
    fn json_answers_keep_their_shape_and_lose_secret_fields() {
        let scrubber = Scrubber::new("key-\"12345678\"");
        let body = json!({
            "id": "t",
            "details": {"error": "bad key key-\"12345678\""},
            "webhook_secret": "anything at all",
            "key-\"12345678\"": 1,
        })
        .to_string();
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(body.as_bytes()).unwrap()).unwrap();
        assert_eq!(scrubbed["details"]["error"], "bad key [redacted]");
        assert_eq!(scrubbed["webhook_secret"], REDACTED);
        assert_eq!(scrubbed["[redacted]"], 1);
        assert_eq!(scrubbed["id"], "t");
        assert_eq!(scrubber.scrub_body(br#"{"id":"t","status":"Ready"}"#), None);
        assert_eq!(
            scrubber.scrub_body(b"<html>key-\"12345678\"</html>").unwrap(),
            b"<html>[redacted]</html>"
        );
    }

    #[test]
    fn headers_holding_a_secret_are_scrubbed() {
        let scrubber = Scrubber::new("key-12345678");
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static("you sent key-12345678"));
        headers.insert("retry-after", HeaderValue::from_static("2"));
        scrubber.scrub_headers(&mut headers);
        assert_eq!(headers["x-echo"], "you sent [redacted]");
        assert_eq!(headers["retry-after"], "2");
        headers.insert("x-key-12345678", HeaderValue::from_static("1"));
        scrubber.scrub_headers(&mut headers);
        assert!(
            headers.keys().all(|name| !name.as_str().contains("key-12345678")),
            "{headers:?}"
        );
        assert_eq!(headers.len(), 2);
    }

    #[test]
    fn a_header_spelling_a_secret_with_escapes_is_scrubbed() {
        // A header is no JSON to decode: a request echoed as JSON in one
        // may spell the key with escapes.
        let scrubber = Scrubber::new("key-12345678");
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static(r#"{"x-key":"\u006bey-12345678"}"#));
        headers.insert("x-other", HeaderValue::from_static(r"caf\u00e9"));
        scrubber.scrub_headers(&mut headers);
        assert_eq!(headers["x-echo"], r#"{"x-key":"[redacted]"}"#);
        assert_eq!(headers["x-other"], r"caf\u00e9");
    }

    #[test]
    fn escaped_json_and_lowercase_percent_spellings_are_scrubbed() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec/abc+def1");
        let escaped: String = "key-12345678".chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let body = format!(r#"{{"details":{{"error":"bad key {escaped} and whsec\/abc+def1"}}}}"#);
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(body.as_bytes()).unwrap()).unwrap();
        assert_eq!(scrubbed["details"]["error"], "bad key [redacted] and [redacted]");
        assert_eq!(scrubber.scrub("q=whsec%2fabc%2bdef1"), "q=[redacted]");
        let number = br#"{"id":"t","code":12345678}"#;
        let scrubber = Scrubber::new("12345678");
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(number).unwrap()).unwrap();
        assert_eq!(scrubbed["code"], REDACTED, "a number that spells a secret");
    }

    #[test]
    fn a_secret_in_json_text_that_no_decoded_value_spells_is_still_removed() {
        // All digits, past what a float keeps: the number decodes to
        // another spelling, while the text still holds the secret.
        let scrubber = Scrubber::new("98237498237498237498234");
        let body = br#"{"id":"t","code":98237498237498237498234}"#;
        let scrubbed = scrubber.scrub_body(body).expect("the secret is in the text");
        assert!(!scrubber.finds(&scrubbed), "{}", String::from_utf8_lossy(&scrubbed));
        assert!(serde_json::from_slice::<Value>(&scrubbed).is_ok(), "still JSON");
        // A backslash in the secret: as written, it is an escape in the
        // JSON text, which decodes to something else.
        let scrubber = Scrubber::new(r"pass\nword12");
        let body = br#"{"detail":"pass\nword12"}"#;
        let scrubbed = scrubber.scrub_body(body).expect("the secret is in the text");
        assert!(!scrubber.finds(&scrubbed), "{}", String::from_utf8_lossy(&scrubbed));
    }

    #[test]
    fn a_secret_escaped_in_a_json_field_given_twice_is_removed() {
        // JSON keeps the last of two fields of one name: the first, which
        // spells the key with escapes, is in the text and in no value.
        let scrubber = Scrubber::new("key-12345678");
        let body = br#"{"detail":"bad \u006bey-12345678","detail":"bad key"}"#;
        let scrubbed = scrubber.scrub_body(body).expect("the key is in the text");
        let text = String::from_utf8_lossy(&scrubbed);
        assert!(!text.contains("ey-12345678"), "{text}");
        assert_eq!(
            serde_json::from_slice::<Value>(&scrubbed).unwrap(),
            json!({"detail": "bad key"})
        );
    }

    #[test]
    fn a_json_string_quoting_json_loses_a_secret_spelled_with_its_escapes() {
        // An upstream's answer quoted whole in a string of this one: its
        // escapes are text in the decoded string (Java's serializers write
        // `<` as `\u003C`, which no learned spelling holds).
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("tok<en>&12345678");
        let quoted = r#"upstream: {"error":"bad tok\u003Cen\u003E\u002612345678"}"#;
        let body = json!({"detail": quoted, r"\u006bey-12345678": 1}).to_string();
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(body.as_bytes()).unwrap()).unwrap();
        assert_eq!(scrubbed["detail"], r#"upstream: {"error":"bad [redacted]"}"#);
        assert_eq!(scrubbed["[redacted]"], 1, "a name, too");
    }

    #[test]
    fn a_cut_json_page_loses_secrets_escaped_as_other_serializers_write_them() {
        // Cut, the page is no JSON to decode: the escapes other
        // serializers write (`\/` for a slash, `\u0026` for `&` and the
        // like) are found in the page's decoded view, as every escape is.
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec/abc+def1");
        scrubber.learn("tok<en>&12345678");
        let page = br#"{"detail":"echo whsec\/abc+def1 and tok\u003cen\u003e\u002612345678 and more"#;
        let cut = scrubber.scrub_cut(page);
        let text = String::from_utf8_lossy(&cut);
        assert_eq!(text, r#"{"detail":"echo [redacted] and [redacted] and more"#);
    }

    /// Pages of secrets with some of their characters escaped, between
    /// stray backslashes and broken escapes, whole and cut anywhere,
    /// seeded: whatever the scrubber leaves spells no secret, as written or
    /// as its escapes decode, and nothing panics.
    #[test]
    fn no_page_of_secrets_spelled_with_escapes_keeps_one() {
        // The last begins with hex digits, which an escape before it takes.
        let secrets = ["whsec_abcdefgh", "key-12345678", "0c8a2f3e-1234"];
        let scrubber = Scrubber::new(secrets[1]);
        scrubber.learn(secrets[0]);
        scrubber.learn(secrets[2]);
        let junk = [
            r"\", r"\u", r"\u00", r"\ud83d", r"\ude00", r"\\", "\"", " ", "é", "{\"a\":", "&", "&#", "&#x", "&am",
        ];
        let mut draw = fastrand::Rng::with_seed(53);
        for _ in 0..20_000 {
            let mut page = String::new();
            for _ in 0..draw.usize(1..4) {
                page.push_str(junk[draw.usize(..junk.len())]);
                for character in secrets[draw.usize(..secrets.len())].chars() {
                    match draw.u8(..8) {
                        0 => page.push_str(&format!("\\u{:04x}", u32::from(character))),
                        1 => page.push_str(&format!("\\u{:04X}", u32::from(character))),
                        // Quoted twice: JSON quoting JSON.
                        2 => page.push_str(&format!("\\\\u{:04x}", u32::from(character))),
                        // HTML character references, and HTML quoting them.
                        3 => page.push_str(&format!("&#{};", u32::from(character))),
                        4 => page.push_str(&format!("&#x{:x}", u32::from(character))),
                        5 => page.push_str(&format!("&amp;#{};", u32::from(character))),
                        _ => page.push(character),
                    }
                }
            }
            let cut_at = draw.usize(..=page.len());
            let cut = page.as_bytes()[..cut_at].to_vec();
            let whole = scrubber
                .scrub_body(page.as_bytes())
                .unwrap_or_else(|| page.clone().into_bytes());
            let left_of_cut = scrubber.scrub_cut(&cut);
            let known = scrubber.known.read().unwrap();
            for left in [left_of_cut.clone(), whole] {
                // Decoded again and again on its own, each level from the
                // one before, not through the levels the scrubber reads.
                let mut levels = vec![left.clone()];
                while let Some(view) = View::of(&levels[levels.len() - 1]) {
                    if view.decoded == levels[levels.len() - 1] {
                        break;
                    }
                    levels.push(view.decoded);
                }
                assert!(
                    levels.iter().all(|level| !known.contains(level)),
                    "{page:?} left {:?}",
                    String::from_utf8_lossy(&left)
                );
            }
            // Nor does what is left of the cut end, at any level, with a
            // secret's beginning, before an escape cut short or without.
            let mut level = left_of_cut.clone();
            while let Some(view) = View::of(&level) {
                let before = view.before_cut(&level).unwrap_or(&level);
                assert_eq!(
                    known.partial_tail(before),
                    0,
                    "{:?} left {:?}",
                    String::from_utf8_lossy(&cut),
                    String::from_utf8_lossy(&left_of_cut)
                );
                if view.decoded == level {
                    break;
                }
                level = view.decoded;
            }
            assert_eq!(known.partial_tail(&level), 0, "{:?}", String::from_utf8_lossy(&cut));
        }
    }

    #[test]
    fn a_page_quoting_json_that_quotes_json_loses_secrets_escaped_twice() {
        let scrubber = Scrubber::new("key-12345678");
        // An HTML page carrying an answer whose message quotes the request:
        // the key's escapes are escaped once more.
        let page = r#"<script>var a = "{\"detail\":\"sent x-key: \\u006bey-12345678\"}";</script>"#;
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_body(page.as_bytes()).unwrap()),
            r#"<script>var a = "{\"detail\":\"sent x-key: [redacted]\"}";</script>"#
        );
        // Cut through it, its beginning goes too.
        let cut = r#"{"detail":"{\"sent\":\"\\u006bey-1234"#;
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_cut(cut.as_bytes())),
            r#"{"detail":"{\"sent\":\""#
        );
    }

    #[test]
    fn a_page_that_is_no_json_loses_secrets_spelled_with_any_escape() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_abcdefgh");
        // Every character escaped (JSON allows any as `\uXXXX`), in a page
        // cut at its limit, and whole in an HTML page carrying JSON in a
        // script.
        let escaped = r"\u0077\u0068\u0073\u0065\u0063\u005f\u0061\u0062\u0063\u0064\u0065\u0066\u0067\u0068";
        let cut = format!(r#"{{"detail":"echo {escaped} and key\u002d12345678, and mo"#);
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_cut(cut.as_bytes())),
            r#"{"detail":"echo [redacted] and [redacted], and mo"#
        );
        let page = format!(r#"<html><script>var e = {{"echo": "{escaped}"}};</script></html>"#);
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_body(page.as_bytes()).unwrap()),
            r#"<html><script>var e = {"echo": "[redacted]"};</script></html>"#
        );
        // A cut through one spelled so drops its beginning too.
        let through = format!(r#"{{"detail":"echo {}"#, &escaped[..6 * 9]);
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_cut(through.as_bytes())),
            r#"{"detail":"echo "#
        );
        // Escapes that spell no secret are left as they are.
        assert_eq!(scrubber.scrub_body(br"<p>caf\u00e9 \u0041BC</p>"), None);
    }

    /// The unit tests' allocator: the system's, counting, for the thread
    /// that asks, the most bytes it held at once since it last asked.
    struct Counting;

    thread_local! {
        static HELD: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
    }

    // SAFETY: every call is passed to the system allocator as it came.
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            let _ = HELD.try_with(|held| {
                let (now, most) = held.get();
                held.set((now + layout.size(), most.max(now + layout.size())));
            });
            // SAFETY: the caller's layout, as it came.
            unsafe { std::alloc::System.alloc(layout) }
        }
        unsafe fn dealloc(&self, pointer: *mut u8, layout: std::alloc::Layout) {
            let _ = HELD.try_with(|held| {
                let (now, most) = held.get();
                held.set((now.saturating_sub(layout.size()), most));
            });
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::System.dealloc(pointer, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    /// The most bytes this thread held at once while `work` ran, beyond
    /// what it held before.
    fn most_held(work: impl FnOnce()) -> usize {
        let before = HELD.with(|held| {
            let (now, _) = held.get();
            held.set((now, now));
            now
        });
        work();
        HELD.with(|held| held.get().1) - before
    }

    #[test]
    fn a_page_with_escapes_and_no_secret_is_searched_in_a_few_bytes_a_byte() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_abcdefgh");
        // A page of a MiB with escapes at two levels, as the default limit
        // lets in: searched, it spells no secret.
        let page = "caf\\u00e9 \\\\u0041 ".repeat((1 << 20) / 18);
        let held = most_held(|| assert_eq!(scrubber.scrub_body(page.as_bytes()), None));
        assert!(held < 3 * page.len(), "{held} bytes held for a page of {}", page.len());
        // The same page spelling a secret: now each byte says where it
        // came from, for the replacement.
        let spelled = format!("{page} key\\u002d12345678");
        let held = most_held(|| assert!(scrubber.scrub_body(spelled.as_bytes()).is_some()));
        assert!(held > 9 * page.len(), "{held} bytes held for a page of {}", page.len());
    }

    #[test]
    fn a_page_too_long_to_map_is_replaced_whole_only_when_its_escapes_spell_a_secret() {
        let scrubber = Scrubber::new("key-12345678");
        let padding = "caf\\u00e9 ".repeat(LONGEST_MAPPED / 10 + 1);
        // Escapes that spell nothing: left as it is, however long.
        let clean = format!("<p>{padding}</p>");
        assert!(clean.len() > LONGEST_MAPPED);
        assert_eq!(scrubber.scrub_body(clean.as_bytes()), None);
        // One that spells the key, at the end: the page goes whole.
        let spelled = format!("<p>{padding} key\\u002d12345678</p>");
        assert_eq!(scrubber.scrub_body(spelled.as_bytes()).unwrap(), REDACTED.as_bytes());
        // Just as long as may be mapped: replaced where it stands.
        let short = format!("{} key\\u002d12345678", &padding[..LONGEST_MAPPED - 18]);
        assert_eq!(short.len(), LONGEST_MAPPED);
        let scrubbed = scrubber.scrub_body(short.as_bytes()).unwrap();
        assert!(scrubbed.ends_with(b" [redacted]"));
        assert_eq!(scrubbed.len(), LONGEST_MAPPED - 17 + REDACTED.len());
    }

    #[test]
    fn a_page_spelling_a_secret_with_html_character_references_loses_it() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_ab+cd/ef=gh");
        // What HTML templates write for the `+`, `/` and `=` of a secret in
        // an attribute: numbers, in either base, or names.
        for spelled in [
            "whsec_ab&#43;cd&#x2F;ef&#61;gh",
            "whsec_ab&plus;cd&sol;ef&equals;gh",
            "whsec_ab&#43cd&#47ef&#61gh",
            "&#119;&#104;&#115;&#101;&#99;&#95;&#97;&#98;&#43;&#99;&#100;&#47;&#101;&#102;&#61;&#103;&#104;",
            // Quoted by HTML again, or by JSON.
            "whsec_ab&amp;#43;cd&amp;sol;ef&amp;#x3d;gh",
            r"whsec_ab\u0026#43;cd/ef=gh",
        ] {
            let page = format!(r#"<p>sent <input value="{spelled}"> back</p>"#);
            assert_eq!(
                String::from_utf8_lossy(&scrubber.scrub_body(page.as_bytes()).unwrap()),
                r#"<p>sent <input value="[redacted]"> back</p>"#,
                "{spelled}"
            );
        }
        // In a string of a JSON answer, which quotes a page.
        let answer = r#"{"detail":"<input value=\"whsec_ab&#43;cd&#x2f;ef&#61;gh\">"}"#;
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(answer.as_bytes()).unwrap()).unwrap();
        assert_eq!(scrubbed["detail"], r#"<input value="[redacted]">"#);
        // A page cut through a reference loses the secret's beginning.
        for cut in ["&", "&#", "&#6", "&#x3", "&equ", "&equals"] {
            let page = format!("echo whsec_ab&#43;cd&#x2F;ef{cut}");
            assert_eq!(scrubber.scrub_cut(page.as_bytes()), b"echo ", "{page}");
        }
        // Legacy names without their `;`, and in capitals, as browsers read them.
        scrubber.learn("tok<en>&12345678");
        assert_eq!(
            String::from_utf8_lossy(&scrubber.scrub_body(b"<p>tok&lten&gt&AMP;12345678</p>").unwrap()),
            "<p>[redacted]</p>"
        );
        // References that spell no secret, and an address's `&`s, are left.
        assert_eq!(
            scrubber.scrub_body(b"<p>a&#43;b &amp; https://x.example/?a=1&b=2</p>"),
            None
        );
    }

    #[test]
    fn a_number_reference_ending_a_text_without_its_semicolon_spells_its_character() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_ab+cd/ef=gh");
        // Browsers read `&#104` at the end of a text as `h`: a string of an
        // answer, a header's value or a page may end a secret so.
        let answer = br#"{"detail":"whsec_ab&#43;cd&#47;ef&#61;g&#104"}"#;
        let scrubbed: Value = serde_json::from_slice(&scrubber.scrub_body(answer).unwrap()).unwrap();
        assert_eq!(scrubbed["detail"], REDACTED);
        assert_eq!(scrubber.scrub("sent whsec_ab&#43;cd/ef=g&amp;#x68"), "sent [redacted]");
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static("whsec_ab&#43;cd/ef=g&#x68"));
        scrubber.scrub_headers(&mut headers);
        assert_eq!(headers["x-echo"], REDACTED);
        // Cut there, it may be whole, and then ends eight bytes of the
        // secret, or cut short, and then ends seven: either way they go.
        assert_eq!(scrubber.scrub_cut(b"echo whsec_a&#98"), b"echo ");
        assert_eq!(scrubber.scrub_cut(b"echo whsec_a&amp;#x62"), b"echo ");
    }

    #[test]
    fn a_cut_through_a_number_reference_padded_with_zeros_leaves_no_beginning_of_the_secret() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_ab+cd/ef=gh");
        // HTML allows any number of leading zeros: `&#000…043;` is a `+`.
        for zeros in [1, 16, 40] {
            let zeros = "0".repeat(zeros);
            for cut in [format!("&#{zeros}4"), format!("&#x{zeros}2"), format!("&amp;#{zeros}")] {
                let page = format!("echo whsec_ab{cut}");
                assert_eq!(scrubber.scrub_cut(page.as_bytes()), b"echo ", "{page}");
            }
            let whole = format!("<p>whsec_ab&#{zeros}43;cd/ef=gh</p>");
            assert_eq!(scrubber.scrub_body(whole.as_bytes()).unwrap(), b"<p>[redacted]</p>");
        }
    }

    #[test]
    fn a_cut_through_an_escape_leaves_no_beginning_of_the_secret_before_it() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_abcdefgh");
        scrubber.learn("password\u{1f600}-1234");
        let escaped = r"\u0077\u0068\u0073\u0065\u0063\u005f\u0061\u0062\u0063\u0064\u0065\u0066\u0067\u0068";
        // The cut goes through the last escape, which decodes to nothing:
        // the thirteen characters before it are still the secret's.
        for cut_in_escape in [r"\", r"\u", r"\u00", r"\u006"] {
            let page = format!(r#"{{"detail":"echo {}{cut_in_escape}"#, &escaped[..6 * 13]);
            assert_eq!(
                String::from_utf8_lossy(&scrubber.scrub_cut(page.as_bytes())),
                r#"{"detail":"echo "#,
                "{page}"
            );
            // Written plainly up to the escape the cut went through.
            let page = format!("echo whsec_abcdefg{cut_in_escape}");
            assert_eq!(scrubber.scrub_cut(page.as_bytes()), b"echo ", "{page}");
        }
        // A surrogate pair the cut went through: its high half alone, or
        // with the beginning of its low half.
        for cut_in_pair in [r"\ud83d", r"\ud83d\", r"\ud83d\ude0"] {
            let page = format!(r"echo pass\u0077ord{cut_in_pair}");
            assert_eq!(scrubber.scrub_cut(page.as_bytes()), b"echo ", "{page}");
        }
        // An escape cut short after no secret is left as it is.
        assert_eq!(scrubber.scrub_cut(br"echo caf\u00"), br"echo caf\u00");
    }

    #[test]
    fn a_cut_through_an_escape_escaped_again_leaves_no_beginning_of_the_secret_before_it() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("whsec_abcdefgh");
        scrubber.learn("password\u{1f600}-1234");
        // JSON quoting JSON, cut inside the escape that follows: its first
        // level decodes to an escape cut short, which decodes to nothing.
        // Or inside a surrogate pair escaped so.
        let pages = [
            r"echo whsec_abcdefg\\",
            r"echo whsec_abcdefg\\u",
            r"echo whsec_abcdefg\\u00",
            r"echo whsec_abcdefg\\\\u00",
            r"echo whsec_abcdefg\u005c",
            r"echo whsec_abcdefg\u005cu00",
            r"echo password\\ud83d",
            r"echo password\\ud83d\\",
            r"echo password\\ud83d\\ude0",
        ];
        for page in pages {
            assert_eq!(scrubber.scrub_cut(page.as_bytes()), b"echo ", "{page}");
        }
        assert_eq!(scrubber.scrub_cut(br"echo caf\\u00"), br"echo caf\\u00");
    }

    #[test]
    fn a_cut_leaves_no_beginning_of_a_secret_that_an_escape_before_it_hides_once_decoded() {
        let scrubber = Scrubber::new("0c8a2f3e-1234-4cde-9abc-def012345678");
        // `\u0c8a` is an escape: decoded, the key's first characters are
        // another character, while as written they still read as the key's;
        // escaped once more, the same in the first level. Seven bytes of
        // it say nothing.
        for (page, left) in [
            (r"path C:\u0c8a2f3e-1234-4cde\u00", r"path C:\u"),
            (r"path C:\\u0c8a2f3e-1234-4cde\\u00", r"path C:\\u"),
            (r"path C:\u0c8a2f3e\u00", r"path C:\u"),
            (r"path C:\u0c8a2f3\u00", r"path C:\u0c8a2f3\u00"),
        ] {
            assert_eq!(scrubber.scrub_cut(page.as_bytes()), left.as_bytes(), "{page}");
        }
    }

    #[test]
    fn secrets_that_overlap_leave_no_tail_when_one_is_escaped() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("0123456789ab");
        scrubber.learn("6789abcdefghij");
        // The second begins inside the first, written plainly, and goes on
        // escaped; then the first escaped and the second plain.
        for page in [r"x 0123456789ab\u0063defghij y", r"x \u0030123456789abcdefghij y"] {
            assert_eq!(
                scrubber.scrub_body(page.as_bytes()).unwrap(),
                b"x [redacted] y",
                "{page}"
            );
            let cut = format!("{page} and mo");
            assert_eq!(scrubber.scrub_cut(cut.as_bytes()), b"x [redacted] y and mo", "{cut}");
        }
        // A cut through the second, escaped, which begins inside the first.
        assert_eq!(scrubber.scrub_cut(br"x 0123456789ab\u0063def"), b"x [redacted]");
    }

    #[test]
    fn a_cut_through_a_secret_loses_its_beginning_too() {
        let scrubber = Scrubber::new("0c8a2f3e-1234-4cde-9abc-def012345678");
        assert_eq!(
            scrubber.scrub_cut(b"error page ... 0c8a2f3e-1234-4cde"),
            b"error page ... "
        );
        assert_eq!(
            scrubber.scrub_cut(b"a whole 0c8a2f3e-1234-4cde-9abc-def012345678 ok"),
            b"a whole [redacted] ok"
        );
        assert_eq!(
            scrubber.scrub_cut(b"ends with 0c8a2f3"),
            b"ends with 0c8a2f3",
            "seven bytes say nothing"
        );
    }

    #[test]
    fn a_cut_through_a_secret_that_begins_inside_another_leaves_no_part_of_it() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn("0123456789ab");
        scrubber.learn("6789abcdefghijklmnop");
        // The second begins inside the first, and the cut goes through it:
        // what follows the first would be the second's middle.
        assert_eq!(scrubber.scrub_cut(b"page 0123456789abcdefghijkl"), b"page [redacted]");
        // A chain: a third begins inside the second, and the cut goes
        // through the third.
        scrubber.learn("klmnopQRSTUVWXYZ");
        assert_eq!(
            scrubber.scrub_cut(b"page 0123456789abcdefghijklmnopQRSTU"),
            b"page [redacted]"
        );
        // Whole, overlapping secrets before the cut are one redaction and
        // the text after them stays.
        assert_eq!(scrubber.scrub_cut(b"0123456789abcdefghijklmnop ok"), b"[redacted] ok");
    }

    #[test]
    fn a_webhook_path_token_is_learned_and_an_image_addresses_short_values_are_not() {
        let scrubber = Scrubber::new("key-12345678");
        let signature = "a1b2c3d4".repeat(8);
        scrubber.learn_request(&json!({
            "webhook_url": "https://hooks.example.com/hook/P4THS3CR3T123abc/in",
            "input_image": format!(
                "https://bucket.s3.amazonaws.com/in.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261125T000000Z&X-Amz-Signature={signature}"
            ),
        }));
        let sample = "https://delivery.example.com/r.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261125T000000Z";
        assert_eq!(
            scrubber.scrub(sample),
            sample,
            "a result address signed alike stays whole"
        );
        // A signature is found whole only: a result address's own may
        // begin as the user's did.
        let signed = format!("{sample}&X-Amz-Signature={}ffff", &signature[..60]);
        assert_eq!(scrubber.scrub(&signed), signed);
        assert_eq!(
            scrubber.scrub(&format!("P4THS3CR3T123abc {signature} hook in")),
            "[redacted] [redacted] hook in"
        );
    }

    /// A token too short to be learned alone goes with the path it stands
    /// in; the same word in an address of the service's stays.
    #[test]
    #[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
    fn a_short_webhook_path_token_goes_with_its_path_and_the_same_word_elsewhere_stays() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({"webhook_url": "https://me.example/hook/T0KENCAN4RY/in?x=1"}));
        for (text, scrubbed) in [
            (
                "webhook https://me.example/hook/T0KENCAN4RY/in?x=1 refused",
                "webhook https://me.example[redacted]?x=1 refused",
            ),
            (
                "{\"webhook_url\":\"https:\\/\\/me.example\\/hook\\/T0KENCAN4RY\\/in\"}",
                "{\"webhook_url\":\"https:\\/\\/me.example[redacted]\"}",
            ),
            (
                "https://delivery.example.com/T0KENCAN4RY/in/r.png",
                "https://delivery.example.com/T0KENCAN4RY/in/r.png",
            ),
        ] {
            assert_eq!(scrubber.scrub(text), scrubbed, "{text}");
        }
        // An address of the service's, which a query of the webhook
        // address names after a `://` of its own, stays whole.
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({
            "webhook_url": "https:me.example/hook/ab12cd34?next=http://x/mock/results/"
        }));
        let result = "http://127.0.0.1:8080/mock/results/t1.jpg?se=1";
        assert_eq!(scrubber.scrub(result), result);
        // A path is decoded as a path: an `&` or `=` in it cuts nothing
        // off, so what stands before the token is learned with it.
        for webhook in [
            "https://hooks.example/mock/results&/ab12cd34/=zz",
            "https://hooks.example/v1/get_result&/ab12cd34/=zz",
            "https://hooks.example/mock/results&/ab12cd34",
            "http://127.0.0.1:8080/&ab12cd34",
            "http://127.0.0.1:8080/a+b/&ab12cd34",
        ] {
            let scrubber = Scrubber::new("key-12345678");
            scrubber.learn_request(&json!({ "webhook_url": webhook }));
            for address in [result, "http://127.0.0.1:8080/v1/get_result?id=t1"] {
                assert_eq!(scrubber.scrub(address), address, "{webhook}");
            }
        }
        // The path as the request wrote it, which the parser spells
        // otherwise, goes too.
        for (sent, echoed) in [
            (
                "https://me.example/hook/./ab12cd34ef",
                "https://me.example/hook/./ab12cd34ef",
            ),
            (
                "https://me.example/h%6Fok/ab12cd34ef/x y",
                "https://me.example/h%6Fok/ab12cd34ef/x y?",
            ),
        ] {
            let scrubber = Scrubber::new("key-12345678");
            scrubber.learn_request(&json!({ "webhook_url": sent }));
            let scrubbed = scrubber.scrub(&format!("cannot deliver to {echoed}"));
            assert!(!scrubbed.contains("ab12cd34ef"), "{sent}: {scrubbed}");
        }
        assert_eq!(written_path("https://h.example/a/b?q=/c#f"), Some("/a/b"));
        assert_eq!(written_path("https://h.example?q=/c"), None);
        // `https:host` is an address to the parser; the `://` further on
        // is in its query, and what follows is no path of it.
        assert_eq!(
            written_path("https:me.example/hook/ab12cd34?next=http://x/mock/results/"),
            None
        );
        assert_eq!(written_path(" https://h.example/a"), None);
        assert_eq!(written_path("https://h.example\\a\\b"), Some("\\a\\b"));
        // An echo of part of the path keeps no token: cut after it, a
        // slash added or dropped, no leading slash, a token opening the
        // path with its host; the same word after another host stays (a
        // path of that one word alone, `/ab12cd34ef`, is learned whole).
        for (sent, echoed) in [
            (
                "https://me.example/hook/T0KENCAN4RY/in",
                "https://me.example/hook/T0KENCAN4RY",
            ),
            (
                "https://me.example/hook/T0KENCAN4RY/in",
                "https://me.example/hook/T0KENCAN4RY/i…",
            ),
            (
                "https://me.example/hook/T0KENCAN4RY/",
                "posting to /hook/T0KENCAN4RY failed",
            ),
            ("https://me.example/hook/T0KENCAN4RY/in", "path hook/T0KENCAN4RY/in"),
            (
                "https://me.example:8443/ab12cd34ef/in",
                "me.example:8443/ab12cd34ef/ refused",
            ),
            ("https://me.example/in/ab12cd34ef/", "https://me.example/in/ab12cd34ef"),
            ("https://me.example//ab12cd34ef/in", "me.example//ab12cd34ef/"),
            (
                "https://me.example:443/ab12cd34ef/in",
                "POST https://me.example:443/ab12cd34ef failed",
            ),
            (
                "https://Me.Example/ab12cd34ef/in",
                "POST https://Me.Example/ab12cd34ef failed",
            ),
        ] {
            let scrubber = Scrubber::new("key-12345678");
            scrubber.learn_request(&json!({ "webhook_url": sent }));
            let scrubbed = scrubber.scrub(echoed);
            assert!(
                !scrubbed.contains("T0KENCAN4RY") && !scrubbed.contains("ab12cd34ef"),
                "{sent}: {scrubbed}"
            );
            for elsewhere in [
                "https://delivery.example.com/T0KENCAN4RY/r.png",
                "https://delivery.example.com/ab12cd34ef/r.png",
            ] {
                assert_eq!(scrubber.scrub(elsewhere), elsewhere, "{sent}");
            }
        }
        // A host named by a token is the secret, whole, as written, cut
        // after the token, and a long token alone; a host of words is not.
        for (sent, echoed) in [
            (
                "https://eo1ab2cd3ef.m.pipedream.example/",
                "cannot reach eo1ab2cd3ef.m.pipedream.example",
            ),
            (
                "https://eo1ab2cd3ef.m.pipedream.example/",
                "cannot reach eo1ab2cd3ef.m.pipedream…",
            ),
            ("https://EO1ab2cd3ef.M.example/", "cannot reach EO1ab2cd3ef.M.example"),
            (
                "https://3f9c1e2d4b5a6f7e8d9c.hooks.example/",
                "subdomain 3f9c1e2d4b5a6f7e8d9c refused",
            ),
        ] {
            let scrubber = Scrubber::new("key-12345678");
            scrubber.learn_request(&json!({ "webhook_url": sent }));
            let scrubbed = scrubber.scrub(echoed);
            assert!(
                !scrubbed.to_lowercase().contains("eo1ab2cd3ef") && !scrubbed.contains("3f9c1e2d4b5a6f7e8d9c"),
                "{sent}: {scrubbed}"
            );
        }
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({"webhook_url": "https://eo1ab2cd3ef.m.pipedream.example/"}));
        assert_eq!(
            scrubber.scrub("cannot reach eo1ab2cd3ef.m.pipedream.example"),
            "cannot reach [redacted]"
        );
        let plain = Scrubber::new("key-12345678");
        plain.learn_request(&json!({"webhook_url": "https://hooks.example.com/in"}));
        assert_eq!(plain.scrub("hooks.example.com"), "hooks.example.com");
        // A short task id is no token: its own result address stays whole.
        let scrubber = Scrubber::new("key-12345678");
        scrubber.is_a_task_id("ab12cd34ef");
        scrubber.learn_request(&json!({"webhook_url": "https://me.example/ab12cd34ef"}));
        let result = "http://127.0.0.1:8082/mock/results/ab12cd34ef.jpg?expires=1";
        assert_eq!(scrubber.scrub(result), result);
        // A path of words only is no secret.
        let plain = Scrubber::new("key-12345678");
        plain.learn_request(&json!({"webhook_url": "https://me.example/hooks/genapi/in"}));
        assert_eq!(plain.scrub("/hooks/genapi/in"), "/hooks/genapi/in");
    }

    /// No request, however its addresses and secrets are written, teaches
    /// the scrubber what the service writes in its own answers: its hosts,
    /// its paths, the JSON's syntax, the start of a task's id. Each line of
    /// a batch is such a request, and every other line's answers pass the
    /// same scrubber.
    #[test]
    fn no_request_teaches_what_the_service_writes_itself() {
        let polling = "http://127.0.0.1:8081/v1/get_result?id=4dad05af-1b2c-4d5e-8f90-123456789abc";
        let result = "http://127.0.0.1:8082/mock/results/4dad05af-1b2c-4d5e-8f90-123456789abc.jpg?se=1&sig=f00";
        let answer = format!(
            r#"{{"id":"t1","polling_url":"{polling}","status":"Ready","input_mp":1.0,"seed":12345678901,"prompt":"a fox","result":{{"sample":"{result}"}}}}"#
        );
        for body in [
            json!({"prompt": "x", "input_image": "https://me.example/x.png#127.0.0.1"}),
            json!({"prompt": "x", "input_image": "https://me.example/x.png#%22,%22input_mp%22:"}),
            json!({"prompt": "x", "input_image": "https://me.example/x.png?a=127.0.0.1:8081/v1/get_result?id="}),
            json!({"prompt": "x", "webhook_url": "https://u:get_result@hooks.example/in"}),
            json!({"prompt": "x", "webhook_url": "https://u:%2Fv1%2Fget_result@me.example/hook"}),
            json!({"prompt": "x", "webhook_url": "https://hooks.example/in#%22status%22:%22Ready%22"}),
            json!({"prompt": "x", "webhook_url": "foo://127.0.0.1\\@ab12cd34ef.example/"}),
            json!({"prompt": "x", "webhook_url": "foo://127.0.0.1:8081\\@ab12cd34ef.example/"}),
            json!({"prompt": "x", "keyframes": [{"webhook_url": "foo://127.0.0.1\\@ab12cd34ef.example/"}]}),
            json!({"prompt": "x", "webhook_url": "https://hooks.example/4dad05af"}),
            json!({"prompt": "x", "webhook_url": "https://hooks.example/4dad05af/"}),
            json!({"prompt": "x", "webhook_secret": "/v1/get_result"}),
            json!({"prompt": "x", "webhook_secret": "127.0.0.1:8082"}),
            json!({"prompt": "x", "webhook_secret": "\",\"input_mp\":"}),
            json!({"prompt": "x", "webhook_secret": "\"status\":\"Ready\""}),
            json!({"prompt": "x", "webhook_secret": "get_result?id="}),
            json!({"prompt": "x", "webhook_secret": "polling_url"}),
            json!({"prompt": "x", "webhook_secret": "/mock/results/"}),
            json!({"prompt": "x", "webhook_secret": "\",\"sample\":\"http"}),
            json!({"prompt": "x", "webhook_secret": "-1b2c-4d5e-"}),
            json!({"prompt": "x", "webhook_secret": "12345678901"}),
            json!({"prompt": "x", "keyframes": [{"webhook_secret": "/mock/results/"}]}),
        ] {
            let scrubber = Scrubber::new("key-12345678").serving(&[
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8081/",
            ]);
            scrubber.learn_request(&body);
            let scrubbed = scrubber
                .scrub_body(answer.as_bytes())
                .unwrap_or_else(|| answer.clone().into_bytes());
            let read: Value = serde_json::from_slice(&scrubbed)
                .unwrap_or_else(|e| panic!("{body}: no JSON left ({e}): {}", String::from_utf8_lossy(&scrubbed)));
            assert_eq!(read["polling_url"], polling, "{body}");
            assert_eq!(read["result"]["sample"], result, "{body}");
            assert_eq!(read["status"], "Ready", "{body}");
            assert_eq!(read["id"], "t1", "{body}");
            assert_eq!(read["seed"], 12345678901u64, "{body}");
            assert_eq!(read["prompt"], "a fox", "{body}");
        }
        // An answer no JSON value holds (a number past a float, a lone
        // surrogate), which the client may still read for its task: what
        // it follows stays whole there too, and the rest is scrubbed.
        let scrubber = Scrubber::new("key-12345678").serving(&["http://127.0.0.1:8080/"]);
        scrubber.learn_request(&json!({"prompt": "x", "webhook_secret": "get_result?id="}));
        for odd in [r#""input_mp":1e400"#, r#""prompt":"a red fox \ud83d""#] {
            let answer = format!(
                r#"{{"id":"t1", "polling_url" : "{polling}",{odd},"details":"get_result?id= and key-12345678"}}"#
            );
            assert!(serde_json::from_str::<Value>(&answer).is_err(), "{answer}");
            let scrubbed = String::from_utf8(scrubber.scrub_body(answer.as_bytes()).unwrap()).unwrap();
            assert!(
                scrubbed.contains(&format!(r#""polling_url" : "{polling}""#)),
                "{scrubbed}"
            );
            assert!(
                scrubbed.contains(r#""details":"[redacted] and [redacted]""#),
                "{scrubbed}"
            );
        }
        // Results delivered from a host the scrubber was not told of: what
        // keeps them whole is what each kind of value must read as to be
        // learned (a fragment, an input's query value: a token; a host as
        // written: the parsed one).
        let result = "https://cdn.example.net/mock/results/t1.jpg?se=1";
        for body in [
            json!({"prompt": "x", "input_image": "https://me.example/x.png#cdn.example.net"}),
            json!({"prompt": "x", "input_image": "https://me.example/x.png?a=cdn.example.net/mock/results/t1.jpg"}),
            json!({"prompt": "x", "webhook_url": "foo://cdn.example.net\\@ab12cd34ef.example/"}),
        ] {
            let scrubber = Scrubber::new("key-12345678").serving(&["http://127.0.0.1:8080/"]);
            scrubber.learn_request(&body);
            assert_eq!(scrubber.scrub(result), result, "{body}");
        }
    }

    #[test]
    fn secrets_sharing_a_prefix_do_not_share_a_bucket() {
        let scrubber = Scrubber::new("key-12345678");
        // As `whsec_` secrets are: a common start, then random characters.
        let random = |n: u64| n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (n << 17);
        for n in 0..10_000u64 {
            scrubber.learn(&format!("whsec_{:016x}", random(n)));
        }
        let known = scrubber.known.read().unwrap();
        let largest = known
            .long
            .values()
            .chain(known.short.values())
            .map(Vec::len)
            .max()
            .unwrap();
        assert!(largest <= 8, "{largest} spellings share their first eight bytes");
        drop(known);
        assert_eq!(scrubber.scrub(&format!("whsec_{:016x}!", random(42))), "[redacted]!");
    }

    #[test]
    fn what_every_address_of_a_signer_repeats_is_no_secret_of_an_input_address() {
        let scrubber = Scrubber::new("key-12345678");
        let credential = "AKIAIOSFODNN7EXAMPLE%2F20261127%2Fus-east-1%2Fs3%2Faws4_request";
        let object_id = "6d1b4c6e-9a43-0d8e-5b7e-2a912f6c1a0e";
        let signature = "a1b2c3d4".repeat(8);
        scrubber.learn_request(&json!({
            "input_image": format!("https://b.s3.amazonaws.com/in.png?X-Amz-Credential={credential}&X-Amz-Signature={signature}"),
            "input_image_2": format!("https://a.blob.core.windows.net/c/in.png?skoid={object_id}&sktid={object_id}&sig={signature}"),
        }));
        for result in [
            format!("https://b.s3.amazonaws.com/out.png?X-Amz-Credential={credential}&X-Amz-Signature=ffff"),
            format!("https://a.blob.core.windows.net/c/out.png?skoid={object_id}&sktid={object_id}&sig=ffff"),
        ] {
            assert_eq!(scrubber.scrub(&result), result);
        }
        assert_eq!(
            scrubber.scrub(&format!("sig={signature}")),
            "sig=[redacted]",
            "the signature is"
        );
    }

    #[test]
    fn a_beginning_followed_by_what_an_address_goes_on_with_is_read_whole() {
        let key = "0c8a2f3e-1234-4cde-9abc-def012345678";
        let scrubber = Scrubber::new(key);
        for address in [
            "https://cdn.example.com/0c8a2f3e-1234-4cde,h_512/q.png",
            "https://cdn.example.com/0c8a2f3e-1234-4cde;v=2/q.png",
            "https://cdn.example.com/0c8a2f3e-1234-4cde(1)/q.png",
        ] {
            assert_eq!(scrubber.scrub(address), address);
        }
        for quoted in [
            "0c8a2f3e-1234-4cde***",
            "0c8a2f3e-1234-4cde[truncated]",
            "\"0c8a2f3e-1234-4cde\"",
        ] {
            assert!(!scrubber.scrub(quoted).contains("4cde"), "{quoted}");
        }
    }

    #[test]
    fn a_task_id_is_never_a_secret_whatever_learned_it() {
        let id = "2f6c1a0e-6d1b-4c6e-9a43-0d8e5b7e2a91";
        let answer = format!(r#"{{"id":"{id}","polling_url":"https://api.example.com/v1/get_result?id={id}"}}"#);
        // Known first, then named by a request's address.
        let scrubber = Scrubber::new("key-12345678");
        scrubber.is_a_task_id(id);
        scrubber.learn_request(&json!({"webhook_url": format!("https://hooks.example.com/in?parent={id}")}));
        assert_eq!(scrubber.scrub_body(answer.as_bytes()), None);
        // Named first, then known.
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({"webhook_url": format!("https://hooks.example.com/in/{id}/done?parent={id}")}));
        assert!(scrubber.scrub_body(answer.as_bytes()).is_some(), "learned as a token");
        scrubber.is_a_task_id(id);
        assert_eq!(scrubber.scrub_body(answer.as_bytes()), None);
        // A service naming a task with the key or a secret field's value
        // unlearns neither.
        scrubber.learn_request(&json!({"webhook_secret": "whsec-given-as-one-42"}));
        scrubber.is_a_task_id("key-12345678");
        scrubber.is_a_task_id("whsec-given-as-one-42");
        assert_eq!(
            scrubber.scrub("key-12345678 whsec-given-as-one-42"),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn the_user_name_and_password_of_an_address_are_learned_decoded_and_found_whole() {
        let scrubber = Scrubber::new("key-12345678");
        scrubber.learn_request(&json!({
            "webhook_url": "https://delivery:production@hooks.example.com/in?size=1024x1024",
            "input_image": "https://v:q%40ss-word-99@files.example.com/in.png?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2FexampleSessionToken0123456789",
        }));
        // Words and settings the service's addresses may hold stay whole.
        let sample = "https://delivery-eu1.example.ai/production/1024x1024/r.png?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2FexampleSessionToken0123456789";
        assert_eq!(scrubber.scrub(sample), sample);
        // The password, as written and decoded.
        assert_eq!(
            scrubber.scrub("p=q%40ss-word-99 p=q@ss-word-99"),
            "p=[redacted] p=[redacted]"
        );
        // A service naming a task with its decoded spelling unlearns neither.
        scrubber.is_a_task_id("q@ss-word-99");
        assert_eq!(scrubber.scrub("q%40ss-word-99"), "[redacted]");
    }

    #[test]
    fn settings_in_addresses_are_not_taken_for_tokens() {
        let settings = [
            "png",
            "production",
            "1024",
            "europe-west",
            "us-east-1",
            "flux-pro-1.1",
            "production-eu-west-1",
            "2026-11-27T13-40-00Z",
            "12345678901234567890",
            "a-b-c-d-e-f-g-h-i-j-k",
            "1024x1024",
            "20261127T120000Z",
            "HMACSHA256",
            "v20240101",
        ];
        for setting in settings {
            assert!(!is_token_like(setting), "{setting}");
        }
        let tokens = [
            "abc123def",
            "9f86d081884c7d659a2feaa0c55ad015",
            "0c8a2f3e-1234-4cde-9abc-def012345678",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.sig",
        ];
        for token in tokens {
            assert!(is_token_like(token), "{token}");
        }
    }
}
