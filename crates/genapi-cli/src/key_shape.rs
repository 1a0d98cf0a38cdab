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

/// Whether `value` holds a UUID: groups of 8, 4, 4, 4 and 12 hex digits
/// joined by dashes, or the 32 digits alone.
fn holds_a_uuid(value: &str) -> bool {
    let hex = |text: &str| text.bytes().all(|b| b.is_ascii_hexdigit());
    value
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .any(|word| {
            let groups: Vec<&str> = word.split('-').collect();
            let dashed = groups.len() == 5
                && groups
                    .iter()
                    .zip([8, 4, 4, 4, 12])
                    .all(|(group, n)| group.len() == n && hex(group));
            dashed || (word.len() == 32 && hex(word) && word.bytes().any(|b| b.is_ascii_digit()))
        })
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
