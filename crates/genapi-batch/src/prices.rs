//! Prices learned from what the service charged, and what a job file will
//! cost by them.
//!
//! The client cannot know a price before the service charges it: the
//! reference lists none, and the service prices by sizes and inputs. What
//! it can know is what this account was charged: the cost the service
//! settles when a task ends (reported on its poll result; the cost an
//! acceptance reports is not a charge, and teaches nothing). So a price is
//! learned per *kind* of submission (the path and every field that may
//! change its price, as the spending cap counts them: see
//! [`Credits`](crate::Credits)), as the most a submission of that kind was
//! charged. A program keeps [`Prices`] between runs (the `genapi` command
//! keeps them per service address, beside the task durations it learns),
//! estimates a job file with them before paying anything
//! ([`Prices::estimate`]), and gives them to the next batch
//! ([`Batch::known_prices`](crate::Batch::known_prices)). A capped batch
//! never holds a line at a price learned so (the file may be stale or
//! forged): it only keeps back a first line of a kind whose learned price
//! is more than what is left. A line of a kind never charged, or priced
//! below [`LEAST_PRICE`](crate::LEAST_PRICE), has no price: it is counted
//! apart and named, never guessed as free.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::budget::kind;
use crate::cap::plausible;
use crate::job::Job;

/// The most each kind of submission was charged, learned from charges.
///
/// ```
/// use genapi_batch::{Job, Prices};
/// let job = |line, prompt: &str, width| Job {
///     line,
///     path: "/v1/gen-2-pro".into(),
///     body: serde_json::json!({"prompt": prompt, "width": width, "height": 768}),
///     name: None,
///     cell: None,
/// };
/// let mut prices = Prices::default();
/// prices.learn(&job(1, "a fox", 1024), 1.58);
/// // Another prompt, the same kind: its price is known.
/// assert_eq!(prices.price_of(&job(2, "a hare", 1024)), Some(1.58));
/// // Another size: another kind, not priced yet.
/// let estimate = prices.estimate([job(2, "a hare", 1024), job(3, "a fox", 512)]);
/// assert_eq!((estimate.credits, estimate.unknown.len()), (1.58, 1));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    /// By kind (a digest: no prompt, secret or image is kept).
    kinds: BTreeMap<String, KindPrice>,
}

/// The price of one kind, with the model it is of (for showing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct KindPrice {
    model: String,
    credits: f64,
}

/// The most one submission is believed to cost: a price above it (or below
/// [`LEAST_PRICE`](crate::LEAST_PRICE), or not a number) is not one a
/// service charged, and a file of prices holding it (corrupt, or written by
/// someone else) is not used for it, so it can neither make an estimate
/// near nothing nor close every batch of its kind.
pub const MOST_CREDITS: f64 = 1e6;

/// Whether `credits` can be a price.
fn usable(credits: f64) -> bool {
    plausible(credits) && credits <= MOST_CREDITS
}

/// The model an operation's path names: `/v1/gen-2-pro` is `gen-2-pro`.
fn model_of(path: &str) -> String {
    path.strip_prefix("/v1/").unwrap_or(path).to_string()
}

impl Prices {
    /// What a submission of `job`'s kind was charged at most, if one was.
    pub fn price_of(&self, job: &Job) -> Option<f64> {
        self.price_of_kind(&kind(job))
    }

    /// A submission of `job`'s kind was charged `credits` (settled when its
    /// task ended). A charge of nothing (a free task), or one that is not a
    /// number a service charges, teaches nothing.
    pub fn learn(&mut self, job: &Job, credits: f64) {
        self.learn_kind(kind(job), model_of(&job.path), credits);
    }

    fn learn_kind(&mut self, kind: String, model: String, credits: f64) {
        if !usable(credits) {
            return;
        }
        let price = self.kinds.entry(kind).or_insert(KindPrice { model, credits });
        // A price read from a file that is not usable is replaced.
        price.credits = if usable(price.credits) {
            price.credits.max(credits)
        } else {
            credits
        };
    }

    /// Takes in every price of `other`: a kind priced in both keeps the
    /// most it was charged.
    pub fn merge(&mut self, other: &Prices) {
        for (kind, price) in &other.kinds {
            self.learn_kind(kind.clone(), price.model.clone(), price.credits);
        }
    }

    /// How many kinds have a price.
    pub fn len(&self) -> usize {
        self.kinds.values().filter(|price| usable(price.credits)).count()
    }

    /// Whether no kind has a price.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What `jobs` will cost by these prices, per model and in all; the
    /// lines of a kind never charged are counted apart and named.
    pub fn estimate(&self, jobs: impl IntoIterator<Item = Job>) -> Estimate {
        let mut estimate = Estimate::default();
        for job in jobs {
            let model = model_of(&job.path);
            let of_model = estimate.by_model.entry(model.clone()).or_default();
            of_model.lines += 1;
            estimate.lines += 1;
            match self.price_of(&job) {
                Some(credits) => {
                    of_model.credits += credits;
                    estimate.credits += credits;
                }
                None => {
                    of_model.unknown += 1;
                    estimate.unknown.push(Unpriced { line: job.line, model });
                }
            }
        }
        // Sums of prices with two decimals, without the float noise of
        // adding them (2.75, not 2.7500000000000004).
        let exact = |credits: f64| (credits * 1e6).round() / 1e6;
        estimate.credits = exact(estimate.credits);
        for of_model in estimate.by_model.values_mut() {
            of_model.credits = exact(of_model.credits);
        }
        estimate
    }

    /// The kind's price, for the cap to keep back a line it says would not
    /// fit.
    pub(crate) fn price_of_kind(&self, kind: &str) -> Option<f64> {
        self.kinds
            .get(kind)
            .map(|price| price.credits)
            .filter(|credits| usable(*credits))
    }
}

/// What a job file will cost, by learned prices ([`Prices::estimate`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Estimate {
    /// The lines estimated.
    pub lines: usize,
    /// The credits of the lines whose price is known.
    pub credits: f64,
    /// Per model.
    pub by_model: BTreeMap<String, ModelEstimate>,
    /// The lines whose price is not known (their kind was never charged, or
    /// its price is below [`LEAST_PRICE`](crate::LEAST_PRICE)),
    /// in the order met: not counted in `credits`.
    pub unknown: Vec<Unpriced>,
}

/// The estimate of one model's lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ModelEstimate {
    /// Its lines.
    pub lines: usize,
    /// The credits of those whose price is known.
    pub credits: f64,
    /// Those whose price is not known.
    pub unknown: usize,
}

/// A line whose price is not known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Unpriced {
    /// Its line.
    pub line: u64,
    /// Its model.
    pub model: String,
}

/// The prices a running batch knows, shared with whoever reads them: the
/// ones it was given and every cost it saw settled ([`crate::Batch::prices`]).
#[derive(Clone, Debug, Default)]
pub struct PriceBook {
    prices: Arc<Mutex<Prices>>,
}

impl PriceBook {
    /// The prices now, to keep for the next run.
    pub fn snapshot(&self) -> Prices {
        self.prices.lock().map(|prices| prices.clone()).unwrap_or_default()
    }

    pub(crate) fn of(prices: Prices) -> PriceBook {
        PriceBook {
            prices: Arc::new(Mutex::new(prices)),
        }
    }

    pub(crate) fn learn(&self, kind: &str, job_path: &str, credits: f64) {
        if let Ok(mut prices) = self.prices.lock() {
            prices.learn_kind(kind.to_string(), model_of(job_path), credits);
        }
    }

    pub(crate) fn price_of_kind(&self, kind: &str) -> Option<f64> {
        self.prices.lock().ok()?.price_of_kind(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(width: u64) -> Job {
        Job {
            line: 1,
            path: "/v1/gen-2-pro".into(),
            body: serde_json::json!({"prompt": "p", "width": width}),
            name: None,
            cell: None,
        }
    }

    #[test]
    fn prices_that_no_service_charges_are_not_used_nor_learned() {
        for bad in ["0", "-5", "1e300", "1e-400", "1e-9", "5e-324", "0.0009"] {
            let text = format!(
                r#"{{"kinds":{{"{}":{{"model":"gen-2-pro","credits":{bad}}}}}}}"#,
                kind(&job(64))
            );
            let prices: Prices = serde_json::from_str(&text).unwrap();
            assert_eq!(prices.price_of(&job(64)), None, "{bad}");
            assert_eq!(prices.len(), 0);
            let estimate = prices.estimate([job(64)]);
            assert_eq!((estimate.credits, estimate.unknown.len()), (0.0, 1), "{bad}");
            // A real charge replaces it.
            let mut learned = prices.clone();
            learned.learn(&job(64), 0.39);
            assert_eq!(learned.price_of(&job(64)), Some(0.39), "{bad}");
        }
        let mut prices = Prices::default();
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9, 1e-9, 5e-324] {
            prices.learn(&job(64), bad);
        }
        assert!(prices.is_empty());
    }
}
