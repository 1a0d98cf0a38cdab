//! `genapi batch JOBS.jsonl --out DIR`: many requests, resumable after any
//! interruption without paying twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use genapi::FailureClass;
use genapi_batch::{
    adopt, safe_stem, AdoptError, Batch, FileJournal, InvalidLine, Job, JobFile, JobLine, JobOutcome, JobStatus,
    Journal, LineProblem, MemoryJournal, Standing,
};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::progress::{Figures, Progress};
use crate::{code, connect_with, out, standing, timeout_if_given, Failure, Global};

/// The journal's file name in the output directory.
const JOURNAL: &str = "journal.jsonl";
/// The results' file name in the output directory.
const RESULTS: &str = "results.jsonl";
/// Active tasks at most without --max-active (the service's default), and
/// the size of a new seat pool.
const DEFAULT_MAX_ACTIVE: usize = 24;

/// How long the seats given back may take to reach the ledger at the end.
const SEATS_FLUSH: Duration = Duration::from_secs(5);

/// The ledger could not be opened within --timeout.
fn ledger_late(global: &Global) -> Failure {
    Failure::new(
        code::TIMEOUT,
        format!(
            "--timeout {}s passed while opening the ledger (its database did not answer in time); nothing was sent",
            global.timeout_seconds()
        ),
    )
}

/// `--out`, which every run but `--status` needs.
fn out_folder(args: &BatchArgs) -> Result<PathBuf, Failure> {
    args.out
        .clone()
        .ok_or_else(|| Failure::usage("give --out DIR: the folder for the images, results.jsonl and the journal"))
}

/// Settings of `genapi batch`.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// The job file: one JSON object per line, `{"model": "gen-2-pro", "name": "fox", "prompt": "a red fox"}`;
    /// image fields take a path (relative to the job file) or an http(s) URL. See --schema.
    #[arg(value_name = "JOBS.jsonl", required_unless_present = "schema")]
    jobs: Option<PathBuf>,
    /// Directory for the images, results.jsonl and the journal (created if needed). Run the same command
    /// again to resume.
    #[arg(short = 'o', long, value_name = "DIR", required_unless_present_any = ["schema", "status"])]
    out: Option<PathBuf>,
    /// Submit the valid lines even when others are invalid.
    #[arg(long)]
    skip_invalid: bool,
    /// Submit again lines whose earlier submission was sent but never answered. The service may have accepted
    /// them: this risks paying twice for each.
    #[arg(long)]
    resubmit_unknown: bool,
    /// Give a line whose submission went unanswered the task it created, found elsewhere (e.g. in the project's
    /// activity records): the task is polled and its result saved; the line is not submitted again. TASK is the
    /// task id or its polling URL. Repeatable.
    #[arg(long, value_name = "LINE=TASK", value_parser = parse_adopt)]
    adopt: Vec<(u64, String)>,
    /// Submit again lines the service refused in an earlier run (402, 403, 422), e.g. after adding credits.
    #[arg(long)]
    retry_refused: bool,
    /// Tasks active at the service at most, for this run [default: 24, as the service allows by default; with
    /// --ledger, the seat pool's size, which a new pool takes from its first worker]. `--limit` is the old name.
    #[arg(long, visible_alias = "limit", value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_active: Option<u32>,
    /// Share the batch with other workers, on this machine or others, through this PostgreSQL database
    /// (postgres://USER:PASSWORD@HOST:PORT/DB; default: GENAPI_LEDGER_URL). Each line is done by one worker, the
    /// seats of the --seats-pool are shared by all, and the ledger replaces the journal.
    #[arg(long, value_name = "URL")]
    ledger: Option<String>,
    /// The batch's name in the ledger (default: the job file's name).
    #[arg(long, value_name = "NAME")]
    batch_name: Option<String>,
    /// The seat pool in the ledger that --max-active counts in: batches and programs sharing a pool share an
    /// account's active tasks. A pool has one size: a worker asking for another is refused.
    #[arg(long, value_name = "NAME", default_value = "default")]
    seats_pool: String,
    /// Spend at most N credits on this batch in all (over every run and worker). Submissions stop when the next
    /// could pass it; tasks in flight finish. A submission of a kind not yet charged (another size or input
    /// image) has no known price: it is sent alone, and may cost more than was left, so the batch spends at most
    /// N plus what that one submission costs above what was left (as long as the service charges a kind alike;
    /// see docs/batch.md).
    #[arg(long, value_name = "N", value_parser = parse_credits)]
    max_credits: Option<f64>,
    /// Show where the batch stands and exit: from the journal in --out DIR (what the next run does with each line),
    /// or from the ledger with --ledger (lines done, failed, in flight, unknown, credits, workers; --out is not
    /// needed); --json for JSON. It only reads: nothing is created or sent.
    #[arg(long)]
    status: bool,
    /// Seconds a worker's claims and seats last without renewal (renewed a few times per lease while it runs): a
    /// worker that died leaves its lines to the others after this long. The same worker started again (same
    /// machine and --out, or same --worker-name) takes its lines back at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    ledger_lease: u64,
    /// This worker's name in the ledger [default: this machine's name and the --out folder; workers sharing both
    /// are told apart as NAME#2, NAME#3…]. Started again under its name, a worker takes back its lines at once,
    /// without waiting for --ledger-lease. Only one running worker may have a name.
    #[arg(long, value_name = "NAME", value_parser = parse_worker_name)]
    worker_name: Option<String>,
    /// Print the JSON Schema of a job line and exit.
    #[arg(long)]
    schema: bool,
    /// Do not keep index.html (a gallery of the results, with thumbnails in thumbs/) in the output directory.
    #[arg(long)]
    no_gallery: bool,
}

/// Reads a worker name: printable, and short enough to show.
fn parse_worker_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.len() > 200 || text.chars().any(char::is_control) {
        return Err("give a name of 1 to 200 printable characters".into());
    }
    Ok(text.to_string())
}

/// Reads a credit amount.
fn parse_credits(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(credits) if credits.is_finite() && credits >= 0.0 => Ok(credits),
        _ => Err(format!("{text:?} is not a number of credits (0 or more)")),
    }
}

/// The ledger URL: --ledger, else GENAPI_LEDGER_URL.
fn ledger_url(args: &BatchArgs) -> Option<String> {
    args.ledger
        .clone()
        .or_else(|| std::env::var("GENAPI_LEDGER_URL").ok())
        .filter(|url| !url.trim().is_empty())
}

fn ledger_failure(error: &genapi_batch::ledger::LedgerError) -> Failure {
    use genapi_batch::ledger::LedgerError;
    if let LedgerError::PoolSize { pool, size, asked } = error {
        return Failure::usage(format!(
            "--max-active {asked}: seat pool {} in the ledger has {size} seats, and a pool has one size, which all \
             its workers share; leave --max-active out (or pass --max-active {size}) to work in it, or choose another \
             --seats-pool for {asked} seats; nothing was sent",
            out::clean(&format!("{pool:?}"))
        ));
    }
    let class = match error {
        LedgerError::Unreachable { .. } | LedgerError::Unanswered { .. } => code::NETWORK,
        LedgerError::Credentials { .. } => FailureClass::Auth.exit_code(),
        LedgerError::Url { .. }
        | LedgerError::Settings { .. }
        | LedgerError::Insecure { .. }
        | LedgerError::OtherJobFile { .. }
        | LedgerError::WorkerTaken { .. }
        | LedgerError::SchemaTooNew { .. } => code::USAGE,
        _ => code::OTHER,
    };
    Failure::new(class, format!("--ledger: {error}; nothing was sent"))
}

impl BatchArgs {
    /// Whether the run prints tasks on stdout (not `--status` or `--schema`,
    /// which send nothing).
    pub fn prints_tasks(&self) -> bool {
        !self.status && !self.schema
    }
}

/// `genapi batch`.
pub async fn run(global: &Global, args: BatchArgs) -> Result<(), Failure> {
    if args.schema {
        let schema = JobLine::schema();
        out::out(&serde_json::to_string_pretty(&schema).unwrap_or_default());
        return Ok(());
    }
    let Some(jobs_file) = args.jobs.clone() else {
        return Err(Failure::usage("give a job file and --out DIR (or --schema)"));
    };
    let deadline = Instant::now() + timeout_if_given(global);
    let checked = JobFile::check(&jobs_file).map_err(|e| {
        let too_large = std::fs::metadata(&jobs_file).is_ok_and(|m| m.len() > genapi_batch::JOB_FILE_LIMIT);
        let hint = if too_large {
            " (split a larger batch into several job files, each run with its own --out)"
        } else {
            ""
        };
        Failure::usage(format!("{}{hint}", out::clean(&e.to_string())))
    })?;
    for invalid in checked.invalid() {
        out::err(&format!(
            "{}: line {}: {}",
            shown(&jobs_file),
            invalid.line,
            explained(invalid)
        ));
    }
    let unlisted = checked.invalid_lines() - checked.invalid().len();
    if unlisted > 0 {
        out::err(&format!(
            "{}: {unlisted} more invalid lines (only the first {} are listed)",
            shown(&jobs_file),
            checked.invalid().len()
        ));
    }
    if checked.invalid_lines() > 0 && !args.skip_invalid {
        return Err(Failure::usage(format!(
            "{} of {} lines are invalid; nothing was submitted (fix them, or pass --skip-invalid to submit the others)",
            checked.invalid_lines(),
            checked.lines()
        )));
    }
    if checked.lines() == 0 {
        return Err(Failure::usage(format!("{}: no jobs in the file", shown(&jobs_file))));
    }
    let ledger = match ledger_url(&args) {
        None if args.batch_name.is_some() => {
            return Err(Failure::usage(
                "--batch-name names the batch in a ledger: it needs --ledger URL (or GENAPI_LEDGER_URL)",
            ))
        }
        None if args.status => {
            let Some(out_dir) = &args.out else {
                return Err(Failure::usage(
                    "--status reads the journal in --out DIR (or a ledger, with --ledger URL)",
                ));
            };
            return journal_status(&checked, out_dir, global.json);
        }
        None => None,
        Some(_) if crate::uses_builtin_mock(global) && !args.status => {
            return Err(Failure::usage(
                "--ledger shares a batch between workers of one service, but this run would use its own built-in \
                 mock, which no other worker can see and which ends with it (its tasks and seats would be stranded \
                 in the ledger): set GENAPI_BASE_URL and GENAPI_API_KEY, for instance to a `genapi mock` all the \
                 workers share; nothing was sent",
            ))
        }
        Some(url) => {
            let digest = checked.digest().to_string();
            // Named after the job file, not its contents: a job file that
            // changes under the same name is refused (its lines would be paid
            // for again in a new batch), not silently a new batch.
            let name = args.batch_name.clone().unwrap_or_else(|| {
                let file = jobs_file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("jobs:{}", safe_stem(&file))
            });
            if args.status {
                // Only read: a batch no worker has started is not created.
                let lines = checked.lines() as u64;
                let reading = genapi_batch::ledger::Ledger::read_status(&url, &name, &digest, lines);
                let status = tokio::time::timeout_at(deadline, reading)
                    .await
                    .map_err(|_| ledger_late(global))?
                    .map_err(|e| ledger_failure(&e))?;
                show_status(status, &name, lines, global.json);
                return Ok(());
            }
            // The worker's name is made from the folder as it will be.
            let out_dir = out_folder(&args)?;
            std::fs::create_dir_all(&out_dir)
                .map_err(|e| Failure::usage(format!("--out {}: cannot create the directory ({e})", shown(&out_dir))))?;
            let options = genapi_batch::ledger::LedgerOptions::default()
                .lease(Duration::from_secs(args.ledger_lease))
                // Each database step ends within half of --timeout, so a
                // database that stops answering cannot hold the worker past
                // it, and the lines it kept from being sent are reported.
                .step_deadline((crate::timeout_if_given(global) / 2).min(genapi_batch::ledger::DEFAULT_STEP_DEADLINE));
            let options = match &args.worker_name {
                Some(name) => options.worker_name(name.clone()),
                None => options.worker_for_folder(&out_dir),
            };
            let hold = genapi_batch::ledger::UNANSWERED_SEAT_HOLD;
            let opening = async {
                // The pool's size is checked first: a refused worker leaves no batch behind.
                let seats = match args.max_active {
                    Some(size) => {
                        genapi_batch::ledger::SharedSeats::connect_with(
                            &url,
                            &args.seats_pool,
                            size as usize,
                            &options,
                            hold,
                        )
                        .await
                    }
                    None => {
                        genapi_batch::ledger::SharedSeats::join_with(
                            &url,
                            &args.seats_pool,
                            DEFAULT_MAX_ACTIVE,
                            &options,
                            hold,
                        )
                        .await
                    }
                }
                .map_err(|e| ledger_failure(&e))?;
                let mut ledger = genapi_batch::ledger::Ledger::open_with(&url, &name, &digest, options.clone())
                    .await
                    .map_err(|e| ledger_failure(&e))?;
                // One commit per record, the seat's changes written with them.
                ledger.carry_seat_changes(&seats).map_err(|e| ledger_failure(&e))?;
                Ok::<_, Failure>((ledger, seats))
            };
            Some(
                tokio::time::timeout_at(deadline, opening)
                    .await
                    .map_err(|_| ledger_late(global))??,
            )
        }
    };
    let out_dir = out_folder(&args)?;
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| Failure::usage(format!("--out {}: cannot create the directory ({e})", shown(&out_dir))))?;
    // Files in the folder that a batch did not write are left as they are,
    // by the file policy: a results file of someone else's refuses the run
    // before anything is sent; a page of the user's own leaves the run
    // without a gallery, which is said now.
    genapi_files::may_write(&out_dir.join(RESULTS), RESULTS_FILE)
        .map_err(|refused| Failure::usage(format!("{}; nothing was sent", out::clean(&refused.to_string()))))?;
    let keep_gallery = !args.no_gallery
        && match genapi_gallery::Gallery::may_write(&out_dir) {
            Ok(()) => true,
            Err(refused) => {
                out::err(&format!("warning: no gallery: {}", out::clean(&refused.to_string())));
                false
            }
        };
    // With a ledger, workers share the output directory and no journal is kept.
    let mut keeper = match ledger {
        Some((ledger, seats)) => Keeper::Ledger(Box::new(ledger), seats),
        None => {
            let mut journal = FileJournal::open(out_dir.join(JOURNAL)).map_err(|e| {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::InvalidData
                ) {
                    Failure::usage(format!("{e}; nothing was sent"))
                } else {
                    Failure::new(
                        code::OTHER,
                        format!("cannot open the journal in {}: {e}", shown(&out_dir)),
                    )
                }
            })?;
            // A journal that lost its records would have every line submitted
            // (and paid for) again: results.jsonl naming tasks says it had some.
            if results_name_tasks(&out_dir) && journal.replay().is_ok_and(|records| records.is_empty()) {
                return Err(Failure::usage(format!(
                    "--out {}: {RESULTS} lists tasks of an earlier run, but {JOURNAL} holds no record of them, so \
                     running would submit (and pay for) those lines again and overwrite their files; restore \
                     {JOURNAL} from a copy, or, to start over, move {RESULTS} and the images away (or choose another \
                     --out directory); nothing was sent",
                    shown(&out_dir)
                )));
            }
            // Tasks that lived in a built-in mock that ended cannot be polled
            // by anyone: said at once, instead of polling them until --timeout.
            let standings = journal.replay().map(genapi_batch::standings).unwrap_or_default();
            let gone: Vec<u64> = standings
                .iter()
                .filter(|(_, standing)| **standing == Standing::Gone)
                .map(|(line, _)| *line)
                .collect();
            if !gone.is_empty() {
                return Err(Failure::usage(format!(
                    "{}; nothing was sent",
                    standing::gone_advice(&gone, &out_dir, false)
                )));
            }
            Keeper::File(journal)
        }
    };
    // An --adopt naming no valid line is a mistake said before any service
    // (or the built-in mock) is reached.
    if !args.adopt.is_empty() {
        let valid: HashSet<u64> = job_lines(&checked).into_iter().collect();
        if let Some((line, _)) = args.adopt.iter().find(|(line, _)| !valid.contains(line)) {
            return Err(Failure::usage(format!(
                "--adopt {line}=…: {} has no valid line {line}",
                shown(&jobs_file)
            )));
        }
    }
    let max_active = args.max_active.map_or(DEFAULT_MAX_ACTIVE, |n| n as usize);
    let connection = match &keeper {
        Keeper::Ledger(_, seats) => {
            connect_with(global, |builder| builder.shared_places(seats.places(), seats.limit())).await?
        }
        Keeper::File(_) => connect_with(global, |builder| builder.max_active_tasks(max_active)).await?,
    };
    let on_builtin_mock = connection.mock.is_some();
    if on_builtin_mock {
        out::err(
            "note: the built-in mock ends with this command: if the batch is interrupted, the tasks it accepted are \
             gone and the batch starts over in another folder (run `genapi mock` to be able to resume)",
        );
    }
    if !args.adopt.is_empty() {
        let wanted: HashSet<u64> = args.adopt.iter().map(|(line, _)| *line).collect();
        let jobs: HashMap<u64, Job> = valid_jobs(&checked)?
            .filter(|job| wanted.contains(&job.line))
            .map(|job| (job.line, job))
            .collect();
        let adopting = async {
            for (line, task) in &args.adopt {
                let Some(job) = jobs.get(line) else {
                    return Err(Failure::usage(format!(
                        "--adopt {line}=…: {} has no valid line {line}",
                        shown(&jobs_file)
                    )));
                };
                let adopted = match &mut keeper {
                    Keeper::File(journal) => adopt(&connection.client, journal, job, task).await,
                    Keeper::Ledger(ledger, _) => ledger.adopt(&connection.client, job, task).await,
                }
                .map_err(|e| adopt_failure(*line, &e))?;
                let note = match &adopted.unchecked_prompt {
                    None => String::new(),
                    Some(reported) => format!(
                        "; note: its prompt is reported as {reported:?}, not the line's (this model may rewrite \
                         prompts, so it was not refused): if it is another task, adopt the right one, which replaces it"
                    ),
                };
                out::err(&out::clean(&format!(
                    "line {line}: recorded task {} as its task; the next step polls it, it is not submitted again{note}",
                    adopted.task.id
                )));
            }
            Ok(())
        };
        tokio::time::timeout_at(deadline, adopting).await.map_err(|_| {
            Failure::new(
                code::TIMEOUT,
                format!(
                    "--timeout {}s passed while checking the --adopt tasks; those not reported above were not \
                     recorded, and nothing was sent",
                    global.timeout_seconds()
                ),
            )
        })??;
    }
    // Listening for Ctrl-C before anything is sent.
    let interrupt = crate::interrupt::interrupted();
    tokio::pin!(interrupt);
    let shared_seats = match &keeper {
        Keeper::Ledger(_, seats) => Some(seats.clone()),
        Keeper::File(_) => None,
    };
    let shared = shared_seats.is_some();
    let changed = Changed::default();
    let reader = valid_jobs_noting(&checked, changed.clone())?;
    let (counters, stopper, stream) = match keeper {
        Keeper::File(journal) => {
            let batch = settle(Batch::new(connection.client.clone(), journal, &out_dir), &args)
                .ephemeral_service(on_builtin_mock);
            (batch.counters(), batch.stopper(), batch.run(reader).map(|s| s.boxed()))
        }
        Keeper::Ledger(ledger, _) => {
            let batch = settle(
                Batch::new(connection.client.clone(), MemoryJournal::default(), &out_dir),
                &args,
            )
            .ledger(*ledger);
            (batch.counters(), batch.stopper(), batch.run(reader).map(|s| s.boxed()))
        }
    };
    let mut stream = stream.map_err(|e| Failure::api(&e))?;

    // Written beside results.jsonl under a name of this worker's own
    // (workers sharing the directory each write theirs), put in its place
    // at the end.
    let partial = genapi_files::temporary_name(&out_dir.join(RESULTS));
    let mut results = genapi_files::create_temporary(&partial)
        .map_err(|e| Failure::new(code::OTHER, format!("cannot write {}: {e}", shown(&partial))))?;
    let mut tally = Tally::new(checked.lines() - checked.invalid_lines());
    let mut printed = Printed {
        json: global.json,
        lost: None,
        gallery: keep_gallery.then(|| Kept::new(&out_dir)),
    };
    for invalid in checked.invalid() {
        let message = explained(invalid);
        let entry = json!({"line": invalid.line, "status": "invalid", "error": message, "class": "validation"});
        write_result(&mut results, &entry, &mut printed)?;
    }
    tally.invalid = checked.invalid_lines();
    let progress = Progress::start("batch", tally.jobs as u64);
    let mut ticker = tokio::time::interval(if progress.is_bar() {
        Duration::from_secs(1)
    } else {
        crate::progress::PLAIN_EVERY
    });
    ticker.tick().await;
    let mut reports = Reports::default();
    let stopped: Option<Failure> = loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(outcome) => {
                    let outcome = with_flags(outcome);
                    reports.say(&outcome, &progress);
                    write_result(&mut results, &outcome.to_json(), &mut printed)?;
                    tally.add(&outcome);
                }
                None => break None,
            },
            _ = ticker.tick() => {
                progress.show(&tally.figures(&counters));
                if let Some(gallery) = &mut printed.gallery {
                    gallery.write_if_due();
                }
            }
            _ = tokio::time::sleep_until(deadline) => break Some(Failure::new(code::TIMEOUT, format!(
                "--timeout {}s passed", global.timeout_seconds()
            ))),
            _ = &mut interrupt => break Some(Failure::new(code::INTERRUPTED, "interrupted")),
        }
    };
    if stopped.is_some() {
        // The bar goes before anything else is said, and where the run
        // stood is said once more.
        progress.stopped(&tally.figures(&counters));
        // Submissions already sent get their answers recorded, so the next
        // run polls their tasks instead of calling them unknown; nothing new
        // is sent. A second Ctrl-C (or 15 s) ends this at once.
        stopper.stop();
        out::progress(if on_builtin_mock {
            "stopping: recording the answers of submissions in flight (Ctrl-C again to quit now)"
        } else {
            "stopping: recording the answers of submissions in flight (Ctrl-C again to quit now; submissions still \
             unanswered then are not sent again by the next run, which says so)"
        });
        // Within --timeout too: it bounds the whole command.
        let drain_until = (Instant::now() + Duration::from_secs(15)).min(deadline);
        let again = crate::interrupt::interrupted();
        tokio::pin!(again);
        loop {
            tokio::select! {
                next = stream.next() => match next {
                    Some(outcome) => {
                        let outcome = with_flags(outcome);
                        write_result(&mut results, &outcome.to_json(), &mut printed)?;
                        tally.add(&outcome);
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(drain_until) => break,
                _ = &mut again => break,
            }
        }
    }
    progress.finish();
    // Lines that changed while the batch ran were sent nowhere: each is a
    // result, and counted as an invalid line.
    for line in changed.take() {
        let entry = json!({"line": line.line, "status": "invalid", "error": explained(&line), "class": "validation"});
        write_result(&mut results, &entry, &mut printed)?;
        tally.invalid += 1;
    }
    if let Some(gallery) = &mut printed.gallery {
        gallery.write();
        if let Some(warning) = gallery.warning.take() {
            out::err(&warning);
        }
    }
    // The journal is closed (its last records written) once the stream is gone.
    drop(stream);
    // The seats this worker gave back are free for the others at once (a
    // database that does not answer gets a few seconds: they come back
    // with their lease instead).
    if let Some(seats) = &shared_seats {
        let flush_for = SEATS_FLUSH.min(deadline.saturating_duration_since(Instant::now()));
        if tokio::time::timeout(flush_for, seats.flush()).await.is_err() {
            out::err("note: the seats this worker gave back could not all be written to the ledger; they come back to the pool when their lease lapses");
        }
    }
    let _ = results.sync_data();
    drop(results);
    if stopped.is_none() {
        // A results.jsonl the batch did not write is left as it is.
        genapi_files::publish(&partial, &out_dir.join(RESULTS), RESULTS_FILE)
            .map_err(|refused| Failure::new(code::OTHER, out::clean(&refused.to_string())))?;
    } else {
        // An unfinished run leaves the previous results as they were.
        let _ = std::fs::remove_file(&partial);
    }
    reports.close();
    summary(&tally, &out_dir, global.json, on_builtin_mock, stopped.is_none());
    // A run that stopped early says what the next one does with each line,
    // as the journal has it (a ledger's --status says it for a shared batch).
    let stopped = match (stopped, shared) {
        (Some(mut failure), false) => {
            let standings = FileJournal::read(out_dir.join(JOURNAL))
                .map(genapi_batch::standings)
                .unwrap_or_default();
            let lines = standing::Lines::new(&standings, job_lines(&checked));
            let said = if lines.gone().is_empty() {
                lines
                    .next_run(&out_dir)
                    .iter()
                    .map(|sentence| format!("  {sentence}"))
                    .collect()
            } else {
                vec![standing::gone_advice(lines.gone(), &out_dir, true)]
            };
            say(&said, global.json);
            failure.message = if lines.gone().is_empty() {
                format!(
                    "{}; run the same command again to resume, as said above (accepted tasks are polled, not \
                     submitted again)",
                    failure.message
                )
            } else {
                format!("{}; start over in another folder, as said above", failure.message)
            };
            Some(failure)
        }
        (Some(mut failure), true) => {
            failure.message = format!(
                "{}; run the same command again to resume (accepted tasks are polled, not submitted again; --status \
                 shows where the batch stands)",
                failure.message
            );
            Some(failure)
        }
        (None, _) => None,
    };
    if let Some(error) = &printed.lost {
        let kept = if stopped.is_none() {
            format!("they are in {}, and ", shown(&out_dir.join(RESULTS)))
        } else {
            String::new()
        };
        let message =
            format!("the results could not be written to stdout ({error}); {kept}the task of each line is named above");
        match stopped {
            Some(failure) => {
                out::err(&format!("error: {message}"));
                return Err(failure);
            }
            None => return Err(Failure::new(code::ID_NOT_WRITTEN, message)),
        }
    }
    if let Some(failure) = stopped {
        return Err(failure);
    }
    match tally.exit_code() {
        0 => Ok(()),
        code => Err(Failure::new(code, "")),
    }
}

/// The run's settings on a batch, whatever keeps it.
fn settle<J: genapi_batch::Journal>(batch: Batch<J>, args: &BatchArgs) -> Batch<J> {
    let batch = batch
        .resubmit_unknown(args.resubmit_unknown)
        .retry_refused(args.retry_refused);
    match args.max_credits {
        Some(credits) => batch.max_credits(credits),
        None => batch,
    }
}

/// Where the batch is kept.
enum Keeper {
    /// The journal in the output directory (one process).
    File(FileJournal),
    /// A ledger shared by workers, with the seats they share.
    Ledger(Box<genapi_batch::ledger::Ledger>, genapi_batch::ledger::SharedSeats),
}

/// `--status`: the whole batch, as the ledger holds it (`None`: not there).
fn show_status(status: Option<genapi_batch::ledger::BatchStatus>, name: &str, lines: u64, json: bool) {
    let exists = status.is_some();
    let status = status.unwrap_or_else(|| {
        let mut none = genapi_batch::ledger::BatchStatus::default();
        none.batch = name.to_string();
        none.not_started = lines;
        none
    });
    if json {
        let mut view = serde_json::to_value(&status).unwrap_or_default();
        if let Some(fields) = view.as_object_mut() {
            fields.insert("exists".into(), Value::Bool(exists));
        }
        out::out(&view.to_string());
        return;
    }
    if !exists {
        out::out(&format!(
            "batch {} is not in the ledger: no worker has started it yet ({lines} lines not started)",
            out::clean(name)
        ));
        return;
    }
    out::out(&format!(
        "batch {}: {} done, {} failed, {} in flight, {} unknown, {} open, {} not started; {:.2} credits charged, \
         {:.2} held",
        out::clean(&status.batch),
        status.done,
        status.failed,
        status.in_flight,
        status.unknown,
        status.open,
        status.not_started,
        status.credits_charged,
        status.credits_held
    ));
    for (worker, lines) in &status.workers {
        let shown: Vec<String> = lines.iter().take(20).map(ToString::to_string).collect();
        let more = if lines.len() > 20 { ", …" } else { "" };
        out::out(&format!(
            "  {} holds {} line(s): {}{more}",
            out::clean(worker),
            lines.len(),
            shown.join(", ")
        ));
    }
}

/// Reads `LINE=TASK`.
fn parse_adopt(text: &str) -> Result<(u64, String), String> {
    let (line, task) = text
        .split_once('=')
        .ok_or_else(|| format!("expected LINE=TASK (a line number, `=`, a task id or polling URL), got `{text}`"))?;
    let line = line
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("`{line}` is not a line number (in LINE=TASK)"))?;
    let task = task.trim();
    if task.is_empty() {
        return Err("the task id is empty (in LINE=TASK)".into());
    }
    Ok((line, task.to_string()))
}

/// An adoption that did not happen; nothing was recorded or sent.
fn adopt_failure(line: u64, error: &AdoptError) -> Failure {
    let code = match error {
        AdoptError::Service { source, .. } => crate::exit_code(source),
        AdoptError::Journal(_) => code::OTHER,
        _ => code::USAGE,
    };
    let message = match error {
        AdoptError::Service { source, .. } => format!(
            "cannot check the task, so nothing was recorded: {}",
            crate::describe(source)
        ),
        other => other.to_string(),
    };
    Failure::new(code, out::clean(&format!("--adopt {line}=…: {message}")))
}

/// Whether the output directory's results.jsonl names a task (a line an
/// earlier run submitted or took up). Only a regular file is read.
fn results_name_tasks(out_dir: &Path) -> bool {
    let path = out_dir.join(RESULTS);
    if !genapi_files::is_taken(&path) {
        return false;
    }
    // By the file policy; one that cannot be read as a results file of
    // reasonable size is taken to name tasks (the run is then refused, not
    // paid again).
    let Ok(file) = genapi_files::open(&path, RESULTS_LIMIT) else {
        return true;
    };
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        // A result line is small: a longer line is no result, and is not held.
        match (&mut reader).take(RESULT_LINE_LIMIT).read_until(b'\n', &mut line) {
            Ok(0) => return false,
            Ok(_) if serde_json::from_slice::<Value>(&line).is_ok_and(|entry| entry["task_id"].is_string()) => {
                return true
            }
            Ok(_) if line.ends_with(b"\n") => {}
            // The rest of a long line is passed over.
            Ok(_) => {
                if reader.skip_until(b'\n').is_err() {
                    return true;
                }
            }
            Err(_) => return true,
        }
    }
}

/// The largest results file read (about a million lines).
const RESULTS_LIMIT: u64 = 1 << 30;

/// The longest line of a results file taken for a result.
const RESULT_LINE_LIMIT: u64 = 1 << 20;

fn shown(path: &Path) -> String {
    out::clean(&path.display().to_string())
}

/// Where result lines go besides results.jsonl: stdout with --json, as long
/// as it can be written.
struct Printed {
    json: bool,
    /// Why stdout could not be written, once it could not.
    lost: Option<std::io::Error>,
    /// The gallery kept beside the results (unless `--no-gallery`).
    gallery: Option<Kept>,
}

/// The gallery of the output directory, kept current during the run: each
/// result goes in as it is written, the page is written now and then (a
/// page of thousands of tiles is not rewritten for every line) and at the
/// end. A gallery that cannot be written is said once; the batch goes on.
struct Kept {
    gallery: genapi_gallery::Gallery,
    written: Option<Instant>,
    changed: bool,
    failed: bool,
    /// Why the page could not be written, to say after the run.
    warning: Option<String>,
}

impl Kept {
    /// How often the page is written while the batch runs.
    const EVERY: Duration = Duration::from_secs(2);

    fn new(dir: &Path) -> Kept {
        Kept {
            gallery: genapi_gallery::Gallery::new(dir),
            written: None,
            changed: false,
            failed: false,
            warning: None,
        }
    }

    fn add(&mut self, entry: &Value) {
        if let Ok(line) = serde_json::from_value::<genapi_batch::ResultLine>(entry.clone()) {
            self.gallery.add(line);
            self.changed = true;
        }
    }

    fn write_if_due(&mut self) {
        if self.changed && self.written.is_none_or(|at| at.elapsed() >= Kept::EVERY) {
            self.write();
        }
    }

    fn write(&mut self) {
        self.written = Some(Instant::now());
        self.changed = false;
        if let Err(error) = self.gallery.write() {
            if !std::mem::replace(&mut self.failed, true) {
                // Said once the run ends, below the bar rather than into it.
                self.warning = Some(format!("warning: no gallery: {}", out::clean(&error.to_string())));
            }
        }
    }
}

fn write_result(file: &mut std::fs::File, entry: &Value, printed: &mut Printed) -> Result<(), Failure> {
    let text = entry.to_string();
    writeln!(file, "{text}").map_err(|e| Failure::new(code::OTHER, format!("cannot write {RESULTS}: {e}")))?;
    if let Some(gallery) = &mut printed.gallery {
        gallery.add(entry);
    }
    if !printed.json {
        return Ok(());
    }
    if printed.lost.is_none() {
        match out::out_required(&text) {
            Ok(()) => return Ok(()),
            Err(error) => printed.lost = Some(error),
        }
    }
    // A task is paid for: its id must not be lost with stdout.
    if let Some(id) = entry["task_id"].as_str() {
        out::err(&out::clean(&format!(
            "line {} {}: task {id} (polling URL {}): {}",
            entry["line"],
            entry["name"].as_str().unwrap_or_default(),
            entry["polling_url"].as_str().unwrap_or_default(),
            entry["status"].as_str().unwrap_or_default(),
        )));
    }
    Ok(())
}

/// The library says how to recover in its own terms; a command user gets
/// the flags that do it.
fn with_flags(mut outcome: JobOutcome) -> JobOutcome {
    let line = outcome.line;
    let flags = match (outcome.status, outcome.class, &outcome.task) {
        (JobStatus::Unknown, _, _) => format!("--adopt {line}=TASK_ID, or --resubmit-unknown"),
        // An adopted task that turned out to be another line's.
        (JobStatus::Failed, Some(FailureClass::Validation), Some(_)) => format!("--adopt {line}=TASK_ID"),
        // A saved result whose paid task could not be recorded: a later
        // run would not know the task.
        (JobStatus::Succeeded, Some(FailureClass::Write), Some(task)) => {
            format!("--adopt {line}={}", out::clean(&task.id))
        }
        _ => return outcome,
    };
    if let Some(error) = &mut outcome.error {
        error.push_str(&format!(" (genapi batch: {flags})"));
    }
    outcome
}

/// Failures said as they happen (a saved result with a problem too), each
/// message once: a line whose report would repeat an earlier line's is
/// named with it at the end (a credit cap or a refusal reaches many lines
/// with the same words).
#[derive(Default)]
struct Reports {
    /// Each message said, with the line it was said of and the lines it
    /// was not repeated for.
    said: HashMap<String, (u64, Vec<u64>)>,
    /// The messages in the order they were said.
    order: Vec<String>,
}

impl Reports {
    fn say(&mut self, outcome: &JobOutcome, progress: &Progress) {
        if outcome.from_journal {
            return;
        }
        // Lines sent without an answer are many at once when the network
        // goes: the summary names them together, with what to do, once.
        if outcome.status == JobStatus::Unknown {
            return;
        }
        let worth_saying = outcome.status != JobStatus::Succeeded || outcome.class.is_some();
        let (Some(error), true) = (&outcome.error, worth_saying) else {
            return;
        };
        let status = status_words(outcome.status);
        let error = out::clean(error);
        let error = error.strip_prefix(&format!("{status}: ")).unwrap_or(&error);
        let message = format!("{status}: {error}");
        if let Some((_, repeats)) = self.said.get_mut(&message) {
            repeats.push(outcome.line);
            return;
        }
        let task = outcome
            .task
            .as_ref()
            .map(|t| format!(" (task {})", out::clean(&t.id)))
            .unwrap_or_default();
        progress.println(&format!("line {} {}{task}: {message}", outcome.line, outcome.name));
        self.said.insert(message.clone(), (outcome.line, Vec::new()));
        self.order.push(message);
    }

    /// Names the lines whose report was the same as an earlier line's.
    fn close(&mut self) {
        for message in &self.order {
            if let Some((first, repeats)) = self.said.get_mut(message) {
                if !repeats.is_empty() {
                    repeats.sort_unstable();
                    out::err(&format!("{}: the same as line {first}", standing::counted(repeats)));
                }
            }
        }
    }
}

/// A line's status as the command says it (results.jsonl keeps the
/// library's words, e.g. `not_submitted`).
fn status_words(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Succeeded => "saved",
        JobStatus::Moderated => "moderated",
        JobStatus::Pending => "accepted, not finished",
        JobStatus::Unknown => "sent without an answer",
        JobStatus::NotSubmitted => "not sent",
        _ => "failed",
    }
}

/// Counts for the progress line and the summary.
struct Tally {
    jobs: usize,
    succeeded: usize,
    earlier: usize,
    /// Of those, the ones that succeeded.
    earlier_succeeded: usize,
    worked: usize,
    failed: BTreeMap<&'static str, usize>,
    classes: HashSet<FailureClass>,
    moderated: usize,
    unknown: Vec<u64>,
    pending: usize,
    invalid: usize,
    cost: f64,
}

impl Tally {
    fn new(jobs: usize) -> Tally {
        Tally {
            jobs,
            succeeded: 0,
            earlier: 0,
            earlier_succeeded: 0,
            worked: 0,
            failed: BTreeMap::new(),
            classes: HashSet::new(),
            moderated: 0,
            unknown: Vec::new(),
            pending: 0,
            invalid: 0,
            cost: 0.0,
        }
    }

    fn add(&mut self, outcome: &JobOutcome) {
        if outcome.from_journal {
            self.earlier += 1;
            if outcome.status == JobStatus::Succeeded {
                self.earlier_succeeded += 1;
            }
        } else {
            self.worked += 1;
        }
        // Whatever was charged for the line, in this run or before.
        self.cost += outcome.cost.unwrap_or(0.0);
        if let Some(class) = outcome.class {
            self.classes.insert(class);
        }
        match outcome.status {
            JobStatus::Succeeded => self.succeeded += 1,
            JobStatus::Moderated => self.moderated += 1,
            JobStatus::Unknown => self.unknown.push(outcome.line),
            JobStatus::Pending => self.pending += 1,
            _ => {
                let unsent = if outcome.status == JobStatus::NotSubmitted {
                    "not_sent"
                } else {
                    "other"
                };
                let class = outcome.class.map_or(unsent, FailureClass::as_str);
                *self.failed.entry(class).or_default() += 1;
            }
        }
    }

    /// What progress shows.
    fn figures(&self, counters: &genapi_batch::Counters) -> Figures {
        Figures {
            done: self.done() as u64,
            total: self.jobs as u64,
            failed: self.failed_total() as u64,
            in_flight: counters.in_flight() as u64,
            held: counters.held_elsewhere() as u64,
            worked: self.worked as u64,
            credits: self.cost,
        }
    }

    fn done(&self) -> usize {
        self.earlier + self.worked
    }

    fn failed_total(&self) -> usize {
        self.failed.values().sum::<usize>() + self.moderated + self.unknown.len() + self.pending
    }

    /// 0 when every line succeeded, else the code of the most serious class.
    fn exit_code(&self) -> u8 {
        if self.failed_total() == 0 && self.invalid == 0 && self.classes.is_empty() {
            return 0;
        }
        FailureClass::most_serious(self.classes.iter().copied()).map_or(
            if self.invalid > 0 { code::USAGE } else { code::OTHER },
            FailureClass::exit_code,
        )
    }
}

fn summary(tally: &Tally, out_dir: &Path, json: bool, mock: bool, written: bool) {
    // The words of results.jsonl (`credit_cap`, `not_sent`) said as words.
    let failed: Vec<String> = tally
        .failed
        .iter()
        .map(|(class, n)| format!("{n} {}", class.replace('_', " ")))
        .collect();
    let mut text = format!(
        "{} succeeded ({} of them already done before this run or by another worker), {} failed{}, {} moderated, {} pending, {} unknown, {} invalid; total \
         known cost {:.2} credits{}; {}",
        tally.succeeded,
        tally.earlier_succeeded,
        tally.failed.values().sum::<usize>(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed.join(", "))
        },
        tally.moderated,
        tally.pending,
        tally.unknown.len(),
        tally.invalid,
        tally.cost,
        if mock { " (illustrative mock prices)" } else { "" },
        if written {
            format!("results in {}", shown(&out_dir.join(RESULTS)))
        } else {
            format!("{RESULTS} not updated (the run stopped early)")
        },
    );
    // A run that stopped early says what the next does from the journal,
    // not from the counts of this run, which miss the lines it let go of.
    if !written {
        let text = format!(
            "the run stopped early ({RESULTS} not updated); known cost {:.2} credits{}",
            tally.cost,
            if mock { " (illustrative mock prices)" } else { "" },
        );
        say(&[text], json);
        return;
    }
    if tally.pending > 0 {
        text.push_str("\npending tasks were accepted: run the same command again to finish them (never resubmitted)");
    }
    if !tally.unknown.is_empty() {
        let mut unknown = tally.unknown.clone();
        unknown.sort_unstable();
        let lines: Vec<String> = unknown.iter().take(20).map(u64::to_string).collect();
        let more = if unknown.len() > lines.len() { ", …" } else { "" };
        let (which, them, they) = match lines.as_slice() {
            [one] => (format!("line {one} was"), "it", "it is"),
            _ => (format!("lines {}{more} were", lines.join(", ")), "them", "they are"),
        };
        text.push_str(&format!(
            "\n{which} sent without an answer: the service may have accepted (and charged) {them}, so {they} not \
             sent again automatically. For each: if you find its task id (e.g. in the project's activity records; \
             the line's error in results.jsonl says when it was sent), run again with --adopt LINE=TASK_ID to fetch \
             its result; if it was not accepted, run again with --resubmit-unknown (it sends every unknown line \
             left, risking paying twice for any that was accepted)"
        ));
    }

    say(&[text], json);
}

/// The summary's lines: on stdout, or on stderr when stdout holds JSON.
fn say(texts: &[String], json: bool) {
    for text in texts {
        for line in text.lines() {
            if json {
                out::err(line);
            } else {
                out::out(line);
            }
        }
    }
}

/// The line numbers of the job file's valid lines.
fn job_lines(checked: &JobFile) -> Vec<u64> {
    checked
        .jobs()
        .map(|jobs| jobs.filter_map(Result::ok).map(|job| job.line).collect())
        .unwrap_or_default()
}

/// `--status` for a batch kept in a journal: what the next run does with
/// each line. Only reads.
fn journal_status(checked: &JobFile, out_dir: &Path, json: bool) -> Result<(), Failure> {
    let path = out_dir.join(JOURNAL);
    let records = match FileJournal::read(&path) {
        Ok(records) => Some(records),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Failure::usage(format!("--status: {}", out::clean(&e.to_string())))),
    };
    let exists = records.is_some();
    let standings = records.map(genapi_batch::standings).unwrap_or_default();
    let lines = standing::Lines::new(&standings, job_lines(checked));
    if json {
        out::out(
            &json!({"exists": exists, "journal": path.display().to_string(), "lines": lines.counts()}).to_string(),
        );
        return Ok(());
    }
    if !exists {
        out::out(&format!(
            "no run of this batch has started in {} yet ({} lines to send)",
            shown(out_dir),
            job_lines(checked).len()
        ));
        return Ok(());
    }
    out::out(&format!("batch in {}:", shown(out_dir)));
    for sentence in lines.next_run(out_dir) {
        out::out(&format!("  {sentence}"));
    }
    Ok(())
}

/// Why a line is invalid, in the command's words: the library's reasons, with
/// where to look for the right ones, and what a terminal should not print
/// removed.
pub(crate) fn explained(invalid: &InvalidLine) -> String {
    let problems: Vec<String> = invalid
        .problems
        .iter()
        .map(|problem| {
            let hint = match problem {
                LineProblem::NotAJobLine(_) => "; see `genapi batch --schema`".to_string(),
                LineProblem::UnknownModel(_) => " (see `genapi models`)".to_string(),
                LineProblem::UnknownField { model, .. } => format!("; see `genapi models {model}`"),
                _ => String::new(),
            };
            out::clean(&format!("{problem}{hint}"))
        })
        .collect();
    problems.join("; ")
}

/// The valid lines of the job file, read again one at a time as the batch
/// takes them; a line that changed since it was checked is reported and
/// skipped.
fn valid_jobs(checked: &JobFile) -> Result<impl Iterator<Item = Job> + Send + 'static, Failure> {
    valid_jobs_noting(checked, Changed::default())
}

/// Lines that changed in the job file while the batch ran: skipped (never
/// sent), each said when it is met, and counted as invalid at the end.
#[derive(Clone, Default)]
struct Changed(Arc<Mutex<Vec<InvalidLine>>>);

impl Changed {
    fn take(&self) -> Vec<InvalidLine> {
        self.0
            .lock()
            .map(|mut lines| std::mem::take(&mut *lines))
            .unwrap_or_default()
    }
}

/// The valid lines of the job file, read again as the batch goes; a line
/// that changed since the check is said, noted in `changed`, and skipped.
fn valid_jobs_noting(
    checked: &JobFile,
    changed: Changed,
) -> Result<impl Iterator<Item = Job> + Send + 'static, Failure> {
    let jobs = checked.jobs().map_err(|e| Failure::usage(out::clean(&e.to_string())))?;
    Ok(jobs.filter_map(move |job| {
        job.map_err(|line| {
            out::err(&format!("line {}: {}", line.line, explained(&line)));
            if let Ok(mut noted) = changed.0.lock() {
                noted.push(line);
            }
        })
        .ok()
    }))
}

/// How results.jsonl treats a file at its name: replaced only when a batch
/// wrote it.
const RESULTS_FILE: genapi_files::Existing = genapi_files::Existing::ReplaceOurs {
    writer: "a batch",
    ours: is_results_file,
};

/// Whether the first bytes of a file show a results file a batch wrote:
/// empty (white space alone), or a first line that is a result (an object
/// with its `line` and `status`).
fn is_results_file(head: &[u8]) -> bool {
    if head.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    let first = head.split(|&byte| byte == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<Value>(first).is_ok_and(|line| line["line"].is_u64() && line["status"].is_string())
}
