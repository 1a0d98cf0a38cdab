//! The shape of a key: what a value pasted where a key does not belong
//! looks like, so that it is refused rather than kept or handed on (a
//! config field, a variable the opener would be given).

/// The beginnings of common services' keys and tokens (`sk-` and `sk_`,
/// GitHub's `ghp_`, Slack's `xoxb-`, AWS's `AKIA`, Google's `AIza`, a JWT's
/// `eyJ`): a word that opens so and is long enough is taken for a key.
const KEY_PREFIXES: [&str; 18] = [
    "sk-",
    "sk_",
    "rk_",
    "pk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "hf_",
    "eyJ",
];

/// The fewest characters of a word [`KEY_PREFIXES`] opens that is taken for
/// a key (a folder `sk-trips` is not one).
const SHORTEST_PREFIXED_KEY: usize = 16;

/// The fewest letters and digits in a row that [`looks_like_a_key`] weighs.
const SHORTEST_RANDOM_RUN: usize = 20;

/// Whether `value` has the shape of a key rather than of a model's name, a
/// folder or an address: one of its words (between `/`, spaces and the
/// like) opens as common services' keys do ([`KEY_PREFIXES`]) and is
/// [`SHORTEST_PREFIXED_KEY`] characters or more, or it holds a run of
/// [`SHORTEST_RANDOM_RUN`] letters and digits or more that goes from letters
/// to digits or back three times or more, with three of each, as random keys
/// and digests do and names, dates and sizes do not (`gen-2-pro`,
/// `shots/2026-11-25`, `renders-1024x1024`), or it holds a UUID (a key of
/// that shape: `0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e`).
pub fn looks_like_a_key(value: &str) -> bool {
    let words = value.split(|c: char| c.is_whitespace() || matches!(c, '/' | '\\' | '=' | ',' | '?' | '&' | '@' | ':'));
    let prefixed = words
        .filter(|word| word.len() >= SHORTEST_PREFIXED_KEY)
        .any(|word| KEY_PREFIXES.iter().any(|prefix| word.starts_with(prefix)));
    let random = value
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|run| run.len() >= SHORTEST_RANDOM_RUN)
        .any(|run| {
            let digits = run.bytes().filter(u8::is_ascii_digit).count();
            let changes = run
                .as_bytes()
                .windows(2)
                .filter(|pair| pair[0].is_ascii_digit() != pair[1].is_ascii_digit())
                .count();
            digits >= 3 && run.len() - digits >= 3 && changes >= 3
        });
    prefixed || random || holds_a_uuid(value)
}

/// Whether `value` holds a UUID anywhere, whatever stands beside it
/// (`out-…`, `img…x`): groups of 8, 4, 4, 4 and 12 hex digits joined by
/// one separator (`-`, `_`, `.`, `/` or a space), or 32 hex digits in a
/// row with a digit among them; also once its `%` escapes are decoded.
fn holds_a_uuid(value: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
    let holds = |text: &str| {
        let bytes = text.as_bytes();
        (0..bytes.len()).any(|start| grouped_at(&bytes[start..]) || plain_at(&bytes[start..]))
    };
    holds(value) || holds(&decoded)
}

/// A UUID in groups opens `bytes`.
fn grouped_at(bytes: &[u8]) -> bool {
    let Some(&separator) = bytes.get(8).filter(|b| b"-_./ ".contains(b)) else {
        return false;
    };
    let mut at = 0;
    for (n, length) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        let group = bytes.get(at..at + length);
        if !group.is_some_and(|group| group.iter().all(u8::is_ascii_hexdigit)) {
            return false;
        }
        at += length;
        if n < 4 {
            if bytes.get(at) != Some(&separator) {
                return false;
            }
            at += 1;
        }
    }
    true
}

/// 32 hex digits with a digit among them open `bytes`.
fn plain_at(bytes: &[u8]) -> bool {
    bytes
        .get(..32)
        .is_some_and(|run| run.iter().all(u8::is_ascii_hexdigit) && run.iter().any(u8::is_ascii_digit))
}

#[cfg(test)]
mod tests {
    use super::looks_like_a_key;

    #[test]
    fn keys_have_their_shape_and_names_folders_and_addresses_do_not() {
        for key in [
            "sk-live-PASTED7731q9ZcX2vB8nM4kL0p",
            "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "AKIAIOSFODNN7EXAMPLE",
            "Q7f3Kp92LmX0zR4tB8vN1cW6yH5j",
            "3f9c1e2a7b4d5e6f8a9b0c1d2e3f4a5b",
            "  sk-proj-AbCdEf0123456789xyz  ",
            "~/keys/sk-live-PASTED7731q9ZcX2vB8",
            "0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e",
            "https://api.example.com/0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e",
            "https://0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e.example.com",
            "0C8A2F3E9B1D4B6C9D7E5A4F3B2C1D0E",
            "x0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0e",
            "renders-0c8a2f3e-9b1d-4b6c-9d7e-5a4f3b2c1d0ex",
            "0c8a2f3e.9b1d.4b6c.9d7e.5a4f3b2c1d0e",
            "0c8a2f3e 9b1d 4b6c 9d7e 5a4f3b2c1d0e",
            "%30%63%38%61%32%66%33%65%2d%39%62%31%64%2d%34%62%36%63%2d%39%64%37%65%2d%35%61%34%66%33%62%32%63%31%64%30%65",
        ] {
            assert!(looks_like_a_key(key), "{key}");
        }
        for plain in [
            "gen-2-pro",
            "gen-tools/deblur-v1",
            "shots",
            "~/Pictures/genapi/2026-11-25",
            "renders-1024x1024",
            "sk-trips",
            "https://api.eu4.example.com",
            "https://api.example.com/v1",
            "my-output-folder-for-the-night-batch",
            "20261125T120000Z",
        ] {
            assert!(!looks_like_a_key(plain), "{plain}");
        }
    }
}
