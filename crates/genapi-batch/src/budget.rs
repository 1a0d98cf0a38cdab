//! What the cap counts in a file journal (one process), and the price kind
//! it counts by.
//!
//! A kind is everything in a request that may change its price: the path
//! and every field but the prompt, the seed and the webhook's, each with its
//! whole value, an image included. Two lines whose images differ are of two
//! kinds even when the images have the same size: the client cannot know how
//! the service reads a header, and a header it misread would put a dearer
//! line under a cheaper one's price. The kind is kept as a digest (SHA-256),
//! so it is small and holds no secret or image, in a journal or in the
//! ledger's database.
//!
//! [`LocalBudget`] counts a journal's lines for the cap's one rule
//! ([`crate::Credits::decide`], where the rule is explained): what each line
//! was settled at, what this run holds, and what lines whose credits cannot
//! come back are counted at.

use std::collections::{HashMap, HashSet};

use super::cap::{Credits, Hold, SettledCost};
use super::job::Job;
use super::journal::Event;
use super::line::{Ending, Line};

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
    /// The cost the service settled, by line.
    settled: HashMap<u64, f64>,
    /// Held for this run's submissions not settled yet: kind and amount,
    /// by line.
    holds: HashMap<u64, (String, f64)>,
    /// What lines whose credits cannot come back are counted at, by line,
    /// until settled: a task that ended without a settled cost, a
    /// submission never answered, a task an earlier run left in flight.
    kept: HashMap<u64, f64>,
    /// Lines this run works on now (claimed, not yet released): a task an
    /// earlier run left in flight may settle while its line is worked on,
    /// so its count may come back then, and only then.
    working: HashSet<u64>,
    /// The kind of each line held in this run, for its settled cost.
    kinds: HashMap<u64, String>,
    /// The most a line of each kind was settled at in this run.
    prices: HashMap<String, f64>,
}

/// Whether a line that ended with `status` was charged nothing (the one
/// list of such endings is [`crate::FailedStatus::charged_nothing`]).
fn charges_nothing(status: &str) -> bool {
    crate::FailedStatus::from_word(status).charged_nothing()
}

impl LocalBudget {
    /// From the journal: what was settled, and what the lines that may have
    /// been charged without a settled cost count at (the journal keeps no
    /// holds, nor kinds).
    pub(crate) fn from_lines<'a>(lines: impl Iterator<Item = (&'a u64, &'a Line)>) -> LocalBudget {
        let mut budget = LocalBudget::default();
        let mut open = Vec::new();
        for (number, line) in lines {
            let reported = line.task().and_then(|task| task.cost);
            match line {
                Line::Ended {
                    ending: Ending::Saved { cost: Some(cost), .. },
                    ..
                } if SettledCost::of(*cost).is_some() => {
                    budget.settled.insert(*number, *cost);
                }
                Line::Ended {
                    ending: Ending::Failed { status, .. },
                    ..
                } if status.charged_nothing() => {}
                // Ended without a settled cost, or may have been charged.
                Line::Ended { .. } | Line::Accepted { .. } | Line::Unanswered { .. } => open.push((*number, reported)),
                Line::Unsent { .. } => {}
            }
        }
        // What such a line cost is not known: it is counted at the most
        // any line was settled at (never below what its acceptance
        // reported), or, with nothing settled, at all there was: an
        // acceptance's report alone may say far less than the charge.
        let most = budget.largest();
        for (line, reported) in open {
            let counted = match reported.filter(|cost| cost.is_finite()) {
                _ if most <= 0.0 => f64::INFINITY,
                Some(reported) => most.max(reported),
                None => most,
            };
            budget.kept.insert(line, counted);
        }
        budget
    }

    /// Holds credits for a submission of `line`, of price kind `kind`,
    /// under a cap of `max`, by the cap's rule; `learned` is the kind's
    /// price learned before the batch.
    pub(crate) fn hold(&mut self, line: u64, kind: &str, max: f64, learned: Option<f64>) -> Hold {
        let hold = Credits {
            max,
            charged: self.spent(),
            held: self.holds.values().map(|(_, amount)| amount).sum(),
            live_holds: !self.holds.is_empty() || self.working.iter().any(|line| self.kept.contains_key(line)),
            settled_price: self.prices.get(kind).copied(),
            learned_price: learned,
            largest: self.largest(),
        }
        .decide();
        if let Hold::Held(amount) = hold {
            self.holds.insert(line, (kind.to_string(), amount));
        }
        hold
    }

    /// This run works on `line` now, until [`LocalBudget::released`].
    pub(crate) fn claimed(&mut self, line: u64) {
        self.working.insert(line);
    }

    /// This run is done with `line`: what it is still counted at stays,
    /// and is no longer waited for.
    pub(crate) fn released(&mut self, line: u64) {
        self.working.remove(&line);
    }

    pub(crate) fn drop_hold(&mut self, line: u64) {
        self.holds.remove(&line);
    }

    /// The submission of `line` was sent and never answered: it may have
    /// been charged, so its hold stays, but it will never come back.
    pub(crate) fn keep_unanswered(&mut self, line: u64) {
        if let Some((_, amount)) = self.holds.remove(&line) {
            *self.kept.entry(line).or_insert(0.0) += amount;
        }
    }

    /// Follows what an event says about charges.
    pub(crate) fn note(&mut self, record: &Event) {
        match record {
            // An acceptance's report is not a charge: a service may report
            // less there than it settles. It only ever raises what its line
            // is counted at.
            Event::Accepted {
                line, cost: Some(cost), ..
            } if cost.is_finite() => self.raise(*line, *cost),
            Event::Accepted { .. } | Event::Intent { .. } | Event::Damaged { .. } => {}
            Event::Refused { line, .. } => self.drop_hold(*line),
            Event::Finished {
                line, cost: Some(cost), ..
            } => self.settle(*line, *cost),
            Event::Finished {
                line,
                status,
                cost: None,
                ..
            } => self.end_unsettled(*line, status),
        }
    }

    fn raise(&mut self, line: u64, reported: f64) {
        if let Some((_, amount)) = self.holds.get_mut(&line) {
            *amount = amount.max(reported);
        } else if let Some(amount) = self.kept.get_mut(&line) {
            *amount = amount.max(reported);
        }
    }

    /// The service settled `line`'s task at `cost`: it replaces what the
    /// line was held or counted at, and prices its kind.
    pub(crate) fn settle(&mut self, line: u64, cost: f64) {
        // Below any real price (a hostile answer, or a journal written
        // before such figures were refused): no settled cost, so the line
        // stays counted at what it held.
        let Some(cost) = SettledCost::of(cost).map(SettledCost::credits) else {
            self.end_unsettled(line, "Ready");
            return;
        };
        self.settled.insert(line, cost);
        self.kept.remove(&line);
        if let Some((kind, _)) = self.holds.remove(&line) {
            self.kinds.insert(line, kind);
        }
        // A later settled cost (a task adopted in place of another)
        // raises the kind's price, never lowers it.
        if let Some(kind) = self.kinds.get(&line) {
            let most = self.prices.entry(kind.clone()).or_insert(cost);
            *most = most.max(cost);
        }
    }

    /// `line`'s task ended without a settled cost: a refusal or a
    /// moderation charged nothing; anything else may have been charged,
    /// so its hold stays, but no longer waited for (the batch would wait
    /// for ever).
    fn end_unsettled(&mut self, line: u64, status: &str) {
        match self.holds.remove(&line) {
            Some((_, amount)) if !charges_nothing(status) => *self.kept.entry(line).or_insert(0.0) += amount,
            Some(_) => {}
            // A task an earlier run left in flight, ended uncharged.
            None if charges_nothing(status) => {
                self.kept.remove(&line);
            }
            None => {}
        }
    }

    /// Counted as spent for good: settled, or kept.
    fn spent(&self) -> f64 {
        self.settled.values().sum::<f64>() + self.kept.values().sum::<f64>()
    }

    /// The most any line was settled at.
    fn largest(&self) -> f64 {
        self.settled.values().copied().fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(line: u64, cost: Option<f64>) -> Event {
        Event::Accepted {
            line,
            id: format!("t-{line}"),
            polling_url: format!("https://p/{line}"),
            cost,
            adopted: false,
        }
    }

    fn finished(line: u64, status: &str, cost: Option<f64>) -> Event {
        Event::Finished {
            line,
            status: status.into(),
            file: None,
            seed: None,
            cost,
            duration: None,
            error: None,
            class: None,
        }
    }

    #[test]
    fn an_acceptance_reporting_no_charge_keeps_its_hold_until_the_task_settles_it() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        budget.note(&accepted(1, Some(0.0)));
        assert_eq!(
            budget.hold(2, "k", 10.0, None),
            Hold::Wait,
            "not held at 0: the first of the kind's charge is not known yet"
        );
        budget.note(&finished(1, "Ready", Some(1.58)));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(1.58));
    }

    #[test]
    fn an_acceptances_report_neither_prices_its_kind_nor_gives_back_its_hold() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 2.0, None), Hold::Held(2.0));
        budget.note(&accepted(1, Some(0.01)));
        assert_eq!(budget.spent(), 0.0, "a report is not a charge");
        assert_eq!(
            budget.hold(2, "k", 2.0, None),
            Hold::Wait,
            "the first of the kind is still alone, holding all"
        );
        budget.note(&finished(1, "Ready", Some(1.0)));
        assert_eq!(budget.spent(), 1.0, "the settled cost");
        assert_eq!(budget.hold(2, "k", 2.0, None), Hold::Held(1.0), "priced as settled");
        assert_eq!(budget.hold(3, "k", 2.0, None), Hold::Wait);
        budget.note(&accepted(2, Some(0.01)));
        assert_eq!(budget.hold(3, "k", 2.0, None), Hold::Wait, "its hold stays at 1");
        budget.note(&finished(2, "Ready", Some(1.0)));
        assert_eq!(budget.hold(3, "k", 2.0, None), Hold::CapReached);
    }

    #[test]
    fn an_acceptance_reporting_more_than_was_held_raises_the_hold_and_a_dearer_settlement_the_price() {
        let mut budget = LocalBudget::default();
        budget.settle(9, 1.0);
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(9.0));
        budget.note(&finished(1, "Ready", Some(2.0)));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(2.0));
        budget.note(&accepted(2, Some(6.0)));
        assert_eq!(
            budget.hold(3, "k", 10.0, None),
            Hold::Wait,
            "3 settled and 6 held: 1 left"
        );
        budget.note(&finished(2, "Ready", Some(4.0)));
        assert_eq!(budget.spent(), 7.0);
        assert_eq!(
            budget.hold(3, "k", 10.0, None),
            Hold::CapReached,
            "the kind's price rose to 4"
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
    fn a_local_budget_replaces_holds_by_settled_costs() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        budget.note(&finished(1, "Ready", Some(3.0)));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.hold(3, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.hold(4, "k", 10.0, None), Hold::Wait, "1 left, 6 held");
        budget.note(&Event::Refused {
            line: 2,
            error: "429".into(),
        });
        budget.drop_hold(3);
        assert_eq!(budget.hold(4, "k", 10.0, None), Hold::Held(3.0));
        assert_eq!(budget.spent(), 3.0);
    }

    /// A settled figure below any real price (less than nothing, nothing,
    /// a billionth) is no settled cost: the line stays counted at what it
    /// held, and its kind stays unpriced, so the cap is not loosened.
    #[test]
    fn a_settled_cost_below_any_price_keeps_the_hold_counted() {
        for figure in [-5.0, 0.0, 0.0001, 1e-9, f64::NAN] {
            let mut budget = LocalBudget::default();
            assert_eq!(budget.hold(1, "k", 0.3, None), Hold::Held(0.3));
            budget.note(&finished(1, "Ready", Some(figure)));
            assert_eq!(budget.hold(2, "k", 0.3, None), Hold::CapReached, "{figure}");
        }
        // Read back from a journal that recorded such a figure: the same.
        let lines = Line::of_each(vec![accepted(1, None), finished(1, "Ready", Some(-5.0))]);
        let mut budget = LocalBudget::from_lines(lines.iter());
        assert_eq!(budget.hold(2, "k", 0.3, None), Hold::CapReached);
    }

    #[test]
    fn a_first_of_a_kind_that_ends_without_a_cost_does_not_hold_the_batch_for_ever() {
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        // It failed and said no cost: it may have been charged all it held.
        budget.note(&finished(1, "Error", None));
        assert_eq!(
            budget.hold(2, "k", 10.0, None),
            Hold::CapReached,
            "counted, not waited for"
        );
        // A moderated task is not charged: its hold comes back.
        let mut budget = LocalBudget::default();
        assert_eq!(budget.hold(1, "k", 10.0, None), Hold::Held(10.0));
        budget.note(&finished(1, "Content Moderated", None));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(10.0));
    }

    #[test]
    fn tasks_an_earlier_run_left_unsettled_count_at_the_most_settled_never_at_their_report() {
        let states = Line::of_each(vec![
            accepted(1, Some(0.5)),
            finished(1, "Ready", Some(0.5)),
            // In flight when the run stopped: its acceptance said 0.01.
            accepted(2, Some(0.01)),
            // Ended without a settled cost, and sent without an answer.
            accepted(3, None),
            finished(3, "Error", None),
            Event::Intent {
                line: 4,
                name: "img-4".into(),
                digest: "d".into(),
                sent_at: None,
                ephemeral: false,
            },
            // Charged nothing.
            accepted(5, None),
            finished(5, "Request Moderated", None),
        ]);
        let mut budget = LocalBudget::from_lines(states.iter());
        assert_eq!(budget.spent(), 0.5 * 4.0);
        // Line 2 settles in this run: its count is replaced.
        budget.note(&finished(2, "Ready", Some(1.0)));
        assert_eq!(budget.spent(), 0.5 * 3.0 + 1.0);
        // Nothing counted as a price of any kind: a kind goes alone still.
        assert_eq!(budget.hold(6, "k", 10.0, None), Hold::Held(7.5));

        // Nothing settled at all: what the task in flight cost is not
        // known, whatever its acceptance said.
        let states = Line::of_each(vec![accepted(1, Some(0.01))]);
        let mut budget = LocalBudget::from_lines(states.iter());
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::CapReached);
        // While this run polls it, it may settle: a line waits for it.
        budget.claimed(1);
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        budget.note(&finished(1, "Ready", Some(1.0)));
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Held(9.0), "once settled");
        // One that ends without a settled cost stays counted, and is no
        // longer waited for once this run is done with it.
        let states = Line::of_each(vec![accepted(1, None)]);
        let mut budget = LocalBudget::from_lines(states.iter());
        budget.claimed(1);
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::Wait);
        budget.note(&finished(1, "Error", None));
        budget.released(1);
        assert_eq!(budget.hold(2, "k", 10.0, None), Hold::CapReached);
    }
}
