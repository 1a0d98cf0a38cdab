//! `genapi batch JOBS.jsonl --out DIR`: many requests, resumable after any
//! interruption without paying twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use genapi::FailureClass;
use genapi_batch::{
    adopt, safe_stem, AdoptError, Batch, FileJournal, InvalidLine, Job, JobFile, JobLine, JobOutcome, JobStatus,
    Journal, LineProblem, MemoryJournal,
};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::{code, connect_with, out, timeout_of, Failure, Global};

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
            global.timeout
        ),
    )
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
    #[arg(short = 'o', long, value_name = "DIR", required_unless_present = "schema")]
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
    /// The batch's name in the ledger (default: from the job file's contents).
    #[arg(long, value_name = "NAME")]
    batch_name: Option<String>,
    /// The seat pool in the ledger that --max-active counts in: batches and programs sharing a pool share an
    /// account's active tasks. A pool has one size: a worker asking for another is refused.
    #[arg(long, value_name = "NAME", default_value = "default")]
    seats_pool: String,
    /// Spend at most N credits on this batch in all (over every run and worker). Submissions stop when the next
    /// could pass it; tasks in flight finish.
    #[arg(long, value_name = "N", value_parser = parse_credits)]
    max_credits: Option<f64>,
    /// Show where the batch stands in the ledger (lines done, failed, in flight, unknown, credits, workers) and
    /// exit; --json for JSON. It only reads: a batch no worker has started is reported as not there, not created.
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
        | LedgerError::Insecure { .. }
        | LedgerError::OtherJobFile { .. }
        | LedgerError::WorkerTaken { .. }
        | LedgerError::SchemaTooNew { .. } => code::USAGE,
        _ => code::OTHER,
    };
    Failure::new(class, format!("--ledger: {error}; nothing was sent"))
}

/// `genapi batch`.
pub async fn run(global: &Global, args: BatchArgs) -> Result<(), Failure> {
    if args.schema {
        let schema = JobLine::schema();
        out::out(&serde_json::to_string_pretty(&schema).unwrap_or_default());
        return Ok(());
    }
    let (Some(jobs_file), Some(out_dir)) = (args.jobs.clone(), args.out.clone()) else {
        return Err(Failure::usage("give a job file and --out DIR (or --schema)"));
    };
    let deadline = Instant::now() + timeout_of(global);
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
        None if args.status || args.batch_name.is_some() => {
            return Err(Failure::usage(
                "--status and --batch-name need --ledger URL (or GENAPI_LEDGER_URL)",
            ))
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
            std::fs::create_dir_all(&out_dir)
                .map_err(|e| Failure::usage(format!("--out {}: cannot create the directory ({e})", shown(&out_dir))))?;
            let options = genapi_batch::ledger::LedgerOptions::default()
                .lease(Duration::from_secs(args.ledger_lease))
                // Each database step ends within half of --timeout, so a
                // database that stops answering cannot hold the worker past
                // it, and the lines it kept from being sent are reported.
                .step_deadline((timeout_of(global) / 2).min(genapi_batch::ledger::DEFAULT_STEP_DEADLINE));
            let options = match &args.worker_name {
                Some(name) => options.worker_name(name.clone()),
                None => options.worker_for_folder(&out_dir),
            };
            let hold = genapi_batch::ledger::UNANSWERED_SEAT_HOLD;
            let opening = async {
                // The pool's size is checked first: a refused worker leaves no batch behind.
                let seats = match args.max_active {
                    Some(size) => {
                        genapi_batch::ledger::SharedSeats::connect_with_options(
                            &url,
                            &args.seats_pool,
                            size as usize,
                            &options,
                            hold,
                        )
                        .await
                    }
                    None => {
                        genapi_batch::ledger::SharedSeats::join_with_options(
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
                let ledger = genapi_batch::ledger::Ledger::open_with(&url, &name, &digest, options.clone())
                    .await
                    .map_err(|e| ledger_failure(&e))?;
                Ok::<_, Failure>((ledger, seats))
            };
            Some(
                tokio::time::timeout_at(deadline, opening)
                    .await
                    .map_err(|_| ledger_late(global))??,
            )
        }
    };
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| Failure::usage(format!("--out {}: cannot create the directory ({e})", shown(&out_dir))))?;
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
            Keeper::File(journal)
        }
    };
    let max_active = args.max_active.map_or(DEFAULT_MAX_ACTIVE, |n| n as usize);
    let connection = match &keeper {
        Keeper::Ledger(_, seats) => {
            connect_with(global, |builder| builder.shared_places(seats.places(), seats.limit())).await?
        }
        Keeper::File(_) => connect_with(global, |builder| builder.max_active_tasks(max_active)).await?,
    };
    if connection.mock.is_some() {
        out::err("note: the built-in mock stops with this command, so a later run cannot resume its tasks");
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
                    global.timeout
                ),
            )
        })??;
    }
    // Listening for Ctrl-C before anything is sent: the handler is in place
    // once the future has been polled.
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    let _ = futures::poll!(interrupt.as_mut());
    let shared_seats = match &keeper {
        Keeper::Ledger(_, seats) => Some(seats.clone()),
        Keeper::File(_) => None,
    };
    let shared = shared_seats.is_some();
    let reader = valid_jobs(&checked)?;
    let (counters, stopper, stream) = match keeper {
        Keeper::File(journal) => {
            let batch = settle(Batch::new(connection.client.clone(), journal, &out_dir), &args);
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
    let mut stream = stream.map_err(|e| Failure::new(code::OTHER, format!("cannot read the journal: {e}")))?;

    // Workers sharing the directory each write their own partial results.
    let partial = if shared {
        out_dir.join(format!(".{RESULTS}.{}.partial", std::process::id()))
    } else {
        out_dir.join(format!(".{RESULTS}.partial"))
    };
    let mut results = genapi::files::create_temporary(&partial)
        .map_err(|e| Failure::new(code::OTHER, format!("cannot write {}: {e}", shown(&partial))))?;
    let mut tally = Tally::new(checked.lines() - checked.invalid_lines());
    let mut printed = Printed {
        json: global.json,
        lost: None,
    };
    for invalid in checked.invalid() {
        let message = explained(invalid);
        let entry = json!({"line": invalid.line, "status": "invalid", "error": message, "class": "validation"});
        write_result(&mut results, &entry, &mut printed)?;
    }
    tally.invalid = checked.invalid_lines();
    let started = Instant::now();
    let terminal = out::stderr_is_terminal();
    let mut ticker = tokio::time::interval(if terminal {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    });
    ticker.tick().await;
    let stopped: Option<Failure> = loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(outcome) => {
                    let outcome = with_flags(outcome);
                    report(&outcome);
                    write_result(&mut results, &outcome.to_json(), &mut printed)?;
                    tally.add(&outcome);
                }
                None => break None,
            },
            _ = ticker.tick() => show_progress(&tally, counters.in_flight(), started.elapsed(), terminal),
            _ = tokio::time::sleep_until(deadline) => break Some(Failure::new(code::TIMEOUT, format!(
                "--timeout {}s passed; run the same command again to resume (accepted tasks are polled, not submitted again)",
                global.timeout
            ))),
            _ = &mut interrupt => break Some(Failure::new(code::INTERRUPTED,
                "interrupted; run the same command again to resume (accepted tasks are polled, not submitted again)")),
        }
    };
    if stopped.is_some() {
        // Submissions already sent get their answers recorded, so the next
        // run polls their tasks instead of calling them unknown; nothing new
        // is sent. A second Ctrl-C (or 15 s) ends this at once.
        stopper.stop();
        out::progress(
            "stopping: recording the answers of submissions in flight (Ctrl-C again to quit now; submissions still \
             unanswered then are reported as unknown by the next run)",
        );
        let drain_until = Instant::now() + Duration::from_secs(15);
        let again = tokio::signal::ctrl_c();
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
    if terminal && !out::quiet() {
        out::err_raw("\r\x1b[2K");
    }
    // The seats this worker gave back are free for the others at once (a
    // database that does not answer gets a few seconds: they come back
    // with their lease instead).
    if let Some(seats) = &shared_seats {
        if tokio::time::timeout(SEATS_FLUSH, seats.flush()).await.is_err() {
            out::err("note: the seats this worker gave back could not all be written to the ledger; they come back to the pool when their lease lapses");
        }
    }
    let _ = results.sync_data();
    drop(results);
    if stopped.is_none() {
        std::fs::rename(&partial, out_dir.join(RESULTS))
            .map_err(|e| Failure::new(code::OTHER, format!("cannot write {RESULTS}: {e}")))?;
    } else {
        // An unfinished run leaves the previous results as they were.
        let _ = std::fs::remove_file(&partial);
    }
    summary(
        &tally,
        &out_dir,
        global.json,
        connection.mock.is_some(),
        stopped.is_none(),
    );
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
    if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(file) = std::fs::File::open(&path) else {
        return false;
    };
    BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .any(|line| serde_json::from_str::<Value>(&line).is_ok_and(|entry| entry["task_id"].is_string()))
}

fn shown(path: &Path) -> String {
    out::clean(&path.display().to_string())
}

/// Where result lines go besides results.jsonl: stdout with --json, as long
/// as it can be written.
struct Printed {
    json: bool,
    /// Why stdout could not be written, once it could not.
    lost: Option<std::io::Error>,
}

fn write_result(file: &mut std::fs::File, entry: &Value, printed: &mut Printed) -> Result<(), Failure> {
    let text = entry.to_string();
    writeln!(file, "{text}").map_err(|e| Failure::new(code::OTHER, format!("cannot write {RESULTS}: {e}")))?;
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

/// A failure or an unknown outcome, said as it happens; a saved result
/// with a problem (a class) too.
fn report(outcome: &JobOutcome) {
    if outcome.from_journal {
        return;
    }
    let worth_saying = outcome.status != JobStatus::Succeeded || outcome.class.is_some();
    if let (Some(error), true) = (&outcome.error, worth_saying) {
        let task = outcome
            .task
            .as_ref()
            .map(|t| format!(" (task {})", out::clean(&t.id)))
            .unwrap_or_default();
        out::err(&format!(
            "line {} {}{task}: {}: {}",
            outcome.line,
            outcome.name,
            outcome.status.as_str(),
            out::clean(error)
        ));
    }
}

/// Counts for the progress line and the summary.
struct Tally {
    jobs: usize,
    succeeded: usize,
    earlier: usize,
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

fn show_progress(tally: &Tally, in_flight: usize, elapsed: Duration, terminal: bool) {
    if out::quiet() {
        return;
    }
    let seconds = elapsed.as_secs_f64().max(0.001);
    let rate = tally.worked as f64 / seconds;
    let remaining = tally.jobs.saturating_sub(tally.done());
    let eta = if rate > 0.0 {
        format!("ETA {:.0}s", remaining as f64 / rate)
    } else {
        "ETA unknown".to_string()
    };
    let line = format!(
        "batch: {}/{} done, {} failed, {} in flight, {:.1}/s, {eta}, {:.2} credits",
        tally.done(),
        tally.jobs,
        tally.failed_total(),
        in_flight,
        rate,
        tally.cost
    );
    if terminal {
        out::err_raw(&format!("\r\x1b[2K{line}"));
    } else {
        out::err(&line);
    }
}

fn summary(tally: &Tally, out_dir: &Path, json: bool, mock: bool, written: bool) {
    let failed: Vec<String> = tally.failed.iter().map(|(class, n)| format!("{n} {class}")).collect();
    let mut text = format!(
        "{} succeeded ({} from earlier runs), {} failed{}, {} moderated, {} pending, {} unknown, {} invalid; total \
         known cost {:.2} credits{}; {}",
        tally.succeeded,
        tally.earlier,
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
    let accounted =
        tally.succeeded + tally.failed.values().sum::<usize>() + tally.moderated + tally.pending + tally.unknown.len();
    let not_started = tally.jobs.saturating_sub(accounted);
    if not_started > 0 {
        text.push_str(&format!(
            "\n{not_started} of {} lines were not started: running the same command again sends them",
            tally.jobs
        ));
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

    if json {
        out::err(&text);
    } else {
        for line in text.lines() {
            out::out(line);
        }
    }
}

/// Why a line is invalid, in the command's words: the library's reasons, with
/// where to look for the right ones, and what a terminal should not print
/// removed.
fn explained(invalid: &InvalidLine) -> String {
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
    let jobs = checked.jobs().map_err(|e| Failure::usage(out::clean(&e.to_string())))?;
    Ok(jobs.filter_map(|job| {
        job.map_err(|changed| out::err(&format!("line {}: {}", changed.line, explained(&changed))))
            .ok()
    }))
}
