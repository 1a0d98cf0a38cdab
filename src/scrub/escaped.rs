//! A text read as JSON strings read, whatever else it is.
//!
//! A JSON answer is decoded before it is searched, so a secret its strings
//! spell with escapes (`\u0073k-…`, `\/`) is found there. A page that does
//! not parse is searched as it was written: one cut at its limit, an HTML
//! page carrying JSON in a script. Its strings may still spell a secret
//! with escapes, in any of the ways JSON allows. So such a text is also
//! searched in a view with every escape it holds decoded, leniently (what
//! is no escape stays as it is), and each byte of that view knows where in
//! the text it came from (found by walking the text again, so no map as
//! large as the text is kept): a secret found in the view is redacted in
//! the text, escapes and all.

/// A text with its JSON escapes decoded.
pub(super) struct View {
    /// The decoded bytes.
    pub(super) decoded: Vec<u8>,
}

impl View {
    /// The view of `text`, or `None` when it holds no escape to decode.
    pub(super) fn of(text: &[u8]) -> Option<View> {
        if !text.contains(&b'\\') {
            return None;
        }
        let mut decoded = Vec::with_capacity(text.len());
        walk(text, |_, bytes| decoded.extend_from_slice(bytes));
        Some(View { decoded })
    }

    /// Where in `text` (the text this is the view of) each decoded position
    /// of `wanted` came from: the start of what decodes to the byte there,
    /// or the end of the text for the end of the view. Found by walking the
    /// text again, so the view needs no map as large as the text.
    pub(super) fn sources(&self, text: &[u8], mut wanted: Vec<usize>) -> Sources {
        wanted.sort_unstable();
        wanted.dedup();
        let mut found = Vec::with_capacity(wanted.len());
        let mut next = wanted.iter().peekable();
        let mut decoded = 0;
        walk(text, |at, bytes| {
            decoded += bytes.len();
            while let Some(&&position) = next.peek() {
                if position >= decoded {
                    break;
                }
                found.push((position, at));
                next.next();
            }
        });
        found.extend(next.map(|&position| (position, text.len())));
        Sources(found)
    }
}

/// Decoded positions and where in the text each came from.
pub(super) struct Sources(Vec<(usize, usize)>);

impl Sources {
    /// Where the decoded `position` came from (it was among those wanted).
    pub(super) fn of(&self, position: usize) -> usize {
        match self.0.binary_search_by_key(&position, |&(decoded, _)| decoded) {
            Ok(index) => self.0[index].1,
            // Not wanted: the nearest source at or before it, which only
            // widens what is redacted.
            Err(index) => index.checked_sub(1).map_or(0, |before| self.0[before].1),
        }
    }
}

/// Calls `each` with every piece of `text` as JSON decodes it: where in
/// the text it begins and the bytes it decodes to (an escape's character,
/// or a byte that is no escape, as it is).
fn walk(text: &[u8], mut each: impl FnMut(usize, &[u8])) {
    let mut at = 0;
    while at < text.len() {
        match escape_at(text, at) {
            Some((character, length)) => {
                let mut bytes = [0; 4];
                each(at, character.encode_utf8(&mut bytes).as_bytes());
                at += length;
            }
            None => {
                each(at, &text[at..=at]);
                at += 1;
            }
        }
    }
}

/// The character the JSON escape at `text[at..]` stands for, and the bytes
/// it takes; `None` where none begins (a lone surrogate, an escape cut
/// short, a backslash before anything else).
fn escape_at(text: &[u8], at: usize) -> Option<(char, usize)> {
    if text.get(at) != Some(&b'\\') {
        return None;
    }
    let simple = match *text.get(at + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => return unicode_at(text, at),
        _ => return None,
    };
    Some((simple, 2))
}

/// A `\uXXXX` escape at `text[at..]`, or a pair of them spelling one
/// character beyond the first plane.
fn unicode_at(text: &[u8], at: usize) -> Option<(char, usize)> {
    let unit = hex_unit(text, at)?;
    if let Some(character) = char::from_u32(unit) {
        return Some((character, 6));
    }
    // A high surrogate, which only a low one after it completes.
    let low = hex_unit(text, at + 6).filter(|low| (0xdc00..0xe000).contains(low))?;
    let high = unit.checked_sub(0xd800).filter(|high| *high < 0x400)?;
    char::from_u32(0x10000 + (high << 10) + (low - 0xdc00)).map(|character| (character, 12))
}

/// The four hex digits of a `\uXXXX` at `text[at..]`.
fn hex_unit(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 6)?.strip_prefix(b"\\u")?;
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(text: &str) -> String {
        String::from_utf8(View::of(text.as_bytes()).unwrap().decoded).unwrap()
    }

    #[test]
    fn every_json_escape_is_decoded_and_anything_else_kept() {
        assert_eq!(decoded(r#"\u0073k\/\"\\\n"#), "sk/\"\\\n");
        assert_eq!(decoded(r"\ud83d\ude00 \u00e9"), "😀 é");
        // No escape: a lone surrogate, one cut short, an unknown one.
        assert_eq!(decoded(r"\ud83d \u00 \x"), r"\ud83d \u00 \x");
        // An escaped backslash before `u0073` is a backslash, then text.
        assert_eq!(decoded(r"\\u0073"), r"\u0073");
        assert!(View::of(b"no escape").is_none());
    }

    #[test]
    fn each_decoded_position_knows_where_it_came_from() {
        let text = r"a\u00e9b".as_bytes();
        let view = View::of(text).unwrap();
        assert_eq!(view.decoded, "aéb".as_bytes());
        // `é` is two bytes, both from the escape at 1; `b` is at 7; the
        // view's end is the text's.
        let sources = view.sources(text, vec![4, 3, 1, 0, 2]);
        assert_eq!([0, 1, 2, 3, 4].map(|position| sources.of(position)), [0, 1, 1, 7, 8]);
    }
}
