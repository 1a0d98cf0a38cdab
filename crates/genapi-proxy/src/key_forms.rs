//! The configured key in the spellings an answer may quote it in, taken out
//! of every answer the proxy reads whole.
//!
//! A service (or a host in front of it) that quotes the key it was sent
//! would hand it to callers that never had it, and beyond loopback those
//! hold only the proxy's own key. A JSON answer is searched string by
//! string first, so any JSON escape is read as the character it spells
//! ([`crate::Shared::without_key`]); then the bytes are searched for the key
//! as text, as UTF-16 (either byte order), as HTML character references,
//! every character escaped (`\u0073`, `%73`), and as base64 (standard or URL-safe, at each of the three alignments the
//! key may have in a longer text, for keys long enough that the encoded
//! part cannot be met by chance).

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

/// What stands where a spelling of the key was.
pub(crate) const REDACTED: &[u8] = b"[redacted]";

/// The fewest bytes of the key a base64 spelling covers for it to be
/// searched: 16 characters of base64, which ordinary data does not match
/// by chance.
const LEAST_ENCODED: usize = 12;

/// The spellings of `key` searched for.
pub(crate) fn of(key: &str) -> Vec<Vec<u8>> {
    let mut forms = vec![key.as_bytes().to_vec()];
    let escaped = serde_json::to_string(key).unwrap_or_default();
    forms.push(escaped.trim_matches('"').as_bytes().to_vec());
    forms.push(key.encode_utf16().flat_map(u16::to_le_bytes).collect());
    forms.push(key.encode_utf16().flat_map(u16::to_be_bytes).collect());
    forms.push(
        key.chars()
            .map(|c| format!("&#{};", c as u32))
            .collect::<String>()
            .into_bytes(),
    );
    forms.push(
        key.chars()
            .map(|c| format!("&#x{:x};", c as u32))
            .collect::<String>()
            .into_bytes(),
    );
    // Every character escaped, as JSON (`\u0073`) or as an address
    // (`%73`), in either case.
    for upper in [false, true] {
        let json: String = key
            .encode_utf16()
            .map(|unit| {
                if upper {
                    format!("\\u{unit:04X}")
                } else {
                    format!("\\u{unit:04x}")
                }
            })
            .collect();
        let address: String = key
            .bytes()
            .map(|byte| {
                if upper {
                    format!("%{byte:02X}")
                } else {
                    format!("%{byte:02x}")
                }
            })
            .collect();
        forms.push(json.into_bytes());
        forms.push(address.into_bytes());
    }
    let bytes = key.as_bytes();
    for skipped in 0..3 {
        let rest = bytes.get(skipped..).unwrap_or_default();
        let whole_groups = &rest[..rest.len() - rest.len() % 3];
        if whole_groups.len() >= LEAST_ENCODED {
            forms.push(STANDARD_NO_PAD.encode(whole_groups).into_bytes());
            forms.push(URL_SAFE_NO_PAD.encode(whole_groups).into_bytes());
        }
    }
    forms.sort();
    forms.dedup();
    forms
}

/// `body` with every one of `forms` replaced by [`REDACTED`]; `None` when
/// it holds none.
pub(crate) fn redacted(body: &[u8], forms: &[Vec<u8>]) -> Option<Vec<u8>> {
    let mut found = false;
    let mut text = body.to_vec();
    for form in forms.iter().filter(|form| !form.is_empty()) {
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        while at < text.len() {
            if text[at..].starts_with(form) {
                out.extend_from_slice(REDACTED);
                at += form.len();
                found = true;
            } else {
                out.push(text[at]);
                at += 1;
            }
        }
        text = out;
    }
    found.then_some(text)
}

/// The longest of `forms`: a stream searched chunk by chunk keeps that
/// many bytes less one from each chunk for the next, so a spelling cut in
/// two is found whole.
pub(crate) fn longest(forms: &[Vec<u8>]) -> usize {
    forms.iter().map(Vec::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_the_key_is_taken_out_and_nothing_else() {
        let key = "sk-quoted-0123456789abcdef";
        let forms = of(key);
        let spelt = [
            key.to_string(),
            key.encode_utf16().flat_map(u16::to_le_bytes).map(char::from).collect(),
            key.chars().map(|c| format!("&#{};", c as u32)).collect(),
            // In a longer base64 text, at each alignment.
            STANDARD_NO_PAD.encode(format!("a{key}b")),
            STANDARD_NO_PAD.encode(format!("ab{key}c")),
            URL_SAFE_NO_PAD.encode(format!("abc{key}")),
        ];
        for text in spelt {
            let body = format!("before {text} after");
            let redacted = redacted(body.as_bytes(), &forms).unwrap_or_else(|| panic!("not found in {body}"));
            assert!(String::from_utf8_lossy(&redacted).contains("[redacted]"), "{body}");
        }
        assert_eq!(redacted(b"an answer that quotes nothing", &forms), None);
        let percent: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
        let escaped: String = key.bytes().map(|b| format!("\\u{b:04x}")).collect();
        for spelt in [percent, escaped] {
            assert!(redacted(spelt.as_bytes(), &forms).is_some(), "{spelt}");
        }
    }
}
