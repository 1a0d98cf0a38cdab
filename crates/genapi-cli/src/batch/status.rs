//! `genapi batch --status`: where a batch stands, in one view whether the
//! journal in `--out` or a ledger keeps it.
//!
//! The view is made from what the store says ([`genapi_batch::Status`], read
//! by [`keeper::read_status`] without changing anything): for each group of
//! lines, what the next run does with them, in the words a run that stopped
//! early uses ([`standing`](super::standing)); a ledger adds what its
//! workers share: the credits and which worker holds which lines.

use std::collections::BTreeMap;
use std::path::PathBuf;

use genapi_batch::{SharedStatus, Status};
use serde_json::Value;

use super::keeper::{self, Place};
use super::standing::Lines;
use super::{shown, Run, JOURNAL};
use crate::{out, Failure};

/// Workers' lines listed at most, per worker.
const LINES_LISTED: usize = 20;

/// Shows where the batch stands; nothing is created or sent.
pub(super) async fn show(run: &Run<'_>, ledger_url: Option<String>) -> Result<(), Failure> {
    let (place, status) = keeper::read_status(run, ledger_url).await?;
    let view = View {
        place,
        status,
        job_lines: run.job_lines(),
        invalid: run.checked.invalid_lines(),
        // Where a line's advice sends the user: a ledger read without
        // --out has no folder of its own.
        folder: run.args.out.clone().unwrap_or_else(|| PathBuf::from(".")),
        asked: run.asked(),
    };
    if run.global.json {
        out::out(&view.json().to_string());
    } else {
        for line in view.text() {
            out::out(&line);
        }
    }
    Ok(())
}

/// What `--status` says of a batch.
struct View<'a> {
    /// Where the batch is kept.
    place: Place,
    /// What its store says, `None` when the store does not hold it yet.
    status: Option<Status>,
    /// The valid lines of the job file.
    job_lines: &'a [u64],
    /// How many lines of the job file are not jobs.
    invalid: usize,
    /// The folder the advice names.
    folder: PathBuf,
    /// The flags given with `--status`: the run they would make.
    asked: genapi_batch::Asked,
}

impl View<'_> {
    /// The job file's lines by what the next run does with them (all of
    /// them sent when the store does not hold the batch yet).
    fn lines(&self) -> Lines {
        let none = BTreeMap::new();
        let standings = self.status.as_ref().map_or(&none, |status| &status.lines);
        Lines::new(standings, self.job_lines.iter().copied())
    }

    /// What the workers of the ledger's batch `name` share; a batch not in
    /// the ledger has nothing shared yet.
    fn shared(&self, name: &str) -> SharedStatus {
        let shared = self.status.as_ref().and_then(|status| status.shared.clone());
        shared.unwrap_or_else(|| SharedStatus::new(name))
    }

    /// `--json`: whether the store holds the batch, its lines counted by
    /// standing, and the journal's path or what the ledger's workers share.
    fn json(&self) -> Value {
        let mut view = match &self.place {
            Place::Journal(out_dir) => serde_json::json!({"journal": out_dir.join(JOURNAL).display().to_string()}),
            Place::Ledger(name) => serde_json::to_value(self.shared(name)).unwrap_or_default(),
        };
        view["exists"] = Value::Bool(self.status.is_some());
        view["lines"] = self.lines().counts();
        view["lines"]["invalid"] = self.invalid.into();
        view
    }

    /// The view in words, a line each: where the batch is (with a ledger's
    /// counts and credits), what the next run does with each group of
    /// lines, and which worker of a ledger holds which.
    fn text(&self) -> Vec<String> {
        if self.status.is_none() {
            return vec![self.not_started()];
        }
        let mut said = vec![match &self.place {
            Place::Journal(out_dir) => format!("batch in {}:", shown(out_dir)),
            Place::Ledger(name) => format!("batch {}: {}", out::clean(name), credits(&self.shared(name))),
        }];
        let next_run = self.lines().next_run(&self.folder, self.asked);
        said.extend(next_run.iter().map(|sentence| format!("  {sentence}")));
        if self.invalid > 0 {
            let them = if self.invalid == 1 { "it" } else { "them" };
            said.push(format!(
                "  {} of the job file invalid: not jobs, never sent (fix {them}, as said above, to have {them} sent)",
                lines(self.invalid)
            ));
        }
        if let Place::Ledger(name) = &self.place {
            said.extend(workers(&self.shared(name)));
        }
        said
    }

    /// What is said of a batch its store does not hold yet.
    fn not_started(&self) -> String {
        let count = self.job_lines.len();
        match &self.place {
            Place::Journal(out_dir) => format!(
                "no run of this batch has started in {} yet ({} to send)",
                shown(out_dir),
                lines(count)
            ),
            Place::Ledger(name) => format!(
                "batch {} is not in the ledger: no worker has started it yet ({} to send)",
                out::clean(name),
                lines(count)
            ),
        }
    }
}

/// A shared batch's credits (its lines are counted by standing, below):
/// what was charged, and what is counted for tasks whose cost is not
/// settled (running, or ended without a cost: they may have been charged).
fn credits(shared: &SharedStatus) -> String {
    format!(
        "{:.2} credits charged, {:.2} counted for tasks without a settled cost",
        shared.credits_charged, shared.credits_held
    )
}

/// "1 line", "3 lines".
fn lines(count: usize) -> String {
    match count {
        1 => "1 line".into(),
        _ => format!("{count} lines"),
    }
}

/// Which live worker holds which lines, a line of text each.
fn workers(shared: &SharedStatus) -> Vec<String> {
    shared
        .workers
        .iter()
        .map(|(worker, lines)| {
            let listed: Vec<String> = lines.iter().take(LINES_LISTED).map(ToString::to_string).collect();
            let more = if lines.len() > LINES_LISTED { ", …" } else { "" };
            format!(
                "  {} holds {} line(s): {}{more}",
                out::clean(worker),
                lines.len(),
                listed.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use genapi_batch::Standing;

    use super::*;

    /// Line 1 saved, line 2 accepted, line 3 unknown to the store.
    fn standings() -> BTreeMap<u64, Standing> {
        BTreeMap::from([(1, Standing::Saved), (2, Standing::Accepted)])
    }

    fn view(place: Place, status: Option<Status>) -> View<'static> {
        View {
            place,
            status,
            job_lines: &[1, 2, 3],
            invalid: 0,
            folder: PathBuf::from("out"),
            asked: genapi_batch::Asked::default(),
        }
    }

    /// `--status` with the flags that send lines again says what the run
    /// with them does: it sends them.
    #[test]
    fn the_flags_given_with_status_are_the_runs_it_speaks_of() {
        let mut status = Status::default();
        status.lines = BTreeMap::from([(1, Standing::Unanswered), (2, Standing::Refused)]);
        let plain = view(Place::Journal(PathBuf::from("out")), Some(status.clone()))
            .text()
            .join("\n");
        assert!(plain.contains("the same command does not send it again"), "{plain}");
        let mut flagged = view(Place::Journal(PathBuf::from("out")), Some(status));
        flagged.asked = genapi_batch::Asked {
            retry_refused: true,
            resubmit_unknown: true,
        };
        let said = flagged.text().join("\n");
        assert!(said.contains("with --resubmit-unknown, sends it again"), "{said}");
        assert!(said.contains("with --retry-refused, sends it again"), "{said}");
        assert!(!said.contains("does not send it again"), "{said}");
    }

    #[test]
    fn a_ledger_says_what_a_journal_says_of_each_line_with_its_counts_and_workers() {
        let mut journal = Status::default();
        journal.lines = standings();
        let journal = view(Place::Journal(PathBuf::from("out")), Some(journal));
        let mut shared = SharedStatus::new("jobs:jobsjsonl");
        shared.credits_charged = 2.5;
        shared.workers.insert("host:out".into(), vec![2]);
        let ledger = view(
            Place::Ledger("jobs:jobsjsonl".into()),
            Some(Status::of_shared(standings(), shared)),
        );

        let (journal_said, ledger_said) = (journal.text(), ledger.text());
        assert_eq!(journal_said[0], "batch in out:");
        assert_eq!(
            ledger_said[0],
            "batch jobs:jobsjsonl: 2.50 credits charged, 0.00 counted for tasks without a settled cost"
        );
        assert_eq!(journal_said[1..], ledger_said[1..4], "{ledger_said:#?}");
        assert!(journal_said[3].starts_with("  line 3: not sent"), "{journal_said:#?}");
        assert_eq!(ledger_said[4..], ["  host:out holds 1 line(s): 2"]);

        let (journal_json, ledger_json) = (journal.json(), ledger.json());
        assert_eq!(journal_json["lines"], ledger_json["lines"]);
        assert_eq!(
            (&journal_json["lines"]["saved"], &journal_json["lines"]["unsent"]),
            (&Value::from(1), &Value::from(1))
        );
        assert_eq!(journal_json["journal"], "out/journal.jsonl");
        assert_eq!(
            (&ledger_json["lines"]["accepted"], &ledger_json["exists"]),
            (&Value::from(1), &Value::Bool(true))
        );
        assert_eq!(ledger_json["credits_charged"], 2.5);
    }

    #[test]
    fn invalid_lines_of_the_job_file_are_said_of_one_or_of_many() {
        let mut status = view(Place::Journal(PathBuf::from("out")), Some(Status::default()));
        for (invalid, expected) in [
            (
                1,
                "1 line of the job file invalid: not jobs, never sent (fix it, as said above, to have it sent)",
            ),
            (
                2,
                "2 lines of the job file invalid: not jobs, never sent (fix them, as said above, to have them sent)",
            ),
        ] {
            status.invalid = invalid;
            let said = status.text().join("\n");
            assert!(said.contains(expected), "{said}");
        }
    }

    #[test]
    fn a_batch_its_store_does_not_hold_yet_has_every_line_to_send() {
        let journal = view(Place::Journal(PathBuf::from("out")), None);
        assert_eq!(
            journal.text(),
            ["no run of this batch has started in out yet (3 lines to send)"]
        );
        let ledger = view(Place::Ledger("nightly".into()), None);
        assert_eq!(
            ledger.text(),
            ["batch nightly is not in the ledger: no worker has started it yet (3 lines to send)"]
        );
        for json in [journal.json(), ledger.json()] {
            assert_eq!(
                (&json["exists"], &json["lines"]["unsent"]),
                (&Value::Bool(false), &Value::from(3))
            );
        }
    }
}
