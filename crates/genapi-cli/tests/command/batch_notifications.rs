//! `genapi batch --webhook-url URL --webhook-listen ADDR`: the service's
//! notification of a task's end wakes its wait, which polls once and gives
//! the seat to the next line, however far off the next scheduled poll was;
//! a notification without the run's secret wakes nothing.

use std::time::Duration;

use serde_json::Value;

use crate::common::{free_ports, genapi, write_jobs, write_jobs_with_line_1_held, Dir};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A mock whose tasks take `duration_ms` and which delivers webhooks to
/// receivers on this machine, as `genapi mock` does.
async fn delivering_mock(duration_ms: u64) -> genapi_mock::MockService {
    let config = genapi_mock::MockConfig::default()
        .default_duration(Duration::from_millis(duration_ms))
        .max_active_tasks(1000)
        .webhooks_to_loopback(true);
    genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The receiver's flags, on a free loopback port.
fn receiver_flags() -> (u16, Vec<String>) {
    let port = free_ports(1);
    let flags = vec![
        "--webhook-url".into(),
        format!("http://127.0.0.1:{port}/hooks"),
        "--webhook-listen".into(),
        format!("127.0.0.1:{port}"),
    ];
    (port, flags)
}

/// Has the command learn `mock`'s gen-2-pro durations as a run does, then
/// makes them `seconds` long: the schedule's first poll of a wait woken by
/// notifications comes that long after its submission.
fn durations_learned_at(dir: &Dir, mock: &genapi_mock::MockService, seconds: f64) {
    let first = genapi(dir, mock)
        .args(["generate", "a first fox", "-o", "first.jpg"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let learned_file = dir.join("cache/genapi/learned.json");
    let mut learned: Value = serde_json::from_str(&std::fs::read_to_string(&learned_file).unwrap()).unwrap();
    for service in learned.as_object_mut().unwrap().values_mut() {
        service["learned"]["operations"]["gen_2_pro"] = serde_json::json!(vec![seconds; 8]);
    }
    std::fs::write(&learned_file, learned.to_string()).unwrap();
}

/// Tasks of 0.2 s, with durations learned at a minute: the schedule's
/// first poll would come 20 s after each submission (the longest it aims),
/// past the run's --timeout of 15 s. Each notification brings its poll
/// forward: one poll a task, and the batch ends within about a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_notification_brings_its_tasks_one_poll_forward() {
    let mock = delivering_mock(200).await;
    let dir = Dir::new("batch-notified");
    durations_learned_at(&dir, &mock, 60.0);
    let polls_before = mock.stats().polls;

    let jobs = dir.join("jobs.jsonl");
    write_jobs(&jobs, 6, "notified fox");
    let (_, flags) = receiver_flags();
    let run = genapi(&dir, &mock)
        .args(["--timeout", "15", "batch", "jobs.jsonl", "--out", "out", "--no-gallery"])
        .args(&flags)
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    for n in 1..=6 {
        assert!(dir.join(&format!("out/img-{n}.jpg")).exists(), "line {n}: {stderr}");
    }
    assert_eq!(
        mock.stats().polls - polls_before,
        6,
        "one poll a task, woken by its notification"
    );
    assert!(
        stderr.contains("note: 6 notifications came and woke their tasks' waits, 0 requests refused"),
        "{stderr}"
    );
    let batch_deliveries: Vec<_> = mock
        .deliveries()
        .into_iter()
        .filter(|delivery| delivery.url.ends_with("/hooks"))
        .collect();
    assert_eq!(batch_deliveries.len(), 6, "{batch_deliveries:?}");
    assert!(
        batch_deliveries
            .iter()
            .all(|d| d.delivered && d.last_status == Some(204)),
        "every notification verified: {batch_deliveries:?}"
    );
    // The batch's secret is kept, readable by the user alone, and a later
    // run over the folder takes it again.
    let kept_secret = || {
        let kept: Vec<_> = std::fs::read_dir(dir.join("cache/genapi/tasks"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("batch-notifications-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&kept[0].metadata().unwrap().permissions());
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        std::fs::read_to_string(kept[0].path()).unwrap()
    };
    let first_secret = kept_secret();
    assert!(first_secret.contains("webhook_secret"), "{first_secret}");
    let again = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--no-gallery"])
        .args(&flags)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(kept_secret(), first_secret);
    // The receiver's fields went with the requests only: the line's record
    // and results are the job file's own, and the batch's secret is nowhere.
    for kept in ["out/journal.jsonl", "out/results.jsonl"] {
        let kept_text = std::fs::read_to_string(dir.join(kept)).unwrap();
        assert!(!kept_text.contains("webhook"), "{kept}: {kept_text}");
    }
}

/// A notification that does not carry the run's secret is answered 401 and
/// wakes nothing: with durations learned at an hour, the held task is not
/// polled at all until its own notification comes, when the mock's clock
/// reaches its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_without_the_runs_secret_is_refused_and_wakes_nothing() {
    const HELD: Duration = Duration::from_secs(3600);
    let mock = delivering_mock(50).await;
    let dir = Dir::new("batch-forged-notification");
    durations_learned_at(&dir, &mock, HELD.as_secs_f64());
    let jobs = dir.join("jobs.jsonl");
    let held = write_jobs_with_line_1_held(&jobs, 2, "forged fox", HELD);
    let (port, flags) = receiver_flags();
    let child = genapi(&dir, &mock)
        .args(["--timeout", "60", "batch", "jobs.jsonl", "--out", "out", "--no-gallery"])
        .args(&flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the held task exists and line 2 is done (its own notification
    // woke its one poll): from then on nothing is polled unless woken.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    let task = loop {
        let held_task = mock.created_tasks().into_iter().find(|t| t.prompt == held);
        if let (Some(task), true) = (held_task, dir.join("out/img-2.jpg").exists()) {
            break task;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the held task or line 2 never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let http = crate::common::http();
    let forged = serde_json::json!({"task_id": task.id, "status": "SUCCESS", "id": task.id}).to_string();
    let polls_before = mock.stats().polls;
    for secret in [None, Some("not-the-runs-secret-at-all")] {
        let mut request = http
            .post(format!("http://127.0.0.1:{port}/hooks"))
            .header("content-type", "application/json")
            .body(forged.clone());
        if let Some(secret) = secret {
            request = request.header(genapi::webhook::SECRET_HEADER, secret);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 401, "{secret:?}");
    }
    // A woken poll would have been sent at once; give it the time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(mock.stats().polls, polls_before, "no poll for a refused notification");
    mock.advance(HELD + Duration::from_secs(1));
    let ended = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(ended.status.code(), Some(0), "{}", text(&ended.stderr));
    assert!(dir.join("out/img-1.jpg").exists() && dir.join("out/img-2.jpg").exists());
}

/// A --webhook-url that does not lead to --webhook-listen brings no
/// notification: the batch polls, finishes, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_leads_elsewhere_is_said_after_the_batch_polled_instead() {
    let mock = delivering_mock(50).await;
    let dir = Dir::new("batch-notified-elsewhere");
    write_jobs(&dir.join("jobs.jsonl"), 2, "unheard fox");
    let (listening, nowhere) = (free_ports(1), free_ports(1));
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--no-gallery"])
        .arg("--webhook-url")
        .arg(format!("http://127.0.0.1:{nowhere}/hooks"))
        .arg("--webhook-listen")
        .arg(format!("127.0.0.1:{listening}"))
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: --webhook-url names this machine on port {nowhere}, and the batch listens on port {listening}"
        )),
        "said at the start: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: no notification came to 127.0.0.1:{listening} for the 2 tasks sent (0 requests refused): \
             check that --webhook-url http://127.0.0.1:{nowhere}/hooks leads here; the batch polled instead"
        )),
        "{stderr}"
    );
}
