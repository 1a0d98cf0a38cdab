//! The spending cap of a batch ([`super::Batch::max_credits`]).
//!
//! The service bills each accepted task, and reports the cost in the
//! submission's answer (or only later, on the poll, for some models). Before
//! a submission is sent, credits are *held* for it: the most a submission of
//! its kind was charged so far. A kind is everything in a request that may
//! change its price: the path and every field but the prompt, the seed and
//! the webhook's, each with its whole value, an image included. Two lines
//! whose images differ are of two kinds even when the images have the same
//! size: the client cannot know how the service reads a header, and a
//! header it misread would put a dearer line under a cheaper one's price.
//! The kind is kept as a digest (SHA-256), so it is small and holds no
//! secret or image, in a journal or in the ledger's database. A price learned before the
//! batch ([`crate::Prices`], given with [`crate::Batch::known_prices`]) stands for a
//! kind the batch has not seen charged yet. With no charge of its kind
//! seen and no price learned, everything left under the cap is held, so the first of a kind
//! goes alone (and only while what is left covers the largest charge seen
//! of any kind) and its cost is known before the next is sent. A hold is
//! replaced by the reported cost once known, and given back when nothing was
//! created. A submission whose answer never came may have been charged: its
//! hold stays. So the cap is used (a batch stops submitting only when the
//! next submission could pass it), and it holds for every kind seen charged.
//! It can be passed once: the first submission of a kind not seen, sent
//! alone with all that was left held for it, may be charged more than that
//! (the client cannot know a price before the service charges it). The
//! service is charged at most the cap plus that one submission's excess, and
//! nothing is sent after it. All this holds as long as the service charges
//! a kind alike, as it prices by sizes and inputs: a kind whose price rose
//! passes the cap by the rise, for each of its submissions in flight then.
//! The cost a task ends with, once reported, replaces the one its acceptance
//! reported.

use std::collections::HashMap;

use super::job::Job;
use super::journal::{Event, LineState};

/// The outcome of asking to hold credits for one submission.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Hold {
    /// This much is held for the submission: send it.
    Held(f64),
    /// Not now: credits held for submissions in flight may come back.
    Wait,
    /// The next submission could pass the cap: submit no more.
    CapReached,
}

/// The credits of a batch as a store counts them, when a submission asks
/// to hold some: the one rule of the cap ([`Credits::decide`]), for the
/// file journal and a shared store alike (see the module documentation).
///
/// ```
/// use genapi_batch::{Credits, Hold};
/// let seen = Credits { max: 10.0, charged: 6.0, held: 0.0, live_holds: false, kind_price: Some(3.0), largest: 3.0 };
/// assert_eq!(seen.decide(), Hold::Held(3.0));
/// let full = Credits { charged: 8.0, ..seen };
/// assert_eq!(full.decide(), Hold::CapReached);
/// let first_of_a_kind = Credits { kind_price: None, ..seen };
/// assert_eq!(first_of_a_kind.decide(), Hold::Held(4.0), "all that is left, to go alone");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Credits {
    /// The cap over the whole batch.
    pub max: f64,
    /// Charged so far over the whole batch.
    pub charged: f64,
    /// Held for submissions whose cost is not known yet.
    pub held: f64,
    /// Whether a hold may still be given back (a hold of a worker that
    /// died stays, and is not live).
    pub live_holds: bool,
    /// The most a submission of this kind was charged so far.
    pub kind_price: Option<f64>,
    /// The most any submission was charged so far.
    pub largest: f64,
}

impl Credits {
    /// What to hold for the submission: its kind's price while it fits
    /// under the cap; for a kind not charged yet, all that is left, once
    /// nothing else is in flight and what is left covers the largest
    /// charge seen; else wait for holds to come back, or stop.
    pub fn decide(&self) -> Hold {
        let left = self.max - self.charged - self.held;
        match self.kind_price {
            Some(cost) if cost <= left => Hold::Held(cost.max(0.0)),
            // The first of a kind goes alone, once nothing else is in flight.
            None if !self.live_holds && left > 0.0 && left >= self.largest => Hold::Held(left),
            _ if self.live_holds => Hold::Wait,
            _ => Hold::CapReached,
        }
    }
}

/// [`Credits::decide`] with the figures as arguments.
fn decide(max: f64, charged: f64, held: f64, live_holds: bool, kind_price: Option<f64>, largest: f64) -> Hold {
    Credits {
        max,
        charged,
        held,
        live_holds,
        kind_price,
        largest,
    }
    .decide()
}

/// Fields whose value does not change what a submission costs: a line that
/// differs from another only in these is of the same kind.
const PRICE_NEUTRAL: [&str; 4] = ["prompt", "seed", "webhook_url", "webhook_secret"];

/// What a submission of `job` is compared with: a digest of its path and of
/// every field that may change its price, each with its whole value (see the
/// module's doc).
pub(crate) fn kind(job: &Job) -> String {
    let priced: std::collections::BTreeMap<&str, &serde_json::Value> = match job.body.as_object() {
        Some(fields) => fields
            .iter()
            .filter(|(name, _)| !PRICE_NEUTRAL.contains(&name.as_str()))
            .map(|(name, value)| (name.as_str(), value))
            .collect(),
        None => std::iter::once(("", &job.body)).collect(),
    };
    let mut digest = Digest(ring::digest::Context::new(&ring::digest::SHA256));
    // Written out as JSON, names quoted: no two different lines can spell
    // the same kind, whatever their fields are called.
    let written = serde_json::to_writer(&mut digest, &(&job.path, &priced));
    let hash = digest.0.finish();
    match written {
        Ok(()) => hash.as_ref()[..16].iter().map(|byte| format!("{byte:02x}")).collect(),
        // A body that cannot be written out is a kind of its own.
        Err(_) => format!("line-{}", job.line),
    }
}

/// A SHA-256 fed as JSON is written, so a body's images are not copied.
struct Digest(ring::digest::Context);

impl std::io::Write for Digest {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
    /// The kind of each line charged in this run, for a cost settled later.
    kinds: HashMap<u64, String>,
}

impl LocalBudget {
    /// From the journal: what was charged, and for each line sent but never
    /// answered, the most any line was charged (it may have been charged;
    /// its kind is not written).
    pub(crate) fn from_lines<'a>(lines: impl Iterator<Item = (&'a u64, &'a LineState)>) -> LocalBudget {
        let mut budget = LocalBudget::default();
        let mut unanswered = 0_usize;
        for (line, state) in lines {
            let finished_cost = match &state.finished {
                Some(Event::Finished { cost, .. }) => *cost,
                _ => None,
            };
            // The cost the task ended with is the one settled; the one its
            // acceptance reported stands until then.
            if let Some(cost) = finished_cost.or(state.accepted.as_ref().and_then(|(_, _, cost)| *cost)) {
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

    pub(crate) fn hold(&mut self, line: u64, kind: &str, max: f64, known: Option<f64>) -> Hold {
        let charged: f64 = self.charged.values().sum();
        let held: f64 = self.holds.values().map(|(_, amount)| amount).sum::<f64>() + self.unanswered;
        let live = !self.holds.is_empty();
        let largest = self.charged.values().copied().fold(0.0, f64::max);
        let kind_price = self.most.get(kind).copied().or(known);
        let hold = decide(max, charged, held, live, kind_price, largest);
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

    /// Follows what an event says about charges.
    pub(crate) fn note(&mut self, record: &Event) {
        let (line, cost) = match record {
            // An acceptance that reports no cost, or none above zero, says
            // nothing yet of the charge (a service may settle it only when
            // the task ends): its hold stays until then. Were a 0 taken for
            // the kind's price, every later line of the kind would be held
            // at nothing, and all sent before the first charge is known.
            Event::Accepted { line, cost, .. } => match cost {
                Some(cost) if *cost > 0.0 && cost.is_finite() => (*line, Some(*cost)),
                _ => return,
            },
            Event::Finished { line, cost, status, .. } => {
                if cost.is_none() {
                    let charged_nothing = status == "Refused" || status.ends_with("Moderated");
                    if let Some((_, amount)) = self.holds.remove(line) {
                        // Ended without a cost: a refusal or a moderation
                        // charged nothing; anything else may have been
                        // charged, so its hold stays, but no longer waited
                        // for (the batch would wait for ever).
                        if !charged_nothing {
                            self.unanswered += amount;
                        }
                    }
                }
                (*line, *cost)
            }
            Event::Refused { line, .. } => {
                self.holds.remove(line);
                return;
            }
            Event::Intent { .. } | Event::Damaged { .. } => return,
        };
        // A cost below zero (a hostile answer) would loosen the cap.
        let Some(cost) = cost.map(|cost| cost.max(0.0)) else {
            return;
        };
        // A later cost (the one settled when the task ended) replaces an
        // earlier one (reported at its acceptance), and a kind's price is the
        // most any of its lines cost.
        self.charged.insert(line, cost);
        if let Some((kind, _)) = self.holds.remove(&line) {
            self.kinds.insert(line, kind);
        }
        // A charge of nothing (a free task) is no price: a kind is priced by
        // what it was charged.
        if let (Some(kind), true) = (self.kinds.get(&line), cost > 0.0) {
            let most = self.most.entry(kind.clone()).or_insert(cost);
            *most = most.max(cost);
        }
    }

    /// Credits charged so far.
    #[cfg(test)]
    fn charged(&self) -> f64 {
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
    fn an_acceptance_reporting_no_charge_keeps_its_hold_until_the_task_settles_it() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        budget.note(&Event::Accepted {
            line: 1,
            id: "t".into(),
            polling_url: "https://p".into(),
            cost: Some(0.0),
            adopted: false,
        });
        assert_eq!(
            budget.hold(2, "k", 10.0, None),
            Hold::Wait,
            "not held at 0: the first of the kind's charge is not known yet"
        );
        budget.note(&Event::Finished {
            line: 1,
            status: "Ready".into(),
            file: None,
            seed: None,
            cost: Some(1.58),
            duration: None,
            error: None,
            class: None,
        });
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(1.58));
    }

    #[test]
    fn a_cost_settled_later_replaces_the_first_and_raises_the_kinds_price() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 100.0, None), Hold::Held(100.0));
        budget.note(&Event::Accepted {
            line: 1,
            id: "t".into(),
            polling_url: "https://p".into(),
            cost: Some(1.0),
            adopted: false,
        });
        assert_eq!(budget.charged(), 1.0);
        budget.note(&Event::Finished {
            line: 1,
            status: "Ready".into(),
            file: None,
            seed: None,
            cost: Some(9.0),
            duration: None,
            error: None,
            class: None,
        });
        assert_eq!(budget.charged(), 9.0, "the settled cost");
        assert_eq!(
            budget.hold(2, "k", 100.0, None),
            Hold::Held(9.0),
            "the kind's price rose"
        );
    }

    #[test]
    fn a_kind_follows_every_priced_field_and_holds_no_value() {
        use base64::Engine;
        let image = |marker: u8| base64::engine::general_purpose::STANDARD.encode([marker; 300]);
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
        assert_ne!(plain, with_input(image(1)), "an input image changes the price");
        assert_eq!(with_input(image(1)), with_input(image(1)));
        assert_ne!(
            with_input(image(1)),
            with_input(image(2)),
            "so may another image of the same size"
        );
        // Field names cannot forge another line's kind.
        assert_ne!(
            job(serde_json::json!({"height": 256, "width": 256})),
            job(serde_json::json!({"height=256 width": 256}))
        );
        // Small, and nothing of the request in it.
        let secret = job(serde_json::json!({"extra": {"api_token": "sk-live-secret"}, "x": "y".repeat(100_000)}));
        assert_eq!(secret.len(), 32);
        assert!(secret.chars().all(|c| c.is_ascii_hexdigit()), "{secret}");
    }

    #[test]
    fn a_local_budget_replaces_holds_by_charges() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        budget.note(&Event::Accepted {
            line: 1,
            id: "t".into(),
            polling_url: "http://x/v1/get_result?id=t".into(),
            cost: Some(3.0),
            adopted: false,
        });
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.hold(3, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.hold(4, "k", 10.0, None), Hold::Wait, "1 left, 6 held");
        budget.note(&Event::Refused {
            line: 2,
            error: "429".into(),
        });
        budget.drop_hold(3);
        assert_eq!(budget.hold(4, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.charged(), 3.0);
    }

    #[test]
    fn a_first_of_a_kind_that_ends_without_a_cost_does_not_hold_the_batch_for_ever() {
        let finished = |line, status: &str| Event::Finished {
            line,
            status: status.into(),
            file: None,
            seed: None,
            cost: None,
            duration: None,
            error: None,
            class: None,
        };
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        // It failed and said no cost: it may have been charged all it held.
        budget.note(&finished(1, "Error"));
        assert_eq!(
            budget.hold(2, "k", 10.0, None),
            Hold::CapReached,
            "counted, not waited for"
        );
        // A moderated task is not charged: its hold comes back.
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        budget.note(&finished(1, "Content Moderated"));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(10.0));
    }
}
