//! A stopped batch sends nothing new: not the submission whose intent is
//! being written, not those waiting for room.

use std::time::Duration;

use genapi_batch::{Batch, MemoryJournal, Standing};
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
