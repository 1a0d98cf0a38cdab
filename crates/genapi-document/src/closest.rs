//! The known name a user most likely meant: a model name, a field name, a
//! flag. A name within a few edits of a known one (or contained in it) reads
//! as a typo of it; anything further is not guessed at, because a wrong
//! suggestion costs more than none.

/// The closest of `candidates` to `wanted`, when close enough to read as a
/// typo of it (a few edits, or a part of it).
///
/// ```
/// use genapi_document::closest;
/// assert_eq!(closest("widht", ["width", "height", "seed"].into_iter()), Some("width"));
/// assert_eq!(closest("zzzz", ["width", "height"].into_iter()), None);
/// ```
pub fn closest<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|candidate| (distance(wanted, candidate), candidate))
        .filter(|(d, candidate)| *d <= typo_edits(candidate) || (wanted.len() >= 3 && candidate.contains(wanted)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
}

/// How many edits still read as a typo of `candidate`.
fn typo_edits(candidate: &str) -> usize {
    let length = candidate.chars().count();
    if length >= 5 {
        (length / 3).max(2)
    } else {
        1
    }
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}
