//! When a signed result address says it stops being valid.
//!
//! A delivery host that refuses an address whose signature has run out
//! gives the same answer (403, 404) as one refusing it for a passing
//! reason. Told apart by what the address itself states, a passing refusal
//! is not taken for an expired result, which the user would be told to pay
//! for again. The parameters read are those signed addresses carry: `se`
//! (an Azure shared access signature's expiry, a UTC time),
//! `Expires`/`expires` (CloudFront, and the mock: Unix seconds), and a
//! signing time with a lifetime in seconds (`X-Amz-Date` with
//! `X-Amz-Expires`, `X-Goog-Date` with `X-Goog-Expires`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Url;

/// How far past now a stated expiry must be for a refusal not to be taken
/// for it: clocks of the client and the signer may differ a little.
const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// Whether `address` states an expiry that has passed (by more than
/// [`CLOCK_SLACK`]): the one sign that a refusal of it is its end. `false`
/// where it states nothing this reads.
pub(crate) fn states_it_has_run_out(address: &str, now: SystemTime) -> bool {
    // Checked: an address may state a time near the end of time.
    stated_expiry(address)
        .and_then(|expiry| expiry.checked_add(CLOCK_SLACK))
        .is_some_and(|end| end < now)
}

/// The expiry `address` states, if it states one this reads.
fn stated_expiry(address: &str) -> Option<SystemTime> {
    let url = Url::parse(address).ok()?;
    let query: Vec<(String, String)> = url
        .query_pairs()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.into_owned()))
        .collect();
    let value = |name: &str| query.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    if let Some(expiry) = value("se") {
        return utc(expiry);
    }
    if let Some(seconds) = value("expires").and_then(|v| v.parse::<u64>().ok()) {
        return UNIX_EPOCH.checked_add(Duration::from_secs(seconds));
    }
    ["x-amz-", "x-goog-"].into_iter().find_map(|signer| {
        let signed = utc(value(&format!("{signer}date"))?)?;
        let lifetime = value(&format!("{signer}expires"))?.parse::<u64>().ok()?;
        signed.checked_add(Duration::from_secs(lifetime))
    })
}

/// A UTC time written `2026-11-27T12:30:00Z`, `20261127T123000Z` or
/// `2026-11-27` (midnight), to the second.
fn utc(text: &str) -> Option<SystemTime> {
    let digits: Vec<u64> = text
        .chars()
        .take_while(|c| !matches!(c, '.' | '+'))
        .filter_map(|c| c.to_digit(10).map(u64::from))
        .collect();
    let number = |from: usize, to: usize| digits.get(from..to).map(|d| d.iter().fold(0, |n, d| n * 10 + d));
    let (year, month, day) = (number(0, 4)?, number(4, 6)?, number(6, 8)?);
    let (hour, minute, second) = match digits.len() {
        8 => (0, 0, 0),
        14 => (number(8, 10)?, number(10, 12)?, number(12, 14)?),
        _ => return None,
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_since_1970(year, month, day)?;
    UNIX_EPOCH.checked_add(Duration::from_secs(days * 86_400 + hour * 3_600 + minute * 60 + second))
}

/// Days from 1970-01-01 to a date of the Gregorian calendar on or after it.
fn days_since_1970(year: u64, month: u64, day: u64) -> Option<u64> {
    // Years counted from March, so the leap day ends a year.
    let year = if month <= 2 { year.checked_sub(1)? } else { year };
    let era = year / 400;
    let of_era = year % 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let of_era_days = of_era * 365 + of_era / 4 - of_era / 100 + day_of_year;
    (era * 146_097 + of_era_days).checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn utc_times_are_read_in_each_spelling() {
        assert_eq!(utc("1970-01-01T00:00:00Z"), Some(at(0)));
        assert_eq!(utc("2026-11-27T12:30:05Z"), Some(at(1_795_782_605)));
        assert_eq!(utc("20261127T123005Z"), Some(at(1_795_782_605)));
        assert_eq!(utc("2024-02-29"), Some(at(1_709_164_800)));
        assert_eq!(utc("2026-11-27T12:30:05.123Z"), Some(at(1_795_782_605)));
        for nonsense in ["", "soon", "2026-13-01", "2026-11-27T25:00:00Z", "1969-12-31", "2026"] {
            assert_eq!(utc(nonsense), None, "{nonsense}");
        }
    }

    #[test]
    fn each_signers_expiry_is_read() {
        let now = at(1_795_782_605);
        let valid = [
            "https://delivery-eu1.example.com/r/a.jpg?se=2026-11-27T12%3A40%3A05Z&sp=r&sig=abc",
            "https://d.cloudfront.net/a.jpg?Expires=1795783205&Signature=abc&Key-Pair-Id=K",
            "http://127.0.0.1:9/mock/results/t.jpg?expires=1795783205&signature=abc",
            "https://b.s3.amazonaws.com/a.jpg?X-Amz-Date=20261127T123005Z&X-Amz-Expires=600&X-Amz-Signature=abc",
            "https://storage.googleapis.com/b/a.jpg?X-Goog-Date=20261127T123005Z&X-Goog-Expires=600",
        ];
        for address in valid {
            assert!(!states_it_has_run_out(address, now), "{address}");
            assert!(
                states_it_has_run_out(address, now + Duration::from_secs(600 + 61)),
                "{address}"
            );
        }
        // Within the clocks' slack of its end, or stating nothing: a
        // refusal is not taken for its expiry.
        assert!(!states_it_has_run_out(valid[2], now + Duration::from_secs(600 + 30)));
        for silent in [
            "https://d.example.com/a.jpg",
            "https://d.example.com/a.jpg?se=whenever",
            "not an address",
        ] {
            assert!(
                !states_it_has_run_out(silent, now + Duration::from_secs(86_400)),
                "{silent}"
            );
        }
    }
}
