//! A stopped batch sends nothing new: not the submission whose intent is
//! being written, not those waiting for room, not another attempt of one
//! the service refused with 429; and a line whose every answer was a 429
//! stands unsent after a stop, even one cut short (the second Ctrl-C).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, MemoryJournal, ReadStore, Standing, Stopper};
use genapi_mock::{Fault, FaultKind, MockService};
use tokio::time::Instant;

use crate::common::*;

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
        fn events(&mut self) -> std::io::Result<Vec<genapi_batch::Event>> {
            self.records.events()
        }
        fn append(&mut self, record: &genapi_batch::Event) -> std::io::Result<()> {
            if std::mem::take(&mut self.first) {
                self.entered.send(()).unwrap();
                self.release.recv().unwrap();
            }
            self.records.append(record)
        }
    }
    let mock = roomy_mock(50).await;
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
    let batch = Batch::new(mock.client().unwrap(), store(journal), &dir.0);
    let stopper = batch.stopper();
    let outcomes = tokio::spawn(run_batch(batch, jobs(1, "stop intent")));
    tokio::task::spawn_blocking(move || inside.recv().unwrap())
        .await
        .unwrap();
    stopper.stop();
    release.send(()).unwrap();
    let outcomes = outcomes.await.unwrap();
    assert_eq!(outcomes[0].standing, Standing::Unsent, "{outcomes:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing sent after the stop");
    let kept = records.events_so_far();
    assert!(
        matches!(kept.last(), Some(genapi_batch::Event::Refused { .. })),
        "the journal says it was not sent: {kept:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_keeps_submissions_still_waiting_for_room_from_being_sent() {
    let mock = roomy_mock(60_000).await;
    // The client allows one active task; the batch would run three.
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let dir = Dir::new("stop-waiting");
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).jobs_at_once(3);
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
    let statuses: Vec<Standing> = outcomes.iter().map(|o| o.standing).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == Standing::Unsent).count(),
        2,
        "{outcomes:#?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == Standing::Accepted).count(), 1);
}

/// Stops a batch the moment its client reads a 429 (the mock's carry a
/// `Retry-After`, its other answers none): a stop while a submission is
/// being answered, as a Ctrl-C among a busy service's refusals is.
#[derive(Clone, Default)]
struct StopAt429 {
    stopper: Arc<OnceLock<Stopper>>,
    /// The submissions the mock had seen when the stop came.
    posts_at_stop: Arc<OnceLock<usize>>,
}

impl StopAt429 {
    /// A client of `mock` that stops the batch given to [`StopAt429::arm`]
    /// at its first 429.
    fn client(&self, mock: &Arc<MockService>) -> genapi::Client {
        let (stop, mock) = (self.clone(), mock.clone());
        mock.client_builder()
            .observe_headers(move |headers| {
                if let (true, Some(stopper)) = (headers.contains_key("retry-after"), stop.stopper.get()) {
                    stop.posts_at_stop.get_or_init(|| mock.count("POST", "/v1/gen-2-pro"));
                    stopper.stop();
                }
            })
            .build()
            .unwrap()
    }

    fn arm(&self, batch: &Batch) {
        let _ = self.stopper.set(batch.stopper());
    }

    fn posts_at_stop(&self) -> usize {
        *self.posts_at_stop.get().expect("the stop came at a 429")
    }
}

/// A mock that answers its first `refusals` submissions 429 (`Retry-After:
/// 1`), as a service at its active-task limit does, creating nothing, and
/// holds any later one unanswered (an hour on its clock): an attempt that
/// left after the stop is seen there, still on the wire.
async fn refusing_mock(refusals: usize) -> Arc<MockService> {
    let mock = roomy_mock(50).await;
    let refused = FaultKind::Status {
        status: 429,
        retry_after: Some("1".into()),
        body: r#"{"detail":"Too many active tasks"}"#.into(),
    };
    mock.inject(Fault::on("/v1/gen-2-pro", refused).method("POST").times(refusals));
    let held = FaultKind::Delay(Duration::from_secs(3600));
    mock.inject(Fault::on("/v1/gen-2-pro", held).method("POST").times(1000));
    Arc::new(mock)
}

#[tokio::test(start_paused = true)]
async fn a_stop_while_a_submission_is_answered_429_sends_no_further_attempt() {
    let mock = refusing_mock(1000).await;
    let stop = StopAt429::default();
    let dir = Dir::new("stop-429");
    let records = MemoryJournal::default();
    let batch = Batch::new(stop.client(&mock), store(records.clone()), &dir.0);
    stop.arm(&batch);
    let outcomes = run_batch(batch, jobs(1, "stop 429")).await;
    assert_eq!(stop.posts_at_stop(), 1, "the stop came at the first answer");
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        stop.posts_at_stop(),
        "no attempt left after the stop"
    );
    assert_eq!(outcomes[0].standing, Standing::Unsent, "{outcomes:#?}");
    let status = store(records).status(&[]).await.unwrap();
    assert_eq!(status.lines[&1], Standing::Unsent, "the next run sends it");
}

#[tokio::test(start_paused = true)]
async fn a_second_stop_leaves_lines_answered_only_429_unsent_not_unanswered() {
    const LINES: u64 = 3;
    // Each line's first submission (if it leaves before the stop) is
    // refused; no later one is answered.
    let mock = refusing_mock(LINES as usize).await;
    let stop = StopAt429::default();
    let dir = Dir::new("quit-429");
    let records = MemoryJournal::default();
    let batch = Batch::new(stop.client(&mock), store(records.clone()), &dir.0);
    stop.arm(&batch);
    let mut outcomes = batch.run(jobs(LINES, "quit 429")).unwrap();
    // The first stop comes at the first 429. The second (the command's
    // second Ctrl-C drops the stream, whatever is under way) comes once an
    // attempt is held at the mock, which only an attempt sent after the
    // first stop can be; or not at all, when every line ends first.
    let attempt_after_the_stop = async {
        while mock.count("POST", "/v1/gen-2-pro") <= LINES as usize {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::pin!(attempt_after_the_stop);
    loop {
        tokio::select! {
            next = outcomes.next() => if next.is_none() { break },
            () = &mut attempt_after_the_stop => break,
        }
    }
    drop(outcomes);
    assert!(mock.created_tasks().is_empty(), "the service created nothing");
    let status = store(records).status(&[]).await.unwrap();
    assert_eq!(status.lines.get(&1), Some(&Standing::Unsent), "{status:?}");
    assert!(
        status.lines.values().all(|standing| *standing == Standing::Unsent),
        "every line that met only 429s is sent by the next run, none is left unanswered: {status:?}"
    );
}
