//! `genapi batch JOBS.jsonl --out DIR`: many requests, resumable after any
//! interruption without paying twice.
//!
//! A run goes through these steps, one file each:
//!
//! 1. [`jobs`]: the job file is checked whole; invalid lines are said, and
//!    refuse the run unless `--skip-invalid`.
//! 2. [`keeper`]: the batch's store is opened, the journal in `--out` or a
//!    ledger shared by workers (or only read, for `--status`, which
//!    [`status`] shows).
//! 3. [`adoption`]: tasks found elsewhere are given to their lines
//!    (`--adopt`), before anything is sent.
//! 4. [`drive`]: the lines run until done, `--timeout` or Ctrl-C; each
//!    outcome goes to [`results`] and [`tally`], failures are said by
//!    [`report`].
//! 5. [`finish`]: results.jsonl is put in place, the summary said, and the
//!    exit code chosen; a run stopped early says what the next one does with
//!    each line ([`standing`]).
//!
//! Every step reads what the command was asked, the job file and the
//! deadline from one [`Run`].

mod adoption;
mod drive;
mod estimate;
mod finish;
mod folder;
mod jobs;
mod keeper;
mod notifications;
mod report;
mod results;
mod standing;
mod status;
mod tally;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::Args;
use drive::Ended;
use genapi_batch::{Batch, JobFile, JobLine};
use tokio::time::Instant;

pub(crate) use jobs::explained;

use crate::{learned, out, timeout_if_given, Failure, Global};

/// The journal's file name in the output directory.
const JOURNAL: &str = "journal.jsonl";
/// The mark a run with `--ledger` leaves in the output directory, naming
/// the ledger's batch: a run without it in that folder would know nothing
/// of the lines' tasks.
const LEDGER_MARK: &str = ".ledger-batch";
// The results' file name in the output directory: the one the gallery
// reads.
use genapi_gallery::RESULTS;
/// Active tasks at most without --max-active (the service's default), and
/// the size of a new seat pool.
const DEFAULT_MAX_ACTIVE: usize = 24;

/// Settings of `genapi batch`.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// The job file: one JSON object per line.
    ///
    /// E.g. `{"model": "gen-2-pro", "name": "fox", "prompt": "a red fox"}`;
    /// image fields take a path (relative to the job file) or an http(s) URL. See --schema.
    #[arg(value_name = "JOBS.jsonl", required_unless_present = "schema")]
    jobs: Option<PathBuf>,
    /// Directory for the images, results.jsonl and the journal (created if needed).
    ///
    /// Run the same command again to resume.
    #[arg(short = 'o', long, value_name = "DIR", required_unless_present_any = ["schema", "status", "estimate"], value_parser = parse_out_dir)]
    out: Option<PathBuf>,
    /// Submit the valid lines even when others are invalid.
    #[arg(long)]
    skip_invalid: bool,
    /// Submit again lines sent but never answered (may pay twice).
    ///
    /// The service may have accepted them: this risks paying twice for each.
    #[arg(long)]
    resubmit_unknown: bool,
    /// Give an unanswered line the task it created.
    ///
    /// The task, found elsewhere (e.g. in the project's activity records), is polled and its result saved; the
    /// line is not submitted again. TASK is the task id or its polling URL. Repeatable.
    #[arg(long, value_name = "LINE=TASK", value_parser = adoption::parse)]
    adopt: Vec<(u64, String)>,
    /// Submit again lines the service refused in an earlier run.
    ///
    /// Those refused with 402, 403 or 422, e.g. after adding credits.
    #[arg(long)]
    retry_refused: bool,
    /// Tasks active at the service at most.
    ///
    /// For this run [default: 24, as the service allows by default; with
    /// --ledger, the seat pool's size, which a new pool takes from its first worker]. `--limit` is the old name.
    #[arg(long, visible_alias = "limit", value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_active: Option<u32>,
    /// Share the batch with other workers through a PostgreSQL ledger.
    ///
    /// Workers on this machine or others, through this PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DB; default: GENAPI_LEDGER_URL). Each line is done by one worker, the
    /// seats of the --seats-pool are shared by all, and the ledger replaces the journal.
    #[arg(long, value_name = "URL")]
    ledger: Option<String>,
    /// The batch's name in the ledger.
    ///
    /// [default: the job file's name, as `jobs:` and its letters and digits, e.g. jobs:jobsjsonl].
    #[arg(long, value_name = "NAME")]
    batch_name: Option<String>,
    /// The seat pool in the ledger that --max-active counts in.
    ///
    /// Batches and programs sharing a pool share an
    /// account's active tasks. A pool has one size: a worker asking for another is refused.
    #[arg(long, value_name = "NAME", default_value = "default")]
    seats_pool: String,
    /// Spend at most N credits on this batch in all.
    ///
    /// Over every run and worker. Submissions stop when the next
    /// could pass it; tasks in flight finish. A kind of line (the same model, sizes and input images) is priced
    /// by the cost the service settled when one of its tasks ended in this batch, never by the cost an
    /// acceptance reports or a price learned before (see --estimate). Until then its first line is sent alone,
    /// holding all that is left, and may cost more than was left, so the batch spends at most N plus what that
    /// one submission costs above what was left (as long as the service charges a kind alike). A batch charged more than N exits 11.
    #[arg(long, value_name = "N", value_parser = parse_credits)]
    max_credits: Option<f64>,
    /// Show where the batch stands and exit.
    ///
    /// What the next run does with each line, read from the journal in
    /// --out DIR, or from the ledger with --ledger, which adds the credits and the workers (--out is not
    /// needed); --json for JSON, counting the lines by where they stand. It only reads: nothing is created or
    /// sent.
    #[arg(long)]
    status: bool,
    /// Seconds a worker's claims and seats last without renewal.
    ///
    /// Renewed a few times per lease while it runs: a worker that died leaves its lines to the others after this long. The same worker started again (same
    /// machine and --out, or same --worker-name) takes its lines back at once, once the database ended its earlier
    /// run's connections (waited for up to 5 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    ledger_lease: u64,
    /// This worker's name in the ledger.
    ///
    /// [default: this machine's name and the --out folder; workers sharing both
    /// are told apart as NAME#2, NAME#3…]. Started again under its name, a worker takes back its lines at once,
    /// without waiting for --ledger-lease. Only one running worker may have a name: a name still held is waited for
    /// up to 5 s (a worker killed a moment ago holds it until the database ends its connections).
    #[arg(long, value_name = "NAME", value_parser = parse_worker_name)]
    worker_name: Option<String>,
    /// Have the service notify the batch at URL when each task ends.
    ///
    /// The service calls URL (an address it can reach, which leads to --webhook-listen, e.g. through your proxy);
    /// each notification wakes its task's wait, so its seat goes to the next line at once instead of at the next
    /// poll. Polling still says how each task ended, and goes on if no notification comes. The --out folder has a
    /// secret of its own for them, kept for its later runs. Lines naming their own webhook_url keep it.
    #[arg(long, value_name = "URL", requires = "webhook_listen", conflicts_with_all = ["status", "estimate", "schema"])]
    webhook_url: Option<String>,
    /// Where the batch listens for the notifications sent to --webhook-url (ADDR:PORT, e.g. 0.0.0.0:8090).
    ///
    /// The service's own notifications come from the service's side: with `genapi mock` or the built-in mock,
    /// which call this machine, `--webhook-url http://127.0.0.1:8090/ --webhook-listen 127.0.0.1:8090` tries it.
    #[arg(
        long,
        value_name = "ADDR:PORT",
        requires = "webhook_url",
        conflicts_with_all = ["status", "estimate", "schema"],
        value_parser = notifications::parse_listen
    )]
    webhook_listen: Option<std::net::SocketAddr>,
    /// Print what the job file will cost and exit, sending nothing.
    ///
    /// Per model and in all, by the prices this
    /// account was charged before for each kind of line (the same model, sizes and inputs; kept per service
    /// address); lines of a kind never charged (or at a price no service charges, such as 1e-9) are counted
    /// apart and named, not guessed. --json for JSON.
    #[arg(long, conflicts_with = "status")]
    estimate: bool,
    /// Print the JSON Schema of a job line and exit.
    #[arg(long)]
    schema: bool,
    /// Do not keep the gallery (index.html) in the output directory.
    ///
    /// The gallery is a page of the results, with thumbnails in thumbs/.
    #[arg(long)]
    no_gallery: bool,
    /// Open the gallery (index.html) with the desktop's opener (or GENAPI_OPENER) as the batch starts: the page
    /// reloads itself while the batch runs.
    #[arg(long, conflicts_with_all = ["no_gallery", "status", "estimate", "schema"])]
    open: bool,
}

/// Reads a worker name: printable, and short enough to show.
fn parse_worker_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.len() > 200 || text.chars().any(char::is_control) {
        return Err("give a name of 1 to 200 printable characters".into());
    }
    Ok(text.to_string())
}

/// Reads the output folder: `-`, standard output elsewhere, is no folder.
fn parse_out_dir(text: &str) -> Result<PathBuf, String> {
    if text == "-" {
        return Err(
            "a batch writes its images and results.jsonl into a folder: name one (--json prints the \
                    results on standard output)"
                .into(),
        );
    }
    Ok(PathBuf::from(text))
}

/// Reads a credit amount.
fn parse_credits(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(credits) if credits.is_finite() && credits >= 0.0 => Ok(credits),
        _ => Err(format!("{text:?} is not a number of credits (0 or more)")),
    }
}

impl BatchArgs {
    /// Whether the run prints tasks on stdout (not `--status` or `--schema`,
    /// which send nothing).
    pub fn prints_tasks(&self) -> bool {
        !self.status && !self.schema
    }

    /// Whether the run needs the settings of a service (not `--schema`,
    /// which only prints).
    pub fn reads_settings(&self) -> bool {
        !self.schema
    }
}

/// `genapi batch`.
pub async fn run(global: &Global, args: BatchArgs) -> Result<(), Failure> {
    if args.schema {
        let schema = JobLine::schema();
        out::out(&serde_json::to_string_pretty(&schema).unwrap_or_default());
        return Ok(());
    }
    let run = Run::new(global, args)?;
    if run.args.estimate {
        return estimate::show(&run);
    }
    let ledger_url = keeper::ledger_url(&run)?;
    if run.args.status {
        return status::show(&run, ledger_url).await;
    }
    run.send(ledger_url).await
}

/// `genapi batch` as it was asked for: what every step reads.
struct Run<'g> {
    /// The command's options.
    global: &'g Global,
    /// The batch's settings.
    args: BatchArgs,
    /// The job file, as given.
    jobs_file: PathBuf,
    /// The job file, checked whole.
    checked: JobFile,
    /// The valid lines' numbers, read from the job file when first needed.
    job_lines: OnceLock<Vec<u64>>,
    /// When the command ends at the latest (`--timeout`).
    deadline: Instant,
}

impl<'g> Run<'g> {
    /// Checks the job file; the deadline runs from now.
    fn new(global: &'g Global, args: BatchArgs) -> Result<Run<'g>, Failure> {
        let Some(jobs_file) = args.jobs.clone() else {
            return Err(Failure::usage("give a job file and --out DIR (or --schema)"));
        };
        let deadline = Instant::now() + timeout_if_given(global);
        // `--status` and `--estimate` only read: invalid lines are said,
        // and counted.
        let checked = jobs::check(&jobs_file, args.skip_invalid || args.status || args.estimate)?;
        Ok(Run {
            global,
            args,
            jobs_file,
            checked,
            job_lines: OnceLock::new(),
            deadline,
        })
    }

    /// The flags that send again what a plain run would not: what "the
    /// same command" does with a line depends on them.
    fn asked(&self) -> genapi_batch::Asked {
        genapi_batch::Asked {
            retry_refused: self.args.retry_refused,
            resubmit_unknown: self.args.resubmit_unknown,
        }
    }

    /// The line numbers of the job file's valid lines.
    fn job_lines(&self) -> &[u64] {
        self.job_lines.get_or_init(|| jobs::job_lines(&self.checked))
    }

    /// A run that sends: the store is opened in `--out` or the ledger at
    /// `ledger_url`, the adoptions recorded, the lines driven, and the end
    /// said.
    async fn send(&self, ledger_url: Option<String>) -> Result<(), Failure> {
        // An --adopt naming no valid line is a mistake said before anything
        // is opened or reached.
        adoption::check_lines(self)?;
        // Listening first: a port that cannot be had stops the run before
        // anything is opened.
        let receiver = match (&self.args.webhook_url, self.args.webhook_listen, &self.args.out) {
            (Some(url), Some(listen), Some(out)) => Some(notifications::Receiver::start(url, listen, out).await?),
            _ => None,
        };
        let out_dir = out_folder(&self.args)?;
        let keep_gallery = results::check_folder(&out_dir, self.args.no_gallery)?;
        let keeper = keeper::open(self, ledger_url, &out_dir).await?;
        let connection = keeper.connect(self).await?;
        let on_builtin_mock = connection.mock.is_some();
        if on_builtin_mock {
            out::err(
                "note: the built-in mock ends with this command: if the batch is interrupted, the tasks it accepted \
                 are gone and the batch starts over in another folder (to be able to resume, start a mock that \
                 outlives it: eval \"$(genapi mock --background)\")",
            );
        }
        notifications::learn_kept_secret(&connection.client, &out_dir);
        adoption::adopt_all(self, &connection.client, &*keeper.store).await?;
        let before = self.standing_before(&*keeper.store, &out_dir).await;
        let gallery = keep_gallery.then(|| self.gallery(&out_dir, before.clone()));
        // The folder stays held until the run has finished with it.
        let keeper::Keeper {
            store,
            seats,
            folder: _held,
        } = keeper;
        let mut batch = self.settle(
            Batch::new(connection.client.clone(), store, &out_dir),
            on_builtin_mock,
            connection.prices_key(),
        );
        if let Some(receiver) = &receiver {
            batch = batch.notify_at(receiver.notify_at());
        }
        let counters = batch.counters();
        let results = results::Results::create(&out_dir, self.global.json, gallery, before)?;
        let ended = self.drive(batch, results, &connection).await?;
        if let Some(receiver) = &receiver {
            receiver.say_what_came(counters.submitted());
        }
        finish::finish(self, ended, seats, &out_dir, connection.on_a_mock()).await
    }

    /// Every line as `store` says it stands before the run (a store that
    /// cannot say leaves them unsent), with what the last results kept of
    /// it ([`results::standing_before`]).
    async fn standing_before(&self, store: &dyn genapi_batch::Store, out_dir: &Path) -> Vec<genapi_batch::ResultLine> {
        let standings = store
            .status(self.job_lines())
            .await
            .map(|status| status.lines)
            .unwrap_or_default();
        results::standing_before(out_dir, &standings, self.job_lines())
    }

    /// The gallery kept during the run, written now with every line as it
    /// stands `before` the run.
    fn gallery(&self, out_dir: &Path, before: Vec<genapi_batch::ResultLine>) -> results::LiveGallery {
        let opener = self.args.open.then(|| crate::opener::Opener::of(&self.global.settings));
        results::LiveGallery::new(out_dir, &self.jobs_file, opener, before)
    }

    /// The run's settings on a batch. Prices charged before only keep back
    /// a capped run's first line of a kind they say would not fit.
    fn settle(&self, batch: Batch, on_builtin_mock: bool, prices_key: &str) -> Batch {
        let batch = batch
            .resubmit_unknown(self.args.resubmit_unknown)
            .retry_refused(self.args.retry_refused)
            .ephemeral_service(on_builtin_mock)
            .known_prices(learned::PRICES.load(prices_key));
        match self.args.max_credits {
            Some(credits) => batch.max_credits(credits),
            None => batch,
        }
    }

    /// Drives `batch` to its end on `connection`; the costs it saw settled
    /// are kept for the next run, however it ended.
    async fn drive(
        &self,
        batch: Batch,
        results: results::Results,
        connection: &crate::Connection,
    ) -> Result<Ended, Failure> {
        let prices = batch.prices();
        let ended = drive::drive(self, batch, results, connection.mock.is_some()).await;
        learned::save_prices(connection.prices_key(), prices.snapshot());
        ended
    }
}

/// `--out`, which every run but `--status` needs, created if need be.
fn out_folder(args: &BatchArgs) -> Result<PathBuf, Failure> {
    let out_dir = args
        .out
        .clone()
        .ok_or_else(|| Failure::usage("give --out DIR: the folder for the images, results.jsonl and the journal"))?;
    // A file (or a device) at the name: --out takes a folder.
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(Failure::usage(format!(
            "--out {}: not a folder; --out names the folder for the images, results.jsonl and the journal",
            shown(&out_dir)
        )));
    }
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| Failure::usage(format!("--out {}: cannot create the directory ({e})", shown(&out_dir))))?;
    Ok(out_dir)
}

/// A path as the command shows it.
fn shown(path: &Path) -> String {
    out::clean(&path.display().to_string())
}
