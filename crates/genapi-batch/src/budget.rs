//! The spending cap of a batch ([`super::Batch::max_credits`]).
//!
//! The service bills each accepted task, and reports the cost in the
//! submission's answer (or only later, on the poll, for some models). Before
//! a submission is sent, credits are *held* for it: the most a submission of
//! its kind was charged so far. A kind is everything in a request that may
//! change its price: the path and every field but the prompt, the seed and
//! the webhook's, with each image by its dimensions (the service bills input
//! and output megapixels), or, where they cannot be read (a URL, a header
//! past what is decoded), by its fingerprint, so an unknown image is a kind
//! of its own. With no charge of its kind
//! seen yet, everything left under the cap is held, so the first of a kind
//! goes alone (and only while what is left covers the largest charge seen
//! of any kind) and its cost is known before the next is sent. A hold is
//! replaced by the reported cost once known, and given back when nothing was
//! created. A submission whose answer never came may have been charged: its
//! hold stays. So the service is never charged more than the cap, and the
//! cap is used: a batch stops submitting only when the next submission could
//! pass it.

use std::collections::HashMap;

use super::job::Job;
use super::journal::{LineState, Record};

/// The outcome of asking to hold credits for one submission.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Hold {
    /// This much is held for the submission: send it.
    Held(f64),
    /// Not now: credits held for submissions in flight may come back.
    Wait,
    /// The next submission could pass the cap: submit no more.
    CapReached,
}

/// The one rule, for the file journal and the ledger alike. `charged` and
/// `held` are over the whole batch; `live_holds` says whether any hold may
/// still be given back (a hold of a worker that died stays); `estimate` is
/// the most a submission of this kind was charged so far, and `largest` the
/// most any submission was.
pub(crate) fn decide(max: f64, charged: f64, held: f64, live_holds: bool, estimate: Option<f64>, largest: f64) -> Hold {
    let left = max - charged - held;
    match estimate {
        Some(cost) if cost <= left => Hold::Held(cost.max(0.0)),
        // The first of a kind goes alone, once nothing else is in flight.
        None if !live_holds && left > 0.0 && left >= largest => Hold::Held(left),
        _ if live_holds => Hold::Wait,
        _ => Hold::CapReached,
    }
}

/// Fields whose value does not change what a submission costs: a line that
/// differs from another only in these is of the same kind.
const PRICE_NEUTRAL: [&str; 4] = ["prompt", "seed", "webhook_url", "webhook_secret"];

/// What a submission of `job` is compared with: its path and every field that
/// may change its price (see the module's doc).
pub(crate) fn kind(job: &Job) -> String {
    let mut kind = job.path.clone();
    if let Some(fields) = job.body.as_object() {
        for (name, value) in fields
            .iter()
            .filter(|(name, _)| !PRICE_NEUTRAL.contains(&name.as_str()))
        {
            kind.push_str(&format!(" {name}={}", priced(value)));
        }
    }
    kind
}

/// A field's value as far as the price may follow it: an image by its
/// dimensions, any other long text by its fingerprint (kinds are stored and
/// compared, and a 4 MP image would make a 5 MB kind).
fn priced(value: &serde_json::Value) -> String {
    const SHORT: usize = 32;
    match value {
        serde_json::Value::String(text) => {
            let dimensions = (text.len() > SHORT).then(|| genapi::base64_dimensions(text)).flatten();
            match dimensions {
                Some((width, height)) => format!("{width}x{height}px"),
                // A short word (a format, a ratio, a mode); never an address,
                // which may carry a token.
                None if text.len() <= SHORT && !text.contains("://") => value.to_string(),
                None => {
                    let mut fingerprint = super::job::Fingerprint::default();
                    fingerprint.add(text.as_bytes());
                    format!("#{}", fingerprint.hex())
                }
            }
        }
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(priced).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// The credits of a batch kept in a file journal (one process).
#[derive(Debug, Default)]
pub(crate) struct LocalBudget {
    /// Reported cost by line.
    charged: HashMap<u64, f64>,
    /// Held credits and the kind, by line.
    holds: HashMap<u64, (String, f64)>,
    /// Held for lines whose submission went unanswered in an earlier run.
    unanswered: f64,
    /// The most charged so far, by kind.
    most: HashMap<String, f64>,
}

impl LocalBudget {
    /// From the journal: what was charged, and for each line sent but never
    /// answered, the most any line was charged (it may have been charged;
    /// its kind is not recorded).
    pub(crate) fn from_lines<'a>(lines: impl Iterator<Item = (&'a u64, &'a LineState)>) -> LocalBudget {
        let mut budget = LocalBudget::default();
        let mut unanswered = 0_usize;
        for (line, state) in lines {
            let finished_cost = match &state.finished {
                Some(Record::Finished { cost, .. }) => *cost,
                _ => None,
            };
            if let Some(cost) = state.accepted.as_ref().and_then(|(_, _, cost)| *cost).or(finished_cost) {
                budget.charged.insert(*line, cost);
            } else if state.unanswered {
                unanswered += 1;
            }
        }
        let most = budget.charged.values().copied().fold(0.0, f64::max);
        budget.unanswered = match (unanswered, most > 0.0) {
            (0, _) => 0.0,
            (count, true) => most * count as f64,
            // What it cost is not known at all: it may have taken all there was.
            (_, false) => f64::INFINITY,
        };
        budget
    }

    pub(crate) fn hold(&mut self, line: u64, kind: &str, max: f64) -> Hold {
        let charged: f64 = self.charged.values().sum();
        let held: f64 = self.holds.values().map(|(_, amount)| amount).sum::<f64>() + self.unanswered;
        let live = !self.holds.is_empty();
        let largest = self.charged.values().copied().fold(0.0, f64::max);
        let hold = decide(max, charged, held, live, self.most.get(kind).copied(), largest);
        if let Hold::Held(amount) = hold {
            self.holds.insert(line, (kind.to_string(), amount));
        }
        hold
    }

    pub(crate) fn drop_hold(&mut self, line: u64) {
        self.holds.remove(&line);
    }

    /// The submission of `line` was sent and never answered: it may have
    /// been charged, so its hold stays, but it will never come back.
    pub(crate) fn keep_unanswered(&mut self, line: u64) {
        if let Some((_, amount)) = self.holds.remove(&line) {
            self.unanswered += amount;
        }
    }

    /// Follows what a record says about charges.
    pub(crate) fn note(&mut self, record: &Record) {
        let (line, cost) = match record {
            Record::Accepted { line, cost, .. } => (*line, *cost),
            Record::Finished { line, cost, status, .. } => {
                if cost.is_none() && status == "Refused" {
                    self.holds.remove(line);
                }
                (*line, *cost)
            }
            Record::Refused { line, .. } => {
                self.holds.remove(line);
                return;
            }
            Record::Intent { .. } | Record::Damaged { .. } => return,
        };
        // A cost below zero (a hostile answer) would loosen the cap.
        let Some(cost) = cost.map(|cost| cost.max(0.0)) else {
            return;
        };
        if self.charged.contains_key(&line) {
            return;
        }
        self.charged.insert(line, cost);
        if let Some((kind, _)) = self.holds.remove(&line) {
            let most = self.most.entry(kind).or_insert(cost);
            *most = most.max(cost);
        }
    }

    /// Credits charged so far.
    #[cfg(test)]
    pub(crate) fn charged(&self) -> f64 {
        self.charged.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_a_kind_goes_alone_and_then_the_cap_is_used_without_being_passed() {
        let first = |charged, held, live, largest| decide(60.0, charged, held, live, None, largest);
        let known = |charged, held, live| decide(60.0, charged, held, live, Some(3.0), 3.0);
        assert_eq!(first(0.0, 0.0, false, 0.0), Hold::Held(60.0));
        assert_eq!(first(0.0, 60.0, true, 0.0), Hold::Wait, "goes alone");
        assert_eq!(known(3.0, 0.0, false), Hold::Held(3.0));
        assert_eq!(known(57.0, 0.0, false), Hold::Held(3.0), "up to the cap");
        assert_eq!(known(57.0, 3.0, true), Hold::Wait, "a hold may come back");
        assert_eq!(known(58.0, 0.0, false), Hold::CapReached);
        assert_eq!(known(57.0, 3.0, false), Hold::CapReached, "a dead hold stays");
        assert_eq!(
            first(58.0, 0.0, false, 3.0),
            Hold::CapReached,
            "a new kind goes only if what is left covers the largest charge seen"
        );
    }

    #[test]
    fn a_kind_follows_the_price_not_the_prompt_or_the_seed() {
        use base64::Engine;
        let png = |width: u32, height: u32| {
            let mut header = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
            header.extend(width.to_be_bytes());
            header.extend(height.to_be_bytes());
            header.extend([8, 2, 0, 0, 0]);
            header.resize(200, 0);
            base64::engine::general_purpose::STANDARD.encode(header)
        };
        let job = |body: serde_json::Value| kind(&Job::new(1, "/v1/gen-2-pro", body));
        let plain = job(serde_json::json!({"prompt": "a", "seed": 1, "width": 256, "height": 256}));
        assert_eq!(
            plain,
            job(serde_json::json!({"prompt": "b", "seed": 2, "width": 256, "height": 256, "webhook_secret": "s"}))
        );
        assert_ne!(
            plain,
            job(serde_json::json!({"prompt": "a", "width": 512, "height": 256}))
        );
        let with_input =
            |image: String| job(serde_json::json!({"prompt": "a", "width": 256, "height": 256, "input_image": image}));
        assert_ne!(plain, with_input(png(512, 512)), "an input image changes the price");
        assert_eq!(with_input(png(512, 512)), with_input(png(512, 512)));
        assert_ne!(
            with_input(png(512, 512)),
            with_input(png(1024, 512)),
            "so does its size"
        );
        assert!(with_input(png(512, 512)).contains("input_image=512x512px"));
        let url = with_input("https://images.example/a.png?token=secret-token".into());
        assert!(
            !url.contains("secret-token"),
            "an address is kept by its fingerprint: {url}"
        );
        assert_ne!(
            url,
            with_input("https://images.example/b.png?token=secret-token".into())
        );
    }

    #[test]
    fn a_local_budget_replaces_holds_by_charges() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0), Hold::Held(10.0));
        assert_eq!(budget.hold(2, "k", 10.0), Hold::Wait);
        budget.note(&Record::Accepted {
            line: 1,
            id: "t".into(),
            polling_url: "http://x/v1/get_result?id=t".into(),
            cost: Some(3.0),
            adopted: false,
        });
        assert_eq!(budget.hold(2, "k", 10.0), Hold::Held(3.0));
        assert_eq!(budget.hold(3, "k", 10.0), Hold::Held(3.0));
        assert_eq!(budget.hold(4, "k", 10.0), Hold::Wait, "1 left, 6 held");
        budget.note(&Record::Refused {
            line: 2,
            error: "429".into(),
        });
        budget.drop_hold(3);
        assert_eq!(budget.hold(4, "k", 10.0), Hold::Held(3.0));
        assert_eq!(budget.charged(), 3.0);
    }
}
