//! A line is paid for once: two lines writing one file, a line renamed onto
//! another's, a job moved to another line, a submission never answered, and
//! a folder that does not exist yet never cost a second submission.

use futures::StreamExt;
use genapi_batch::{Batch, Job, JobOutcome, MemoryJournal, Standing};
use genapi_mock::{Fault, FaultKind};
use serde_json::json;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn two_jobs_with_one_output_name_are_not_both_paid_for() {
    let mock = roomy_mock(100).await;
    let client = mock.client().unwrap();
    let dir = Dir::new("same-name");
    let mut same = jobs(3, "same name");
    same[1].name = Some("img-1".into());
    // Names are made safe before they are compared: "../img-1" is "img-1".
    same[2].name = Some("../img-1".into());
    let outcomes = run_batch(Batch::new(client, store(MemoryJournal::default()), &dir.0), same).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    for later in &outcomes[1..] {
        assert_eq!(later.standing, Standing::Unsent, "{later:#?}");
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
    let first = run_batch(
        Batch::new(client.clone(), store(journal.clone()), &dir.0),
        jobs(2, "renamed"),
    )
    .await;
    let accepted = first[1].task.clone().unwrap();
    let mut renamed = jobs(2, "renamed");
    renamed[1].name = Some("img-1".into());
    let again = run_batch(Batch::new(client, store(journal), &dir.0), renamed).await;
    assert_eq!(again[1].standing, Standing::Unsent, "{again:#?}");
    assert_eq!(again[1].task.as_ref(), Some(&accepted), "the paid task is named");
    assert!(again[1].error.as_deref().unwrap().contains(&accepted.id));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing sent again");
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
        Batch::new(client.clone(), store(journal.clone()), &dir.0),
        vec![job(1, "fox"), job(2, "owl")],
    )
    .await;
    assert!(first.iter().all(|o| o.standing == Standing::Saved));
    // A line inserted above: every job now sits one line lower.
    let second = run_batch(
        Batch::new(client.clone(), store(journal.clone()), &dir.0),
        vec![job(1, "cat"), job(2, "fox"), job(3, "owl")],
    )
    .await;
    for outcome in &second {
        // Nothing of these jobs was sent: each stands where the store
        // says its line does.
        assert_eq!(outcome.class, Some(genapi::FailureClass::Validation), "{outcome:#?}");
        assert!(outcome.file.is_none(), "no other job's file is reported");
    }
    assert!(
        second[2].error.as_deref().unwrap().contains("submitted as line 2"),
        "{second:#?}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
}

#[tokio::test(start_paused = true)]
async fn a_submission_without_an_answer_is_reported_and_never_resubmitted_silently() {
    let (mock, client, dir, journal) = setup(100, "unknown").await;
    // The first submission reaches the service and the connection breaks
    // before any answer (this fault creates no task, so the resubmission
    // asked for below pays once; the client cannot know that).
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection).method("POST"));
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let first = run_batch(batch(), jobs(3, "unknown")).await;
    assert_eq!(first[0].standing, Standing::Unanswered, "{first:#?}");
    let message = first[0].error.as_deref().unwrap();
    assert!(
        message.contains("may have accepted") && message.contains("allow sending it again"),
        "{message}"
    );
    assert!(first[1..].iter().all(|o| o.standing == Standing::Saved));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3);

    let second = run_batch(batch(), jobs(3, "unknown")).await;
    assert_eq!(second[0].standing, Standing::Unanswered);
    assert!(second[1..].iter().all(|o| o.from_journal));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        3,
        "not sent again without being asked"
    );

    let third = run_batch(batch().resubmit_unknown(true), jobs(3, "unknown")).await;
    assert_eq!(third[0].standing, Standing::Saved);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4, "sent again only when asked");
}

#[tokio::test(start_paused = true)]
async fn the_output_directory_is_made_before_anything_is_paid_for() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("made-out-dir");
    let out = dir.join("not/yet/there");
    let outcomes = run_batch(
        Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), &out),
        jobs(2, "made"),
    )
    .await;
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:#?}");
    assert!(out.join("img-1.jpg").is_file() || out.join("img-1.png").is_file() || out.join("img-1.webp").is_file());
}

/// A line number is a job's place in the store: a second job given the
/// same number is refused, never claimed as a new line and paid for again.
#[tokio::test(start_paused = true)]
async fn a_line_number_given_to_two_jobs_is_sent_once() {
    let (mock, client, dir, journal) = setup(100, "line-twice").await;
    let mut twice = jobs(1, "twice");
    twice.push(twice[0].clone().name("another-name"));
    let outcomes: Vec<JobOutcome> = Batch::new(client, store(journal), &dir.0)
        .run(twice)
        .unwrap()
        .collect()
        .await;
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "one line, one payment: {outcomes:#?}"
    );
    let refused: Vec<&JobOutcome> = outcomes.iter().filter(|o| o.standing == Standing::Unsent).collect();
    assert_eq!(refused.len(), 1, "{outcomes:#?}");
    assert!(
        refused[0]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("its own line number"),
        "{outcomes:#?}"
    );
}

/// A journal that refuses to write an intent (a full disk, a store that
/// fenced the worker out): that line is not sent, and the others are.
#[derive(Clone, Default)]
struct RefusesIntentsOfLine2(MemoryJournal);

impl genapi_batch::Journal for RefusesIntentsOfLine2 {
    fn events(&mut self) -> std::io::Result<Vec<genapi_batch::Event>> {
        self.0.events()
    }

    fn append(&mut self, event: &genapi_batch::Event) -> std::io::Result<()> {
        if let genapi_batch::Event::Intent { line: 2, .. } = event {
            return Err(std::io::Error::other("no space left on the device"));
        }
        self.0.append(event)
    }
}

/// The intent is written before the request leaves, or the request does
/// not leave: an intent the store refused sends nothing.
#[tokio::test(start_paused = true)]
async fn a_submission_whose_intent_cannot_be_written_is_not_sent() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("intent-refused");
    let journal = RefusesIntentsOfLine2::default();
    let outcomes = run_batch(
        Batch::new(mock.client().unwrap(), store(journal), &dir.0).jobs_at_once(1),
        jobs(3, "intent refused"),
    )
    .await;
    assert_eq!(outcomes[1].standing, Standing::Unsent, "{outcomes:#?}");
    let error = outcomes[1].error.as_deref().unwrap_or_default();
    assert!(error.contains("nothing was sent"), "{error}");
    let posts = crate::common::posts_by_prompt(&mock);
    assert_eq!(posts.get("intent refused 2"), None, "{posts:?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "the other two lines");
}
