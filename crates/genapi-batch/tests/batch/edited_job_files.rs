//! A line is its job, not its place in the file: after any ordinary edit of
//! a job file (a line inserted or removed above, the lines sorted or
//! swapped, a line copied), whatever became of a line in the run before
//! (refused with 402, 403 or 422, a 429 and a stop before it left again, sent without
//! an answer, accepted and not saved, never sent), no job is paid for more
//! often than the job file holds it, counted at the mock.
//!
//! Each case: a first run saves alpha (line 1) and charlie (line 3) and
//! leaves bravo (line 2) one of those ways; the file is edited; the edited
//! file is run, then run again with every flag that sends a refused or
//! unanswered line again.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use genapi_batch::{Batch, Event, Job, Journal, MemoryJournal, Standing, Stopper};
use genapi_mock::{Fault, FaultKind, MockService};
use serde_json::json;

use crate::common::*;

/// bravo's operation: its own, so its faults and its task's length touch
/// no other line.
const BRAVO_PATH: &str = "/v1/gen-2-flex";

/// How bravo was left by the first run.
#[derive(Clone, Copy, Debug)]
enum Left {
    /// The service refused it with this status (402, 403, 422).
    Refused(u16),
    /// It met a 429 and the run was stopped before it left again.
    RateLimitedThenStopped,
    /// The service took it (and made a task) and the answer was lost.
    Unanswered,
    /// Accepted, and the run was stopped before its result was saved.
    AcceptedNotSaved,
    /// The run never sent it (it was not in the file yet).
    NeverSent,
}

const WAYS: [Left; 7] = [
    Left::Refused(402),
    Left::Refused(403),
    Left::Refused(422),
    Left::RateLimitedThenStopped,
    Left::Unanswered,
    Left::AcceptedNotSaved,
    Left::NeverSent,
];

fn job(line: u64, prompt: &str) -> Job {
    let path = if prompt == "bravo" { BRAVO_PATH } else { "/v1/gen-2-pro" };
    Job::new(line, path, json!({"prompt": prompt, "width": 64, "height": 64}))
}

/// The jobs of a file, one prompt per line, numbered from 1.
fn file(prompts: &[&str]) -> Vec<Job> {
    (1..).zip(prompts).map(|(line, prompt)| job(line, prompt)).collect()
}

/// The first run: alpha and charlie saved, bravo left as `left` says.
async fn first_run(mock: &MockService, dir: &Dir, journal: &MemoryJournal, left: Left) {
    let client = mock.client().unwrap();
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let saved = run_batch(batch(), vec![job(1, "alpha"), job(3, "charlie")]).await;
    assert!(saved.iter().all(|o| o.standing == Standing::Saved), "{saved:#?}");
    let post = |kind: FaultKind, times: usize| Fault::on(BRAVO_PATH, kind).method("POST").times(times);
    // Bodies as the service writes them.
    let status = |status: u16, retry_after: Option<&str>| FaultKind::Status {
        status,
        retry_after: retry_after.map(str::to_string),
        body: match status {
            422 => r#"{"detail":[{"loc":["body","prompt"],"msg":"not allowed","type":"value_error"}]}"#,
            402 => r#"{"detail":"Insufficient credits"}"#,
            403 => r#"{"detail":"Not authenticated - Invalid Authentication"}"#,
            _ => r#"{"detail":"Too many requests"}"#,
        }
        .into(),
    };
    let expected = match left {
        Left::NeverSent => return,
        Left::Refused(code) => {
            mock.inject(post(status(code, None), 1));
            Standing::Refused
        }
        Left::RateLimitedThenStopped => {
            mock.inject(post(status(429, Some("1")), 1));
            Standing::Unsent
        }
        Left::Unanswered => {
            mock.inject(post(FaultKind::LoseAnswer, 1));
            Standing::Unanswered
        }
        Left::AcceptedNotSaved => Standing::Accepted,
    };
    // The run is stopped the moment bravo's acceptance (its task runs for
    // an hour) or its 429 is written.
    let stopping = StopWhen::new(journal, |event| {
        matches!(event, Event::Accepted { line: 2, .. } | Event::Refused { line: 2, .. })
    });
    let run = Batch::new(client.clone(), store(stopping.clone()), &dir.0).jobs_at_once(1);
    let _ = stopping.stopper.set(run.stopper());
    let outcomes = run_batch(run, file(&["alpha", "bravo", "charlie"])).await;
    assert_eq!(outcomes[1].standing, expected, "{left:?}: {outcomes:#?}");
}

/// A journal that stops its run once an event `when` picks is written.
#[derive(Clone)]
struct StopWhen {
    journal: MemoryJournal,
    stopper: Arc<OnceLock<Stopper>>,
    when: fn(&Event) -> bool,
}

impl StopWhen {
    fn new(journal: &MemoryJournal, when: fn(&Event) -> bool) -> StopWhen {
        StopWhen {
            journal: journal.clone(),
            stopper: Arc::new(OnceLock::new()),
            when,
        }
    }
}

impl Journal for StopWhen {
    fn events(&mut self) -> std::io::Result<Vec<Event>> {
        self.journal.events()
    }

    fn append(&mut self, event: &Event) -> std::io::Result<()> {
        self.journal.append(event)?;
        if let (true, Some(stopper)) = ((self.when)(event), self.stopper.get()) {
            stopper.stop();
        }
        Ok(())
    }
}

/// Tasks the mock created, by prompt.
fn tasks_by_prompt(mock: &MockService) -> HashMap<String, usize> {
    let mut counted = HashMap::new();
    for task in mock.created_tasks() {
        *counted.entry(task.prompt).or_insert(0) += 1;
    }
    counted
}

/// Runs every way a line can be left, then `edited`, then `edited` again
/// with every flag that sends a line again; no job is paid for more often
/// than the most the files held it.
async fn no_job_is_paid_twice_after(edit: &str, edited: &[&str]) {
    for left in WAYS {
        let config = genapi_mock::MockConfig::default()
            .default_duration(Duration::from_millis(50))
            .duration_for("gen_2_flex", Duration::from_secs(3600))
            .max_active_tasks(10_000);
        let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let dir = Dir::new(&format!("edited-{edit}-{left:?}"));
        let journal = MemoryJournal::default();
        first_run(&mock, &dir, &journal, left).await;
        let client = mock.client().unwrap();
        let after = run_batch(Batch::new(client.clone(), store(journal.clone()), &dir.0), file(edited)).await;
        let again = run_batch(
            Batch::new(client, store(journal.clone()), &dir.0)
                .retry_refused(true)
                .resubmit_unknown(false),
            file(edited),
        )
        .await;
        let before = ["alpha", "bravo", "charlie"];
        for (prompt, tasks) in tasks_by_prompt(&mock) {
            let held = |prompts: &[&str]| prompts.iter().filter(|p| **p == prompt).count();
            let most = held(&before).max(held(edited));
            assert!(
                tasks <= most,
                "{edit} after bravo was {left:?}: {prompt} was paid {tasks} times, held {most} times\n\
                 after the edit: {after:#?}\nagain: {again:#?}"
            );
        }
        // Every refusal for the edit stands changed and says what to do,
        // never to start over elsewhere (which pays for every line again).
        for outcome in after.iter().chain(&again) {
            if let Some(error) = outcome.error.as_deref().filter(|e| e.contains("submitted as line")) {
                assert_eq!(outcome.standing, Standing::Changed, "{outcome:#?}");
                assert!(error.contains("add new jobs at its end"), "{error}");
                assert!(!error.contains("output directory"), "{error}");
            }
        }
        mock.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_line_inserted_above_pays_no_job_twice() {
    no_job_is_paid_twice_after("insert-above", &["zulu", "alpha", "bravo", "charlie"]).await;
}

#[tokio::test(start_paused = true)]
async fn a_line_removed_above_pays_no_job_twice() {
    no_job_is_paid_twice_after("remove-above", &["bravo", "charlie"]).await;
}

#[tokio::test(start_paused = true)]
async fn sorted_lines_pay_no_job_twice() {
    no_job_is_paid_twice_after("sort", &["charlie", "bravo", "alpha"]).await;
}

#[tokio::test(start_paused = true)]
async fn swapped_lines_pay_no_job_twice() {
    no_job_is_paid_twice_after("swap", &["bravo", "alpha", "charlie"]).await;
}

#[tokio::test(start_paused = true)]
async fn a_copied_line_pays_for_the_copy_alone() {
    no_job_is_paid_twice_after("duplicate", &["alpha", "alpha", "bravo", "charlie"]).await;
}

/// The case the review found: alpha saved, bravo refused for want of
/// credits; the user buys credits, adds a line on top and runs the same
/// command. alpha, now line 2 where bravo's refusal is recorded, is not
/// sent again; bravo, new at line 3, is sent once.
#[tokio::test(start_paused = true)]
async fn a_job_moved_onto_a_refused_line_is_not_paid_again() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("moved-onto-refused");
    let journal = MemoryJournal::default();
    let client = mock.client().unwrap();
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let alpha = |line| {
        Job::new(
            line,
            "/v1/gen-2-pro",
            json!({"prompt": "alpha", "width": 64, "height": 64}),
        )
    };
    let bravo = |line| {
        Job::new(
            line,
            "/v1/gen-2-pro",
            json!({"prompt": "bravo", "width": 64, "height": 64}),
        )
    };
    let zulu = |line| {
        Job::new(
            line,
            "/v1/gen-2-pro",
            json!({"prompt": "zulu", "width": 64, "height": 64}),
        )
    };
    run_batch(batch(), vec![alpha(1)]).await;
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST"));
    let first = run_batch(batch(), vec![alpha(1), bravo(2)]).await;
    assert_eq!(first[1].standing, Standing::Refused, "{first:#?}");

    let edited = run_batch(batch().retry_refused(true), vec![zulu(1), alpha(2), bravo(3)]).await;
    let error = edited[1].error.as_deref().unwrap_or_default();
    assert!(error.contains("line 2's job was submitted as line 1"), "{edited:#?}");
    assert_eq!(
        edited[1].standing,
        Standing::Changed,
        "line 2 stands changed, not as bravo's refusal: --retry-refused would not send it"
    );
    // Line 1, changed, does not stand saved (its job, zulu, was never
    // made), yet carries what alpha cost: a summary counts what was spent.
    assert_eq!(edited[0].standing, Standing::Changed, "{edited:#?}");
    assert!(edited[0].file.is_none(), "{edited:#?}");
    assert!(edited[0].cost.is_some(), "{edited:#?}");
    let paid = tasks_by_prompt(&mock);
    assert_eq!(paid.get("alpha"), Some(&1), "alpha paid once: {paid:?}");
    assert_eq!(paid.get("bravo"), Some(&1), "bravo paid once: {paid:?}");
}

/// A copy put above its original, on a line whose own submission was
/// refused: when the copy's line comes, the original's line is not read
/// yet, so the copy waits for the file to be read, finds its job still
/// there, and is sent as the new job it is.
#[tokio::test(start_paused = true)]
async fn a_copy_above_its_original_waits_for_the_file_and_is_sent() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("copy-above");
    let journal = MemoryJournal::default();
    let client = mock.client().unwrap();
    // One job at a time: line 2 is read only once line 1 is decided.
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    run_batch(batch(), vec![job(2, "alpha")]).await;
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST"));
    let first = run_batch(batch(), file(&["zulu", "alpha"])).await;
    assert_eq!(first[0].standing, Standing::Refused, "{first:#?}");

    let copied = run_batch(batch(), file(&["alpha", "alpha"])).await;
    assert_eq!(copied[0].standing, Standing::Saved, "the copy is sent: {copied:#?}");
    assert!(copied[1].from_journal, "the original is reported: {copied:#?}");
    assert_eq!(
        tasks_by_prompt(&mock).get("alpha"),
        Some(&2),
        "two occurrences, two tasks"
    );
}

/// A journal line that cannot be read (a hand edit, a damaged disk) may
/// have been the intent of any job: a job that would be sent for another
/// line is refused until the journal is whole, since it may be the one the
/// damaged line paid for.
#[tokio::test(start_paused = true)]
async fn a_record_that_cannot_be_read_keeps_any_job_from_being_paid_again() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("damaged-then-moved");
    let path = dir.join("journal.jsonl");
    let client = mock.client().unwrap();
    let batch = || {
        let journal = genapi_batch::FileJournal::open(&path).unwrap();
        Batch::new(client.clone(), store(journal), &dir.0).jobs_at_once(1)
    };
    let first = run_batch(batch(), file(&["alpha"])).await;
    assert_eq!(first[0].standing, Standing::Saved, "{first:#?}");
    // The intent's line is damaged: the job it sent cannot be read.
    let text = std::fs::read_to_string(&path).unwrap();
    let damaged = text.replacen("\"digest\":", "\"digest\" ", 1);
    assert_ne!(text, damaged, "the journal holds an intent: {text}");
    std::fs::write(&path, damaged).unwrap();

    let edited = run_batch(batch(), file(&["zulu", "alpha"])).await;
    let error = edited[1].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("line 1's record in the journal cannot be read"),
        "{edited:#?}"
    );
    assert_eq!(tasks_by_prompt(&mock).get("alpha"), Some(&1), "alpha paid once");
}

/// A record that cannot be read after a refusal may be the intent of any
/// job, accepted and paid: its line is not sent again even with
/// `--resubmit-unknown`, whose new intent would replace the claim and let
/// the job the record paid for be sent again, as another line.
#[tokio::test(start_paused = true)]
async fn an_unreadable_record_is_not_sent_again_when_unanswered_lines_may_be() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("damaged-then-resubmitted");
    let path = dir.join("journal.jsonl");
    let client = mock.client().unwrap();
    let batch = || {
        let journal = genapi_batch::FileJournal::open(&path).unwrap();
        Batch::new(client.clone(), store(journal), &dir.0).jobs_at_once(1)
    };
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST").times(1));
    let refused = run_batch(batch(), file(&["alpha"])).await;
    assert_eq!(refused[0].standing, Standing::Refused, "{refused:#?}");
    mock.inject(
        Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer)
            .method("POST")
            .times(1),
    );
    let lost = run_batch(batch().retry_refused(true), file(&["alpha"])).await;
    assert_eq!(lost[0].standing, Standing::Unanswered, "{lost:#?}");
    assert_eq!(tasks_by_prompt(&mock).get("alpha"), Some(&1), "the lost answer's task");
    // The second intent's line is damaged: after the refusal, it may have
    // been any job's.
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.rfind("\"digest\":").unwrap();
    let damaged = format!("{}\"digest\" {}", &text[..last], &text[last + "\"digest\":".len()..]);
    std::fs::write(&path, damaged).unwrap();

    let asked = run_batch(batch().resubmit_unknown(true), file(&["zulu", "alpha"])).await;
    assert_eq!(asked[0].standing, Standing::Unanswered, "{asked:#?}");
    let error = asked[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("line 1's journal is damaged"), "{error}");
    assert_eq!(asked[1].standing, Standing::Changed, "{asked:#?}");
    let refused = asked[1].error.as_deref().unwrap_or_default();
    assert!(
        refused.contains("write the journal's damaged line back"),
        "what unblocks it: {refused}"
    );
    let again = run_batch(batch().resubmit_unknown(true), file(&["zulu", "alpha"])).await;
    assert_eq!(again[1].standing, Standing::Changed, "{again:#?}");
    let paid = tasks_by_prompt(&mock);
    assert_eq!(paid.get("alpha"), Some(&1), "alpha paid once: {paid:?}");
    assert_eq!(paid.get("zulu"), None, "{paid:?}");
}

/// A record after a submission that cannot be read may be its acceptance
/// (the task made and charged): the line is not sent again, even with
/// `--resubmit-unknown`, though it stands unanswered.
#[tokio::test(start_paused = true)]
async fn a_damaged_acceptance_is_not_sent_again_when_unanswered_lines_may_be() {
    let mock = roomy_mock(3_600_000).await;
    let dir = Dir::new("damaged-acceptance");
    let journal = MemoryJournal::default();
    let stopping = StopWhen::new(&journal, |event| matches!(event, Event::Accepted { .. }));
    let client = mock.client().unwrap();
    let run = Batch::new(client.clone(), store(stopping.clone()), &dir.0);
    let _ = stopping.stopper.set(run.stopper());
    let first = run_batch(run, file(&["alpha"])).await;
    assert_eq!(first[0].standing, Standing::Accepted, "{first:#?}");
    // The acceptance's line cut short, its end kept.
    let mut text = String::new();
    for event in journal.clone().events().unwrap() {
        let line = serde_json::to_string(&event).unwrap();
        let kept = if matches!(event, Event::Accepted { .. }) {
            &line[..line.len() / 2]
        } else {
            &line
        };
        text.push_str(kept);
        text.push('\n');
    }
    let path = dir.join("journal.jsonl");
    std::fs::write(&path, text).unwrap();
    let journal = genapi_batch::FileJournal::open(&path).unwrap();
    let asked = run_batch(
        Batch::new(client, store(journal), &dir.0).resubmit_unknown(true),
        file(&["alpha"]),
    )
    .await;
    assert_eq!(asked[0].standing, Standing::Unanswered, "{asked:#?}");
    let error = asked[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("a record after its submission cannot be read"),
        "{error}"
    );
    assert_eq!(tasks_by_prompt(&mock).get("alpha"), Some(&1), "alpha paid once");
}

/// A job recorded twice (an unanswered line and a saved copy): the same
/// file again leaves the unanswered line as it is (it waits for the file to
/// be read, and keeps its history meanwhile: a journal hands it out once,
/// and a line without one would be sent); moved, with `--resubmit-unknown`,
/// its line waits and is then refused for the edit.
#[tokio::test(start_paused = true)]
async fn an_unanswered_line_with_a_copy_is_refused_once_moved() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("unanswered-with-a-copy");
    let journal = MemoryJournal::default();
    let client = mock.client().unwrap();
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let first = run_batch(batch(), file(&["alpha", "alpha"])).await;
    assert_eq!(first[0].standing, Standing::Unanswered, "{first:#?}");
    assert_eq!(first[1].standing, Standing::Saved, "{first:#?}");

    // The same file: line 1 stands as its record says, unanswered.
    let again = run_batch(batch(), file(&["alpha", "alpha"])).await;
    assert_eq!(again[0].standing, Standing::Unanswered, "{again:#?}");
    assert_eq!(
        tasks_by_prompt(&mock).get("alpha"),
        Some(&2),
        "two occurrences, each paid once"
    );
    // alpha's saved line now holds charlie: line 1 waits for the file,
    // then is refused as the job whose record line 2 no longer holds.
    let edited = run_batch(batch().resubmit_unknown(true), file(&["alpha", "charlie"])).await;
    assert_eq!(edited[0].standing, Standing::Changed, "{edited:#?}");
    assert!(
        edited[0]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("submitted as line 2"),
        "{edited:#?}"
    );
    assert_eq!(
        tasks_by_prompt(&mock).get("alpha"),
        Some(&2),
        "two occurrences, each paid once"
    );
}

/// A job edited as it moved is not taken for a new one: alpha refused for
/// want of credits, bravo saved; a line is added on top and bravo's seed
/// rewritten (`5.0` for `5`, as a tool that rewrites the file may write
/// it), or its prompt retyped. bravo is paid once: the same number is the
/// same job, and a job new to the journal, while a paid job is in no line
/// of the file any more, may be that one edited.
#[tokio::test(start_paused = true)]
async fn a_job_edited_as_it_moved_is_not_paid_again() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("edited-as-it-moved");
    let journal = MemoryJournal::default();
    let client = mock.client().unwrap();
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let at = |line, body: serde_json::Value| Job::new(line, "/v1/gen-2-pro", body);
    let alpha = |line| at(line, json!({"prompt": "alpha", "width": 64, "height": 64}));
    let zulu = |line| at(line, json!({"prompt": "zulu", "width": 64, "height": 64}));
    let bravo = |line, prompt: &str, seed: serde_json::Value| {
        at(line, json!({"prompt": prompt, "width": 64, "height": 64, "seed": seed}))
    };
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST").times(1));
    let first = run_batch(batch(), vec![alpha(1), bravo(2, "bravo", json!(5))]).await;
    assert_eq!(
        [first[0].standing, first[1].standing],
        [Standing::Refused, Standing::Saved],
        "{first:#?}"
    );

    let rewritten = run_batch(batch(), vec![zulu(1), alpha(2), bravo(3, "bravo", json!(5.0))]).await;
    assert_eq!(rewritten[2].standing, Standing::Changed, "{rewritten:#?}");
    let error = rewritten[2].error.as_deref().unwrap_or_default();
    assert!(error.contains("no line of the job file holds it any more"), "{error}");
    assert_eq!(tasks_by_prompt(&mock).get("bravo"), Some(&1), "{rewritten:#?}");

    let retyped = run_batch(batch(), vec![zulu(1), alpha(2), bravo(3, "bravo, retyped", json!(5))]).await;
    assert_eq!(retyped[2].standing, Standing::Changed, "{retyped:#?}");
    let error = retyped[2].error.as_deref().unwrap_or_default();
    assert!(error.contains("no line of the job file holds it any more"), "{error}");
    assert!(error.contains("add new jobs at its end"), "{error}");
    assert_eq!(tasks_by_prompt(&mock).get("bravo, retyped"), None, "{retyped:#?}");
    assert_eq!(tasks_by_prompt(&mock).get("bravo"), Some(&1));
}

/// A job sent twice (two identical lines, both saved), then one copy
/// retyped as a line is added on top: the untouched copy does not hide the
/// retyped one, which is not paid a third time.
#[tokio::test(start_paused = true)]
async fn a_copy_edited_as_it_moved_is_not_hidden_by_its_twin() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("copy-edited-as-it-moved");
    let journal = MemoryJournal::default();
    let client = mock.client().unwrap();
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let at = |line, prompt: &str| {
        Job::new(
            line,
            "/v1/gen-2-pro",
            json!({"prompt": prompt, "width": 64, "height": 64}),
        )
    };
    let first = run_batch(batch(), vec![at(1, "alpha"), at(2, "alpha")]).await;
    assert!(first.iter().all(|o| o.standing == Standing::Saved), "{first:#?}");
    let edited = run_batch(batch(), vec![at(1, "zulu"), at(2, "alpha"), at(3, "alpha, retyped")]).await;
    assert_eq!(edited[2].standing, Standing::Changed, "{edited:#?}");
    assert_eq!(tasks_by_prompt(&mock).get("alpha, retyped"), None, "{edited:#?}");
    assert_eq!(tasks_by_prompt(&mock).get("alpha"), Some(&2));
}

/// An acceptance written last and cut short (a crash as it was written, or
/// a damaged record whose newline an editor dropped) is the sign a task was
/// made: its line is not sent again even with `--resubmit-unknown`, and the
/// task's id stays in the journal.
#[tokio::test(start_paused = true)]
async fn an_acceptance_cut_short_at_the_end_of_the_journal_is_never_paid_again() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("torn-acceptance");
    let path = dir.join("journal.jsonl");
    let client = mock.client().unwrap();
    let batch = || {
        let journal = genapi_batch::FileJournal::open(&path).unwrap();
        Batch::new(client.clone(), store(journal), &dir.0).jobs_at_once(1)
    };
    mock.inject(
        Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer)
            .method("POST")
            .times(1),
    );
    let lost = run_batch(batch(), file(&["alpha"])).await;
    assert_eq!(lost[0].standing, Standing::Unanswered, "{lost:#?}");
    let task = mock.created_tasks().into_iter().next().expect("the lost answer's task");
    // Its acceptance, cut short with no newline.
    let torn = format!(
        r#"{{"event":"accepted","line":1,"id":"{}","polling_url":"http://127.0.0.1:1/v1/get_res"#,
        task.id
    );
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&torn);
    std::fs::write(&path, text).unwrap();

    let asked = run_batch(batch().resubmit_unknown(true), file(&["alpha"])).await;
    assert_eq!(asked[0].standing, Standing::Unanswered, "{asked:#?}");
    assert_eq!(tasks_by_prompt(&mock).get("alpha"), Some(&1), "alpha paid once");
    assert!(
        std::fs::read_to_string(&path).unwrap().contains(&task.id),
        "the id is kept"
    );
}
