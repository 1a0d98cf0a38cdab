//! The batch driver: jobs in, outcomes out, the journal kept in between.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use futures::{Stream, StreamExt};

use super::answer::{answer_to_a_submission, Answer};
use super::cap::{Hold, SettledCost};
use super::decide::{decide, refused_for_the_edit, Action, Asked, Seen};
use super::identity::{Claims, JobAt};
use super::job::Job;
use super::journal::Event;
use super::line::{AcceptedTask, Ending, FailedStatus, Line, Standing};
use super::notify::NotifyAt;
use super::outcome::{JobOutcome, Requested};
use super::prices::{PriceBook, Prices};
use super::store::{Claim, Store, StoreError};
use genapi::Error;
use genapi::FailureClass;
use genapi::Unsent;
use genapi::{Client, OperationSpec, Output, Task, WaitOptions};

/// Submissions refused with "surely not accepted" (429, connection never
/// opened) are tried this many times in one run before the job is reported
/// as not submitted. Each is one request under its own intent (the client
/// sends a recorded submission once), so a refusal is recorded as soon as it
/// comes and a stop keeps every later attempt from leaving: at a service's
/// usual `Retry-After: 1`, some twenty seconds of 429s.
const SUBMIT_ATTEMPTS: u32 = 24;
/// The longest pause between attempts the service gave no `Retry-After` for
/// (it grows by a second per attempt up to this).
const LONGEST_UNHINTED_PAUSE: Duration = Duration::from_secs(2);
/// Extensions an output may have been saved with.
const EXTENSIONS: [&str; 6] = ["jpg", "png", "webp", "gif", "mp4", "bin"];
/// Attempts to event a paid task before the run reports it could not.
const PAID_RECORD_ATTEMPTS: u32 = 4;
/// How often lines held by other workers are tried again: often enough
/// that the last worker to finish is not kept waiting for the round that
/// sees the others' lines done (a round takes one step per block).
const HELD_RECHECK: Duration = Duration::from_millis(250);
/// Lines held by other workers are tried again this many at a time.
const RECHECK_BLOCK: usize = 256;
/// How often a submission waiting for held credits to come back asks again.
const CREDITS_RECHECK: Duration = Duration::from_millis(100);

/// Batch generation that never loses or doubles a paid task.
///
/// Jobs are taken from an iterator as room frees up: tasks are active
/// (submitted or being polled) within the client's active-task limit
/// ([`genapi::ClientBuilder::max_active_tasks`], the one limit: a batch adds
/// none of its own), each is waited for with the client's adaptive schedule, and its result is saved
/// in the output directory as soon as it is `Ready`. The [`Store`] keeps
/// each submission before it is sent and the task as soon as it is accepted,
/// so running the same batch again after any interruption:
///
/// - polls the tasks already accepted instead of submitting them again;
/// - does not download files already saved (a result whose address expired
///   is fetched again through a fresh poll);
/// - submits again only jobs the service surely did not accept, and never
///   one whose result file is in the output directory while the journal
///   holds no task of it (the journal lost its events, or the file is
///   someone else's): it would be paid for again and overwritten;
/// - reports, and does not send, a job whose submission was sent but never
///   answered ([`Standing::Unanswered`]), unless [`Batch::resubmit_unknown`].
///
/// Jobs are made from the typed builders [`genapi::Client::submit`] takes
/// ([`Job::from_request`]); `examples/batch.rs` is a whole program.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use futures::StreamExt; // the `futures` crate, for the stream of outcomes
/// use genapi::api::types::Gen2ProRequest;
/// use genapi_batch::{Batch, FileJournal, Job, JournalStore};
///
/// let client = genapi::Client::from_env()?;
/// std::fs::create_dir_all("out")?;
/// let store = JournalStore::open(FileJournal::open("out/journal.jsonl")?)?;
/// let mut jobs = Vec::new();
/// for (line, prompt) in (1..).zip(["a red fox", "a blue whale"]) {
///     jobs.push(Job::from_request(line, Gen2ProRequest::builder().prompt(prompt))?);
/// }
/// let mut outcomes = Batch::new(client, store, "out").run(jobs)?;
/// while let Some(outcome) = outcomes.next().await {
///     println!("line {}: {:?} {:?}", outcome.line, outcome.standing, outcome.file);
/// }
/// # Ok(()) }
/// ```
pub struct Batch {
    client: Client,
    store: Arc<dyn Store>,
    out_dir: PathBuf,
    jobs_at_once: Option<usize>,
    resubmit_unknown: bool,
    retry_refused: bool,
    wait: Option<WaitOptions>,
    notify: Option<NotifyAt>,
    counters: Counters,
    /// Prices known before the run and charges seen in it.
    prices: PriceBook,
    stop: Stopper,
    max_credits: Option<f64>,
    /// The service ends with this run.
    ephemeral: bool,
}

/// Stops a running batch gently ([`Batch::stopper`]): no new job is
/// started, no new submission is sent, nor another attempt of one the
/// service refused with 429 (its line is left [`Standing::Unsent`], for the
/// next run to send), submissions already sent get their answer written,
/// and waits end at once (their tasks go on at the service and the next run
/// polls them). The stream then ends; dropping it before then quits at once,
/// leaving [`Standing::Unanswered`] only the submissions still on the wire.
/// Clones stop the same batch.
///
/// ```
/// # fn demo(batch: &genapi_batch::Batch) {
/// let stopper = batch.stopper();
/// // on Ctrl-C:
/// stopper.stop();
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Stopper {
    sender: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Stopper {
    fn default() -> Self {
        Stopper {
            sender: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }
}

impl Stopper {
    /// Asks the batch to stop.
    pub fn stop(&self) {
        self.sender.send_replace(true);
    }

    /// Whether a stop was asked.
    pub fn is_stopped(&self) -> bool {
        *self.sender.borrow()
    }

    /// Resolves once a stop is asked.
    async fn stopped(&self) {
        let mut receiver = self.sender.subscribe();
        let _ = receiver.wait_for(|stopped| *stopped).await;
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("out_dir", &self.out_dir)
            .field("jobs_at_once", &self.jobs_at_once)
            .field("resubmit_unknown", &self.resubmit_unknown)
            .field("retry_refused", &self.retry_refused)
            .finish_non_exhaustive()
    }
}

/// Live counts of a running batch, for progress displays. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    inner: Arc<CounterValues>,
}

#[derive(Debug, Default)]
struct CounterValues {
    in_flight: AtomicUsize,
    /// Of those in flight, lines waiting for credits under the cap.
    at_the_cap: AtomicUsize,
    /// Of those in flight, lines waiting out a refusal that asked them to
    /// come back (a 429: the account's active tasks are all taken).
    resting: AtomicUsize,
    submitted: AtomicUsize,
    resumed: AtomicUsize,
    /// Lines another worker holds now, by line.
    held: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// Lines whose records show a submission that left in an earlier run
    /// (or from another worker), not taken up by this run yet.
    earlier: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// The batch's client, which knows how many of its calls wait for room.
    client: Option<Client>,
    /// What the acceptances of tasks reported they cost, by line, until
    /// the line's outcome comes out of the run's stream: kept apart rather
    /// than summed, so an absurd price reported for one task leaves the
    /// others' sum exact when it goes.
    charged: std::sync::Mutex<BTreeMap<u64, f64>>,
}

impl Counters {
    /// Jobs whose task is being submitted or waited for now, not counting
    /// those waiting for room under the active-task limit
    /// ([`Counters::waiting_for_room`]); with those, at most
    /// [`Batch::jobs_at_once`].
    pub fn in_flight(&self) -> usize {
        self.placed()
            .saturating_sub(self.waiting_for_room())
            .saturating_sub(self.waiting_at_the_cap())
    }
    /// Jobs waiting for credits under the batch's cap
    /// ([`Batch::max_credits`]): the holds of submissions whose cost is
    /// not known yet fill it, and the line waits for one of them to settle.
    /// Nothing of theirs is sent yet.
    pub fn waiting_at_the_cap(&self) -> usize {
        self.inner.at_the_cap.load(Ordering::Relaxed).min(self.placed())
    }
    /// Jobs waiting for room under the active-task limit (a seat), a
    /// resumed task among them, or waiting out the service's 429 before
    /// they are sent again: nothing of theirs is at the service now.
    pub fn waiting_for_room(&self) -> usize {
        let waiting = self.inner.client.as_ref().map_or(0, Client::waiting_for_room);
        (waiting + self.inner.resting.load(Ordering::Relaxed)).min(self.placed())
    }
    fn placed(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }
    fn of(client: &Client) -> Counters {
        Counters {
            inner: Arc::new(CounterValues {
                client: Some(client.clone()),
                ..CounterValues::default()
            }),
        }
    }
    /// Submissions the service accepted in this run.
    pub fn submitted(&self) -> usize {
        self.inner.submitted.load(Ordering::Relaxed)
    }
    /// Tasks accepted in an earlier run and polled in this one.
    pub fn resumed(&self) -> usize {
        self.inner.resumed.load(Ordering::Relaxed)
    }
    /// Lines another worker of a shared batch holds ([`Claim::Held`] from
    /// its [`Store`]): this run looks at them again until they are done
    /// there, or the other worker's lease lapses and this one takes them.
    pub fn held_elsewhere(&self) -> usize {
        self.inner.held.lock().map_or(0, |held| held.len())
    }
    /// Lines whose submission left before this run (their records say so:
    /// accepted, unanswered, ended) and which this run has not taken up
    /// yet: neither in flight nor waiting for room, nor ever to be sent
    /// for this line again. A progress display counts them apart from the
    /// lines not sent yet. Taken up lines leave the count, whatever they
    /// come to.
    ///
    /// ```no_run
    /// # fn demo(counters: genapi_batch::Counters) {
    /// println!("{} sent earlier", counters.sent_earlier());
    /// # }
    /// ```
    pub fn sent_earlier(&self) -> usize {
        self.inner.earlier.lock().map_or(0, |earlier| earlier.len())
    }
    /// The run took `line` up: it is no longer waiting its turn.
    fn taken_up(&self, line: u64) {
        if let Ok(mut earlier) = self.inner.earlier.lock() {
            earlier.remove(&line);
        }
    }
    /// Whether another worker holds `line`, as its last claim found.
    fn found_held(&self, line: u64, held: bool) {
        if let Ok(mut lines) = self.inner.held.lock() {
            if held {
                lines.insert(line);
            } else {
                lines.remove(&line);
            }
        }
    }
    /// Credits the acceptances of this run's tasks reported (submitted in
    /// this run, or in an earlier one for a task taken up again) whose
    /// lines' outcomes have not come out of the run's stream: charged
    /// already, and in no [`JobOutcome`] taken yet. A progress display adds
    /// them to its outcomes' costs, so what it shows charged does not wait
    /// for the tasks to end; a run stopped before its outcomes all came out
    /// adds them to what it says was charged. Costs that are no number of
    /// credits (infinite, negative) count as nothing, as a summary counts
    /// them.
    ///
    /// ```no_run
    /// # async fn demo(batch: genapi_batch::Batch, jobs: Vec<genapi_batch::Job>) -> genapi::Result<()> {
    /// use futures::StreamExt;
    /// let counters = batch.counters();
    /// let mut outcomes = std::pin::pin!(batch.run(jobs)?);
    /// let mut charged = 0.0;
    /// while let Some(outcome) = outcomes.next().await {
    ///     charged += outcome.cost.unwrap_or(0.0);
    ///     println!("{:.2} credits charged", charged + counters.charged_without_outcome());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn charged_without_outcome(&self) -> f64 {
        self.inner.charged.lock().map_or(0.0, |charged| {
            charged
                .values()
                .filter(|cost| cost.is_finite() && **cost > 0.0)
                .fold(0.0, |sum, cost| sum + cost)
        })
    }

    /// A line waiting out a refusal before it is sent again, counted
    /// until dropped.
    fn resting(&self) -> Resting {
        self.inner.resting.fetch_add(1, Ordering::Relaxed);
        Resting(self.inner.clone())
    }

    /// A line waiting for credits under the cap, counted until dropped.
    fn at_the_cap(&self) -> AtTheCap {
        self.inner.at_the_cap.fetch_add(1, Ordering::Relaxed);
        AtTheCap(self.inner.clone())
    }

    fn enter(&self) -> InFlight {
        self.inner.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.inner.clone())
    }

    /// The line's outcome came out: what it was charged is in it now.
    fn carried(&self, line: u64) {
        if let Ok(mut charged) = self.inner.charged.lock() {
            charged.remove(&line);
        }
        self.taken_up(line);
    }
}

/// Where a followed task comes from.
enum Source<'a> {
    /// Submitted in this run, naming the batch's receiver of notifications
    /// or not.
    Submitted { notified: bool },
    /// Accepted in an earlier run (or adopted), polled in this one.
    Resumed {
        /// For an adopted task: the prompt its result must report.
        expected_prompt: Option<&'a str>,
        /// An adopted task: a file already there may be an earlier task's.
        adopted: bool,
    },
}

/// A job being submitted or followed, counted in flight until dropped.
/// (Its task's place under the active-task limit is the task's own seat.)
struct Place {
    in_flight: InFlight,
}

impl Place {
    /// The line's task is accepted, at `cost` when its acceptance said:
    /// counted in [`Counters::charged_without_outcome`] until the line's outcome
    /// comes out of the run's stream.
    fn charged(&self, line: u64, cost: Option<f64>) {
        let Some(cost) = cost else { return };
        if let Ok(mut charged) = self.in_flight.0.charged.lock() {
            charged.insert(line, cost);
        }
    }
}

/// One line waiting at the cap; counted out when dropped.
struct AtTheCap(Arc<CounterValues>);

impl Drop for AtTheCap {
    fn drop(&mut self) {
        self.0.at_the_cap.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A line waiting out a refusal; counted out when dropped.
struct Resting(Arc<CounterValues>);

impl Drop for Resting {
    fn drop(&mut self) {
        self.0.resting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One job in flight; counted out when dropped.
struct InFlight(Arc<CounterValues>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Batch {
    /// A batch with `client`, keeping its lines in `store` (a
    /// [`crate::JournalStore`], the ledger of the `genapi-ledger` crate, or
    /// your own) and its results in `out_dir` (made when the batch runs, if
    /// need be). Its tasks share the client's active-task limit.
    pub fn new(client: Client, store: impl Store + 'static, out_dir: impl Into<PathBuf>) -> Batch {
        let counters = Counters::of(&client);
        Batch {
            client,
            store: Arc::new(store),
            out_dir: out_dir.into(),
            jobs_at_once: None,
            resubmit_unknown: false,
            retry_refused: false,
            wait: None,
            notify: None,
            counters,
            prices: PriceBook::default(),
            stop: Stopper::default(),
            max_credits: None,
            ephemeral: false,
        }
    }

    /// Says that the service ends with this run (a mock service living in
    /// the same process, as the `genapi` command's built-in one): each
    /// submission is written as such, so that a later run knows at once
    /// that those tasks are gone ([`crate::Standing::Gone`]) instead of
    /// polling an address nothing answers any more. Off by default.
    pub fn ephemeral_service(mut self, ephemeral: bool) -> Self {
        self.ephemeral = ephemeral;
        self
    }

    /// Spends at most `credits` in all on this batch's submissions, over
    /// every run (and, with a store workers share, every worker). Before each
    /// submission credits are held for it: the most a line of its kind was
    /// charged so far, as the service settled it when the task ended, or for
    /// a kind not settled yet all that is left, so its first line goes alone.
    /// A kind is the path and every field that may change the price, each
    /// with its whole value (so each distinct input image is a kind of its
    /// own): all but the prompt, the seed and the webhook's fields. The cost
    /// an acceptance reports never prices a kind nor gives a hold back, and
    /// neither does a price learned before ([`Batch::known_prices`]). A
    /// submission whose answer never came, or whose task ended without a
    /// settled cost, keeps its hold, since it may have been charged. When the
    /// next submission could pass the cap, the batch submits no more: the
    /// jobs left come out [`Standing::Unsent`] with
    /// [`FailureClass::CreditCap`], and tasks in flight are finished.
    ///
    /// **The bound.** Every kind the batch has seen settled is held at its
    /// price, so those never pass the cap. The first line of a kind not
    /// settled yet has no price: it goes alone, once nothing else is in
    /// flight, and the service may charge it more than was left. So a batch
    /// spends at most `credits` plus what one such submission costs above
    /// what was left when it was sent; after it, nothing more is sent
    /// ([`crate::cap_passed`] says whether it was passed). This rests on the
    /// service settling lines of one kind alike (it prices by sizes and
    /// inputs): should a kind's price rise, each of its submissions in flight
    /// then may pass the cap by the rise. A service that settles no cost when
    /// tasks end leaves every kind unpriced: its lines go one at a time, and
    /// the first that ends without a settled cost keeps all it held.
    pub fn max_credits(mut self, credits: f64) -> Self {
        self.max_credits = Some(if credits.is_finite() { credits.max(0.0) } else { 0.0 });
        self
    }

    /// Prices learned before this batch (kept from earlier runs, see
    /// [`Prices`]), for the prices it keeps for the next run. Under
    /// [`Batch::max_credits`] they never set what is held (a file of prices
    /// may be stale or forged): a first line of a kind whose learned price is
    /// more than what is left is not sent, and nothing else changes.
    pub fn known_prices(mut self, prices: Prices) -> Self {
        self.prices = PriceBook::of(prices);
        self
    }

    /// The prices this batch knows: those it was given and each cost it
    /// sees settled (a line's, now or in an earlier run), to keep for the
    /// next run.
    pub fn prices(&self) -> PriceBook {
        self.prices.clone()
    }

    /// Jobs worked on at once at most: being submitted, waited for or saved
    /// (at least 1). This bounds the batch's own work (and so its memory),
    /// not the account's active tasks, which the client's limit keeps (its
    /// seats): below that limit it also bounds the batch's active tasks.
    /// The default is twice the client's limit (48 for an unlimited
    /// client), so saving results never keeps a task from starting.
    pub fn jobs_at_once(mut self, jobs: usize) -> Self {
        self.jobs_at_once = Some(jobs.max(1));
        self
    }

    /// Submits again the jobs whose earlier submission was sent but never
    /// answered. The service may have accepted them: this **risks paying
    /// twice** for each, and is off by default. A line whose record cannot
    /// be read (a damaged journal line) is never sent again: the record may
    /// be another job's paid submission.
    pub fn resubmit_unknown(mut self, resubmit: bool) -> Self {
        self.resubmit_unknown = resubmit;
        self
    }

    /// Submits again the jobs the service refused in an earlier run with an
    /// answer that created no task (402, 403, 422), for instance after adding
    /// credits. A job whose line changed since is always submitted again.
    pub fn retry_refused(mut self, retry: bool) -> Self {
        self.retry_refused = retry;
        self
    }

    /// Options for each wait (default: the client's).
    pub fn wait_options(mut self, options: WaitOptions) -> Self {
        self.wait = Some(options);
        self
    }

    /// Names a receiver of notifications in every submission that can take
    /// one (see [`NotifyAt`]), and wakes those tasks' waits through its
    /// inbox ([`WaitOptions::woken_by`], over the options of
    /// [`Batch::wait_options`] or the client's), so that a task's seat is
    /// given back when its notification arrives rather than at the next
    /// scheduled poll. Off by default.
    pub fn notify_at(mut self, notify: NotifyAt) -> Self {
        self.notify = Some(notify);
        self
    }

    /// A handle that stops the batch gently (see [`Stopper`]).
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// Live counts, to show progress while the stream runs.
    pub fn counters(&self) -> Counters {
        self.counters.clone()
    }

    /// Reads the journal, then returns the stream of outcomes, one per job,
    /// in the order they finish. The journal is closed once the stream has
    /// ended (or is dropped), so it can be opened again at once, for
    /// instance to [`super::adopt`] a task. Jobs are taken from `jobs` only as room
    /// frees up, so memory does not grow with their number. Nothing happens
    /// until the stream is polled; dropping it stops the batch (accepted
    /// tasks go on at the service, and the next run picks them up).
    ///
    /// Fails only when the output directory cannot be made
    /// ([`genapi::Error::Write`]); nothing was sent then. (A journal is read
    /// when its store is opened, [`crate::JournalStore::open`].)
    pub fn run<I>(self, jobs: I) -> genapi::Result<impl Stream<Item = JobOutcome> + Send + 'static>
    where
        I: IntoIterator<Item = Job>,
        I::IntoIter: Send + 'static,
    {
        make_out_dir(&self.out_dir)?;
        let stop = self.stop.clone();
        let context = Arc::new(self.into_context());
        let at_once = context.jobs_at_once;
        let block = context.store.claim_block().max(1);
        let mut admission = Admission {
            context: context.clone(),
            names: HashMap::new(),
            lines_seen: HashSet::new(),
        };
        let read = context.clone();
        let whole_file = jobs.into_iter().chain(std::iter::from_fn(move || {
            // Every job was taken: a claim at a number not seen is at a line
            // the job file no longer has.
            read.file_read.store(true, Ordering::SeqCst);
            None
        }));
        let first_pass = futures::stream::iter(whole_file)
            .take_while(move |_| futures::future::ready(!stop.is_stopped()))
            .map(move |job| admission.admit(job));
        // Another worker's lines go to later rounds.
        let first_pass =
            claimed_and_worked(context.clone(), first_pass, block, at_once).filter_map(futures::future::ready);
        // Lines another worker held are tried again while the first pass
        // goes on: a worker gone is known at once, and its lines should not
        // wait for the end of the file.
        let (done, first_pass_done) = tokio::sync::watch::channel(false);
        let first_pass = first_pass.chain(futures::stream::poll_fn(move |_| {
            done.send_replace(true);
            std::task::Poll::Ready(None)
        }));
        let counters = context.counters.clone();
        let outcomes = futures::stream::select(first_pass, later_rounds(context, block, first_pass_done))
            .inspect(move |outcome| counters.carried(outcome.line));
        Ok(closed_at_the_end(outcomes))
    }

    /// What the run's steps share.
    fn into_context(self) -> Context {
        let claims = self.store.known_digests();
        if let Ok(mut earlier) = self.counters.inner.earlier.lock() {
            *earlier = claims.lines().collect();
        }
        let jobs_at_once = self
            .jobs_at_once
            .unwrap_or_else(|| self.client.max_active_tasks().unwrap_or(24).saturating_mul(2));
        Context {
            client: self.client,
            store: self.store,
            max_credits: self.max_credits,
            cap_reached: AtomicBool::new(false),
            out_dir: self.out_dir,
            resubmit_unknown: self.resubmit_unknown,
            retry_refused: self.retry_refused,
            wait: self.wait,
            notify: self.notify,
            counters: self.counters,
            prices: self.prices,
            stop: self.stop,
            claims,
            current: Mutex::new(HashMap::new()),
            claimed_held: Mutex::new(HashMap::new()),
            file_read: AtomicBool::new(false),
            waiting_histories: Mutex::new(HashMap::new()),
            deferred: Mutex::new(Vec::new()),
            halted: Mutex::new(None),
            sending: Stopper::default(),
            ephemeral: self.ephemeral,
            jobs_at_once,
        }
    }
}

/// Results are saved there: made, when nothing has the name, before
/// anything is paid for.
fn make_out_dir(out_dir: &Path) -> genapi::Result<()> {
    if std::fs::symlink_metadata(out_dir).is_ok() {
        return Ok(());
    }
    std::fs::create_dir_all(out_dir).map_err(|e| Error::Write {
        target: out_dir.display().to_string(),
        message: format!("cannot create the output directory ({e})"),
        task: None,
    })
}

/// The first look at each job, in the job file's order: a second job under
/// one line number or one output name is refused before anything is sent.
struct Admission {
    context: Arc<Context>,
    /// Output names taken, as hashes (memory stays small for a long batch),
    /// with the line that took each.
    names: HashMap<u64, u64>,
    /// A line number is a job's place in the store: a second job under it
    /// would be claimed as new and paid for again.
    lines_seen: HashSet<u64>,
}

impl Admission {
    fn admit(&mut self, job: Job) -> Entry {
        let stem = job.stem();
        if !self.lines_seen.insert(job.line) {
            let error = format!(
                "line {} is given to another job before this one; give each job its own line number, its place in \
                 the batch's store (nothing was sent)",
                job.line
            );
            return Entry::Answered(refused_before_sending(&job, &stem, error, None));
        }
        let first_with_name = *self.names.entry(super::job::name_hash(&stem)).or_insert(job.line);
        if first_with_name != job.line {
            // A task an earlier run had accepted for this line stays in the
            // journal, and is named so it is not lost.
            let earlier = self
                .context
                .store
                .earlier(job.line)
                .and_then(|line| line.task().map(task_ref));
            let kept = earlier
                .as_ref()
                .map(|task| format!("; its task {}, accepted in an earlier run, is kept for it", task.id))
                .unwrap_or_default();
            let error = format!(
                "its output name {stem:?} is also line {first_with_name}'s; give each job its own name (nothing was \
                 sent){kept}"
            );
            return Entry::Answered(refused_before_sending(&job, &stem, error, earlier));
        }
        // Taken in order: every earlier line's job is known here (kept only
        // for lines holding a claim, so memory follows the store, not the
        // job file).
        let claims = &self.context.claims;
        if claims.holds(job.line) || !claims.is_empty() {
            let digest = job.digest();
            if claims.names(&digest) {
                if let Ok(mut held) = self.context.claimed_held.lock() {
                    *held.entry(digest.clone()).or_default() += 1;
                }
            }
            if claims.holds(job.line) {
                if let Ok(mut current) = self.context.current.lock() {
                    current.insert(job.line, digest);
                }
            }
        }
        Entry::Job(job)
    }
}

/// A job refused before anything was sent for it.
fn refused_before_sending(job: &Job, stem: &str, error: String, task: Option<genapi::TaskRef>) -> JobOutcome {
    let mut outcome = JobOutcome::new(job.line, stem, Standing::Unsent);
    outcome.request = Requested::of(job);
    outcome.finished_at = Some(SystemTime::now());
    outcome.class = Some(FailureClass::Validation);
    outcome.task = task;
    outcome.error = Some(error);
    outcome
}

/// Lines another worker held are tried again, round after round, from the
/// start of the run (beside its first pass, `first_pass_done` once it
/// ended) until each is done here or there (its worker gone, or its lease
/// lapsed).
fn later_rounds(
    context: Arc<Context>,
    block: usize,
    first_pass_done: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = JobOutcome> + Send + 'static {
    futures::stream::unfold(context, move |context| {
        let mut first_pass_done = first_pass_done.clone();
        async move {
            loop {
                // Read before the lines are taken: once the first pass ended,
                // every line it put aside is among them.
                let finished = *first_pass_done.borrow();
                let held: Vec<Job> = context
                    .deferred
                    .lock()
                    .map(|mut held| std::mem::take(&mut *held))
                    .ok()?;
                if context.stop.is_stopped() || (held.is_empty() && finished) {
                    return None;
                }
                if held.is_empty() {
                    // Nothing put aside yet: looked at again in a moment, or
                    // as soon as the first pass ends.
                    tokio::select! {
                        () = tokio::time::sleep(HELD_RECHECK) => {}
                        _ = first_pass_done.wait_for(|done| *done) => {}
                        () = context.stop.stopped() => return None,
                    }
                    continue;
                }
                tokio::select! {
                    () = tokio::time::sleep(HELD_RECHECK) => {}
                    () = context.stop.stopped() => return None,
                }
                let entries = futures::stream::iter(held.into_iter().map(Entry::Job));
                let at_once = context.jobs_at_once;
                let round: Vec<JobOutcome> =
                    claimed_and_worked(context.clone(), entries, RECHECK_BLOCK.max(block), at_once)
                        .filter_map(futures::future::ready)
                        .collect()
                        .await;
                if !round.is_empty() {
                    return Some((futures::stream::iter(round), context));
                }
            }
        }
    })
    .flatten()
}

/// Once the last outcome is out, the store (a journal, unlocked) is
/// dropped before the stream says it has ended.
fn closed_at_the_end(
    outcomes: impl Stream<Item = JobOutcome> + Send + 'static,
) -> impl Stream<Item = JobOutcome> + Send + 'static {
    let mut running = Some(Box::pin(outcomes));
    futures::stream::poll_fn(move |cx| {
        let Some(outcomes) = running.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let next = outcomes.as_mut().poll_next(cx);
        if let std::task::Poll::Ready(None) = next {
            running = None;
        }
        next
    })
}

struct Context {
    client: Client,
    /// Jobs worked on at once.
    jobs_at_once: usize,
    /// Where the batch lives: this process's journal, or a shared ledger.
    store: Arc<dyn Store>,
    out_dir: PathBuf,
    resubmit_unknown: bool,
    retry_refused: bool,
    wait: Option<WaitOptions>,
    notify: Option<NotifyAt>,
    counters: Counters,
    /// Prices known before the run and charges seen in it.
    prices: PriceBook,
    stop: Stopper,
    /// The records of earlier runs that may hold a task, by the job's
    /// digest: a job is never sent for another line than its record's.
    claims: Claims,
    /// The digest of each job taken so far, by line (lines the store knows).
    current: Mutex<HashMap<u64, String>>,
    /// How many lines of the job file read so far hold each claimed job,
    /// wherever ([`Claims::edited_away`]).
    claimed_held: Mutex<HashMap<String, usize>>,
    /// Every job of the job file was taken.
    file_read: AtomicBool,
    /// The histories of lines waiting for the file to be read.
    waiting_histories: Mutex<HashMap<u64, Line>>,
    /// Jobs whose line another worker holds, to try again.
    deferred: Mutex<Vec<Job>>,
    /// Why the batch stopped sending on its own, when it did (see
    /// `Context::halt`).
    halted: Mutex<Option<String>>,
    /// Stops sending alone (`Context::halt`), where `stop` stops the run.
    sending: Stopper,
    /// The batch's spending cap.
    max_credits: Option<f64>,
    /// The cap was reached: nothing more is submitted.
    cap_reached: AtomicBool,
    /// The service ends with this run (see [`Batch::ephemeral_service`]).
    ephemeral: bool,
}

/// `entries` claimed a block at a time (a shared store takes the free ones
/// of a block in one step), then worked on, `at_once` together: tasks take
/// their places under the client's limit, and the jobs beyond it wait for
/// room, save results or are answered from the journal. `None` for a line
/// another worker holds (kept for a later round).
fn claimed_and_worked(
    context: Arc<Context>,
    entries: impl Stream<Item = Entry>,
    block: usize,
    at_once: usize,
) -> impl Stream<Item = Option<JobOutcome>> {
    let claiming = context.clone();
    entries
        .chunks(block)
        .then(move |entries| {
            let context = claiming.clone();
            async move { context.claim_entries(entries).await }
        })
        .flat_map(futures::stream::iter)
        .map(move |entry| {
            let context = context.clone();
            async move { context.work(entry).await }
        })
        .buffer_unordered(at_once)
}

/// What [`Context::decide`] made of a job.
enum Decided {
    /// Its outcome.
    Now(Box<JobOutcome>),
    /// Decided again once the job file is read (a record of its job sits at
    /// a line not read yet), with the line's history, which a journal hands
    /// out once.
    Later(Box<(Job, Line)>),
}

/// A job on its way through the first pass.
enum Entry {
    /// Answered without claiming its line (its output name is taken).
    Answered(JobOutcome),
    /// To be claimed.
    Job(Job),
    /// Claimed (or found held or done).
    Claimed(Job, Result<Claim, StoreError>),
}

impl Context {
    /// Claims the lines of a block's jobs in one step.
    async fn claim_entries(&self, entries: Vec<Entry>) -> Vec<Entry> {
        let lines: Vec<u64> = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Job(job) => Some(job.line),
                _ => None,
            })
            .collect();
        let mut claims = self.store.claim_many(&lines).await.into_iter();
        entries
            .into_iter()
            .map(|entry| match entry {
                Entry::Job(job) => {
                    let claim = claims.next().unwrap_or_else(|| {
                        Err(StoreError::new(
                            FailureClass::Other,
                            "the store answered for fewer lines than asked",
                        ))
                    });
                    Entry::Claimed(job, claim)
                }
                other => other,
            })
            .collect()
    }

    /// The outcome of a job on its way, once claimed.
    async fn work(&self, entry: Entry) -> Option<JobOutcome> {
        match entry {
            Entry::Answered(outcome) => Some(outcome),
            Entry::Claimed(job, claim) => self.process_or_defer(job, claim).await,
            // Every job of a block is claimed before it is worked on.
            Entry::Job(job) => {
                let claim = self.store.claim(job.line).await;
                self.process_or_defer(job, claim).await
            }
        }
    }

    /// The job's outcome; `None` when another worker holds its line (the
    /// job is kept for a later round).
    async fn process_or_defer(&self, job: Job, claim: Result<Claim, StoreError>) -> Option<JobOutcome> {
        let started = Instant::now();
        let stem = job.stem();
        let line = job.line;
        let requested = Requested::of(&job);
        self.counters.taken_up(line);
        self.counters.found_held(line, matches!(claim, Ok(Claim::Held)));
        let kept = self
            .waiting_histories
            .lock()
            .ok()
            .and_then(|mut kept| kept.remove(&line));
        let (state, mine) = match claim {
            // What the store forgot of a line it handed out before is what
            // this run kept of it; a store that reads it again knows more.
            Ok(Claim::Mine(state)) if state == Line::default() => (kept.unwrap_or(state), true),
            Ok(Claim::Mine(state)) => (state, true),
            Ok(Claim::Done(state)) => (state, false),
            Ok(Claim::Held) => {
                if let Ok(mut deferred) = self.deferred.lock() {
                    deferred.push(job);
                }
                return None;
            }

            Err(error) => {
                let mut outcome = JobOutcome::new(line, &stem, Standing::Unsent);
                outcome.class = Some(error.class());
                outcome.error = Some(format!("cannot claim the line ({error}); nothing was sent"));
                outcome.request = requested;
                outcome.finished_at = Some(SystemTime::now());
                return Some(outcome);
            }
        };
        // Its price kind, made once: the cap holds credits by it, and what
        // the line was settled at (now or in an earlier run) is that kind's
        // price, learned.
        let (kind, path) = (super::budget::kind(&job), job.path.clone());
        let mut outcome = match self.decide(job, &stem, state, &kind).await {
            Decided::Now(outcome) => *outcome,
            Decided::Later(waiting) => {
                let (job, history) = *waiting;
                // A journal hands a line's history out once: it is kept
                // here for the line's next claim, or the line would be
                // decided as one never sent.
                if let Ok(mut kept) = self.waiting_histories.lock() {
                    kept.insert(line, history);
                }
                self.release_if(mine, line).await;
                if let Ok(mut deferred) = self.deferred.lock() {
                    deferred.push(job);
                }
                return None;
            }
        };
        if let Some(cost) = outcome.settled {
            self.prices.learn(&kind, &path, cost);
        }
        self.release_if(mine, line).await;
        outcome.elapsed = started.elapsed();
        outcome.request = requested;
        outcome.finished_at = Some(SystemTime::now());
        Some(outcome)
    }

    /// Lets go of a line this run claimed.
    async fn release_if(&self, mine: bool, line: u64) {
        if mine {
            if let Err(error) = self.store.release(line).await {
                // Its lease lapses instead: another worker takes it then.
                tracing::warn!(%error, line, "cannot release a line");
            }
        }
    }

    /// Stores an event durably.
    async fn record(&self, record: Event) -> Result<(), StoreError> {
        self.store.write(record).await
    }

    /// Stores the event of a paid task, trying again a few times (a
    /// database failing over, a disk briefly full): without it a later run
    /// cannot know the task.
    async fn record_paid(&self, record: Event) -> Result<(), StoreError> {
        let mut pause = Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match self.record(record.clone()).await {
                Ok(()) => return Ok(()),
                Err(error) if attempt >= PAID_RECORD_ATTEMPTS => return Err(error),
                Err(error) => {
                    tracing::warn!(%error, attempt, line = record.line(), "cannot record a paid task yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause *= 4;
                    attempt += 1;
                }
            }
        }
    }

    /// Holds credits for `job`'s submission under the cap, waiting while
    /// holds in flight may come back.
    async fn hold_credits(&self, job: &Job, kind: &str, max: f64) -> Result<(), HeldBack> {
        // Learned before, or settled in this run: it never sets what is
        // held, it only keeps back a first line it says would not fit.
        let learned = self.prices.price_of_kind(kind);
        loop {
            if self.cap_reached.load(Ordering::SeqCst) {
                return Err(HeldBack::CapReached);
            }
            let hold = self
                .store
                .hold_credits(job.line, kind, max, learned)
                .await
                .map_err(|e| HeldBack::JournalFailed(format!("cannot hold credits ({e}); nothing was sent")))?;
            match hold {
                Hold::Held(_) => return Ok(()),
                Hold::CapReached => {
                    self.cap_reached.store(true, Ordering::SeqCst);
                    return Err(HeldBack::CapReached);
                }
                Hold::Wait => {
                    let _waiting = self.counters.at_the_cap();
                    tokio::select! {
                        () = tokio::time::sleep(CREDITS_RECHECK) => {}
                        () = self.no_more_sending() => return Err(HeldBack::Stopped),
                    }
                }
            }
        }
    }

    /// The submission was not sent: its credits are free again.
    async fn drop_hold(&self, line: u64) {
        // Credits are held only under a cap: without one there is nothing
        // to give back, and no step to wait for (a database that stopped
        // answering would hold the line's report past --timeout).
        if self.max_credits.is_none() {
            return;
        }
        if let Err(error) = self.store.drop_hold(line).await {
            tracing::warn!(%error, line, "cannot give back held credits");
        }
    }

    /// The outcome of a job left unsent at the credit cap.
    fn at_cap(&self, line: u64, stem: &str) -> JobOutcome {
        let mut outcome = JobOutcome::new(line, stem, Standing::Unsent);
        outcome.class = Some(FailureClass::CreditCap);
        outcome.error = Some(format!(
            "the next submission could pass the batch's credit cap of {}, so it was not sent; raise the cap to go on",
            self.max_credits.unwrap_or_default()
        ));
        outcome
    }

    /// What the run does with a line: [`crate::decide`] on what the store
    /// holds of it and what the run sees around it, carried out. Facts that
    /// cost a look at the disk are gathered only where they can change the
    /// action.
    async fn decide(&self, job: Job, stem: &str, line: Line, kind: &str) -> Decided {
        // Computed once: a body with images is large.
        let digest = job.digest();
        let sent_digest = line.sent().and_then(|sent| sent.digest.as_deref());
        let left_behind = self.left_behind(job.line, &digest);
        let mut seen = Seen {
            changed: sent_digest.is_some_and(|sent| sent != digest),
            moved: left_behind.is_some(),
            saved_file: self.saved_file_is_here(&line),
            cap_reached: self.cap_reached.load(Ordering::SeqCst),
            halted: self.sending.is_stopped(),
            stopping: self.stop.is_stopped(),
            name_taken: false,
        };
        let asked = Asked {
            retry_refused: self.retry_refused,
            resubmit_unknown: self.resubmit_unknown,
        };
        let mut action = decide(&line, seen, asked);
        if action == Action::Send {
            seen.name_taken = existing_file(&self.out_dir, stem).is_some();
            action = decide(&line, seen, asked);
        }
        // A refused or unanswered line the edit keeps from being sent
        // whatever the flags is said as refused for the edit, not with a
        // flag that would not send it.
        if matches!(action, Action::Report | Action::ReportUnknown) {
            action = refused_for_the_edit(&line, seen).unwrap_or(action);
        }
        if let (Action::RefuseMoved, Some((_, JobAt::Unread))) = (action, left_behind) {
            // Whether the claim is this job's is known once the file is read.
            return Decided::Later(Box::new((job, line)));
        }
        Decided::Now(Box::new(match action {
            Action::Report => self.reported(job.line, stem, &line),
            Action::RefuseChanged => refused_changed(job.line, stem, &line),
            Action::RefuseMoved => refused_moved(job.line, stem, left_behind),
            Action::RefuseLostFile => refused_lost_file(job.line, stem, &line),
            Action::ReportGone => gone(job.line, stem, &line),
            Action::Poll => self.poll(job, stem, &line).await,
            Action::ReportUnknown => unknown(job.line, stem, &line),
            Action::StopAtCap => self.at_cap(job.line, stem),
            Action::RefuseNameTaken => self.refused_name_taken(job.line, stem),
            Action::Stop if line.task().is_some() => self.stopped_polling(job.line, stem, &line),
            Action::Stop => self.not_sent(job.line, stem),
            Action::Send => match self.place() {
                Some(place) => self.submit(job, stem, digest, place, kind).await,
                None => self.not_sent(job.line, stem),
            },
        }))
    }

    /// Whether the file a saved line names is here (in a ledger it may be
    /// in another worker's folder, so it counts as here).
    fn saved_file_is_here(&self, line: &Line) -> bool {
        let Some(Ending::Saved { file, .. }) = line.ending() else {
            return false;
        };
        self.store.shared()
            || file
                .as_ref()
                .is_some_and(|file| is_a_saved_file(&self.out_dir.join(file)))
    }

    /// A line that ended in an earlier run, as it ended.
    fn reported(&self, number: u64, stem: &str, line: &Line) -> JobOutcome {
        let mut outcome = JobOutcome::new(number, stem, line.standing());
        outcome.task = line.task().map(task_ref);
        outcome.from_journal = true;
        match line.ending() {
            Some(Ending::Saved {
                file,
                seed,
                cost,
                duration,
            }) => {
                // A file another worker saved elsewhere is not named here.
                outcome.file = file
                    .as_ref()
                    .map(|f| self.out_dir.join(f))
                    .filter(|path| path.is_file());
                outcome.seed = seed.as_ref().and_then(seed_of);
                outcome.cost = cost.or(line.task().and_then(|task| task.cost));
                outcome.settled = *cost;
                outcome.duration = *duration;
            }
            Some(Ending::Failed { status, error, class }) => {
                outcome.cost = charged(status, line.task().and_then(|task| task.cost));
                outcome.error = error.clone();
                outcome.class = *class;
            }
            None => {}
        }
        outcome
    }

    /// The journal holds no task of this line, yet a result has its name:
    /// the journal lost its events (emptied, replaced) or the file is
    /// someone else's. Submitting would pay again and overwrite it.
    fn refused_name_taken(&self, number: u64, stem: &str) -> JobOutcome {
        let file = existing_file(&self.out_dir, stem).unwrap_or_else(|| self.out_dir.join(stem));
        // A shared store is a ledger; the other is the folder's journal.
        let store = if self.store.shared() {
            "the ledger's batch"
        } else {
            "the journal"
        };
        failed_outcome(
            number,
            stem,
            Standing::Unsent,
            FailureClass::Validation,
            format!(
                "{} is already in the output directory, but {store} holds no task of line {number}, so it was not \
                 submitted (that would pay for it again and overwrite the file); if {store} lost its records, \
                 restore them, else move the file away (or use another output directory) to make it anew",
                file.display()
            ),
        )
    }

    /// An accepted task a stop kept from being waited for: a later run
    /// polls it.
    fn stopped_polling(&self, number: u64, stem: &str, line: &Line) -> JobOutcome {
        let mut outcome = JobOutcome::new(number, stem, line.standing());
        outcome.task = line.task().map(task_ref);
        outcome.resumed = true;
        outcome.error = Some(self.stopped_waiting());
        outcome
    }

    /// Polls the task an earlier run left (taking its place under the
    /// client's limit first) and saves its result.
    async fn poll(&self, job: Job, stem: &str, line: &Line) -> JobOutcome {
        let Some(task) = line.task() else {
            return self.stopped_polling(job.line, stem, line);
        };
        let Some(place) = self.place() else {
            return self.stopped_polling(job.line, stem, line);
        };
        // Its answers may quote the secrets its submission carried, sent by
        // an earlier run: the client scrubs them as its own.
        self.client.learn_secrets(&job.body);
        // A run killed right after the acceptance and run again may find
        // the service not knowing the task yet: sent so recently, its "not
        // found" is ridden out.
        let sent_at = line
            .sent()
            .and_then(|sent| sent.sent_at)
            .and_then(|seconds| std::time::UNIX_EPOCH.checked_add(Duration::from_secs(seconds)));
        let resumed = tokio::select! {
            resumed = self.client.resume(&task.polling_url) => resumed.map(|resumed| {
                let resumed = match sent_at {
                    Some(sent_at) => resumed.sent_at(sent_at),
                    None => resumed,
                };
                match OperationSpec::by_path(&job.path) {
                    // Its wait is aimed by what its model's tasks took.
                    Some(operation) => resumed.submitted_to(operation),
                    None => resumed,
                }
            }),
            () = self.stop.stopped() => return self.stopped_polling(job.line, stem, line),
        };
        self.counters.inner.resumed.fetch_add(1, Ordering::Relaxed);
        match resumed {
            Ok(resumed) => {
                // A task the user adopted is checked against the job once
                // its result says what prompt it was made from.
                let source = Source::Resumed {
                    expected_prompt: task.adopted.then(|| super::adopt::checked_prompt(&job)).flatten(),
                    adopted: task.adopted,
                };
                self.follow(resumed, task.cost, job.line, stem, source, place).await
            }
            // No place under a shared limit could be taken: the task was
            // accepted and may still run, so it stays the line's and a later
            // run waits for it.
            Err(error @ Error::SharedLimit { .. }) => {
                let mut outcome = self.failed(job.line, stem, Some(task_ref(task)), &error, Standing::Accepted);
                outcome.resumed = true;
                outcome.cost = task.cost;
                outcome.error = Some(format!(
                    "{error}; its task was accepted in an earlier run: run the batch again to keep waiting for it \
                     (it is not submitted again)"
                ));
                outcome
            }
            Err(error) => self.failed(job.line, stem, Some(task_ref(task)), &error, Standing::Accepted),
        }
    }

    /// A record of this job, under another line, that the job file no
    /// longer holds there ([`Claims::left_behind`]).
    fn left_behind(&self, line: u64, digest: &str) -> Option<(u64, JobAt)> {
        let file_read = self.file_read.load(Ordering::SeqCst);
        let (Ok(current), Ok(held)) = (self.current.lock(), self.claimed_held.lock()) else {
            // Without the file's jobs, any claim may be this job's.
            return self.claims.refusing(line, digest, |_| JobAt::Other, |_| 0, true);
        };
        self.claims.refusing(
            line,
            digest,
            |number| JobAt::in_file(&current, number, digest, file_read),
            |job| held.get(job).copied().unwrap_or(0),
            file_read,
        )
    }

    /// Where a line sent without an answer is left: gone when its service
    /// ends with this run (as the store will say, [`Line::gone`]).
    fn left_unanswered(&self) -> Standing {
        if self.ephemeral {
            Standing::Gone
        } else {
            Standing::Unanswered
        }
    }

    /// Where a line whose task was not waited for to its end is left: gone
    /// when its service ends with this run, unless the user adopted the
    /// task (found at the service in use).
    fn left_accepted(&self, adopted: bool) -> Standing {
        if self.ephemeral && !adopted {
            Standing::Gone
        } else {
            Standing::Accepted
        }
    }

    /// What a stop says of an accepted task it stopped waiting for: a later
    /// run polls it, unless the service ends with this run.
    fn stopped_waiting(&self) -> String {
        let said = if self.ephemeral {
            STOPPED_WAITING_GONE
        } else {
            STOPPED_WAITING
        };
        match self.halted() {
            Some(why) => format!("{said}; the batch stopped sending as {why}"),
            None => said.to_string(),
        }
    }

    /// A job a stop kept from being sent, saying why the batch stopped when
    /// it stopped itself.
    fn not_sent(&self, line: u64, stem: &str) -> JobOutcome {
        let mut outcome = not_sent(line, stem);
        if let Some(why) = self.halted() {
            outcome.class = Some(FailureClass::Auth);
            outcome.error = Some(format!(
                "the batch stopped sending as {why}, so it was not sent; running it again submits it"
            ));
        }
        outcome
    }

    /// Why the batch stopped itself, if it did.
    fn halted(&self) -> Option<String> {
        self.halted.lock().ok()?.clone()
    }

    /// Stops sending for a reason every later submission would meet too, so
    /// they are not paid for in vain (a polling host the key may not go to
    /// refuses to say what becomes of them): the job file is still read to
    /// its end, each line coming out not sent and saying why, and what is
    /// in flight is followed to its end.
    fn halt(&self, why: String) {
        if let Ok(mut halted) = self.halted.lock() {
            halted.get_or_insert(why);
        }
        self.sending.stop();
    }

    /// Whether nothing more may be sent: the batch is stopping, or stopped
    /// sending on its own ([`Context::halt`]).
    fn sends_no_more(&self) -> bool {
        self.stop.is_stopped() || self.sending.is_stopped()
    }

    /// Resolves once nothing more may be sent.
    async fn no_more_sending(&self) {
        tokio::select! {
            () = self.stop.stopped() => {}
            () = self.sending.stopped() => {}
        }
    }

    /// The job goes in flight; `None` once the batch is stopping.
    fn place(&self) -> Option<Place> {
        if self.stop.is_stopped() {
            return None;
        }
        Some(Place {
            in_flight: self.counters.enter(),
        })
    }

    async fn submit(&self, job: Job, stem: &str, digest: String, place: Place, kind: &str) -> JobOutcome {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if self.sends_no_more() {
                return self.not_sent(job.line, stem);
            }
            let sent = match self.send_once(&job, stem, &digest, kind).await {
                Ok(sent) => sent,
                Err(outcome) => return outcome,
            };
            let error = match sent.answer {
                Ok(task) => return self.accepted(task, job.line, stem, place, sent.notified).await,
                Err(error) => error,
            };
            match self.not_accepted(job.line, stem, error, attempt, sent.sent_at).await {
                Next::Outcome(outcome) => return *outcome,
                Next::RetryAfter(pause) => {
                    let _resting = self.counters.resting();
                    tokio::select! {
                        () = tokio::time::sleep(pause) => continue,
                        () = self.no_more_sending() => return self.not_sent(job.line, stem),
                    }
                }
            }
        }
    }

    /// Sends the job once: its intent recorded at the last moment before
    /// the request leaves. A stop before then drops it unsent; from then on
    /// its answer is waited for.
    async fn send_once(&self, job: &Job, stem: &str, digest: &str, kind: &str) -> Result<Sent, JobOutcome> {
        // When the request left (Unix seconds), set as the intent is written.
        let sent_at = AtomicU64::new(0);
        // Set when the request is about to leave: from then on a stop
        // waits for the answer instead of dropping the submission.
        let leaving = AtomicBool::new(false);
        let intent = Intent {
            job,
            stem,
            digest,
            kind,
            leaving: &leaving,
            sent_at: &sent_at,
        };
        let (body, notified) = match &self.notify {
            Some(notify) => notify.added_to(&job.path, job.body.clone()),
            None => (job.body.clone(), false),
        };
        let submission = self
            .client
            .submit_raw_recorded(&job.path, body, || self.record_intent(intent));
        tokio::pin!(submission);
        let mut stop_seen = false;
        let submitted = loop {
            tokio::select! {
                biased;
                submitted = &mut submission => break submitted,
                () = self.no_more_sending(), if !stop_seen => {
                    // Still waiting for room under the client's limit:
                    // nothing is written or sent, so it can be dropped.
                    if !leaving.load(Ordering::SeqCst) {
                        return Err(self.not_sent(job.line, stem));
                    }
                    stop_seen = true;
                }
            }
        };
        let answer = match submitted {
            Err(Unsent::HeldBack(HeldBack::Stopped)) => return Err(self.not_sent(job.line, stem)),
            Err(Unsent::HeldBack(HeldBack::CapReached)) => return Err(self.at_cap(job.line, stem)),
            Err(Unsent::HeldBack(HeldBack::JournalFailed(message))) => {
                let mut outcome = JobOutcome::new(job.line, stem, Standing::Unsent);
                outcome.class = Some(FailureClass::Write);
                outcome.error = Some(message);
                return Err(outcome);
            }
            Err(Unsent::Failed(error)) => Err(error),
            Ok(task) => Ok(task),
        };
        let sent_at = Some(sent_at.load(Ordering::SeqCst)).filter(|at| *at > 0);
        Ok(Sent {
            answer,
            sent_at,
            notified,
        })
    }

    /// Written at the last moment before sending (the body checked, a place
    /// held, credits held under a cap), so a crash leaves few lines written
    /// but never sent.
    async fn record_intent(&self, intent: Intent<'_>) -> Result<(), HeldBack> {
        let line = intent.job.line;
        if self.sends_no_more() {
            return Err(HeldBack::Stopped);
        }
        if let Some(max) = self.max_credits {
            self.hold_credits(intent.job, intent.kind, max).await?;
            if self.sends_no_more() {
                self.drop_hold(line).await;
                return Err(HeldBack::Stopped);
            }
        }
        intent.leaving.store(true, Ordering::SeqCst);
        let now = unix_now();
        intent.sent_at.store(now, Ordering::SeqCst);
        let recorded = Event::Intent {
            line,
            name: intent.stem.to_string(),
            digest: intent.digest.to_string(),
            sent_at: Some(now),
            ephemeral: self.ephemeral,
        };
        if let Err(e) = self.record(recorded).await {
            self.drop_hold(line).await;
            return Err(HeldBack::JournalFailed(format!(
                "cannot record the submission before sending it ({e}); nothing was sent, and running the batch again \
                 submits it"
            )));
        }
        // A stop while the intent was being written: still unsent, and the
        // journal says so.
        if self.sends_no_more() {
            let stopped = Event::Refused {
                line,
                error: STOPPED_BEFORE_SENDING.into(),
            };
            let _ = self.record(stopped).await;
            return Err(HeldBack::Stopped);
        }
        Ok(())
    }

    /// An accepted (paid) task: recorded, then followed to its end.
    async fn accepted(&self, task: Task, line: u64, stem: &str, place: Place, notified: bool) -> JobOutcome {
        self.counters.inner.submitted.fetch_add(1, Ordering::Relaxed);
        // Charged from now, even while the acceptance is being recorded.
        place.charged(line, task.cost());
        let accepted = Event::Accepted {
            line,
            id: task.id().to_string(),
            polling_url: task.polling_url().to_string(),
            cost: task.cost(),
            adopted: false,
        };
        let unrecorded = self.record_paid(accepted).await.err();
        let cost = task.cost();
        let reference = task.reference().clone();
        let mut outcome = self
            .follow(task, cost, line, stem, Source::Submitted { notified }, place)
            .await;
        let recorded_later = outcome.standing == Standing::Saved && outcome.error.is_none();
        if let (Some(error), true) = (&unrecorded, recorded_later) {
            // The saved result was written after all: a later run knows the
            // line.
            tracing::warn!(%error, task_id = %reference.id, line, "the acceptance of a paid task was not recorded, its result was");
        } else if let Some(error) = unrecorded {
            // The task is paid for and followed, but a later run would not
            // know it: this run must not end as if all were well, and says
            // which task to adopt.
            outcome.class = Some(FailureClass::Write);
            let after = outcome.error.take().map(|e| format!("; then: {e}")).unwrap_or_default();
            outcome.error = Some(format!(
                "task {} was accepted (and paid for) but could not be recorded ({error}); a later run would report \
                 line {line} unknown: adopt task {} for it{after}",
                reference.id, reference.id
            ));
            outcome.task = Some(reference);
        }
        outcome
    }

    /// A submission that was not accepted: sent again after a pause when the
    /// service surely created nothing and attempts are left; recorded as
    /// refused for good when its answer says no task was created; unknown
    /// when no answer says what became of it.
    async fn not_accepted(&self, line: u64, stem: &str, error: Error, attempt: u32, sent_at: Option<u64>) -> Next {
        let answer = answer_to_a_submission(&error);
        // No place could be taken under the shared limit: the request never
        // left and nothing was written, so the next run sends it.
        if answer == Answer::NoPlace {
            let mut outcome = self.failed(line, stem, None, &error, Standing::Unsent);
            outcome.error = Some(format!("{error} (running the batch again submits it)"));
            return Next::Outcome(Box::new(outcome));
        }
        let nothing_sent = answer == Answer::NeverLeft;
        if answer == Answer::SafeToResend || nothing_sent {
            let refused = Event::Refused {
                line,
                error: error.to_string(),
            };
            if let Err(e) = self.record(refused).await {
                tracing::warn!(error = %e, "cannot record a refused submission in the journal");
            }
            // Recorded as refused: the line may be sent again, by a later
            // run when this one is stopping (no attempt leaves after a stop).
            if nothing_sent || attempt >= SUBMIT_ATTEMPTS || self.sends_no_more() {
                return Next::Outcome(Box::new(self.failed(line, stem, None, &error, Standing::Unsent)));
            }
            return Next::RetryAfter(match &error {
                Error::RateLimited {
                    retry_after: Some(after),
                    ..
                } => (*after).min(Duration::from_secs(30)),
                _ => Duration::from_secs(u64::from(attempt)).min(LONGEST_UNHINTED_PAUSE),
            });
        }
        if answer == Answer::SurelyRefused {
            self.record_ending(line, FailedStatus::Refused, &error).await;
            return Next::Outcome(Box::new(self.failed(line, stem, None, &error, Standing::Refused)));
        }
        // Its hold stays (it may have been charged) but no longer waits for
        // an answer (a ledger's does so once the line is released).
        self.store.keep_unanswered(line);
        let mut outcome = JobOutcome::new(line, stem, self.left_unanswered());
        outcome.class = Some(FailureClass::Unknown);
        outcome.error = Some(unknown_message(line, sent_at, Some(&error)));
        Next::Outcome(Box::new(outcome))
    }

    /// Records that the line ended without a result (`ending`: refused for
    /// good, failed, moderated…), as `error` says.
    async fn record_ending(&self, line: u64, ending: FailedStatus, error: &Error) {
        let finished = Event::Finished {
            line,
            status: ending.as_str().into(),
            file: None,
            seed: None,
            cost: None,
            duration: None,
            error: Some(error.to_string()),
            class: Some(error.class()),
        };
        if let Err(e) = self.record(finished).await {
            tracing::warn!(error = %e, "cannot record the end of a line in the journal");
        }
    }

    /// Waits for an accepted task and saves its result.
    async fn follow(
        &self,
        task: Task,
        cost: Option<f64>,
        line: u64,
        stem: &str,
        source: Source<'_>,
        place: Place,
    ) -> JobOutcome {
        place.charged(line, cost);
        let (resumed, expected_prompt, adopted, notified) = match source {
            Source::Submitted { notified } => (false, None, false, notified),
            Source::Resumed {
                expected_prompt,
                adopted,
            } => (true, expected_prompt, adopted, false),
        };
        let task_ref = task.reference().clone();
        // Woken by its notification only when its submission named the
        // receiver: another would wait for one that never comes.
        let inbox = self.notify.as_ref().filter(|_| notified).map(NotifyAt::inbox);
        let wait = async {
            match (&self.wait, inbox) {
                (Some(options), Some(inbox)) => task.wait_with(options.clone().woken_by(inbox.clone())).await,
                (Some(options), None) => task.wait_with(options.clone()).await,
                (None, Some(inbox)) => inbox.wait(task).await,
                (None, None) => task.wait().await,
            }
        };
        let waited = tokio::select! {
            waited = wait => waited,
            () = self.stop.stopped() => {
                let mut outcome = JobOutcome::new(line, stem, self.left_accepted(adopted));
                outcome.task = Some(task_ref);
                outcome.cost = cost;
                outcome.resumed = resumed;
                outcome.error = Some(self.stopped_waiting());
                return outcome;
            }
        };
        // A settled cost counts at once: the task's seat is free already,
        // and the next submission's hold must see a price that rose.
        if let (Some(cost), Some(_)) = (waited.as_ref().ok().and_then(settled_cost), self.max_credits) {
            if let Err(error) = self.store.settle(line, cost).await {
                tracing::warn!(%error, line, "the settled cost of a task could not be counted yet");
            }
        }
        // The task is final (its seat is free) or no longer waited for: the
        // job is out of flight while the result is saved.
        drop(place);
        let reported = waited.as_ref().ok().and_then(|output| output.prompt());
        if let (Some(expected), Some(reported)) = (expected_prompt, reported) {
            if !super::adopt::same_prompt(expected, reported) {
                // Nothing is recorded: the task stays the line's until the
                // right one is adopted.
                let mut outcome = JobOutcome::new(line, stem, Standing::Accepted);
                outcome.class = Some(FailureClass::Validation);
                outcome.task = Some(task_ref.clone());
                outcome.error = Some(format!(
                    "task {}, adopted for line {line}, was made from another prompt ({:?}); it is not this line's \
                     task, and its result was not saved. Adopting the right one for this line replaces it",
                    task_ref.id,
                    super::adopt::shown_prompt(reported)
                ));
                return outcome;
            }
        }
        if let Err(error @ Error::UntrustedOrigin { origin, .. }) = &waited {
            // Every task polled there would be paid for and never seen.
            self.halt(format!(
                "the polling host {origin} refused a poll without the key (trust it if it is the service's: \
                 GENAPI_TRUSTED_ORIGINS={origin}); {error}"
            ));
        }
        let mut outcome = match waited {
            // A file left by an earlier run is this task's, unless the task
            // was adopted (it may replace another).
            Ok(output) => {
                self.save(output, cost, line, stem, resumed && !adopted, &task_ref)
                    .await
            }
            Err(error) => self.not_saved(error, cost, line, stem, &task_ref).await,
        };
        outcome.task = Some(task_ref);
        outcome.resumed = resumed;
        outcome
    }
    /// A task that ended without a result to save (failed, moderated,
    /// gone), or whose wait ended some other way: recorded when it ended
    /// for good, else left for a later run to wait for.
    async fn not_saved(
        &self,
        error: Error,
        cost: Option<f64>,
        line: u64,
        stem: &str,
        task_ref: &genapi::TaskRef,
    ) -> JobOutcome {
        // Whether the task ended is the library's one rule; which status
        // it ended with is the error's own.
        let ended = error.class().ends_the_task().then_some(match &error {
            Error::Moderated {
                stage: genapi::Moderation::Request,
                ..
            } => FailedStatus::RequestModerated,
            Error::Moderated { .. } => FailedStatus::ContentModerated,
            Error::TaskNotFound { .. } => FailedStatus::TaskNotFound,
            Error::ResultExpired { .. } => FailedStatus::Expired,
            _ => FailedStatus::Error,
        });
        let standing = if ended.is_some() {
            Standing::Ended
        } else {
            Standing::Accepted
        };
        let mut outcome = self.failed(line, stem, Some(task_ref.clone()), &error, standing);
        outcome.cost = match &ended {
            Some(status) => charged(status, cost),
            None => cost,
        };
        if let Some(ending) = ended {
            self.record_ending(line, ending, &error).await;
        }
        if standing == Standing::Accepted {
            outcome.error = Some(format!(
                "{error}; task {} was accepted: run the batch again to keep waiting for it (it is not \
                 submitted again)",
                task_ref.id
            ));
        }
        outcome
    }

    async fn save(
        &self,
        output: Output,
        cost: Option<f64>,
        line: u64,
        stem: &str,
        resumed: bool,
        task_ref: &genapi::TaskRef,
    ) -> JobOutcome {
        // The journal keeps the settled cost alone: the cap trusts no other.
        let settled = settled_cost(&output).map(SettledCost::credits);
        let cost = output.cost().or(cost);
        let duration = output.duration();
        // A run that stopped between saving and writing left the file.
        let existing = if resumed {
            existing_file(&self.out_dir, stem)
        } else {
            None
        };
        let file = match existing {
            Some(file) => file,
            // The line's file is the batch's to write: one an earlier task
            // of the line left (an adopted task's result replaces it), or
            // one of an earlier batch into the same folder, is replaced.
            None => match output.save_replacing(self.out_dir.join(stem)).await {
                Ok(file) => file,
                Err(error) => {
                    let mut outcome = self.failed(line, stem, None, &error, Standing::Accepted);
                    outcome.cost = cost;
                    outcome.error = Some(match &error {
                        // The same address, run out since it came, offered
                        // again: the next run's polls ask once more, and
                        // end the line if the task is gone. The line stays
                        // open meanwhile, and the error's own advice (to
                        // submit again) is not given.
                        Error::ResultExpired { .. } => format!(
                            "the result of task {} could not be fetched: its address was refused and the service \
                             offered no fresh one; run the batch again to poll the task once more (it is not \
                             submitted again; if the task is gone, that run says so)",
                            task_ref.id
                        ),
                        _ => format!(
                            "{error}; the task is finished: run the batch again to fetch its result (it is not \
                             submitted again)"
                        ),
                    });
                    return outcome;
                }
            },
        };
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let finished = Event::Finished {
            line,
            status: "Ready".into(),
            file: name,
            seed: output.seed().and_then(serde_json::Number::from_i128),
            cost: settled,
            duration,
            error: None,
            class: None,
        };
        let mut outcome = JobOutcome::new(line, stem, Standing::Saved);
        if let Err(e) = self.record(finished).await {
            outcome.error = Some(format!("saved, but the journal could not record it ({e})"));
        }
        outcome.file = Some(file);
        outcome.seed = output.seed();
        outcome.cost = cost;
        outcome.settled = settled;
        outcome.duration = duration;
        outcome
    }

    fn failed(
        &self,
        line: u64,
        stem: &str,
        task: Option<genapi::TaskRef>,
        error: &Error,
        standing: Standing,
    ) -> JobOutcome {
        let mut outcome = JobOutcome::new(line, stem, standing);
        outcome.task = task.or_else(|| error.task().cloned());
        outcome.class = Some(error.class());
        outcome.error = Some(error.to_string());
        outcome
    }
}

/// What a task that ended without a result was charged: what its
/// acceptance reported, unless its ending charges nothing (moderation).
fn charged(ending: &FailedStatus, reported: Option<f64>) -> Option<f64> {
    reported.filter(|_| !ending.charged_nothing())
}

/// Said of an accepted task whose wait a stop ended.
const STOPPED_WAITING: &str =
    "stopped while waiting; the task was accepted: run the batch again to keep waiting for it (it is not submitted \
     again)";

/// Said of an accepted task whose wait a stop ended, when the service ends
/// with this run.
const STOPPED_WAITING_GONE: &str = "stopped while waiting; the task was accepted by a service that ends with this run \
     (a mock in this process), so no later run can finish it; start the batch over in another output directory";

/// Said of a line whose task lived in a service that ended with its run.
const GONE: &str = "its submission went to a service that ended with an earlier run (a mock in that run's process), \
                    so its task is gone and no run can finish it; start the batch over in another output directory";

/// Said (inside the crate) of a submission a stop kept from leaving.
const STOPPED_BEFORE_SENDING: &str = "stopped before it was sent";

/// A job a stop kept from being sent.
fn not_sent(line: u64, stem: &str) -> JobOutcome {
    let mut outcome = JobOutcome::new(line, stem, Standing::Unsent);
    outcome.error = Some("stopped before it was sent; running the batch again submits it".into());
    outcome
}

/// The cost the service settled `output`'s task at, when it can be one:
/// a figure below any real price (nothing, less than nothing, 1e-9) is no
/// settled cost, so the task stays counted at what it held (it may have
/// been charged) instead of loosening the cap by its figure.
fn settled_cost(output: &Output) -> Option<SettledCost> {
    output.settled_cost().and_then(SettledCost::of)
}

/// What to say about a submission sent without an answer.
fn unknown_message(line: u64, sent_at: Option<u64>, error: Option<&Error>) -> String {
    let cause = error.map(|e| format!(" ({e})")).unwrap_or_default();
    // The journal is input: a time past what a date can show is given as it is.
    const YEAR_10000: u64 = 253_402_300_800;
    let when = match sent_at {
        Some(secs) if secs < YEAR_10000 => {
            format!(
                " at {}",
                httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            )
        }
        Some(secs) => format!(" at Unix time {secs}"),
        None => String::new(),
    };
    format!(
        "sent{when}, no answer came back{cause}; the service may have accepted (and charged) it, so it is not sent \
         again on its own. If you find its task id, adopt it for line {line}; if it was not accepted, allow sending \
         it again (which risks paying twice)"
    )
}

/// Now, in Unix seconds.
/// The reference of a task the store holds.
fn task_ref(task: &AcceptedTask) -> genapi::TaskRef {
    genapi::TaskRef {
        id: task.id.clone(),
        polling_url: task.polling_url.clone(),
    }
}

/// A line refused for a reason of its own, nothing sent.
fn failed_outcome(number: u64, stem: &str, standing: Standing, class: FailureClass, error: String) -> JobOutcome {
    let mut outcome = JobOutcome::new(number, stem, standing);
    outcome.class = Some(class);
    outcome.error = Some(error);
    outcome
}

/// A changed line whose earlier job was sent is not this job's: its task or
/// file must not be reported as this job's, nor this job sent in its place.
/// The earlier task is named in the words, not as this outcome's task:
/// adopting it for the changed line would only fail again.
fn refused_changed(number: u64, stem: &str, line: &Line) -> JobOutcome {
    let earlier = line
        .task()
        .map(|task| format!(" (its task then: {})", task.id))
        .unwrap_or_default();
    // It stands changed (`--status` says the same), with what the earlier
    // job was charged; nothing of this one is sent.
    let mut outcome = failed_outcome(
        number,
        stem,
        Standing::Changed,
        FailureClass::Validation,
        format!(
            "line {number} changed since the journal recorded its submission{earlier}, so it was not sent; \
             {RESTORE}"
        ),
    );
    let task_cost = line.task().and_then(|task| task.cost);
    outcome.cost = match line.ending() {
        Some(Ending::Saved { cost, .. }) => cost.or(task_cost),
        Some(Ending::Failed { status, .. }) => charged(status, task_cost),
        None => task_cost,
    };
    outcome
}

/// A job whose record another line holds ([`Claims`]) is not sent here:
/// that record may be its paid task.
fn refused_moved(number: u64, stem: &str, left_behind: Option<(u64, JobAt)>) -> JobOutcome {
    let earlier = left_behind.map(|(earlier, _)| earlier).unwrap_or_default();
    let why = match left_behind {
        Some((_, JobAt::Nowhere)) => format!(
            "line {earlier}'s job was submitted (and may have been paid for) in an earlier run, and no line of the \
             job file holds it any more: line {number}'s job is new to the journal and may be that one, edited (a \
             number written 5.0 for 5, text retyped, an image file saved again), so it was not sent (that could pay \
             for it twice); {RESTORE}"
        ),
        Some((_, JobAt::Unreadable)) => format!(
            "line {earlier}'s record in the journal cannot be read, so the job its task was paid for is not known \
             and could be line {number}'s: line {number} was not sent (that could pay for it twice). No run of this \
             folder sends it while that record stays damaged (an adopted task does not tell which job the record \
             sent): write the journal's damaged line back as it was; jobs new to the batch can run in a job file \
             of their own, with another --out folder"
        ),
        _ => format!(
            "line {number}'s job was submitted as line {earlier}, which now holds another job or is no longer in the \
             job file: lines of the job file moved (one inserted or removed above, or the lines sorted?), so it was \
             not sent (that could pay for it twice); {RESTORE}"
        ),
    };
    failed_outcome(number, stem, Standing::Changed, FailureClass::Validation, why)
}

/// What to do about a line refused for an edit of the job file. Another
/// output directory is not advised: it would send every line again, the
/// saved ones too, and pay for each twice.
const RESTORE: &str = "restore the file as it was when its lines were sent (each job at the line the journal \
                       recorded it at; `--status` says which lines still differ), and add new jobs at its end, \
                       where they move no line";

/// Never submit a finished line again, even without its task.
fn refused_lost_file(number: u64, stem: &str, line: &Line) -> JobOutcome {
    let mut outcome = failed_outcome(
        number,
        stem,
        line.standing(),
        FailureClass::Write,
        format!(
            "line {number} finished in an earlier run, but its file is gone and the journal does not hold its task \
             to fetch it again"
        ),
    );
    outcome.from_journal = true;
    outcome
}

/// Sent to a service that ended with an earlier run: nothing can answer for
/// its task any more, so it is neither polled nor sent.
fn gone(number: u64, stem: &str, line: &Line) -> JobOutcome {
    let mut outcome = failed_outcome(number, stem, Standing::Gone, FailureClass::TaskFailed, GONE.into());
    outcome.task = line.task().map(task_ref);
    outcome
}

/// Sent, never answered, and not sent again unless asked.
fn unknown(number: u64, stem: &str, line: &Line) -> JobOutcome {
    let mut outcome = JobOutcome::new(number, stem, Standing::Unanswered);
    let sent = line.sent();
    if let Some(sent) = sent.filter(|sent| sent.damaged || sent.digest.is_none()) {
        // Not sent again even when asked: see `decide`'s rule 6.
        let what = match sent.digest {
            Some(_) => "a record after its submission cannot be read: it may be its acceptance",
            None => "its record cannot be read: it may be the submission of any job of the file",
        };
        outcome.class = Some(FailureClass::Write);
        outcome.error = Some(format!(
            "line {number}'s journal is damaged ({what}, the task made and charged), so it is not sent again, even \
             when unanswered lines may be. Write the damaged record back, or, if you find its task id (the \
             service's activity records), adopt it for line {number}"
        ));
        return outcome;
    }
    outcome.class = Some(FailureClass::Unknown);
    outcome.error = Some(unknown_message(number, sent.and_then(|sent| sent.sent_at), None));
    outcome
}

/// Whether a saved result is at `path`: a file that is not empty.
fn is_a_saved_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or(0)
}

/// A seed read back from the journal.
fn seed_of(number: &serde_json::Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

/// A result saved under this stem earlier.
fn existing_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    EXTENSIONS
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .find(|path| path.is_file())
}

/// What one sending of a job gave: the service's answer, and when the
/// request left (if it did).
struct Sent {
    answer: Result<Task, Error>,
    sent_at: Option<u64>,
    /// The request named the batch's receiver of notifications.
    notified: bool,
}

/// What follows a submission that was not accepted.
enum Next {
    /// The line's outcome.
    Outcome(Box<JobOutcome>),
    /// Send it again after this pause.
    RetryAfter(Duration),
}

/// What the intent of one sending is made of, and the marks it sets.
#[derive(Clone, Copy)]
struct Intent<'a> {
    job: &'a Job,
    stem: &'a str,
    digest: &'a str,
    kind: &'a str,
    /// Set as the request is about to leave.
    leaving: &'a AtomicBool,
    /// When it left (Unix seconds).
    sent_at: &'a AtomicU64,
}

/// Why the journal held a submission back: nothing was sent.
enum HeldBack {
    /// A stop came before the request left.
    Stopped,
    /// The intent could not be written (the message says why).
    JournalFailed(String),
    /// The submission could pass the credit cap.
    CapReached,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line waiting out a 429 is not at the service: it counts as
    /// waiting for room, never in flight, until it is sent again.
    #[test]
    fn a_line_waiting_out_a_refusal_waits_for_room_and_is_not_in_flight() {
        let counters = Counters::default();
        let (_first, _second) = (counters.enter(), counters.enter());
        assert_eq!((counters.in_flight(), counters.waiting_for_room()), (2, 0));
        let resting = counters.resting();
        assert_eq!((counters.in_flight(), counters.waiting_for_room()), (1, 1));
        drop(resting);
        assert_eq!((counters.in_flight(), counters.waiting_for_room()), (2, 0));
    }
}
