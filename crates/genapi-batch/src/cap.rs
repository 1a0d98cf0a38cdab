//! The spending cap of a batch ([`super::Batch::max_credits`]): the one rule
//! that says what to hold for a submission, for the file journal and the
//! PostgreSQL ledger alike ([`Credits::decide`]).
//!
//! Before a submission is sent, credits are *held* for it; once its task
//! ended, the cost the service *settled* (reported on the poll result when
//! the task ended) replaces the hold. A kind (the path and every field that
//! may change the price, see [`crate::Prices`]) is priced for the cap by
//! that alone: the most a line of the kind was settled at, seen by this
//! batch's store. Two other figures are never a price:
//!
//! - the cost an *acceptance* reports (the `cost` of the submission's
//!   answer): a service may report less there than it settles (or report
//!   before it knows), so it only ever raises what its line holds, never
//!   lowers it, and never prices the kind;
//! - a price *learned before* the batch ([`crate::Prices`], kept in a file
//!   between runs): the file may be stale, corrupt or written by someone
//!   else. It may only keep a line back (a first line of a kind whose
//!   learned price is more than what is left is not sent), never let one go.
//!
//! A kind not priced so goes alone: its first line is held at everything
//! left under the cap, once nothing else is in flight (and only while what
//! is left covers the largest settled charge of any kind), so no line is
//! sent against credits that line might use. Once it settles, its kind is
//! priced and the kind's other lines go together. So every kind settled in
//! the batch stays under the cap, and the cap can be passed once: by the
//! first line of a kind not priced yet, which may cost more than was left
//! (the client cannot know a price before the service settles it). The
//! service is charged at most the cap plus that one submission's excess, and
//! nothing is sent after it. This rests on the service settling a kind
//! alike, as it prices by sizes and inputs: a kind whose price rose passes
//! the cap by the rise, for each of its lines in flight then.
//!
//! Prices below [`LEAST_PRICE`], and figures that are not finite numbers,
//! are not prices: a kind settled at one stays unpriced.

/// The least credits a submission is believed to cost: a price below it is
/// not used for the cap (its kind stays unpriced) nor in an estimate (its
/// lines are named as of unknown price).
///
/// The service bills in hundredths of a credit (its costs, like its
/// megapixels, come with two decimals), so a tenth of the smallest amount
/// it bills is below any real price. A smaller figure is a corrupt or forged
/// price (1e-9, or 5e-324, the smallest float), and holding lines at it would
/// hold nothing: every line of the kind would be sent at once.
pub const LEAST_PRICE: f64 = 0.001;

/// Sums of costs in floats are off by far less than this (0.1 + 0.2 is
/// 0.30000000000000004): a charge passes a cap only by more.
const SUM_NOISE: f64 = 1e-6;

/// Whether `credits` can be a price for the cap: a finite number of at
/// least [`LEAST_PRICE`].
pub(crate) fn plausible(credits: f64) -> bool {
    credits.is_finite() && credits >= LEAST_PRICE
}

/// A cost the service settled that the cap counts a line at and prices its
/// kind by: a finite number of at least [`LEAST_PRICE`]. Only
/// [`SettledCost::of`] makes one, so a store given one applies no rule of
/// its own, and every store counts the same figures alike; a figure that is
/// not one leaves the line at what it held.
///
/// ```
/// use genapi_batch::SettledCost;
/// assert_eq!(SettledCost::of(1.5).map(SettledCost::credits), Some(1.5));
/// assert!(SettledCost::of(0.0).is_none() && SettledCost::of(f64::NAN).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct SettledCost(f64);

impl SettledCost {
    /// `credits` as a settled cost, when it can be a price.
    pub fn of(credits: f64) -> Option<SettledCost> {
        plausible(credits).then_some(SettledCost(credits))
    }

    /// The credits.
    pub fn credits(self) -> f64 {
        self.0
    }
}

/// Whether a batch charged `charged` credits in all passed its cap of
/// `max` (beyond the noise of adding costs up): the bound allows it by one
/// submission's excess, and a program (the `genapi` command's exit code)
/// says so.
///
/// ```
/// assert!(!genapi_batch::cap_passed(0.3, 0.1 + 0.1 + 0.1));
/// assert!(genapi_batch::cap_passed(2.0, 2.01));
/// ```
pub fn cap_passed(max: f64, charged: f64) -> bool {
    charged - max > SUM_NOISE
}

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
/// to hold some: the one rule of the cap ([`Credits::decide`], see the
/// module documentation).
///
/// ```
/// use genapi_batch::{Credits, Hold};
/// let settled = Credits {
///     max: 10.0,
///     charged: 6.0,
///     held: 0.0,
///     live_holds: false,
///     settled_price: Some(3.0),
///     learned_price: None,
///     largest: 3.0,
/// };
/// assert_eq!(settled.decide(), Hold::Held(3.0));
/// let full = Credits { charged: 8.0, ..settled };
/// assert_eq!(full.decide(), Hold::CapReached);
/// let first_of_a_kind = Credits { settled_price: None, ..settled };
/// assert_eq!(first_of_a_kind.decide(), Hold::Held(4.0), "all that is left, to go alone");
/// // A price learned before the batch is never held at…
/// let learned = Credits { learned_price: Some(0.5), ..first_of_a_kind };
/// assert_eq!(learned.decide(), Hold::Held(4.0));
/// // …but one above what is left keeps the line back.
/// let dear = Credits { learned_price: Some(5.0), ..first_of_a_kind };
/// assert_eq!(dear.decide(), Hold::CapReached);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Credits {
    /// The cap over the whole batch.
    pub max: f64,
    /// Counted as spent, for good: the costs the service settled, and what
    /// lines whose credits cannot come back are counted at (a task that
    /// ended without a settled cost, a submission never answered, a task
    /// left in flight by a run that is gone).
    pub charged: f64,
    /// Held for submissions in flight whose cost is not settled yet.
    pub held: f64,
    /// Whether a hold may still be given back or settled (a hold whose run
    /// or worker is gone stays, and is not live).
    pub live_holds: bool,
    /// The most a line of this kind was settled at, as the batch's store
    /// saw it: the only price the kind is held at.
    pub settled_price: Option<f64>,
    /// The kind's price learned before the batch ([`crate::Prices`]): never
    /// held at, it only keeps back a first line it says would not fit.
    pub learned_price: Option<f64>,
    /// The most any line was settled at.
    pub largest: f64,
}

impl Credits {
    /// What to hold for the submission: its kind's settled price while it
    /// fits under the cap; for a kind not priced so, all that is left, once
    /// nothing else is in flight, what is left covers the largest charge
    /// settled and any price learned for the kind; else wait for holds to
    /// come back, or stop.
    pub fn decide(&self) -> Hold {
        let left = self.max - self.charged - self.held;
        let learned_fits = self
            .learned_price
            .filter(|price| plausible(*price))
            .is_none_or(|price| price <= left);
        match self.settled_price.filter(|price| plausible(*price)) {
            Some(price) if price <= left => Hold::Held(price),
            // The first of a kind goes alone, once nothing else is in flight.
            None if !self.live_holds && left > 0.0 && left >= self.largest && learned_fits => Hold::Held(left),
            _ if self.live_holds => Hold::Wait,
            _ => Hold::CapReached,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch capped at 10 with nothing spent, nothing in flight, nothing
    /// priced.
    const FRESH: Credits = Credits {
        max: 10.0,
        charged: 0.0,
        held: 0.0,
        live_holds: false,
        settled_price: None,
        learned_price: None,
        largest: 0.0,
    };

    #[test]
    fn the_cap_holds_a_kind_at_its_settled_price_and_a_kind_not_settled_alone_with_all_that_is_left() {
        let settled = |price| Credits {
            settled_price: Some(price),
            largest: 1.0,
            ..FRESH
        };
        #[rustfmt::skip]
        let table: &[(&str, Credits, Hold)] = &[
            ("nothing priced: the first goes alone", FRESH, Hold::Held(10.0)),
            ("it waits while another is in flight", Credits { held: 10.0, live_holds: true, ..FRESH }, Hold::Wait),
            ("a settled price is held", settled(1.0), Hold::Held(1.0)),
            ("up to the cap", Credits { charged: 9.0, ..settled(1.0) }, Hold::Held(1.0)),
            ("a hold in flight may come back", Credits { charged: 9.0, held: 1.0, live_holds: true, ..settled(1.0) }, Hold::Wait),
            ("past the cap: stop", Credits { charged: 9.5, ..settled(1.0) }, Hold::CapReached),
            ("a hold that cannot come back stays", Credits { charged: 9.0, held: 1.0, ..settled(1.0) }, Hold::CapReached),
            ("a new kind goes only if what is left covers the largest charge",
             Credits { charged: 9.5, ..settled(1.0) }.unpriced(), Hold::CapReached),
            ("unanswered, of unknown cost: it may have taken all", Credits { charged: f64::INFINITY, ..FRESH }, Hold::CapReached),
        ];
        check(table);
    }

    #[test]
    fn prices_not_settled_or_not_plausible_never_let_a_line_go_before_its_kind_is_settled() {
        let learned = |price| Credits {
            learned_price: Some(price),
            ..FRESH
        };
        let settled = |price| Credits {
            settled_price: Some(price),
            ..FRESH
        };
        #[rustfmt::skip]
        let table: &[(&str, Credits, Hold)] = &[
            ("a learned price is not held at", learned(1.0), Hold::Held(10.0)),
            ("nor lets a second line go", Credits { held: 10.0, live_holds: true, ..learned(1.0) }, Hold::Wait),
            ("a tiny learned price neither", Credits { held: 10.0, live_holds: true, ..learned(1e-9) }, Hold::Wait),
            ("nor the smallest float", Credits { held: 10.0, live_holds: true, ..learned(5e-324) }, Hold::Wait),
            ("a learned price above what is left keeps the line back", learned(11.0), Hold::CapReached),
            ("…or waits for holds in flight", Credits { charged: 5.0, held: 1.0, live_holds: true, ..learned(6.0) }, Hold::Wait),
            ("a settled price below the floor is no price", settled(1e-9), Hold::Held(10.0)),
            ("its line goes alone", Credits { held: 10.0, live_holds: true, ..settled(1e-9) }, Hold::Wait),
            ("at the floor it is one", settled(LEAST_PRICE), Hold::Held(LEAST_PRICE)),
            ("a settled price that is not a number is none", settled(f64::NAN), Hold::Held(10.0)),
            ("nor an infinite one", settled(f64::INFINITY), Hold::Held(10.0)),
        ];
        check(table);
    }

    #[test]
    fn a_cap_is_passed_only_beyond_the_noise_of_adding_costs() {
        assert!(!cap_passed(2.0, 2.0));
        assert!(!cap_passed(0.3, 0.1 + 0.1 + 0.1));
        assert!(cap_passed(2.0, 2.01));
        assert!(cap_passed(2.0, f64::INFINITY));
    }

    impl Credits {
        fn unpriced(self) -> Credits {
            Credits {
                settled_price: None,
                ..self
            }
        }
    }

    fn check(table: &[(&str, Credits, Hold)]) {
        for (case, credits, expected) in table {
            assert_eq!(credits.decide(), *expected, "{case}: {credits:?}");
        }
    }
}
