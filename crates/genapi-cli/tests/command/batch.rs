//! Batch generation: the library against the in-process mock, and the
//! `genapi batch` command killed with SIGKILL and run again until it
//! completes.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt;
use genapi_batch::{adopt, AdoptError, Adopted, Batch, Job, JobOutcome, JobStatus, MemoryJournal};
use genapi_mock::{Fault, FaultKind, MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::{genapi, posts_by_prompt, Dir};

async fn mock(duration_ms: u64) -> MockService {
    // Every submission is accepted, so POSTs and accepted tasks are the same
    // count; the request log keeps them all.
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(duration_ms))
        .max_active_tasks(10_000)
        .request_log_capacity(100_000);
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn jobs(count: u64, tag: &str) -> Vec<Job> {
    (1..=count)
        .map(|n| {
            Job::new(
                n,
                "/v1/gen-2-pro",
                json!({"prompt": format!("{tag} {n}"), "width": 64, "height": 64}),
            )
            .name(format!("img-{n}"))
        })
        .collect()
}

/// Jobs whose prompt the service does not rewrite (upsampling off), so the
/// prompt a task reports can be checked against them.
fn literal_jobs(count: u64, tag: &str) -> Vec<Job> {
    jobs(count, tag)
        .into_iter()
        .map(|mut job| {
            job.body["disable_pup"] = json!(true);
            job
        })
        .collect()
}

async fn run_batch<J: genapi_batch::Journal>(batch: Batch<J>, jobs: Vec<Job>) -> Vec<JobOutcome> {
    let mut outcomes: Vec<JobOutcome> = batch.run(jobs).unwrap().collect().await;
    outcomes.sort_by_key(|o| o.line);
    outcomes
}

/// The task the mock created for `prompt`, as a user finds it in the
/// service's records.
fn created_for(mock: &MockService, prompt: &str) -> genapi_mock::CreatedTask {
    mock.created_tasks()
        .into_iter()
        .find(|task| task.prompt == prompt)
        .unwrap_or_else(|| panic!("no task was created for {prompt:?}"))
}

#[tokio::test(start_paused = true)]
async fn two_jobs_with_one_output_name_are_not_both_paid_for() {
    let mock = mock(100).await;
    let client = mock.client().unwrap();
    let dir = Dir::new("same-name");
    let mut same = jobs(3, "same name");
    same[1].name = Some("img-1".into());
    // Names are made safe before they are compared: "../img-1" is "img-1".
    same[2].name = Some("../img-1".into());
    let outcomes = run_batch(Batch::new(client, MemoryJournal::default(), &dir.0), same).await;
    assert_eq!(outcomes[0].status, JobStatus::Succeeded, "{outcomes:#?}");
    for later in &outcomes[1..] {
        assert_eq!(later.status, JobStatus::NotSubmitted, "{later:#?}");
        assert_eq!(later.class, Some(genapi::FailureClass::Validation));
        let error = later.error.as_deref().unwrap();
        assert!(
            error.contains("also line 1's") && error.contains("nothing was sent"),
            "{error}"
        );
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "only the first was sent");
    assert!(dir.join("img-1.jpg").is_file());
}

#[tokio::test(start_paused = true)]
async fn a_line_renamed_onto_another_after_its_task_was_accepted_names_that_task() {
    let (mock, client, dir, journal) = setup(100, "renamed-onto").await;
    let first = run_batch(Batch::new(client.clone(), journal.clone(), &dir.0), jobs(2, "renamed")).await;
    let accepted = first[1].task.clone().unwrap();
    let mut renamed = jobs(2, "renamed");
    renamed[1].name = Some("img-1".into());
    let again = run_batch(Batch::new(client, journal, &dir.0), renamed).await;
    assert_eq!(again[1].status, JobStatus::NotSubmitted, "{again:#?}");
    assert_eq!(again[1].task.as_ref(), Some(&accepted), "the paid task is named");
    assert!(again[1].error.as_deref().unwrap().contains(&accepted.id));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing sent again");
}

#[tokio::test(start_paused = true)]
async fn expired_results_are_fetched_again_by_polling_without_resubmitting() {
    let (mock, client, dir, journal) = setup(100, "expiry").await;
    // First run: the output "directory" is a file, so no result can be saved.
    let blocked = dir.join("out");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let first = run_batch(Batch::new(client.clone(), journal.clone(), &blocked), jobs(3, "expiry")).await;
    assert!(first.iter().all(|o| o.status == JobStatus::Pending), "{first:#?}");
    assert!(first.iter().all(|o| o.task.is_some()));
    assert!(first[0].error.as_deref().unwrap().contains("not submitted again"));
    // The result addresses of the first run expire.
    std::fs::remove_file(&blocked).unwrap();
    std::fs::create_dir(&blocked).unwrap();
    mock.advance(Duration::from_secs(601));
    let polls_before = mock.count("GET", "/v1/get_result");
    let second = run_batch(Batch::new(client.clone(), journal.clone(), &blocked), jobs(3, "expiry")).await;
    for (before, after) in first.iter().zip(&second) {
        assert_eq!(after.status, JobStatus::Succeeded, "{after:#?}");
        assert!(after.resumed);
        assert_eq!(before.task, after.task, "the same task, polled again");
        let file = after.file.as_ref().unwrap();
        assert_eq!(genapi::dimensions(&std::fs::read(file).unwrap()), Some((64, 64)));
    }
    assert!(
        mock.count("GET", "/v1/get_result") >= polls_before + 3,
        "fresh addresses come from polls"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "nothing was submitted twice");
    // A third run downloads nothing and sends nothing.
    let downloads = mock
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/mock/results/"))
        .count();
    let third = run_batch(Batch::new(client, journal, &blocked), jobs(3, "expiry")).await;
    assert!(third.iter().all(|o| o.status == JobStatus::Succeeded && o.from_journal));
    let after = mock
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/mock/results/"))
        .count();
    assert_eq!((after, mock.count("POST", "/v1/gen-2-pro")), (downloads, 3));
}

#[tokio::test(start_paused = true)]
async fn a_submission_without_an_answer_is_reported_and_never_resubmitted_silently() {
    let (mock, client, dir, journal) = setup(100, "unknown").await;
    // The first submission reaches the service and the connection breaks
    // before any answer (this fault creates no task, so the resubmission
    // asked for below pays once; the client cannot know that).
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection).method("POST"));
    let batch = || Batch::new(client.clone(), journal.clone(), &dir.0).limit(1);
    let first = run_batch(batch(), jobs(3, "unknown")).await;
    assert_eq!(first[0].status, JobStatus::Unknown, "{first:#?}");
    let message = first[0].error.as_deref().unwrap();
    assert!(
        message.contains("may have accepted") && message.contains("allow sending it again"),
        "{message}"
    );
    assert!(first[1..].iter().all(|o| o.status == JobStatus::Succeeded));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3);

    let second = run_batch(batch(), jobs(3, "unknown")).await;
    assert_eq!(second[0].status, JobStatus::Unknown);
    assert!(second[1..].iter().all(|o| o.from_journal));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        3,
        "not sent again without being asked"
    );

    let third = run_batch(batch().resubmit_unknown(true), jobs(3, "unknown")).await;
    assert_eq!(third[0].status, JobStatus::Succeeded);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4, "sent again only when asked");
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_is_recovered_by_adopting_the_task_found_in_the_services_records() {
    let (mock, client, dir, mut journal) = setup(100, "adopt").await;
    // The service creates the first task; its answer is lost on the way.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = |journal: &MemoryJournal| Batch::new(client.clone(), journal.clone(), &dir.0).limit(1);
    let first = run_batch(batch(&journal), literal_jobs(3, "adopt")).await;
    assert_eq!(first[0].status, JobStatus::Unknown, "{first:#?}");
    let message = first[0].error.as_deref().unwrap();
    assert!(
        message.contains("sent at ") && message.contains("adopt it for line 1;"),
        "{message}"
    );
    assert_eq!(
        mock.stats().submissions.get("/v1/gen-2-pro"),
        Some(&3),
        "the service created all three"
    );

    // The user looks the task up (here: the mock's records of created tasks).
    let lost = created_for(&mock, "adopt 1");
    let line_two = first[1].task.clone().unwrap();
    let job = literal_jobs(3, "adopt");
    let refused = |result: Result<Adopted, AdoptError>| result.unwrap_err();
    let absent = Job::new(9, "/v1/gen-2-pro", json!({"prompt": "adopt 9"}));
    assert!(matches!(
        refused(adopt(&client, &mut journal, &absent, &lost.id).await),
        AdoptError::NoSubmission { line: 9 }
    ));
    assert!(matches!(
        refused(adopt(&client, &mut journal, &job[1], &lost.id).await),
        AdoptError::NotUnknown { line: 2, .. }
    ));
    assert!(matches!(
        refused(adopt(&client, &mut journal, &job[0], &line_two.id).await),
        AdoptError::TaskTaken { other_line: 2, .. }
    ));
    let mistyped = refused(adopt(&client, &mut journal, &job[0], "no-such-task").await);
    assert!(matches!(mistyped, AdoptError::NoSuchTask { .. }), "{mistyped}");
    assert!(mistyped.to_string().contains("no-such-task"), "{mistyped}");
    for hostile in ["abc\u{1b}[31m", "", "http://127.0.0.1:9/v1/get_result"] {
        let refusal = refused(adopt(&client, &mut journal, &job[0], hostile).await);
        assert!(
            matches!(refusal, AdoptError::InvalidTask { .. }),
            "{hostile:?}: {refusal}"
        );
        assert!(!refusal.to_string().contains('\u{1b}'));
    }
    // Another submission's task: its answer names another prompt.
    let stranger = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "someone else", "width": 64, "height": 64, "disable_pup": true}),
        )
        .await
        .unwrap();
    let stranger_id = stranger.id().to_string();
    stranger.wait().await.unwrap();
    let mismatch = refused(adopt(&client, &mut journal, &job[0], &stranger_id).await);
    assert!(
        matches!(mismatch, AdoptError::PromptMismatch { line: 1, .. }),
        "{mismatch}"
    );
    assert!(mismatch.to_string().contains("someone else"), "{mismatch}");
    // A changed job is not the one whose submission was recorded.
    let changed = Job::new(
        1,
        "/v1/gen-2-pro",
        json!({"prompt": "adopt 1, changed", "disable_pup": true}),
    );
    assert!(matches!(
        refused(adopt(&client, &mut journal, &changed, &lost.id).await),
        AdoptError::JobChanged { line: 1 }
    ));

    let adopted = adopt(&client, &mut journal, &job[0], &lost.id).await.unwrap();
    assert_eq!(
        (adopted.task.id.as_str(), adopted.unchecked_prompt.as_deref()),
        (lost.id.as_str(), None)
    );
    // Adopting it again changes nothing (the same command can run again).
    let again = adopt(&client, &mut journal, &job[0], &lost.id).await.unwrap();
    assert_eq!(again, adopted);
    assert_eq!(
        journal
            .records()
            .iter()
            .filter(|r| matches!(r, genapi_batch::Record::Accepted { line: 1, .. }))
            .count(),
        1
    );
    let second = run_batch(batch(&journal), literal_jobs(3, "adopt")).await;
    assert_eq!(second[0].status, JobStatus::Succeeded, "{second:#?}");
    assert_eq!(second[0].task.as_ref().map(|t| t.id.as_str()), Some(lost.id.as_str()));
    assert!(second[0].resumed);
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        4,
        "nothing was submitted again (3 lines + the stranger)"
    );
    assert_eq!(mock.stats().submissions.get("/v1/gen-2-pro"), Some(&4));
}

#[tokio::test(start_paused = true)]
async fn an_adopted_task_made_from_another_prompt_is_not_saved_and_can_be_replaced() {
    let (mock, client, dir, journal) = setup(100, "adopt-wrong").await;
    // Clones share the records: one to run, one to adopt with.
    let mut records = journal.clone();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = || Batch::new(client.clone(), journal.clone(), &dir.0);
    let job = literal_jobs(1, "adopt wrong");
    assert_eq!(run_batch(batch(), job.clone()).await[0].status, JobStatus::Unknown);
    // A task still running cannot say its prompt yet: it is taken on the
    // user's word, and checked when its result comes.
    let stranger = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "someone else [mock:duration_ms=1500]", "width": 64, "height": 64, "disable_pup": true}),
        )
        .await
        .unwrap();
    adopt(&client, &mut records, &job[0], stranger.id()).await.unwrap();
    let wrong = run_batch(batch(), job.clone()).await;
    assert_eq!(wrong[0].status, JobStatus::Failed, "{wrong:#?}");
    let message = wrong[0].error.as_deref().unwrap();
    assert!(
        message.contains("made from another prompt") && message.contains("someone else"),
        "{message}"
    );
    assert!(wrong[0].file.is_none());
    assert!(
        !dir.join("img-1.jpg").exists(),
        "another task's image is not saved as the line's"
    );

    let lost = created_for(&mock, "adopt wrong 1");
    adopt(&client, &mut records, &job[0], &lost.id).await.unwrap();
    let right = run_batch(batch(), job).await;
    assert_eq!(right[0].status, JobStatus::Succeeded, "{right:#?}");
    assert_eq!(right[0].task.as_ref().map(|t| t.id.as_str()), Some(lost.id.as_str()));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the line and the stranger, nothing more"
    );
}

#[tokio::test(start_paused = true)]
async fn jobs_that_moved_to_other_lines_are_refused_not_paid_again() {
    let (mock, client, dir, journal) = setup(50, "moved").await;
    let job = |line: u64, prompt: &str| {
        Job::new(
            line,
            "/v1/gen-2-pro",
            json!({"prompt": prompt, "width": 64, "height": 64}),
        )
    };
    let first = run_batch(
        Batch::new(client.clone(), journal.clone(), &dir.0),
        vec![job(1, "fox"), job(2, "owl")],
    )
    .await;
    assert!(first.iter().all(|o| o.status == JobStatus::Succeeded));
    // A line inserted above: every job now sits one line lower.
    let second = run_batch(
        Batch::new(client.clone(), journal.clone(), &dir.0),
        vec![job(1, "cat"), job(2, "fox"), job(3, "owl")],
    )
    .await;
    for outcome in &second {
        assert_eq!(outcome.status, JobStatus::Failed, "{outcome:#?}");
        assert!(outcome.file.is_none(), "no other job's file is reported");
    }
    assert!(
        second[2].error.as_deref().unwrap().contains("submitted as line 2"),
        "{second:#?}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
}

#[tokio::test(start_paused = true)]
async fn a_journal_with_an_impossible_time_is_read_without_a_panic() {
    let mock = mock(50).await;
    let dir = Dir::new("far-future");
    let journal = MemoryJournal::default();
    let job = literal_jobs(1, "far future").remove(0);
    // The digest the batch records, read back from a first (refused) run.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection).method("POST"));
    run_batch(
        Batch::new(mock.client().unwrap(), journal.clone(), &dir.0),
        vec![job.clone()],
    )
    .await;
    let digest = journal
        .records()
        .iter()
        .find_map(|r| match r {
            genapi_batch::Record::Intent { digest, .. } => Some(digest.clone()),
            _ => None,
        })
        .unwrap();
    let mut edited = journal.clone();
    for sent_at in [u64::MAX, 253_402_300_800] {
        genapi_batch::Journal::append(
            &mut edited,
            &serde_json::from_value(
                json!({"event": "intent", "line": 1, "name": "x", "digest": digest, "sent_at": sent_at}),
            )
            .unwrap(),
        )
        .unwrap();
        let outcome = run_batch(
            Batch::new(mock.client().unwrap(), journal.clone(), &dir.0),
            vec![job.clone()],
        )
        .await;
        assert_eq!(outcome[0].status, JobStatus::Unknown);
        assert!(outcome[0]
            .error
            .as_deref()
            .unwrap()
            .contains(&format!("Unix time {sent_at}")));
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_while_the_intent_is_written_sends_nothing() {
    /// Holds the first write (the intent) until told.
    struct Held {
        records: MemoryJournal,
        entered: std::sync::mpsc::Sender<()>,
        release: std::sync::mpsc::Receiver<()>,
        first: bool,
    }
    impl genapi_batch::Journal for Held {
        fn replay(&mut self) -> std::io::Result<Vec<genapi_batch::Record>> {
            self.records.replay()
        }
        fn append(&mut self, record: &genapi_batch::Record) -> std::io::Result<()> {
            if std::mem::take(&mut self.first) {
                self.entered.send(()).unwrap();
                self.release.recv().unwrap();
            }
            self.records.append(record)
        }
    }
    let mock = mock(50).await;
    let dir = Dir::new("stop-intent");
    let records = MemoryJournal::default();
    let (entered, inside) = std::sync::mpsc::channel();
    let (release, held) = std::sync::mpsc::channel();
    let journal = Held {
        records: records.clone(),
        entered,
        release: held,
        first: true,
    };
    let batch = Batch::new(mock.client().unwrap(), journal, &dir.0);
    let stopper = batch.stopper();
    let outcomes = tokio::spawn(run_batch(batch, jobs(1, "stop intent")));
    tokio::task::spawn_blocking(move || inside.recv().unwrap())
        .await
        .unwrap();
    stopper.stop();
    release.send(()).unwrap();
    let outcomes = outcomes.await.unwrap();
    assert_eq!(outcomes[0].status, JobStatus::NotSubmitted, "{outcomes:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing sent after the stop");
    let kept = records.records();
    assert!(
        matches!(kept.last(), Some(genapi_batch::Record::Refused { .. })),
        "the journal says it was not sent: {kept:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn where_prompts_may_be_rewritten_a_differing_prompt_is_shown_and_the_task_can_be_replaced_after_it_finished() {
    let (mock, client, dir, journal) = setup(100, "adopt-unchecked").await;
    let mut records = journal.clone();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = || Batch::new(client.clone(), journal.clone(), &dir.0);
    // gen-2-pro rewrites prompts unless told not to: a differing prompt
    // proves nothing, so it is shown, not refused.
    let job = jobs(1, "adopt unchecked");
    assert_eq!(run_batch(batch(), job.clone()).await[0].status, JobStatus::Unknown);
    let stranger = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "someone else", "width": 64, "height": 64}),
        )
        .await
        .unwrap();
    let stranger_id = stranger.id().to_string();
    let stranger_bytes = stranger.wait().await.unwrap().bytes().await.unwrap();
    let wrong = adopt(&client, &mut records, &job[0], &stranger_id).await.unwrap();
    assert_eq!(wrong.unchecked_prompt.as_deref(), Some("someone else"));
    let first = run_batch(batch(), job.clone()).await;
    assert_eq!(first[0].status, JobStatus::Succeeded);
    let saved = first[0].file.clone().unwrap();
    assert_eq!(std::fs::read(&saved).unwrap(), stranger_bytes.to_vec());

    // The user sees it is the wrong one and adopts the right one: the line's
    // file becomes that task's result.
    let lost = created_for(&mock, "adopt unchecked 1");
    let right = adopt(&client, &mut records, &job[0], &lost.id).await.unwrap();
    assert_eq!(right.unchecked_prompt, None);
    let second = run_batch(batch(), job).await;
    assert_eq!(second[0].status, JobStatus::Succeeded, "{second:#?}");
    assert_eq!(second[0].task.as_ref().map(|t| t.id.as_str()), Some(lost.id.as_str()));
    let right_bytes = mock_result(&client, &lost.id).await;
    assert_eq!(std::fs::read(second[0].file.as_ref().unwrap()).unwrap(), right_bytes);
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the line and the stranger, nothing more"
    );
}

/// The result of a task, fetched again through its polling host.
/// A mock whose tasks take `duration_ms`, a client of it, an empty output
/// directory named after the test, and an empty journal.
async fn setup(duration_ms: u64, name: &str) -> (MockService, genapi::Client, Dir, MemoryJournal) {
    let mock = mock(duration_ms).await;
    let client = mock.client().unwrap();
    (mock, client, Dir::new(name), MemoryJournal::default())
}

async fn mock_result(client: &genapi::Client, id: &str) -> Vec<u8> {
    let task = client.task(id).unwrap();
    task.wait().await.unwrap().bytes().await.unwrap().to_vec()
}

#[tokio::test(start_paused = true)]
async fn a_stop_keeps_submissions_still_waiting_for_room_from_being_sent() {
    let mock = mock(60_000).await;
    // The client allows one active task; the batch would run three.
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let dir = Dir::new("stop-waiting");
    let batch = Batch::new(client, MemoryJournal::default(), &dir.0).limit(3);
    let stopper = batch.stopper();
    let outcomes = tokio::spawn(run_batch(batch, jobs(3, "stop waiting")));
    let give_up = Instant::now() + Duration::from_secs(20);
    while mock.count("POST", "/v1/gen-2-pro") < 1 {
        assert!(Instant::now() < give_up, "the first submission never came");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Two jobs now wait for the first task (a minute long) to free a place.
    stopper.stop();
    let outcomes = outcomes.await.unwrap();
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "nothing sent after the stop");
    let statuses: Vec<JobStatus> = outcomes.iter().map(|o| o.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == JobStatus::NotSubmitted).count(),
        2,
        "{outcomes:#?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == JobStatus::Pending).count(), 1);
}

#[tokio::test(start_paused = true)]
async fn refusals_that_surely_created_nothing_are_retried_and_in_flight_stays_under_the_limit() {
    let mock = mock(200).await;
    let client = mock.client().unwrap();
    let dir = Dir::new("limit");
    // Two 429s: the service surely did not accept them; tried again in the run.
    mock.inject(Fault::status("/v1/gen-2-pro", 429).method("POST").times(2));
    let batch = Batch::new(client, MemoryJournal::default(), &dir.0).limit(4);
    let counters = batch.counters();
    let stream = batch.run(jobs(12, "limit")).unwrap();
    tokio::pin!(stream);
    let mut peak = 0;
    let mut outcomes = Vec::new();
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(outcome) => outcomes.push(outcome),
                None => break,
            },
            _ = tokio::time::sleep(Duration::from_millis(5)) => peak = peak.max(counters.in_flight()),
        }
    }
    assert_eq!(outcomes.len(), 12);
    assert!(
        outcomes.iter().all(|o| o.status == JobStatus::Succeeded),
        "{outcomes:#?}"
    );
    assert!((1..=4).contains(&peak), "peak in flight {peak}");
    assert_eq!(counters.submitted(), 12);
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.values().sum::<usize>(), 14, "12 accepted + 2 refused with 429");
}

#[tokio::test(start_paused = true)]
async fn a_batch_keeps_as_many_tasks_active_as_the_clients_limit_and_no_more() {
    // The one limit is the client's: the batch adds none of its own.
    let mock = mock(2_000).await;
    let client = mock.client_builder().max_active_tasks(40).build().unwrap();
    let dir = Dir::new("client-limit");
    let outcomes = run_batch(
        Batch::new(client, MemoryJournal::default(), &dir.0),
        jobs(90, "limit 40"),
    )
    .await;
    assert!(
        outcomes.iter().all(|o| o.status == JobStatus::Succeeded),
        "{outcomes:#?}"
    );
    assert_eq!(
        mock.stats().peak_active_tasks,
        40,
        "the service saw the client's limit reached, not passed"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 90);
}

#[tokio::test(start_paused = true)]
async fn tasks_taken_up_from_the_journal_hold_places_under_the_clients_limit() {
    let mock = mock(10_000).await;
    let limited = || mock.client_builder().max_active_tasks(3).build().unwrap();
    let dir = Dir::new("resumed-limit");
    let journal = MemoryJournal::default();
    // A first run is stopped once its three tasks were accepted; they run on.
    let first = Batch::new(limited(), journal.clone(), &dir.0);
    let stopper = first.stopper();
    let running = tokio::spawn(run_batch(first, jobs(3, "resumed")));
    while mock.count("POST", "/v1/gen-2-pro") < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    stopper.stop();
    let first = running.await.unwrap();
    assert!(first.iter().all(|o| o.status == JobStatus::Pending), "{first:#?}");
    // The next run (a new client, as a new process has) takes them up
    // before it submits three more: never more than three active at once.
    let second = run_batch(Batch::new(limited(), journal, &dir.0), jobs(6, "resumed")).await;
    assert!(second.iter().all(|o| o.status == JobStatus::Succeeded), "{second:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 6, "none submitted twice");
    assert_eq!(mock.stats().peak_active_tasks, 3);
}

#[tokio::test(start_paused = true)]
async fn a_credit_cap_is_used_without_being_passed_and_says_why_the_rest_was_not_sent() {
    // 256 x 256 is 0.07 MP as the service rounds it: 3 credits a task.
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(200))
        .price_per_mp(300.0 / 7.0);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.set_credits(Some(100.0));
    let dir = Dir::new("credit-cap");
    let journal = MemoryJournal::default();
    let sized = |count, tag| -> Vec<Job> {
        jobs(count, tag)
            .into_iter()
            .map(|mut job| {
                job.body["width"] = json!(256);
                job.body["height"] = json!(256);
                job
            })
            .collect()
    };
    let batch = Batch::new(mock.client().unwrap(), journal.clone(), &dir.0).max_credits(10.0);
    let outcomes = run_batch(batch, sized(8, "capped")).await;
    let charged = 100.0 - mock.credits().unwrap();
    assert_eq!(charged, 9.0, "three tasks fit under 10 credits, a fourth would pass it");
    let at_cap: Vec<&JobOutcome> = outcomes
        .iter()
        .filter(|o| o.class == Some(genapi::FailureClass::CreditCap))
        .collect();
    assert_eq!(at_cap.len(), 5, "{outcomes:#?}");
    assert!(at_cap.iter().all(|o| o.status == JobStatus::NotSubmitted));
    assert!(at_cap[0].error.as_deref().unwrap().contains("credit cap of 10"));
    // The cap counts over runs: what the journal says was charged stays spent.
    let again = Batch::new(mock.client().unwrap(), journal, &dir.0).max_credits(10.0);
    let outcomes = run_batch(again, sized(8, "capped")).await;
    assert_eq!(100.0 - mock.credits().unwrap(), 9.0, "nothing more charged");
    assert_eq!(outcomes.iter().filter(|o| o.from_journal).count(), 3);
}

/// Lines of one path and size, most of them with an input image of one of
/// two sizes: the input changes the price (the service bills input and
/// output megapixels) while the path and size stay the same.
fn mixed_input_jobs(count: u64, tag: &str) -> Vec<Job> {
    (1..=count)
        .map(|n| {
            let mut body = json!({"prompt": format!("{tag} {n}"), "width": 256, "height": 256});
            match n % 4 {
                2 | 3 => body["input_image"] = json!(common::b64(&common::png_header(512, 512))),
                0 => body["input_image"] = json!(common::b64(&common::png_header(640, 640))),
                _ => {}
            }
            Job::new(n, "/v1/gen-2-pro", body).name(format!("img-{n}"))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_credit_cap_holds_when_input_images_change_the_price() {
    // At the default price: 0.1 credit a line without input, 0.5 with a
    // 512 x 512 input and 0.72 with a 640 x 640 one.
    let config = MockConfig::default().default_duration(Duration::from_millis(200));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.set_credits(Some(100.0));
    let dir = Dir::new("credit-cap-mixed");
    let journal_path = dir.join("journal.jsonl");
    let journal = genapi_batch::FileJournal::open(&journal_path).unwrap();
    let batch = Batch::new(mock.client().unwrap(), journal, &dir.0).max_credits(1.0);
    let outcomes = run_batch(batch, mixed_input_jobs(8, "mixed")).await;
    let charged = 100.0 - mock.credits().unwrap();
    assert!(charged > 0.0, "{outcomes:#?}");
    assert!(
        charged <= 1.0,
        "a cap of 1 credit, yet the service charged {charged}: {outcomes:#?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|o| o.class == Some(genapi::FailureClass::CreditCap)),
        "{outcomes:#?}"
    );
    // Run again from the journal: nothing more passes the cap.
    let journal = genapi_batch::FileJournal::open(&journal_path).unwrap();
    let again = Batch::new(mock.client().unwrap(), journal, &dir.0).max_credits(1.0);
    run_batch(again, mixed_input_jobs(8, "mixed")).await;
    let charged = 100.0 - mock.credits().unwrap();
    assert!(charged <= 1.0, "after a rerun the service charged {charged}");
}

/// A first line of its kind that fails with no cost reported (a model that
/// reports cost only on the poll) holds what was left: counted, but never
/// waited for, so the batch ends rather than waits for ever. On the real
/// clock: a paused one jumps ahead whenever the runtime waits on the
/// loopback network, and could end the bound below before an answer under
/// load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_batch_ends_when_its_first_line_fails_without_a_cost() {
    let mock = mock(200).await;
    mock.set_credits(Some(100.0));
    let dir = Dir::new("credit-cap-failed-first");
    let jobs: Vec<Job> = (1..=3)
        .map(|n| {
            let prompt = if n == 1 {
                "[mock:error] first".to_string()
            } else {
                format!("line {n}")
            };
            Job::new(n, "/v1/gen-dev", json!({"prompt": prompt})).name(format!("dev-{n}"))
        })
        .collect();
    let batch = Batch::new(mock.client().unwrap(), MemoryJournal::default(), &dir.0).max_credits(5.0);
    let outcomes = tokio::time::timeout(Duration::from_secs(60), run_batch(batch, jobs))
        .await
        .expect("the batch waited for ever on a hold no answer would give back");
    assert_eq!(outcomes.len(), 3, "{outcomes:#?}");
    assert_eq!(outcomes[0].status, JobStatus::Failed, "{outcomes:#?}");
    let charged = 100.0 - mock.credits().unwrap();
    assert!(charged <= 5.0, "a cap of 5 credits, yet the service charged {charged}");
}

#[tokio::test(start_paused = true)]
async fn the_output_directory_is_made_before_anything_is_paid_for() {
    let mock = mock(100).await;
    let dir = Dir::new("made-out-dir");
    let out = dir.join("not/yet/there");
    let outcomes = run_batch(
        Batch::new(mock.client().unwrap(), MemoryJournal::default(), &out),
        jobs(2, "made"),
    )
    .await;
    assert!(
        outcomes.iter().all(|o| o.status == JobStatus::Succeeded),
        "{outcomes:#?}"
    );
    assert!(out.join("img-1.jpg").is_file() || out.join("img-1.png").is_file() || out.join("img-1.webp").is_file());
}

// ---------------------------------------------------------------------------
// The command.

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

use crate::common::write_jobs;

fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn journal_records(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

/// Runs the batch to its end; `None` when it was killed.
///
/// A kill comes once the journal holds `threshold` records (so it lands
/// inside the batch, not after it) plus `delay` (so it lands at any moment:
/// while submissions are in flight, answers are being recorded, results
/// saved, or nothing happens).
fn run_until(command: &mut Command, journal: &Path, kill: Option<(usize, Duration)>) -> Option<Output> {
    let Some((threshold, delay)) = kill else {
        return Some(command.output().unwrap());
    };
    // Nobody reads a run that is to be killed: its output goes nowhere.
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut fire_at = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the batch ended ({status}) before the kill point {threshold} + {delay:?}");
        }
        if fire_at.is_none() && journal_records(journal) >= threshold {
            fire_at = Some(Instant::now() + delay);
        }
        if fire_at.is_some_and(|at| Instant::now() >= at) {
            child.kill().unwrap(); // SIGKILL
            let _ = child.wait();
            return None;
        }
        assert!(Instant::now() < give_up, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_killed_with_sigkill_at_random_points_completes_without_a_lost_or_doubled_task() {
    const LINES: u64 = 200;
    let mock = mock(150).await;
    let dir = Dir::new("crash");
    write_jobs(&dir.join("jobs.jsonl"), LINES, "crash test line");
    let out = dir.join("out");
    let journal = out.join("journal.jsonl");
    // A journal holds about 3 records per line (intent, accepted, finished):
    // kill points spread over the whole batch, drawn from a fixed seed.
    let mut rng = fastrand::Rng::with_seed(13);
    let mut points: Vec<usize> = (0..5).map(|i| 10 + i * 110 + rng.usize(0..100)).collect();
    points.sort();
    let batch = |extra: &[String]| {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
            .args(extra);
        command
    };
    for point in &points {
        let delay = Duration::from_millis(rng.u64(0..40));
        assert!(run_until(&mut batch(&[]), &journal, Some((*point, delay))).is_none());
    }
    let last = run_until(&mut batch(&[]), &journal, None).unwrap();
    let stderr = text(&last.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A kill between sending a submission and recording its answer leaves a
    // line whose outcome is unknown: reported, never sent again on its own.
    let unknown: Vec<u64> = results(&out.join("results.jsonl"))
        .iter()
        .filter(|r| r["status"] == "unknown")
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    let prompt = |line: u64| format!("crash test line {line}");
    let before = posts_by_prompt(&mock);
    let sent = |posts: &HashMap<String, usize>, line: u64| posts.get(&prompt(line)).copied().unwrap_or(0);
    for line in 1..=LINES {
        // An unknown line was sent once (its answer was lost) or not at all
        // (the kill came between its record and its sending).
        let allowed = if unknown.contains(&line) { 0..=1 } else { 1..=1 };
        assert!(
            allowed.contains(&sent(&before, line)),
            "line {line}: {} submissions",
            sent(&before, line)
        );
    }

    // What a user does with them: look each up in the service's records;
    // adopt the tasks found, submit the rest again.
    let mut recover = Vec::new();
    if unknown.is_empty() {
        assert_eq!(last.status.code(), Some(0), "{stderr}");
    } else {
        assert_eq!(last.status.code(), Some(9), "{stderr}");
        assert!(
            stderr.contains("--adopt") && stderr.contains("--resubmit-unknown"),
            "{stderr}"
        );
        let created = mock.created_tasks();
        for line in &unknown {
            if let Some(task) = created.iter().find(|t| t.prompt == prompt(*line)) {
                recover.push(format!("--adopt={line}={}", task.id));
            }
        }
        recover.push("--resubmit-unknown".into());
        let again = run_until(&mut batch(&recover), &journal, None).unwrap();
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    }
    // Exactly one accepted submission per line, by the mock's own counters.
    let after = posts_by_prompt(&mock);
    for line in 1..=LINES {
        assert_eq!(sent(&after, line), 1, "line {line}");
    }
    assert_eq!(mock.stats().submissions.get("/v1/gen-2-pro"), Some(&LINES));
    eprintln!(
        "kills: {}; unknown lines: {unknown:?}; adopted: {}",
        points.len(),
        recover.len().saturating_sub(1)
    );
    let lines = results(&out.join("results.jsonl"));
    assert_eq!(lines.len(), LINES as usize);
    let client = mock.client().unwrap();
    let checks = lines.iter().map(|line| {
        let client = client.clone();
        let out = out.clone();
        async move {
            assert_eq!(line["status"], "succeeded", "{line}");
            let n = line["line"].as_u64().unwrap();
            let file = out.join(format!("img-{n}.jpg"));
            let saved = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            // The file is the task's own result: fetch it again from its task.
            let task = client.task(line["polling_url"].as_str().unwrap()).unwrap();
            let fetched = task.wait().await.unwrap().bytes().await.unwrap();
            assert_eq!(saved, fetched.to_vec(), "line {n}");
        }
    });
    futures::stream::iter(checks)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_over_the_same_output_directory_is_refused_while_the_first_runs() {
    let mock = mock(100).await;
    let dir = Dir::new("locked");
    write_jobs(&dir.join("jobs.jsonl"), 2, "locked");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    // Another run holds the journal (here: this process).
    let held = genapi_batch::FileJournal::open(dir.join("out").join("journal.jsonl")).unwrap();
    let second = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2), "{}", text(&second.stderr));
    assert!(
        text(&second.stderr).contains("in use by another run"),
        "{}",
        text(&second.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
    drop(held);
    let after = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(after.status.code(), Some(0), "{}", text(&after.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_many_invalid_lines_lists_the_first_and_counts_the_rest() {
    let mock = mock(100).await;
    let dir = Dir::new("cli-many-invalid");
    let kept = genapi_batch::INVALID_LINES_KEPT;
    std::fs::write(dir.join("jobs.jsonl"), "{\"model\":\"x\"}\n".repeat(kept + 2)).unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("2 more invalid lines (only the first {kept} are listed)")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{} of {} lines are invalid", kept + 2, kept + 2)),
        "{stderr}"
    );
    assert_eq!(stderr.matches("unknown model").count(), kept);

    // A missing file is not a file too large: no hint to split it.
    let run = genapi(&dir, &mock)
        .args(["batch", "absent.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("absent.jsonl") && !stderr.contains("split"), "{stderr}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
}

#[test]
fn a_journal_in_a_directory_that_does_not_exist_names_the_path() {
    let dir = Dir::new("journal-no-dir");
    let error = genapi_batch::FileJournal::open(dir.join("missing/journal.jsonl")).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    let said = error.to_string();
    assert!(
        said.contains("missing/journal.jsonl") && said.contains("its directory must exist"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_lines_are_all_reported_and_nothing_is_sent() {
    let mock = mock(100).await;
    let dir = Dir::new("invalid");
    let jobs = [
        json!({"model": "gen-2-pro", "prompt": "fine"}).to_string(),
        json!({"model": "gen-2-prp", "prompt": "typo"}).to_string(),
        "not json".to_string(),
        json!({"model": "gen-2-pro", "prompt": "small", "width": 3}).to_string(),
        json!({"model": "gen-2-pro", "name": "../up", "prompt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "promt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "input_image": "missing.png", "prompt": "x"}).to_string(),
    ];
    std::fs::write(dir.join("jobs.jsonl"), jobs.join("\n")).unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    for expected in [
        "line 2: unknown model",
        "did you mean gen-2-pro",
        "line 3: not a job line",
        "line 4: width",
        "line 5: name",
        "line 6: gen-2-pro has no field \"promt\"; did you mean prompt",
        "line 7: input_image: cannot read",
        "6 of 7 lines are invalid; nothing was submitted",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in\n{stderr}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);

    // --skip-invalid sends the valid line; every line is in results.jsonl.
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--skip-invalid", "--json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
    let printed: Vec<Value> = text(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(printed, results(&dir.join("out/results.jsonl")));
    assert_eq!(printed.len(), 7);
    let fine = printed.iter().find(|r| r["line"] == 1).unwrap();
    assert_eq!(fine["status"], "succeeded");
    assert!(dir.join("out/line-1.jpg").is_file());
    assert!(text(&run.stderr).contains("1 succeeded"), "{}", text(&run.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_reports_an_unknown_outcome_with_what_to_do_and_survives_closed_pipes() {
    let mock = mock(100).await;
    let dir = Dir::new("cli-unknown");
    write_jobs(&dir.join("jobs.jsonl"), 3, "cli unknown");
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--limit", "1"])
        .stdout(Stdio::from(writer))
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    // The results did not reach stdout: that decides the exit code, as for
    // `genapi submit`; the unknown line is reported all the same.
    assert_eq!(run.status.code(), Some(10), "{stderr}");
    assert!(stderr.contains("could not be written to stdout"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("line 1 was sent without an answer"), "{stderr}");
    assert!(stderr.contains("--resubmit-unknown"), "{stderr}");
    // The line's own report names the command's flags, not the library's calls.
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap();
    let unknown: Value = serde_json::from_str(results.lines().find(|l| l.contains("\"unknown\"")).unwrap()).unwrap();
    let error = unknown["error"].as_str().unwrap();
    assert!(
        error.ends_with("(genapi batch: --adopt 1=TASK_ID, or --resubmit-unknown)"),
        "{error}"
    );
    let again = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(9), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("2 succeeded (2 of them already done before this run or by another worker)"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        3,
        "the unknown line was not sent again"
    );

    // Its task, found in the service's records, is adopted and fetched.
    let bad = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("LINE=TASK"), "{}", text(&bad.stderr));
    let mistyped = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "1=no-such-task"])
        .output()
        .unwrap();
    assert_eq!(mistyped.status.code(), Some(2));
    assert!(
        text(&mistyped.stderr).contains("does not know task no-such-task"),
        "{}",
        text(&mistyped.stderr)
    );
    let lost = created_for(&mock, "cli unknown 1");
    let adopted = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt"])
        .arg(format!("1={}", lost.id))
        .output()
        .unwrap();
    assert_eq!(adopted.status.code(), Some(0), "{}", text(&adopted.stderr));
    assert!(
        text(&adopted.stdout).contains("3 succeeded"),
        "{}",
        text(&adopted.stdout)
    );
    assert!(dir.join("out").join("img-1.jpg").is_file());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "adopting sends nothing");
    assert_eq!(mock.stats().submissions.get("/v1/gen-2-pro"), Some(&3));
    // The same command again: nothing to do, nothing refused.
    let repeated = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt"])
        .arg(format!("1={}", lost.id))
        .output()
        .unwrap();
    assert_eq!(repeated.status.code(), Some(0), "{}", text(&repeated.stderr));
    let absent = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "7=abc"])
        .output()
        .unwrap();
    assert_eq!(absent.status.code(), Some(2));
    assert!(
        text(&absent.stderr).contains("has no valid line 7"),
        "{}",
        text(&absent.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3);
}

#[test]
fn the_job_line_schema_is_printed() {
    let run = Command::new(env!("CARGO_BIN_EXE_genapi"))
        .args(["batch", "--schema"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let schema: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(schema["required"], json!(["model"]));
    assert_eq!(schema["properties"]["name"]["pattern"], "^[A-Za-z0-9_-]{1,100}$");
    assert_eq!(schema["additionalProperties"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_created_no_task_is_kept_until_the_user_asks_to_retry_it() {
    let (mock, client, dir, journal) = setup(100, "refused").await;
    // 1 MP costs 1.5 illustrative credits: more than the balance.
    mock.set_credits(Some(1.0));
    let jobs = |_: u64, tag: &str| -> Vec<Job> {
        (1..=2)
            .map(|n| {
                Job::new(
                    n,
                    "/v1/gen-2-pro",
                    json!({"prompt": format!("{tag} {n}"), "width": 1024, "height": 1024}),
                )
            })
            .collect()
    };
    let batch = || Batch::new(client.clone(), journal.clone(), &dir.0);
    let first = run_batch(batch(), jobs(2, "refused")).await;
    assert!(first.iter().all(|o| o.status == JobStatus::Failed), "{first:#?}");
    assert_eq!(first[0].class, Some(genapi::FailureClass::Credits));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
    mock.set_credits(None);
    let second = run_batch(batch(), jobs(2, "refused")).await;
    assert!(second.iter().all(|o| o.status == JobStatus::Failed && o.from_journal));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "not sent again by itself");
    let third = run_batch(batch().retry_refused(true), jobs(2, "refused")).await;
    assert!(third.iter().all(|o| o.status == JobStatus::Succeeded), "{third:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4);
}

/// A standalone `genapi mock` process, killed when dropped.
struct StandaloneMock {
    child: std::process::Child,
    base_url: String,
    key: String,
    /// The origins it prints for `GENAPI_TRUSTED_ORIGINS` (its polling host).
    trusted: String,
}

impl StandaloneMock {
    fn start(duration_ms: u64) -> StandaloneMock {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_genapi"))
            .args(["mock", "--duration-ms", &duration_ms.to_string()])
            .env_remove("GENAPI_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut variables = HashMap::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if line.starts_with("# genapi mock ready") {
                break;
            }
            if let Some((name, value)) = line.split_once('=') {
                variables.insert(name.to_string(), value.to_string());
            }
        }
        StandaloneMock {
            child,
            base_url: variables["GENAPI_BASE_URL"].clone(),
            key: variables["GENAPI_API_KEY"].clone(),
            trusted: variables["GENAPI_TRUSTED_ORIGINS"].clone(),
        }
    }

    /// POSTs a control request over plain HTTP/1.1 (with the key, which
    /// control routes may require) and checks it succeeded.
    fn control(&self, path: &str, body: Value) {
        use std::io::{Read, Write};
        let address = self.base_url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let body = body.to_string();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nx-key: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.key,
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
    }

    fn command(&self, dir: &Dir) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_genapi"));
        for name in [
            "GENAPI_REGIONAL_BASE_URL",
            "GENAPI_TRUSTED_ORIGINS",
            "GENAPI_LOG",
            "GENAPI_DOCUMENT",
        ] {
            command.env_remove(name);
        }
        command
            .env("GENAPI_BASE_URL", &self.base_url)
            .env("GENAPI_API_KEY", &self.key)
            .env("GENAPI_TRUSTED_ORIGINS", &self.trusted)
            .env("XDG_CACHE_HOME", dir.0.join("cache"))
            .current_dir(&dir.0)
            .stdin(Stdio::null());
        command
    }
}

impl Drop for StandaloneMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_command_fetches_expired_results_again_from_the_same_tasks_on_a_standalone_mock() {
    let mock = StandaloneMock::start(100);
    let dir = Dir::new("standalone-expiry");
    write_jobs(&dir.join("jobs.jsonl"), 3, "standalone expiry");
    // Every download of the first run is refused: each result address, then
    // the fresh one a poll gives (two refusals per line, never retried).
    mock.control(
        "/mock/faults",
        json!({"path_prefix": "/mock/results/", "status": 403, "times": 6}),
    );
    let first = mock
        .command(&dir)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
        .output()
        .unwrap();
    assert_ne!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let pending: Vec<Value> = text(&first.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(pending.len(), 3);
    assert!(pending.iter().all(|r| r["status"] == "pending"), "{pending:#?}");
    assert!(!dir.join("out/results.jsonl").exists() || results(&dir.join("out/results.jsonl")).len() == 3);

    // Past the addresses' validity: the next run polls the same tasks for
    // fresh addresses and submits nothing.
    mock.control("/mock/clock/advance", json!({"seconds": 601}));
    let second = mock
        .command(&dir)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    let done = results(&dir.join("out/results.jsonl"));
    assert_eq!(done.len(), 3);
    let ids = |lines: &[Value]| -> HashMap<u64, String> {
        lines
            .iter()
            .map(|r| (r["line"].as_u64().unwrap(), r["task_id"].as_str().unwrap().to_string()))
            .collect()
    };
    assert_eq!(ids(&pending), ids(&done), "the same tasks: nothing submitted again");
    for line in &done {
        assert_eq!(line["status"], "succeeded");
        let file = dir.0.join(line["file"].as_str().unwrap());
        assert_eq!(genapi::dimensions(&std::fs::read(file).unwrap()), Some((64, 64)));
    }
    let journal = std::fs::read_to_string(dir.join("out/journal.jsonl")).unwrap();
    assert_eq!(journal.matches(r#""event":"intent""#).count(), 3, "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_with_130_and_the_same_command_finishes_the_batch() {
    let mock = mock(300).await;
    let dir = Dir::new("interrupt");
    write_jobs(&dir.join("jobs.jsonl"), 30, "interrupt");
    let journal = dir.join("out/journal.jsonl");
    let child = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    while journal_records(&journal) < 10 {
        assert!(Instant::now() < give_up, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: signals our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let stopped = child.wait_with_output().unwrap();
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("run the same command again to resume"), "{stderr}");
    assert!(
        !dir.join("out/results.jsonl").exists(),
        "no results from an unfinished run"
    );
    let finished = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(finished.status.code(), Some(0), "{}", text(&finished.stderr));
    assert_eq!(results(&dir.join("out/results.jsonl")).len(), 30);
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.len(), 30);
    assert!(posts.values().all(|n| *n == 1), "{posts:?}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_planted_where_the_command_writes_temporary_files_are_never_followed() {
    let mock = mock(50).await;
    let dir = Dir::new("planted-links");
    write_jobs(&dir.join("jobs.jsonl"), 2, "planted");
    let out = dir.join("out");
    let cache = dir.join("cache").join("genapi");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    // Where results.jsonl, an image and the learned durations are written
    // before they are renamed into place: links to files of someone else's,
    // and one to a file that does not exist yet.
    let victims: Vec<_> = ["results", "image", "durations"]
        .iter()
        .map(|name| dir.join(&format!("victim-{name}.txt")))
        .collect();
    for victim in &victims {
        std::fs::write(victim, b"not yours").unwrap();
    }
    let elsewhere = dir.join("created-elsewhere.txt");
    for (link, target) in [
        (out.join(".results.jsonl.partial"), &victims[0]),
        (out.join(".img-1.partial"), &victims[1]),
        (cache.join("learned.json.partial"), &victims[2]),
        (out.join(".img-2.partial"), &elsewhere),
    ] {
        std::os::unix::fs::symlink(target, link).unwrap();
    }
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    for victim in &victims {
        let kept = std::fs::read(victim).unwrap() == b"not yours";
        assert!(kept, "{} was written through a link", victim.display());
    }
    assert!(!elsewhere.exists(), "nothing is created through a link");
    for n in 1..=2 {
        let image = std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap();
        assert_eq!(genapi::dimensions(&image), Some((64, 64)));
    }
    assert_eq!(results(&out.join("results.jsonl")).len(), 2);
    let learned = std::fs::read_to_string(cache.join("learned.json")).unwrap();
    assert!(serde_json::from_str::<Value>(&learned).is_ok(), "{learned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_file_the_batch_did_not_write_is_left_as_it_was_and_refused() {
    let mock = mock(50).await;
    let dir = Dir::new("foreign-journal");
    write_jobs(&dir.join("jobs.jsonl"), 2, "foreign journal");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let journal = dir.join("out/journal.jsonl");
    // Someone's own file, its last line without a newline.
    let mine = "{\"note\":\"my own log\"}\n{\"note\":\"its last line\"}";
    std::fs::write(&journal, mine).unwrap();
    let batch = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let run = batch();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        for expected in [
            "is not a journal of a batch",
            "left as it is",
            "move it elsewhere",
            "nothing was sent",
        ] {
            assert!(stderr.contains(expected), "{expected:?} in {stderr}");
        }
        assert_eq!(
            std::fs::read_to_string(&journal).unwrap(),
            mine,
            "left exactly as it was"
        );
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
    // Moved away, it makes room for the batch's own, which the next run reads.
    std::fs::rename(&journal, dir.join("mine.jsonl")).unwrap();
    for _ in 0..2 {
        let run = batch();
        assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    }
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the second run found its tasks in the journal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_directory_whose_journal_lost_its_records_is_refused_not_paid_again() {
    let mock = mock(50).await;
    let dir = Dir::new("lost-journal");
    write_jobs(&dir.join("jobs.jsonl"), 2, "lost journal");
    let out = dir.join("out");
    let batch = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    let first = batch();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let images: Vec<Vec<u8>> = (1..=2)
        .map(|n| std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap())
        .collect();
    let unchanged = || {
        for (n, image) in (1..=2).zip(&images) {
            assert_eq!(&std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap(), image);
        }
    };
    // The journal is emptied: results.jsonl still names the tasks.
    std::fs::write(out.join("journal.jsonl"), "").unwrap();
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    for expected in [
        "results.jsonl lists tasks",
        "holds no record",
        "restore journal.jsonl",
        "nothing was sent",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
    unchanged();
    // Without results.jsonl, the saved images say so, line by line.
    std::fs::rename(out.join("results.jsonl"), dir.join("old-results.jsonl")).unwrap();
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("img-1.jpg is already in the output directory")
            && stderr.contains("journal holds no task of line 1")
            && stderr.contains("restore it"),
        "{stderr}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
    unchanged();
    // With the results moved away too, it starts over.
    for n in 1..=2 {
        std::fs::remove_file(out.join(format!("img-{n}.jpg"))).unwrap();
    }
    let fresh = batch();
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_counts_as_already_done_only_the_lines_that_succeeded() {
    let mock = mock(100).await;
    let dir = Dir::new("batch-already-done");
    let line = |name: &str, prompt: &str| {
        json!({"model": "gen-2-pro", "name": name, "prompt": prompt, "width": 64, "height": 64}).to_string()
    };
    std::fs::write(
        dir.join("jobs.jsonl"),
        format!(
            "{}\n{}\n",
            line("fine", "a calm sea"),
            line("broken", "a calm sea [mock:error]")
        ),
    )
    .unwrap();
    let run = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    assert_eq!(run().status.code(), Some(7));
    let again = run();
    let said = text(&again.stdout);
    assert!(
        said.contains("1 succeeded (1 of them already done before this run or by another worker), 1 failed"),
        "{said}"
    );
}
