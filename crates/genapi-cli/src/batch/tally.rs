//! The run's counts: the progress line while it runs, the summary at the
//! end, and the exit code (that of the most serious class among the lines,
//! by [`FailureClass::most_serious`]).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use genapi::FailureClass;
use genapi_batch::{JobOutcome, Standing};

use super::{shown, RESULTS};
use crate::code;
use crate::out;
use crate::progress::Figures;

/// Counts for the progress line and the summary.
pub(super) struct Tally {
    jobs: usize,
    /// The lines by where each stands after this run.
    by_standing: BTreeMap<Standing, usize>,
    /// Of the saved lines, those saved before this run or by another worker.
    saved_earlier: usize,
    /// Lines reported from the store, nothing sent or fetched for them.
    earlier: usize,
    worked: usize,
    /// Why lines stand where they do, for those that have a class, in
    /// words ([`FailureClass::in_words`]).
    why: BTreeMap<(Standing, &'static str), usize>,
    classes: HashSet<FailureClass>,
    unanswered: Vec<u64>,
    /// Unanswered lines whose journal record cannot be read: never sent
    /// again, whatever the flags (the library's class for them is `Write`).
    unreadable: Vec<u64>,
    invalid: usize,
    cost: f64,
    /// Lines that were charged something (their cost is in `cost`).
    charged: usize,
    /// Lines whose task ended without a settled cost: the cap counts each
    /// at all it held ([`JobOutcome::counted_at_its_hold`]).
    unsettled: usize,
    cap: Option<f64>,
    /// The run's flags that send again what a plain run would not.
    asked: genapi_batch::Asked,
    /// Where the store said the lines stood when last read: those ended
    /// (another worker's, or an earlier run's the run has not reached, among
    /// them), and of those, the ones not saved.
    store_ended: Option<(usize, usize)>,
}

impl Tally {
    /// Counts for `jobs` valid lines.
    pub(super) fn new(jobs: usize) -> Tally {
        Tally {
            jobs,
            by_standing: BTreeMap::new(),
            saved_earlier: 0,
            earlier: 0,
            worked: 0,
            why: BTreeMap::new(),
            classes: HashSet::new(),
            unanswered: Vec::new(),
            unreadable: Vec::new(),
            invalid: 0,
            cost: 0.0,
            charged: 0,
            unsettled: 0,
            cap: None,
            asked: genapi_batch::Asked::default(),
            store_ended: None,
        }
    }

    /// Takes where the store says every line stands now (read while the
    /// run goes on): progress counts the lines ended there as done, though
    /// this run took no outcome of them yet.
    pub(super) fn store_read(&mut self, standings: &BTreeMap<u64, Standing>) {
        let left =
            |standing: &Standing| matches!(standing, Standing::Accepted | Standing::Unanswered | Standing::Unsent);
        let ended = standings.values().filter(|standing| !left(standing)).count();
        let saved = standings
            .values()
            .filter(|standing| **standing == Standing::Saved)
            .count();
        self.store_ended = Some((ended, ended.saturating_sub(saved)));
    }

    /// Counts one line's outcome.
    pub(super) fn add(&mut self, outcome: &JobOutcome) {
        let standing = outcome.standing;
        if outcome.from_journal {
            self.earlier += 1;
            if standing == Standing::Saved {
                self.saved_earlier += 1;
            }
        } else {
            self.worked += 1;
        }
        // Whatever was charged for the line, in this run or before.
        self.cost += counted(outcome.cost);
        if counted(outcome.cost) > 0.0 {
            self.charged += 1;
        }
        if outcome.counted_at_its_hold() {
            self.unsettled += 1;
        }
        *self.by_standing.entry(standing).or_default() += 1;
        if let Some(class) = outcome.class {
            self.classes.insert(class);
            *self.why.entry((standing, class.in_words())).or_default() += 1;
        }
        match (standing, outcome.class) {
            (Standing::Unanswered, Some(FailureClass::Write)) => self.unreadable.push(outcome.line),
            (Standing::Unanswered, _) => self.unanswered.push(outcome.line),
            _ => {}
        }
    }

    /// The lines that stand so after this run.
    fn count(&self, standing: Standing) -> usize {
        self.by_standing.get(&standing).copied().unwrap_or(0)
    }

    /// What progress shows: the lines done are those this run took an
    /// outcome of, or those the store last said ended, whichever is more
    /// (another worker's among them); every other count is of lines not
    /// done, so none is said twice.
    pub(super) fn figures(&self, counters: &genapi_batch::Counters) -> Figures {
        let (store_done, store_failed) = self.store_ended.unwrap_or_default();
        let done = self.done().max(store_done);
        let mut not_done = self.jobs.saturating_sub(done);
        let mut take = |count: usize| {
            let taken = count.min(not_done);
            not_done -= taken;
            taken as u64
        };
        let in_flight = take(counters.in_flight());
        let waiting = take(counters.waiting_for_room());
        let at_the_cap = take(counters.waiting_at_the_cap());
        let left = take(self.left());
        let held = take(counters.held_elsewhere());
        let sent_earlier = take(counters.sent_earlier());
        Figures {
            done: done as u64,
            total: self.jobs as u64,
            failed: self.failed_done().max(store_failed) as u64,
            left,
            in_flight,
            waiting,
            at_the_cap,
            held,
            sent_earlier,
            worked: self.worked as u64,
            // Tasks running were charged at their acceptance already.
            credits: Some(self.cost + counters.charged_without_outcome()),
        }
    }

    /// Counts what tasks were charged at their acceptance whose lines'
    /// outcomes were never taken (a run stopped while they ran): their
    /// lines stand where the journal says, and the cost is known.
    pub(super) fn charged_without_outcome(&mut self, credits: f64) {
        self.cost += credits;
    }

    /// The flags of the run, which the advice of the summary follows.
    pub(super) fn asked(&mut self, asked: genapi_batch::Asked) {
        self.asked = asked;
    }

    /// The batch's cap (`--max-credits`), if it has one.
    pub(super) fn capped(&mut self, cap: Option<f64>) {
        self.cap = cap;
    }

    /// The cap, when the lines were charged more than it in all (in this
    /// run or before; the settled cost of each, else the one its
    /// acceptance reported). The bound allows it by one submission, and
    /// such a run fails as one at its cap does, never with 0.
    fn passed_cap(&self) -> Option<f64> {
        self.cap.filter(|cap| genapi_batch::cap_passed(*cap, self.cost))
    }

    /// Counts an invalid line (found at the start or while the run read
    /// the job file again).
    pub(super) fn add_invalid(&mut self) {
        self.invalid += 1;
    }

    /// The valid lines of the job file.
    pub(super) fn jobs(&self) -> usize {
        self.jobs
    }

    /// Lines that ended: reported, and left with nothing for the next run
    /// to do (a line accepted and not finished, unanswered, or not sent is
    /// the next run's: [`Tally::left`]).
    fn done(&self) -> usize {
        self.earlier + self.worked - self.left()
    }

    /// Lines reported that the next run takes up: accepted and not
    /// finished, sent without an answer, not sent (a stop, the cap).
    fn left(&self) -> usize {
        [Standing::Accepted, Standing::Unanswered, Standing::Unsent]
            .iter()
            .map(|standing| self.count(*standing))
            .sum()
    }

    /// Lines that ended otherwise than saved.
    fn failed_done(&self) -> usize {
        self.done() - self.count(Standing::Saved)
    }

    /// Lines this run reached that did not end saved.
    fn failed_total(&self) -> usize {
        self.by_standing
            .iter()
            .filter(|(standing, _)| **standing != Standing::Saved)
            .map(|(_, n)| n)
            .sum()
    }

    /// 0 when every line was saved within the cap, else the code of the
    /// most serious class (a batch charged more than its cap is one at it).
    pub(super) fn exit_code(&self) -> u8 {
        let past_the_cap = self.passed_cap().map(|_| FailureClass::CreditCap);
        if self.failed_total() == 0 && self.invalid == 0 && self.classes.is_empty() && past_the_cap.is_none() {
            return 0;
        }
        FailureClass::most_serious(self.classes.iter().copied().chain(past_the_cap))
            .map_or(if self.invalid > 0 { code::USAGE } else { code::OTHER }, code::of)
    }
}

/// The summary: where the lines stand, in the words `--status` uses, and
/// what they cost, with what to do about lines left accepted or
/// unanswered.
pub(super) fn summary(tally: &Tally, out_dir: &Path, json: bool, mock: bool, completed: bool) {
    let prices = if mock { " (the mock's illustrative prices)" } else { "" };
    let results = shown(&out_dir.join(RESULTS));
    let mut text = format!(
        "{}; known cost, all runs: {} credits{prices}; results in {results}",
        standings(tally),
        credits(tally.cost),
    );
    let past_the_cap = tally.passed_cap().map(|cap| {
        format!(
            "the batch was charged {} credits in all, more than its --max-credits cap of {}: the first line of a \
             kind not priced yet goes alone, with all that was left held for it, and cost more than that (the \
             service settles a price only once a task of its kind ends; `genapi man genapi-batch` says more); \
             nothing was sent after it",
            credits(tally.cost),
            credits(cap)
        )
    });
    // A run that stopped early says what the next does from the journal,
    // not from the counts of this run, which miss the lines it let go of.
    if !completed {
        let text = format!(
            "the run stopped early; {results} has every line, each it did not reach as the last run left it; \
             known cost, all runs: {} credits{prices}",
            credits(tally.cost)
        );
        let texts: Vec<String> = std::iter::once(text).chain(past_the_cap).collect();
        say(&texts, json);
        return;
    }
    if let Some(past) = &past_the_cap {
        text.push('\n');
        text.push_str(past);
    }
    if let Some(raise) = raise_the_cap(tally) {
        text.push('\n');
        text.push_str(&raise);
    }
    if tally.count(Standing::Accepted) > 0 {
        text.push_str(
            "\naccepted tasks are not finished: run the same command again to finish them (never resubmitted)",
        );
    }
    if !tally.unanswered.is_empty() {
        text.push('\n');
        text.push_str(&unknown_advice(&tally.unanswered));
    }
    if !tally.unreadable.is_empty() {
        text.push('\n');
        text.push_str(&unreadable_advice(&tally.unreadable));
    }
    let refused = tally.count(Standing::Refused);
    if refused > 0 {
        let lines = if refused == 1 {
            "1 line".to_string()
        } else {
            format!("{refused} lines")
        };
        let said = super::standing::next_run(Standing::Refused, refused == 1, tally.asked);
        text.push_str(&format!("\n{lines} {said}"));
    }

    say(&[text], json);
}

/// "3 saved (1 before this run or by another worker), 2 ended (1
/// moderated, 1 task failed), 1 unsent (1 at the credit cap)": each standing with
/// lines, in the order of [`Standing::ALL`], with the classes of its lines.
fn standings(tally: &Tally) -> String {
    let mut said = Vec::new();
    for standing in Standing::ALL {
        let count = tally.count(standing);
        if count == 0 && standing != Standing::Saved {
            continue;
        }
        let mut why: Vec<String> = tally
            .why
            .iter()
            .filter(|((of, _), _)| *of == standing)
            .map(|((_, class), n)| format!("{n} {class}"))
            .collect();
        // A saved line's class is said of it as it happens, and an
        // unanswered or changed line's is its standing again.
        if matches!(standing, Standing::Saved | Standing::Unanswered | Standing::Changed) {
            why.clear();
            if standing == Standing::Saved && tally.saved_earlier > 0 {
                why.push(format!("{} before this run or by another worker", tally.saved_earlier));
            }
        }
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join(", "))
        };
        said.push(format!("{count} {}{why}", standing.as_str()));
    }
    if tally.invalid > 0 {
        said.push(format!("{} invalid", tally.invalid));
    }
    said.join(", ")
}

/// What it takes to send the lines left unsent at the cap: the cap that
/// leaves room for them at what the lines charged so far cost on average,
/// never one at or below the cap given (the next run would stop where this
/// one did), and no number at all when none would help.
fn raise_the_cap(tally: &Tally) -> Option<String> {
    let key = (Standing::Unsent, FailureClass::CreditCap.in_words());
    let left = tally.why.get(&key).copied().filter(|n| *n > 0)?;
    let cap = tally.cap?;
    let lines = if left == 1 {
        "1 line".to_string()
    } else {
        format!("{left} lines")
    };
    let at_the_cap = format!("{lines} left unsent at the --max-credits cap of {}", credits(cap));
    if tally.unsettled > 0 {
        return Some(format!("{at_the_cap}: {}", unsettled_advice(tally.unsettled)));
    }
    if tally.charged == 0 {
        return Some(format!(
            "{at_the_cap}: no line has been charged yet, so what they cost is not known; `genapi batch FILE \
             --estimate` prices them, and a cap above that sends them"
        ));
    }
    let each = tally.cost / tally.charged as f64;
    let more = each * left as f64;
    let needed = suggested_cap(cap, tally.cost, more);
    match needed {
        Some(needed) if each <= genapi_batch::MOST_CREDITS => Some(format!(
            "{at_the_cap}: at {} credits a line (what the lines charged so far cost on average) they take about {} \
             more; run the same command with --max-credits {needed:.2} (or more) to send them",
            credits(each),
            credits(more)
        )),
        _ => Some(format!(
            "{at_the_cap}: the lines charged so far cost {} credits on average, more than any submission is believed \
             to cost ({} credits), so no cap is suggested: check what the service charged before raising it",
            credits(each),
            credits(genapi_batch::MOST_CREDITS)
        )),
    }
}

/// The cap that sends lines taking `more` credits after `spent`: rounded
/// up to the hundredth (never short of the sum by rounding), and above
/// `cap`; none when it is no finite number.
fn suggested_cap(cap: f64, spent: f64, more: f64) -> Option<f64> {
    let mut needed = ((spent + more) * 100.0).ceil() / 100.0;
    if needed <= cap {
        // The lines fit under the cap at the average, yet were held back
        // (a kind dearer than the average): room for them above it.
        needed = ((cap + more) * 100.0).ceil() / 100.0;
    }
    Some(needed).filter(|needed| needed.is_finite() && *needed > cap)
}

/// Why lines were held back when tasks ended without a settled cost.
fn unsettled_advice(unsettled: usize) -> String {
    let tasks = if unsettled == 1 {
        "1 task".to_string()
    } else {
        format!("{unsettled} tasks")
    };
    format!(
        "{tasks} ended without a settled cost (the service reported none when the task ended), and the cap counts \
         such a task at all it held for it, which for the first line of a kind is all that was left under the cap; \
         a higher cap does not help: the next run counts each at the whole cap and sends nothing more while the \
         service settles no cost, so run without --max-credits to send the rest, or ask the service to report a \
         settled cost on the poll result"
    )
}

/// Credits as the summary shows them: to the hundredth, and a figure no
/// service charges (above a thousand times the most one submission is
/// believed to cost, or no finite number) as a bound, not 300 digits.
fn credits(amount: f64) -> String {
    let most = genapi_batch::MOST_CREDITS * 1000.0;
    if amount.is_finite() && amount <= most {
        format!("{amount:.2}")
    } else {
        format!("more than {most:.0}")
    }
}

/// The lines named in an advice: "line 3" or "lines 3, 4" (the first
/// twenty), and whether there is one.
fn named(lines: &[u64]) -> (String, bool) {
    let mut sorted = lines.to_vec();
    sorted.sort_unstable();
    let shown: Vec<String> = sorted.iter().take(20).map(u64::to_string).collect();
    let more = if sorted.len() > shown.len() { ", …" } else { "" };
    match shown.as_slice() {
        [one] => (format!("line {one}"), true),
        _ => (format!("lines {}{more}", shown.join(", ")), false),
    }
}

/// What to do about lines whose journal record cannot be read.
fn unreadable_advice(unreadable: &[u64]) -> String {
    let (which, one) = named(unreadable);
    let (records, each, is) = if one {
        ("record", "it", "is")
    } else {
        ("records", "each", "are")
    };
    format!(
        "the journal's {records} of {which} cannot be read: {each} may be a submission's acceptance, the task made \
         and charged, so {which} {is} not sent again, even with --resubmit-unknown. Write the damaged journal line \
         back, or, if you find the task's id (the service's activity records), run again with --adopt \
         LINE=TASK_ID"
    )
}

/// What to do about lines sent without an answer.
fn unknown_advice(unanswered: &[u64]) -> String {
    let (which, one) = named(unanswered);
    let (which, them, they) = if one {
        (format!("{which} was"), "it", "it is")
    } else {
        (format!("{which} were"), "them", "they are")
    };
    format!(
        "{which} sent without an answer: the service may have accepted (and charged) {them}, so {they} not sent \
         again automatically. For each: if you find its task id (e.g. in the project's activity records; the line's \
         error in results.jsonl says when it was sent), run again with --adopt LINE=TASK_ID to fetch its result; if \
         it was not accepted, run again with --resubmit-unknown (it sends every unanswered line left, risking paying \
         twice for any that was accepted)"
    )
}

/// The summary's lines: on stdout, or on stderr when stdout holds JSON.
pub(super) fn say(texts: &[String], json: bool) {
    for text in texts {
        for line in text.lines() {
            if json {
                out::err(line);
            } else {
                out::out(line);
            }
        }
    }
}

/// What a line's reported cost adds to the run's total (see
/// [`crate::progress::credits`]).
fn counted(cost: Option<f64>) -> f64 {
    crate::progress::credits(cost).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {

    /// A shared batch's worker counts the lines another worker ended as
    /// done once the store says so, and says none of them twice (held,
    /// not sent).
    #[test]
    fn lines_ended_in_the_store_are_done_and_said_once() {
        let mut tally = Tally::new(20);
        let counters = genapi_batch::Counters::default();
        let before = tally.figures(&counters);
        assert_eq!(before.done, 0);
        let standings: BTreeMap<u64, Standing> = (1..=20)
            .map(|line| {
                let standing = match line {
                    1..=15 => Standing::Saved,
                    16 => Standing::Ended,
                    _ => Standing::Accepted,
                };
                (line, standing)
            })
            .collect();
        tally.store_read(&standings);
        let figures = tally.figures(&counters);
        assert_eq!((figures.done, figures.failed), (16, 1));
        assert!(figures.accounted() <= figures.total, "{figures:?}");
    }

    use super::*;

    #[test]
    fn a_cost_below_nothing_hides_no_cap_that_was_passed() {
        let mut tally = Tally::new(2);
        tally.capped(Some(2.0));
        for cost in [Some(-10.0), Some(f64::NEG_INFINITY), Some(f64::NAN), Some(5.0)] {
            tally.cost += counted(cost);
        }
        assert_eq!(tally.cost, 5.0);
        assert_eq!(tally.passed_cap(), Some(2.0));
    }

    #[test]
    fn a_suggested_cap_is_never_at_or_below_the_cap_nor_without_a_finite_figure() {
        assert_eq!(suggested_cap(100.0, 0.4, 0.4), Some(100.4), "above the cap given");
        assert_eq!(suggested_cap(1.0, 0.8, 0.8), Some(1.6), "what they take");
        assert_eq!(suggested_cap(100.0, 1e308, 1e308), None);
        assert_eq!(suggested_cap(100.0, f64::INFINITY, 1.0), None);
        assert_eq!(suggested_cap(100.0, f64::NAN, 1.0), None);
    }

    #[test]
    fn huge_or_endless_costs_are_shown_as_a_bound_not_a_wall_of_digits() {
        assert_eq!(credits(1.234), "1.23");
        assert_eq!(credits(1e308), "more than 1000000000");
        assert_eq!(credits(f64::INFINITY), "more than 1000000000");
        assert_eq!(credits(f64::NAN), "more than 1000000000");
    }
}
