//! A line whose answer was lost is given its task back (`adopt`): checked
//! at the service, refused when it is not the line's, and polled by the next
//! run instead of being paid for again.

use genapi_batch::{adopt, AdoptError, Adopted, Batch, Job, MemoryJournal, Standing};
use genapi_mock::{Fault, FaultKind};
use serde_json::json;

use crate::common::*;

#[tokio::test(start_paused = true)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_lost_answer_is_recovered_by_adopting_the_task_found_in_the_services_records() {
    let (mock, client, dir, journal) = setup(100, "adopt").await;
    // The service creates the first task; its answer is lost on the way.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = |journal: &MemoryJournal| Batch::new(client.clone(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let first = run_batch(batch(&journal), literal_jobs(3, "adopt")).await;
    assert_eq!(first[0].standing, Standing::Unanswered, "{first:#?}");
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
        refused(adopt(&client, &store(journal.clone()), &absent, &lost.id).await),
        AdoptError::NoSubmission { line: 9 }
    ));
    assert!(matches!(
        refused(adopt(&client, &store(journal.clone()), &job[1], &lost.id).await),
        AdoptError::NotUnknown { line: 2, .. }
    ));
    assert!(matches!(
        refused(adopt(&client, &store(journal.clone()), &job[0], &line_two.id).await),
        AdoptError::TaskTaken { other_line: 2, .. }
    ));
    let mistyped = refused(adopt(&client, &store(journal.clone()), &job[0], "no-such-task").await);
    assert!(matches!(mistyped, AdoptError::NoSuchTask { .. }), "{mistyped}");
    assert!(mistyped.to_string().contains("no-such-task"), "{mistyped}");
    for hostile in ["abc\u{1b}[31m", "", "http://127.0.0.1:9/v1/get_result"] {
        let refusal = refused(adopt(&client, &store(journal.clone()), &job[0], hostile).await);
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
    let mismatch = refused(adopt(&client, &store(journal.clone()), &job[0], &stranger_id).await);
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
        refused(adopt(&client, &store(journal.clone()), &changed, &lost.id).await),
        AdoptError::JobChanged { line: 1 }
    ));

    let adopted = adopt(&client, &store(journal.clone()), &job[0], &lost.id)
        .await
        .unwrap();
    assert_eq!(
        (adopted.task.id.as_str(), adopted.unchecked_prompt.as_deref()),
        (lost.id.as_str(), None)
    );
    // Adopting it again changes nothing (the same command can run again).
    let again = adopt(&client, &store(journal.clone()), &job[0], &lost.id)
        .await
        .unwrap();
    assert_eq!(again, adopted);
    assert_eq!(
        journal
            .events_so_far()
            .iter()
            .filter(|r| matches!(r, genapi_batch::Event::Accepted { line: 1, .. }))
            .count(),
        1
    );
    let second = run_batch(batch(&journal), literal_jobs(3, "adopt")).await;
    assert_eq!(second[0].standing, Standing::Saved, "{second:#?}");
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
    let records = journal.clone();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0);
    let job = literal_jobs(1, "adopt wrong");
    assert_eq!(run_batch(batch(), job.clone()).await[0].standing, Standing::Unanswered);
    // A task still running cannot say its prompt yet: it is taken on the
    // user's word, and checked when its result comes.
    let stranger = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "someone else [mock:duration_ms=1500]", "width": 64, "height": 64, "disable_pup": true}),
        )
        .await
        .unwrap();
    adopt(&client, &store(records.clone()), &job[0], stranger.id())
        .await
        .unwrap();
    let wrong = run_batch(batch(), job.clone()).await;
    // Nothing is recorded: the line stands with the adopted task until the
    // right one replaces it.
    assert_eq!(
        (wrong[0].standing, wrong[0].class),
        (Standing::Accepted, Some(genapi::FailureClass::Validation)),
        "{wrong:#?}"
    );
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
    adopt(&client, &store(records.clone()), &job[0], &lost.id)
        .await
        .unwrap();
    let right = run_batch(batch(), job).await;
    assert_eq!(right[0].standing, Standing::Saved, "{right:#?}");
    assert_eq!(right[0].task.as_ref().map(|t| t.id.as_str()), Some(lost.id.as_str()));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the line and the stranger, nothing more"
    );
}

#[tokio::test(start_paused = true)]
async fn where_prompts_may_be_rewritten_a_differing_prompt_is_shown_and_the_task_can_be_replaced_after_it_finished() {
    let (mock, client, dir, journal) = setup(100, "adopt-unchecked").await;
    let records = journal.clone();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0);
    // gen-2-pro rewrites prompts unless told not to: a differing prompt
    // proves nothing, so it is shown, not refused.
    let job = jobs(1, "adopt unchecked");
    assert_eq!(run_batch(batch(), job.clone()).await[0].standing, Standing::Unanswered);
    let stranger = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "someone else", "width": 64, "height": 64}),
        )
        .await
        .unwrap();
    let stranger_id = stranger.id().to_string();
    let stranger_bytes = stranger.wait().await.unwrap().bytes().await.unwrap();
    let wrong = adopt(&client, &store(records.clone()), &job[0], &stranger_id)
        .await
        .unwrap();
    assert_eq!(wrong.unchecked_prompt.as_deref(), Some("someone else"));
    let first = run_batch(batch(), job.clone()).await;
    assert_eq!(first[0].standing, Standing::Saved);
    let saved = first[0].file.clone().unwrap();
    assert_eq!(std::fs::read(&saved).unwrap(), stranger_bytes.to_vec());

    // The user sees it is the wrong one and adopts the right one: the line's
    // file becomes that task's result.
    let lost = created_for(&mock, "adopt unchecked 1");
    let right = adopt(&client, &store(records.clone()), &job[0], &lost.id)
        .await
        .unwrap();
    assert_eq!(right.unchecked_prompt, None);
    let second = run_batch(batch(), job).await;
    assert_eq!(second[0].standing, Standing::Saved, "{second:#?}");
    assert_eq!(second[0].task.as_ref().map(|t| t.id.as_str()), Some(lost.id.as_str()));
    let right_bytes = mock_result(&client, &lost.id).await;
    assert_eq!(std::fs::read(second[0].file.as_ref().unwrap()).unwrap(), right_bytes);
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the line and the stranger, nothing more"
    );
}

/// `genapi batch --adopt L=T --max-credits N` adopts into the store the run
/// then uses: the line whose submission went unanswered held the whole cap
/// (its cost was unknown); once its task is adopted, that hold is gone, and
/// the other lines are sent.
#[tokio::test(start_paused = true)]
async fn a_task_adopted_into_the_store_a_capped_run_uses_holds_no_credits_back() {
    let (mock, client, dir, journal) = setup(100, "adopt-capped").await;
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    // Large enough for the mock to charge a real price when they settle
    // (a cost of nothing is no settled cost: the cap would keep counting
    // the line at all it could have cost).
    let jobs = |count| -> Vec<_> {
        literal_jobs(count, "adopt capped")
            .into_iter()
            .map(|mut job| {
                job.body["width"] = json!(512);
                job.body["height"] = json!(512);
                job
            })
            .collect()
    };
    let first = run_batch(Batch::new(client.clone(), store(journal.clone()), &dir.0), jobs(1)).await;
    assert_eq!(first[0].standing, Standing::Unanswered, "{first:#?}");
    let lost = created_for(&mock, "adopt capped 1");
    let jobs = jobs(2);
    let run_store = store(journal.clone());
    adopt(&client, &run_store, &jobs[0], &lost.id).await.unwrap();
    let outcomes = run_batch(Batch::new(client, run_store, &dir.0).max_credits(1000.0), jobs).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    assert_eq!(outcomes[1].standing, Standing::Saved, "{outcomes:#?}");
}
