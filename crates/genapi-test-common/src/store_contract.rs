//! What every batch store must answer, whatever keeps its lines: one suite,
//! generic over the store, run against the file journal and the memory
//! journal (genapi-batch's tests) and the PostgreSQL ledger (genapi-ledger's
//! tests, on a real server).
//!
//! Each store is reached through an [`Opener`]: it opens the same batch as
//! many times as asked, as runs of one batch do.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use genapi_batch::{Claim, CreditHolds, Event, Hold, ReadStore, SettledCost, Standing, Store, WriteStore};

/// Opens stores of one batch, as its runs open them.
pub trait Opener: Sync {
    /// The store.
    type Store: Store + 'static;

    /// The batch's store, as one run opens it; `Err` when the store refuses
    /// the run (another run holds it).
    fn open(&self) -> BoxFuture<'_, Result<Self::Store, String>>;
}

/// Runs every clause of the contract against stores `opener` opens; each
/// clause on a batch of its own, made by `fresh` (a new opener per clause).
pub async fn holds<O: Opener>(fresh: impl Fn(&str) -> O) {
    a_new_batch_has_no_lines(&fresh("empty")).await;
    what_is_written_stands_as_it_was_written(&fresh("written")).await;
    what_one_run_wrote_the_next_reads(&fresh("reopened")).await;
    credits_held_never_pass_the_cap(&fresh("credits")).await;
    an_end_at_no_price_leaves_its_hold_counted(&fresh("no-price")).await;
    an_acceptance_reporting_more_than_the_hold_raises_it(&fresh("reported")).await;
    two_runs_at_once_never_both_hold_a_line(&fresh("two-runs")).await;
    a_line_a_live_run_holds_is_not_taken(&fresh("held")).await;
    an_intent_is_written_only_for_a_line_the_run_holds(&fresh("unheld")).await;
}

/// The request leaves after its intent, and the intent is written only for
/// a line the run holds: never for one it did not claim, nor for one it
/// gave back. A refused intent leaves nothing behind.
pub async fn an_intent_is_written_only_for_a_line_the_run_holds<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("the batch opens");
    assert!(
        store.write(intent(1)).await.is_err(),
        "an intent for a line never claimed"
    );
    assert!(matches!(store.claim(2).await.expect("claim"), Claim::Mine(_)));
    store.release(2).await.expect("release");
    assert!(store.write(intent(2)).await.is_err(), "an intent for a line given back");
    assert!(store.lines().await.expect("lines").is_empty(), "nothing was recorded");
    assert!(matches!(store.claim(3).await.expect("claim"), Claim::Mine(_)));
    store.write(intent(3)).await.expect("an intent for a line held");
}

/// A line one run holds (its lease live) is not the other's, claimed alone
/// or among others, until the first gives it back.
pub async fn a_line_a_live_run_holds_is_not_taken<O: Opener>(opener: &O) {
    let first = opener.open().await.expect("the first run opens");
    assert!(matches!(first.claim(1).await.expect("claim"), Claim::Mine(_)));
    assert!(matches!(first.claim(2).await.expect("claim"), Claim::Mine(_)));
    let Ok(second) = opener.open().await else {
        // Refused at open: the first run holds the whole batch.
        return;
    };
    let alone = second.claim(1).await.expect("claim");
    assert!(matches!(alone, Claim::Held), "line 1 taken from a live run: {alone:?}");
    let among = second.claim_many(&[2, 3]).await;
    assert!(
        matches!(among[0], Ok(Claim::Held)),
        "line 2 taken from a live run: {:?}",
        among[0]
    );
    assert!(matches!(among[1], Ok(Claim::Mine(_))), "line 3 is free: {:?}", among[1]);
}

/// Nothing is known of a batch no run has written to.
pub async fn a_new_batch_has_no_lines<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("a new batch opens");
    assert!(store.lines().await.expect("lines").is_empty());
    assert!(store.status(&[1, 2]).await.expect("status").lines.is_empty());
}

/// The events of a line stand as the one fold of events says: saved,
/// unanswered, refused (sent again), accepted.
pub async fn what_is_written_stands_as_it_was_written<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("the batch opens");
    write_four_lines(&store).await;
    assert_eq!(standings(&store).await, expected_four_lines());
}

/// What one run wrote is what the next run reads and claims, after the
/// first let go of the store.
pub async fn what_one_run_wrote_the_next_reads<O: Opener>(opener: &O) {
    {
        let first = opener.open().await.expect("the first run opens");
        write_four_lines(&first).await;
        for line in 1..=4 {
            first.release(line).await.expect("release");
        }
    }
    let next = opener.open().await.expect("the next run opens once the first let go");
    assert_eq!(standings(&next).await, expected_four_lines());
    let claimed = next.claim(4).await.expect("claim");
    let Claim::Mine(line) = claimed else {
        panic!("an accepted line of a run that ended is the next run's: {claimed:?}")
    };
    assert_eq!(line.task().map(|task| task.id.as_str()), Some("task-4"));
}

/// A first line of an unpriced kind holds what is left of the cap; no
/// other line may hold anything while its cost is unknown; a hold given
/// back frees the cap again; a settled cost prices the kind at once.
pub async fn credits_held_never_pass_the_cap<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("the batch opens");
    for line in [1, 2] {
        assert!(matches!(store.claim(line).await.expect("claim"), Claim::Mine(_)));
    }
    let first = store.hold_credits(1, "kind", 2.0, None).await.expect("hold");
    let Hold::Held(amount) = first else {
        panic!("the first line of a kind goes alone: {first:?}")
    };
    assert!(amount > 0.0 && amount <= 2.0, "held {amount} under a cap of 2");
    let second = store.hold_credits(2, "kind", 2.0, None).await.expect("hold");
    assert!(
        !matches!(second, Hold::Held(_)),
        "nothing more may be held while the first's cost is unknown: {second:?}"
    );
    store.drop_hold(1).await.expect("drop");
    let again = store.hold_credits(2, "kind", 2.0, None).await.expect("hold");
    assert!(matches!(again, Hold::Held(held) if held <= 2.0), "{again:?}");
    // A cost settled counts at once, before the line's end is written: the
    // kind is priced, and what is left of the cap is too little for one more.
    let cost = SettledCost::of(1.5).expect("1.5 is a price");
    store.settle(2, cost).await.expect("settle");
    assert!(matches!(store.claim(3).await.expect("claim"), Claim::Mine(_)));
    let after = store.hold_credits(3, "kind", 2.0, None).await.expect("hold");
    assert_eq!(after, Hold::CapReached, "1.5 charged, a second at 1.5 would pass 2");
}

/// A line that ended with a figure that is no price (0, a forged 1e-9: a
/// hostile answer) is counted at what it held, in every store alike: the
/// cap it filled stays filled.
pub async fn an_end_at_no_price_leaves_its_hold_counted<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("the batch opens");
    for line in [1, 2] {
        assert!(matches!(store.claim(line).await.expect("claim"), Claim::Mine(_)));
    }
    let held = store.hold_credits(1, "kind", 2.0, None).await.expect("hold");
    assert_eq!(held, Hold::Held(2.0), "the first line of a kind holds what is left");
    store.write(intent(1)).await.expect("intent");
    store.write(accepted(1)).await.expect("accepted");
    for cost in [0.0, 1e-9] {
        let Event::Finished { line, status, file, .. } = saved(1) else {
            unreachable!("saved makes an end")
        };
        let ended = Event::Finished {
            line,
            status,
            file,
            seed: None,
            cost: Some(cost),
            duration: None,
            error: None,
            class: None,
        };
        store.write(ended).await.expect("finished");
        let next = store.hold_credits(2, "kind", 2.0, None).await.expect("hold");
        assert!(
            !matches!(next, Hold::Held(_)),
            "line 1 ended at {cost}, no price: its 2 credits stay counted, so nothing more fits: {next:?}"
        );
    }
}

/// An acceptance reporting a cost above what its line holds (the service
/// says the task costs more than its kind was priced at) raises what is
/// held to the report, in every store alike: the cap counts it at once,
/// before the task settles.
pub async fn an_acceptance_reporting_more_than_the_hold_raises_it<O: Opener>(opener: &O) {
    let store = opener.open().await.expect("the batch opens");
    for line in [1, 2, 3] {
        assert!(matches!(store.claim(line).await.expect("claim"), Claim::Mine(_)));
    }
    // The kind priced at 2: line 1 settled at it.
    let first = store.hold_credits(1, "kind", 10.0, None).await.expect("hold");
    assert_eq!(first, Hold::Held(10.0), "the first line of a kind holds what is left");
    store
        .settle(1, SettledCost::of(2.0).expect("2 is a price"))
        .await
        .expect("settle");
    let second = store.hold_credits(2, "kind", 10.0, None).await.expect("hold");
    assert_eq!(second, Hold::Held(2.0), "the kind's price");
    store.write(intent(2)).await.expect("intent");
    let Event::Accepted {
        line, id, polling_url, ..
    } = accepted(2)
    else {
        unreachable!("accepted makes an acceptance")
    };
    let reported = Event::Accepted {
        line,
        id,
        polling_url,
        cost: Some(7.0),
        adopted: false,
    };
    store.write(reported).await.expect("accepted");
    // 2 charged and 7 held leave 1 of 10: too little for one more at 2.
    let third = store.hold_credits(3, "kind", 10.0, None).await.expect("hold");
    assert!(
        !matches!(third, Hold::Held(_)),
        "line 2 reported 7 at its acceptance, held 2: 2 + 7 + 2 would pass 10, yet {third:?}"
    );
}

/// Of two runs of one batch at once, at most one holds a line: the second
/// is refused when it opens the store (a journal), or finds each line held
/// (the ledger).
pub async fn two_runs_at_once_never_both_hold_a_line<O: Opener>(opener: &O) {
    let first = opener.open().await.expect("the first run opens");
    let Ok(second) = opener.open().await else {
        // Refused at open: the first run holds the whole batch.
        assert!(matches!(first.claim(1).await.expect("claim"), Claim::Mine(_)));
        return;
    };
    let (a, b) = futures::join!(first.claim_many(&[1, 2, 3]), second.claim_many(&[1, 2, 3]));
    for (line, (a, b)) in (1..=3).zip(a.into_iter().zip(b)) {
        let mine = |claim: &Result<Claim, genapi_batch::StoreError>| matches!(claim, Ok(Claim::Mine(_)));
        assert!(!(mine(&a) && mine(&b)), "line {line} held by two runs at once");
        assert!(mine(&a) || mine(&b), "line {line} held by neither run");
    }
}

/// Lines 1 to 4: saved; unanswered; refused (may be sent again); accepted.
async fn write_four_lines<S: Store>(store: &S) {
    for line in 1..=4 {
        assert!(matches!(store.claim(line).await.expect("claim"), Claim::Mine(_)));
        store.write(intent(line)).await.expect("intent");
    }
    store.write(accepted(1)).await.expect("accepted");
    store.write(saved(1)).await.expect("finished");
    store
        .write(Event::Refused {
            line: 3,
            error: "429".into(),
        })
        .await
        .expect("refused");
    store.write(accepted(4)).await.expect("accepted");
}

fn expected_four_lines() -> BTreeMap<u64, Standing> {
    [
        (1, Standing::Saved),
        (2, Standing::Unanswered),
        (3, Standing::Unsent),
        (4, Standing::Accepted),
    ]
    .into_iter()
    .collect()
}

async fn standings<S: ReadStore + ?Sized>(store: &S) -> BTreeMap<u64, Standing> {
    let read: BTreeMap<u64, Standing> = store
        .lines()
        .await
        .expect("lines")
        .iter()
        .map(|(number, line)| (*number, line.standing()))
        .collect();
    let status = store.status(&[1, 2, 3, 4]).await.expect("status").lines;
    assert_eq!(read, status, "lines and status agree");
    read
}

fn intent(line: u64) -> Event {
    Event::Intent {
        line,
        name: format!("line-{line}"),
        digest: format!("digest-{line}"),
        sent_at: Some(1_764_000_000),
        ephemeral: false,
    }
}

fn accepted(line: u64) -> Event {
    Event::Accepted {
        line,
        id: format!("task-{line}"),
        polling_url: format!("https://api.example.com/v1/get_result?id=task-{line}"),
        cost: None,
        adopted: false,
    }
}

fn saved(line: u64) -> Event {
    Event::Finished {
        line,
        status: "Ready".into(),
        file: Some(format!("line-{line}.jpg")),
        seed: None,
        cost: Some(1.0),
        duration: None,
        error: None,
        class: None,
    }
}
