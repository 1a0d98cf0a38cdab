//! A text read as JSON strings and HTML pages read, whatever else it is.
//!
//! A JSON answer is decoded before it is searched, so a secret its strings
//! spell with escapes (`\u0073k-…`, `\/`) is found there. A page that does
//! not parse is searched as it was written: one cut at its limit, an HTML
//! page carrying JSON in a script. Its strings may still spell a secret
//! with escapes, in any of the ways JSON allows, and an HTML page may spell
//! one with character references (`&#43;`, `&#x2b;`, `&plus;`: what an
//! HTML template writes for a `+` of a `whsec_…` secret in an attribute).
//! So such a text is also searched in a view with every escape and
//! reference it holds decoded, leniently (what is neither stays as it is),
//! and each byte of that view knows where in the text it came from: a
//! secret found in the view is redacted in the text, escapes and all. A
//! header's value and a string JSON decoded (which may quote another
//! answer, escapes and all) are read the same way.
//!
//! JSON quoting JSON escapes its escapes (`\\u0073`: an HTML page carrying
//! an answer that quotes another), and HTML quoting HTML its references
//! (`&amp;#43;`), so the view is decoded again, level by level, while its
//! escapes decode (at most [`DEPTH`] levels), and every level is searched;
//! each level's bytes still know where in the text they came from.
//!
//! Most texts spell no secret: they are searched in views whose bytes do
//! not know where they came from, a byte for each byte of the text at each
//! level. Only a text found to spell one is decoded again into views that
//! know, about nine bytes for each byte.
//!
//! A text cut at its limit may end inside an escape (`\u00`, the high half
//! of a surrogate pair alone, `&#4`). That escape decodes to nothing, so
//! the secret it was spelling would not end the view; the view says where
//! it begins, and a secret's beginning is looked for before it. A number
//! ending the text without its `;` (`&#101`) may be whole as well, as a
//! browser reads it: it decodes, and a secret's beginning is also looked
//! for with it.

/// A text with its JSON escapes and HTML character references decoded.
pub(super) struct View {
    /// The decoded bytes.
    pub(super) decoded: Vec<u8>,
    /// For each decoded byte, and one past the last, where in the text what
    /// it was decoded from begins; empty in a view made for searching alone
    /// ([`View::searched`]).
    pub(super) from: Vec<usize>,
    /// How many decoded bytes come before an escape the text's end cut
    /// short (all of them when it ends with none).
    whole: usize,
    /// Where in the bytes this view was decoded from (the text, or the
    /// view it is deeper than) an escape their end cut short begins.
    cut_in_source: Option<usize>,
    /// How many times the text was decoded to make this view.
    depth: usize,
    /// Whether its bytes know where in the text they came from.
    mapped: bool,
}

/// The most levels of escapes decoded: each level halves a run of
/// backslashes, so this many cover any quoting a service does; and a page
/// of backslashes, or of `&amp;amp;amp;…` (which loses four bytes a level,
/// not half), costs a bounded number of passes.
pub(super) const DEPTH: usize = 8;

impl View {
    /// The view of `text`, each of its bytes knowing where in the text it
    /// came from (nine bytes for each byte of the text); `None` when the
    /// text holds no escape to decode.
    pub(super) fn of(text: &[u8]) -> Option<View> {
        View::first(text, true)
    }

    /// The view of `text` for searching alone: its bytes do not know where
    /// they came from, so it costs a byte for each byte of the text. Most
    /// texts spell no secret, and are only searched.
    pub(super) fn searched(text: &[u8]) -> Option<View> {
        View::first(text, false)
    }

    fn first(text: &[u8], mapped: bool) -> Option<View> {
        if !may_hold_escapes(text) {
            return None;
        }
        let level = Level::of(text, mapped, text.len());
        Some(View {
            cut_in_source: level.cut_at,
            decoded: level.decoded,
            from: level.from,
            whole: level.whole,
            depth: 1,
            mapped,
        })
    }

    /// This view decoded once more (`\\u0073` was `\u0073` in this view,
    /// and is `s` in the next), its bytes still pointing into the text
    /// when this view's do; or `None` when no escape of this view decodes
    /// and none is cut short at its end, or it is the [`DEPTH`]th.
    pub(super) fn deeper(&self) -> Option<View> {
        if self.depth >= DEPTH || !may_hold_escapes(&self.decoded) {
            return None;
        }
        let level = Level::of(&self.decoded, self.mapped, self.whole);
        // A text cut through an escape escaped again (`\\u00`) ends this
        // view with an escape cut short (`\u00`): the next view, though
        // nothing of it decodes, says where a secret's beginning ends, and
        // is the last.
        let cut_short = level.whole < level.decoded.len();
        if !level.decoded_any && !cut_short {
            return None;
        }
        // Bytes from beyond this view's whole part (an escape cut short)
        // are no part of the next one's either.
        let whole = level.whole.min(level.within);
        // Pointed into the text in place: a page of a few MiB has as many
        // of these as bytes, at each level.
        let mut from = level.from;
        for at in &mut from {
            *at = self.from[*at];
        }
        Some(View {
            cut_in_source: level.cut_at,
            decoded: level.decoded,
            from,
            whole,
            depth: if level.decoded_any { self.depth + 1 } else { DEPTH },
            mapped: self.mapped,
        })
    }

    /// The decoded bytes before an escape the text's end cut short: where
    /// what is left of a secret a cut went through ends.
    pub(super) fn whole(&self) -> &[u8] {
        &self.decoded[..self.whole]
    }

    /// Where what is left of a secret a cut went through may end in this
    /// view: before an escape the text's end cut short, or after all of it,
    /// since a number ending the text without its `;` (`&#101`) may be
    /// whole, and is then a character of the secret.
    pub(super) fn ends(&self) -> [&[u8]; 2] {
        [self.whole(), &self.decoded]
    }

    /// The bytes this view was decoded from (`source`: the text, or the
    /// view it is deeper than) that come before an escape their end cut
    /// short, or `None` when none was. What is left of a secret may end
    /// there, in bytes this view decodes otherwise (`\u0123456` is
    /// `ģ456` here): each level is looked at for it.
    pub(super) fn before_cut<'s>(&self, source: &'s [u8]) -> Option<&'s [u8]> {
        self.cut_in_source.and_then(|at| source.get(..at))
    }

    /// Where in the text the decoded bytes `start..end` came from; only
    /// a view made by [`View::of`] knows.
    pub(super) fn source(&self, start: usize, end: usize) -> (usize, usize) {
        debug_assert!(self.mapped, "asked a searched view where its bytes came from");
        (self.from[start], self.from[end])
    }
}

/// One pass of decoding, its bytes pointing into the text it decoded when
/// asked to.
struct Level {
    decoded: Vec<u8>,
    /// Where each decoded byte came from, and the text's end; empty unless
    /// mapped.
    from: Vec<usize>,
    /// How many decoded bytes come before an escape the end cut short.
    whole: usize,
    /// Where in the text that escape begins.
    cut_at: Option<usize>,
    /// How many decoded bytes came from before the limit given.
    within: usize,
    decoded_any: bool,
}

impl Level {
    /// `text` decoded once; `mapped`, each decoded byte says where it came
    /// from; `within` counts the decoded bytes from before `limit`.
    fn of(text: &[u8], mapped: bool, limit: usize) -> Level {
        let mut decoded = Vec::with_capacity(text.len());
        let mut from = Vec::with_capacity(if mapped { text.len() + 1 } else { 0 });
        let mut at = 0;
        let mut whole = None;
        let mut cut_at = None;
        let mut within = 0;
        let mut decoded_any = false;
        while at < text.len() {
            let before = decoded.len();
            // A number ending the text (`&#104`) decodes, for a text that
            // was not cut, and may be one cut short, for one that was.
            if whole.is_none() && cut_short(&text[at..]) {
                whole = Some(decoded.len());
                cut_at = Some(at);
            }
            let length = match escape_at(text, at) {
                Some((character, length)) => {
                    let mut bytes = [0; 4];
                    decoded.extend_from_slice(character.encode_utf8(&mut bytes).as_bytes());
                    decoded_any = true;
                    length
                }
                None => {
                    decoded.push(text[at]);
                    1
                }
            };
            let added = decoded.len() - before;
            if mapped {
                from.extend(std::iter::repeat_n(at, added));
            }
            if at < limit {
                within += added;
            }
            at += length;
        }
        if mapped {
            from.push(text.len());
        }
        Level {
            whole: whole.unwrap_or(decoded.len()),
            decoded,
            from,
            cut_at,
            within,
            decoded_any,
        }
    }
}

/// Whether `text` holds something a view would decode or find cut short:
/// any backslash, or an `&` that begins a character reference. The usual
/// text has neither, and an address's `&`s begin none: no view is made
/// for them.
pub(super) fn may_hold_escapes(text: &[u8]) -> bool {
    text.contains(&b'\\')
        || text
            .iter()
            .enumerate()
            .any(|(at, byte)| *byte == b'&' && (reference_at(text, at).is_some() || cut_short(&text[at..])))
}

/// The character the escape at `text[at..]` stands for, and the bytes it
/// takes: a JSON escape or an HTML character reference; `None` where none
/// begins (a lone surrogate, an escape cut short, a backslash before
/// anything else, an `&` of an address).
fn escape_at(text: &[u8], at: usize) -> Option<(char, usize)> {
    match text.get(at)? {
        b'\\' => json_escape_at(text, at),
        b'&' => reference_at(text, at),
        _ => None,
    }
}

/// The JSON escape at `text[at..]`, which begins with a backslash.
fn json_escape_at(text: &[u8], at: usize) -> Option<(char, usize)> {
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

/// The HTML character reference at `text[at..]`, which begins with `&`: a
/// number (`&#43;`, `&#x2B;`), also without its `;` as browsers read it
/// (at the text's end too, where its digits may also be cut short: see
/// [`cut_short`]), or a name of [`NAMED`] with its `;` (or without, for
/// the few of [`WITHOUT_SEMICOLON`]).
fn reference_at(text: &[u8], at: usize) -> Option<(char, usize)> {
    let rest = text.get(at + 1..)?;
    let Some(number) = rest.strip_prefix(b"#") else {
        // A name begins with a letter: the `&&` and `& ` of a page begin
        // none, and cost no look at every name.
        if !rest.first().is_some_and(u8::is_ascii_alphabetic) {
            return None;
        }
        return NAMED.iter().find_map(|(name, character)| {
            let after = rest.strip_prefix(name.as_bytes())?;
            match after.first() {
                Some(b';') => Some((*character, name.len() + 2)),
                _ if WITHOUT_SEMICOLON.contains(name) => Some((*character, name.len() + 1)),
                _ => None,
            }
        });
    };
    let (radix, digits) = match number.first() {
        Some(b'x' | b'X') => (16, &number[1..]),
        _ => (10, number),
    };
    let count = digits
        .iter()
        .take_while(|digit| char::from(**digit).is_digit(radix))
        .count();
    // Digit by digit, giving up past the last character's number.
    let value = digits[..count].iter().try_fold(0_u32, |value, digit| {
        value
            .checked_mul(radix)?
            .checked_add(char::from(*digit).to_digit(radix)?)
            .filter(|value| *value <= 0x10ffff)
    })?;
    let character = char::from_u32(value).filter(|_| count > 0)?;
    // `&`, `#`, an `x` if any, the digits.
    let length = 2 + (number.len() - digits.len()) + count;
    match text.get(at + length) {
        Some(b';') => Some((character, length + 1)),
        _ => Some((character, length)),
    }
}

/// The names a browser reads without their `;` too (`&lt`, `&amp`), the
/// ASCII ones of HTML's legacy list.
const WITHOUT_SEMICOLON: [&str; 8] = ["amp", "lt", "gt", "quot", "AMP", "LT", "GT", "QUOT"];

/// The named references that stand for an ASCII character: the ones a
/// template may write for a character of a secret, of its address or of
/// its quoting. Every name is HTML's own.
const NAMED: [(&str, char); 34] = [
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("AMP", '&'),
    ("LT", '<'),
    ("GT", '>'),
    ("QUOT", '"'),
    ("apos", '\''),
    ("sol", '/'),
    ("bsol", '\\'),
    ("equals", '='),
    ("plus", '+'),
    ("colon", ':'),
    ("semi", ';'),
    ("comma", ','),
    ("period", '.'),
    ("excl", '!'),
    ("quest", '?'),
    ("num", '#'),
    ("dollar", '$'),
    ("percnt", '%'),
    ("lpar", '('),
    ("rpar", ')'),
    ("ast", '*'),
    ("lowbar", '_'),
    ("commat", '@'),
    ("lsqb", '['),
    ("rsqb", ']'),
    ("lcub", '{'),
    ("rcub", '}'),
    ("verbar", '|'),
    ("grave", '`'),
    ("Hat", '^'),
];

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

/// Whether `rest`, the end of a text, is an escape cut short: the beginning
/// of one (`\`, `\u00`, `&#4`, `&pl`), or the high half of a surrogate pair
/// with at most the beginning of its low half.
fn cut_short(rest: &[u8]) -> bool {
    if let Some(reference) = rest.strip_prefix(b"&") {
        return begins_reference(reference);
    }
    match rest.split_at_checked(6) {
        None => !rest.is_empty() && begins_unicode(rest),
        Some((unit, low)) => {
            hex_unit(unit, 0).is_some_and(|unit| (0xd800..0xdc00).contains(&unit)) && begins_unicode(low)
        }
    }
}

/// Whether `bytes`, what follows an `&` to the end of a text, begin a
/// character reference short of its `;`: a number's `#`, `x` and digits,
/// or the beginning of a name.
fn begins_reference(bytes: &[u8]) -> bool {
    let Some(number) = bytes.strip_prefix(b"#") else {
        return bytes.is_empty()
            || bytes[0].is_ascii_alphabetic() && NAMED.iter().any(|(name, _)| name.as_bytes().starts_with(bytes));
    };
    let digits = match number.first() {
        Some(b'x' | b'X') => &number[1..],
        _ => number,
    };
    let radix = if digits.len() < number.len() { 16 } else { 10 };
    // Digits to the end first: that look stops at the first other byte,
    // where counting them all would read a page of `&#&#…` once an `&`.
    // Then no character's number is longer, leading zeros aside (a page
    // may write as many as it likes: `&#000043;`).
    digits.iter().all(|digit| char::from(*digit).is_digit(radix))
        && digits.iter().skip_while(|digit| **digit == b'0').count() <= 7
}

/// Whether `bytes` (empty, too) begin a `\uXXXX` escape short of its end.
fn begins_unicode(bytes: &[u8]) -> bool {
    let (lead, digits) = bytes.split_at(bytes.len().min(2));
    bytes.len() < 6 && b"\\u".starts_with(lead) && digits.iter().all(u8::is_ascii_hexdigit)
}

/// The four hex digits of a `\uXXXX` at `text[at..]`.
fn hex_unit(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 6)?.strip_prefix(b"\\u")?;
    // Digit by digit: a number's parser would take `+041` as well.
    digits
        .iter()
        .try_fold(0, |unit, digit| Some(unit << 4 | char::from(*digit).to_digit(16)?))
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
        // Four hex digits and nothing else, as JSON has them.
        assert_eq!(decoded(r"\u+041 \u004G \u00E9"), r"\u+041 \u004G é");
        // An escaped backslash before `u0073` is a backslash, then text.
        assert_eq!(decoded(r"\\u0073"), r"\u0073");
        assert!(View::of(b"no escape").is_none());
    }

    #[test]
    fn each_decoded_byte_knows_where_it_came_from() {
        let view = View::of(r"a\u00e9b".as_bytes()).unwrap();
        assert_eq!(view.decoded, "aéb".as_bytes());
        // `é` is two bytes, both from the escape at 1; `b` is at 7.
        assert_eq!(view.from, [0, 1, 1, 7, 8]);
        assert_eq!(view.source(1, 3), (1, 7));
    }

    #[test]
    fn escapes_of_escapes_are_decoded_level_by_level_and_still_know_their_source() {
        // Quoted three times: four backslashes before `u0073`, two before
        // `u002d`.
        let text = r"a\\\\u0073k\\u002dkey b".as_bytes();
        let first = View::of(text).unwrap();
        assert_eq!(first.decoded, br"a\\u0073k\u002dkey b");
        let second = first.deeper().unwrap();
        assert_eq!(second.decoded, br"a\u0073k-key b");
        let third = second.deeper().unwrap();
        assert_eq!(third.decoded, b"ask-key b");
        // `s` came from what begins at 1, `k` from 10, `-` from 11, and
        // the `k` after it is at 18.
        assert_eq!(third.source(1, 2), (1, 10));
        assert_eq!(third.source(2, 4), (10, 18));
        assert!(third.deeper().is_none(), "nothing more decodes");
        // A page of backslashes is decoded a bounded number of times.
        let page = vec![b'\\'; 1 << 12];
        let mut view = View::of(&page);
        let mut levels = 0;
        while let Some(level) = view {
            levels += 1;
            view = level.deeper();
        }
        assert_eq!(levels, DEPTH);
    }

    #[test]
    fn html_character_references_are_decoded_and_an_addresss_ampersands_kept() {
        assert_eq!(decoded("a&#43;b&#x2B;c&#X2b;d&plus;e&#61;"), "a+b+c+d+e=");
        // A number without its `;`, as browsers read it, if anything follows.
        assert_eq!(decoded("&#43x &#x2bg"), "+x +g");
        // At the text's end too, where it may as well be cut short.
        let ending = View::of(b"ab&#43").unwrap();
        assert_eq!((ending.decoded.as_slice(), ending.whole()), (&b"ab+"[..], &b"ab"[..]));
        // The legacy names, in either case, with or without their `;`.
        assert_eq!(decoded("&lt&gt;&AMP&QUOT;&ampx"), "<>&\"&x");
        // No reference: no digits, past the last character, an unknown
        // name, a name without its `;`, a surrogate.
        assert_eq!(
            decoded(r"\n &#; &#x; &#1114112; &nosuch; &plus &#xd800;"),
            "\n &#; &#x; &#1114112; &nosuch; &plus &#xd800;"
        );
        // HTML quoting HTML: one level a time.
        let quoted = View::of(b"&amp;#43;").unwrap();
        assert_eq!(quoted.decoded, b"&#43;");
        assert_eq!(quoted.deeper().unwrap().decoded, b"+");
        // An address's `&`s begin no reference: no view is made.
        assert!(View::of(b"https://x.example/r?expires=1&signature=ab&amount=1").is_none());
        assert!(View::of(b"https://x.example/r?a=1&plus;").is_some());
        // JSON quoting a page: its escapes, then its references.
        let mixed = View::of(br"\u0026#43;").unwrap();
        assert_eq!(mixed.decoded, b"&#43;");
        assert_eq!(mixed.deeper().unwrap().decoded, b"+");
        assert_eq!(mixed.deeper().unwrap().source(0, 1), (0, 10));
    }

    #[test]
    fn an_escape_the_end_cut_short_is_no_part_of_the_whole_view() {
        let whole = |text: &str| View::of(text.as_bytes()).unwrap().whole().to_vec();
        for cut in [r"ab\", r"ab\u", r"ab\u00e", r"ab\ud83d", r"ab\ud83d\", r"ab\ud83d\ude0"] {
            assert_eq!(whole(cut), b"ab", "{cut}");
        }
        // Whole escapes, an escaped backslash, and what could never become
        // an escape are no escape cut short.
        assert_eq!(whole(r"ab\u00e9"), "abé".as_bytes());
        assert_eq!(whole(r"ab\\"), br"ab\");
        assert_eq!(whole(r"ab\ud83d\u0041"), br"ab\ud83dA");
        assert_eq!(whole(r"ab\u0g"), br"ab\u0g");
        assert_eq!(whole(r"ab\x"), br"ab\x");
        // A reference cut short: its `&`, `#`, `x`, digits, a name's
        // beginning or the whole name without its `;`.
        let zeros = "0".repeat(40);
        let padded = [format!("ab&#{zeros}"), format!("ab&#x{zeros}2")];
        for cut in ["ab&", "ab&#", "ab&#4", "ab&#x", "ab&#x2", "ab&pl", "ab&plus"]
            .into_iter()
            .chain(padded.iter().map(String::as_str))
        {
            assert_eq!(whole(cut), b"ab", "{cut}");
        }
        assert_eq!(whole("ab&#43;"), b"ab+");
        assert_eq!(whole("ab&zz\\n"), b"ab&zz\n");
    }
}
