//! `generate`, `submit`, `wait` and `get`: tasks from submission to saved file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use genapi::{Client, Output, Task, WaitOptions};
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::progress::{Figures, Progress};
use crate::request::{prepare, Format, RequestArgs};
use crate::resume::{ServiceOfRun, WaitCommand};
use crate::{code, connect, out, timeout_of, Connection, Failure, Global};

/// Where results go.
#[derive(Args, Clone, Debug)]
pub struct SaveArgs {
    /// File or directory for the result, or `-` for standard output.
    ///
    /// A file's extension chooses the format (.jpg .jpeg .jfif .jpe, .png, .webp; others are refused), and a name
    /// without one gets the format's (`-o fox` saves `fox.jpg`). A folder gets generated names; `-` writes the
    /// image's bytes to standard output (redirected or piped, never a terminal).
    #[arg(short = 'o', long, value_name = "FILE|DIR|-")]
    pub out: Option<PathBuf>,
    /// Open each saved image with the desktop's opener (or GENAPI_OPENER).
    #[arg(long)]
    pub open: bool,
    /// The global `--force`: replace existing files.
    #[arg(skip)]
    pub force: bool,
    /// The global `--record`: a file the results must not be written over.
    #[arg(skip)]
    pub record: Option<PathBuf>,
    /// The global `--json`: standard output is taken by the objects.
    #[arg(skip)]
    pub json: bool,
}

/// What `--out` does in a command that picks a task up (`wait`, `get`),
/// below its first line: the format was chosen when the task was
/// submitted, so the name's extension only names the file.
pub const PICKED_UP_OUT: &str = "The format was chosen when the task was submitted: a name without an extension \
gets the result's (`-o fox` saves `fox.jpg` for a JPEG), a result of another format than the name's extension is \
saved with its own extension instead, and a name of no image format as given, with a warning. A folder gets generated names; `-` writes the image's bytes to standard output (redirected or piped, never \
a terminal).";

/// Where each result will be written; checked before anything is submitted.
#[derive(Clone, Debug)]
struct Plan {
    /// A file the user named, or a directory for generated names.
    file: Option<PathBuf>,
    dir: PathBuf,
    force: bool,
    /// Readable start of generated names.
    stem: String,
    /// Whether each saved result is opened (`--open`).
    open: bool,
    /// `-o -`: the bytes go to standard output, and no file is written.
    to_stdout: bool,
}

/// Whether `--out` names standard output (`-o -`).
fn names_stdout(out: &Path) -> bool {
    out.as_os_str() == "-"
}

/// A save refused before a submission: says that nothing was sent, so
/// nothing is paid. (`wait` and `get` submit nothing, and say nothing of
/// it.)
fn before_submitting(failure: Failure) -> Failure {
    Failure {
        message: format!("{}; nothing was submitted", failure.message),
        ..failure
    }
}

impl Plan {
    #[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
    fn new(save: &SaveArgs, count: u32, stem: String) -> Result<Plan, Failure> {
        if save.out.as_deref().is_some_and(names_stdout) {
            return Plan::onto_stdout(save, count);
        }
        let (file, dir) = match &save.out {
            None => (None, PathBuf::from(".")),
            Some(path) if path.is_dir() || path.as_os_str().to_string_lossy().ends_with(std::path::MAIN_SEPARATOR) => {
                (None, path.clone())
            }
            Some(path) => {
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                (Some(path.clone()), parent)
            }
        };
        // A folder named as one (a trailing separator) is made, as
        // `batch --out` makes its folder.
        if file.is_none() && !dir.exists() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::usage(format!("--out {}: cannot create the folder ({e})", shown(&dir))))?;
        }
        if !dir.is_dir() {
            return Err(Failure::usage(format!(
                "--out {}: the directory {} does not exist; create it first, or end --out with / to have a folder \
                 made",
                shown(save.out.as_deref().unwrap_or(&dir)),
                shown(&dir)
            )));
        }
        // A name that is already a pipe or a device, or a link to one, or
        // a process's open file (`/dev/stdout`, `/dev/fd/1`, or `/dev/fd/9`
        // not open), is never written, nor used as the stem of other names
        // (`/dev/null` must not become `/dev/null.jpg`): said before the
        // folder is tried. Any other refusal is the folder's to say.
        if let Some(file) = file.as_deref() {
            if let Err(refused @ genapi_files::FileError::NotRegular { .. }) =
                genapi_files::may_write(file, genapi_files::Existing::Replace)
            {
                return Err(Failure::usage(format!(
                    "--out {} (-o - writes the image to standard output)",
                    out::clean(&refused.to_string())
                )));
            }
        }
        probe_writable(&dir)?;
        let plan = Plan {
            file,
            dir,
            force: save.force,
            stem,
            to_stdout: false,
            open: save.open,
        };
        if let Some(file) = &plan.file {
            for index in 1..=count {
                let numbered = plan.numbered(file, (count > 1).then_some(index));
                // Without an extension the save adds the format's: every name
                // it may pick must be free.
                let candidates: Vec<PathBuf> = match numbered.extension() {
                    Some(_) => vec![numbered.clone()],
                    None => SAVED_EXTENSIONS
                        .iter()
                        .map(|ext| numbered.with_extension(ext))
                        .collect(),
                };
                for path in candidates {
                    if save.record.as_deref().is_some_and(|record| same_name(record, &path)) {
                        return Err(Failure::usage(format!(
                            "--record and --out both name {}: the result would be written over the recording (or \
                             the recording over an earlier result); give each its own file",
                            shown(&path)
                        )));
                    }
                    // Never a pipe, a device or a folder, nor a link to
                    // one, --force or not: found now, before paying, and
                    // before a taken name's advice to pass --force.
                    genapi_files::may_write(&path, genapi_files::Existing::Replace)
                        .map_err(|refused| Failure::usage(format!("--out {}", out::clean(&refused.to_string()))))?;
                    if taken(&path) && !plan.force {
                        let what = if path.exists() {
                            "the file exists"
                        } else {
                            "the name is taken by a link to a file that does not exist"
                        };
                        return Err(Failure::usage(format!(
                            "--out {}: {what}; choose another name, or pass --force to replace it",
                            shown(&path)
                        )));
                    }
                }
            }
        }
        Ok(plan)
    }

    /// `-o -`, refused where the bytes would have nowhere sensible to go.
    fn onto_stdout(save: &SaveArgs, count: u32) -> Result<Plan, Failure> {
        if count > 1 {
            return Err(Failure::usage(format!(
                "-o - writes one image to standard output, and -n {count} makes {count}: give a folder (-o shots/) \
                 or a file name, which is numbered (-o shot.jpg writes shot-1.jpg, shot-2.jpg, …)"
            )));
        }
        if save.json {
            return Err(Failure::usage(
                "--json and -o - both write to standard output: drop --json (the task's line then goes to stderr), \
                 or give -o a file name",
            ));
        }
        if save.open {
            return Err(Failure::usage(
                "--open opens a saved file, and -o - saves none: give -o a file name to open it, or pipe the bytes \
                 into a viewer",
            ));
        }
        if std::io::stdout().is_terminal() {
            return Err(Failure::usage(
                "-o - writes the image's bytes to standard output, which is a terminal here: redirect it \
                 (-o - > image.jpg) or pipe it into a program, or give -o a file name",
            ));
        }
        out::give_stdout_to_bytes();
        Ok(Plan {
            file: None,
            dir: PathBuf::from("."),
            force: save.force,
            stem: String::new(),
            open: false,
            to_stdout: true,
        })
    }

    fn numbered(&self, file: &Path, index: Option<u32>) -> PathBuf {
        let Some(index) = index else { return file.to_path_buf() };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match file.extension() {
            Some(ext) => format!("{stem}-{index}.{}", ext.to_string_lossy()),
            None => format!("{stem}-{index}"),
        };
        file.with_file_name(name)
    }

    /// What the resume command should pass as `--out`.
    fn resume_target(&self, index: Option<u32>) -> PathBuf {
        if self.to_stdout {
            return PathBuf::from("-");
        }
        match &self.file {
            Some(file) => self.numbered(file, index),
            None => self.dir.clone(),
        }
    }

    /// The path for a result with these bytes. Only the user's `--out` can
    /// leave the output directory: names made from service data are sanitised.
    fn path_for(&self, index: Option<u32>, id: &str, bytes: &[u8], sample: &str) -> (PathBuf, Option<String>) {
        // The bytes say what the result is; before the download its address
        // does (the service names results by their format).
        let sniffed = genapi::ImageFormat::sniff(bytes).map(|f| f.extension().to_string());
        let extension = sniffed.clone().unwrap_or_else(|| extension_of_url(sample));
        let sniffed = sniffed.or_else(|| (bytes.is_empty() && extension != "bin").then(|| extension.clone()));
        match &self.file {
            Some(file) => {
                let path = self.numbered(file, index);
                match path.extension().map(|e| e.to_string_lossy().into_owned()) {
                    None => (path.with_extension(&extension), None),
                    Some(ext) => {
                        let expected = Format::from_extension(&ext).map(|f| f.as_str().to_string());
                        let got = sniffed
                            .as_deref()
                            .and_then(Format::from_extension)
                            .map(|f| f.as_str().to_string());
                        match (expected, got) {
                            (Some(expected), Some(got)) if expected != got => (
                                path.with_extension(&extension),
                                Some(format!(
                                    "the result is {got}, not {expected} (the format is chosen when the task is \
                                     submitted: --format, or --out's extension); it is saved with the .{extension} \
                                     extension"
                                )),
                            ),
                            // `-o out.txt`, `-o "$(mktemp)"`: no image
                            // format's name. It is written as given (a
                            // script reads that name), once the bytes say
                            // what the image is, with a word that the name
                            // does not.
                            (None, Some(got)) if !bytes.is_empty() => (
                                path,
                                Some(format!(
                                    "the result is {got}, and .{} is no image extension; it is saved under the name \
                                     given",
                                    out::clean(&ext)
                                )),
                            ),
                            _ => (path, None),
                        }
                    }
                }
            }
            None => {
                let stem = if self.stem.is_empty() { "genapi" } else { &self.stem };
                let mut name = format!("{stem}-{}", out::safe_component(id, 8));
                if let Some(index) = index {
                    name = format!("{name}-{index}");
                }
                let mut path = self.dir.join(format!("{name}.{extension}"));
                let mut n = 2;
                while taken(&path) && !self.force {
                    path = self.dir.join(format!("{name}-{n}.{extension}"));
                    n += 1;
                }
                (path, None)
            }
        }
    }
}

/// Whether two names given on the command line name one file, as far as
/// their text says (both made absolute).
fn same_name(a: &Path, b: &Path) -> bool {
    match (std::path::absolute(a), std::path::absolute(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Whether a result cannot be written at `path` without `--force`: anything
/// has the name, a link to nothing included. The save publishes the finished
/// file by the file policy (`genapi_files::publish`), which refuses exactly
/// this case, so the checks before it (and the names it picks) ask the
/// same; `exists` follows links and would call a dangling one free.
fn taken(path: &Path) -> bool {
    genapi_files::is_taken(path)
}

fn extension_of_url(address: &str) -> String {
    let path = address.split(['?', '#']).next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    // Only the extensions of outputs the service makes: a hostile address
    // must not name a file `.exe` or `.sh`.
    match last.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()) {
        Some(ext) if ["jpg", "jpeg", "png", "webp", "gif", "mp4"].contains(&ext.as_str()) => ext,
        _ => "bin".to_string(),
    }
}

fn shown(path: &Path) -> String {
    out::clean(&path.display().to_string())
}

fn probe_writable(dir: &Path) -> Result<(), Failure> {
    let probe = dir.join(format!(".genapi-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Failure::usage(format!("cannot write in {}: {e}", shown(dir)))),
    }
}

/// The service the run used, as a printed command that picks a task up
/// again names it ([`ServiceOfRun`] says how).
fn service_of(global: &Global) -> ServiceOfRun {
    ServiceOfRun::of(&global.settings)
}

/// The command that picks a task up again.
fn resume_command(global: &Global, client: &Client, task_id: &str, polling_url: &str, target: &Path) -> WaitCommand {
    let by_id = url_is_fallback(client, task_id, polling_url);
    let shown = genapi_text::task_address(polling_url);
    let reference = if by_id { task_id } else { &shown };
    // `wait` finishes the job whatever the task's state: it waits while the
    // task runs and downloads once it is Ready.
    WaitCommand::new(reference, &service_of(global), &target.display().to_string())
}

fn url_is_fallback(client: &Client, task_id: &str, polling_url: &str) -> bool {
    let Ok(url) = reqwest_url(polling_url) else {
        return false;
    };
    let base = client.base_url();
    url.origin() == base.origin()
        && url.path().ends_with("/v1/get_result")
        && url.query_pairs().any(|(k, v)| k == "id" && v == task_id)
}

fn reqwest_url(text: &str) -> Result<url::Url, url::ParseError> {
    url::Url::parse(text)
}

/// Keeps the secrets of task `id`, sent with `body`, for the `wait` or `get`
/// of another command that picks it up; not when the service ends with
/// this command, as nothing can pick its tasks up.
fn keep_secrets(connection: &Connection, id: &str, body: &Map<String, Value>) {
    if !connection.ends_with_this_command() {
        crate::task_secrets::keep(id, body);
    }
}

/// Tells the user how to resume after a failure or an interruption.
fn print_resume(connection: &Connection, command: &WaitCommand) {
    if connection.ends_with_this_command() {
        out::err("note: the built-in mock stops with this command, so its tasks cannot be resumed");
    } else {
        out::err(&format!("resume with: {command}"));
    }
}

/// A task accepted by the service, with what is needed to report on it.
struct Accepted {
    task: Task,
    index: Option<u32>,
    resume: WaitCommand,
    /// The model it was submitted to; for a `wait` given only the task,
    /// what this command's history keeps of it (`null` in `--json` when it
    /// keeps nothing, never an empty name).
    model: Option<String>,
    /// What it was sent as, to learn its kind's price by what the task
    /// settled at (a `wait` given only the task does not know).
    kind: Option<genapi_batch::Job>,
}

/// What a finished task produced.
struct Saved {
    output: Output,
    file: PathBuf,
}

/// `genapi generate`.
pub async fn generate(global: &Global, request: RequestArgs, save: SaveArgs, count: u32) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout_of(global);
    let out_file = save.out.as_deref().filter(|p| !p.is_dir());
    let prepared = prepare(&request, out_file).await?;
    let stem = out::slug(prepared.prompt.as_deref().unwrap_or(&prepared.model.name), 40);
    let plan = Plan::new(&save, count, stem).map_err(before_submitting)?;
    prepared.check()?;
    if count > 1 && prepared.body.get("seed").is_some_and(|seed| !seed.is_null()) {
        out::err(&format!(
            "warning: -n {count} with one seed makes {count} identical images, each charged; drop --seed for variations"
        ));
    }
    let connection = connect(global).await?;
    let interrupt = crate::interrupt::interrupted();
    tokio::pin!(interrupt);
    // What the service charges these submissions is their kind's price, as
    // a batch learns it (for `batch --estimate` and capped batches).
    let mut prices: genapi_batch::Prices = crate::learned::PRICES.load(connection.prices_key());
    let kind = genapi_batch::Job::new(
        0,
        prepared.model.operation.path.clone(),
        Value::Object(prepared.body.clone()),
    );

    let mut accepted = Vec::new();
    for index in 1..=count {
        let index = (count > 1).then_some(index);
        let submission = connection
            .client
            .submit_raw(&prepared.model.operation.path, Value::Object(prepared.body.clone()));
        let task = tokio::select! {
            result = tokio::time::timeout_at(deadline, submission) => match result {
                Ok(Ok(task)) => task,
                Ok(Err(error)) => {
                    let failure = Failure { message: prepared.in_flag_terms(&error), ..Failure::api(&error) };
                    return finish_early(&connection, &accepted, failure);
                }
                Err(_) => {
                    let failure = Failure::new(code::TIMEOUT, format!(
                        "--timeout {}s passed during submission; the task may have been accepted",
                        global.timeout_seconds()
                    ));
                    return finish_early(&connection, &accepted, failure);
                }
            },
            _ = &mut interrupt => {
                let failure = Failure::new(code::INTERRUPTED, "interrupted during submission; the task may have been accepted");
                return finish_early(&connection, &accepted, failure);
            }
        };
        let resume = resume_command(
            global,
            &connection.client,
            task.id(),
            task.polling_url().as_str(),
            &plan.resume_target(index),
        );
        announce(&task);
        // For a `wait` in another process that picks the task up, which
        // never sent them (forgotten once the task ends here).
        keep_secrets(&connection, task.id(), &prepared.body);
        crate::history::submitted(global, task.id(), &prepared.model.name);
        if let Some(cost) = task.cost() {
            prices.learn(&kind, cost);
        }
        accepted.push(Accepted {
            task,
            index,
            resume,
            model: Some(prepared.model.name.clone()),
            kind: Some(kind.clone()),
        });
    }
    crate::learned::save_prices(connection.prices_key(), prices);
    complete("generate", global, &connection, &plan, accepted, deadline, interrupt).await
}

/// Whether a wait's failure is its task's end, by the library's one rule
/// ([`genapi::FailureClass::ends_the_task`]) read from the exit code: any
/// other failure (the deadline, a refused key or host, the rate limit, the
/// network, a result not written, an interruption) leaves the task open,
/// paid for, for its resume line.
fn ends_the_task(failure: &Failure) -> bool {
    genapi::FailureClass::ALL
        .into_iter()
        .any(|class| class.ends_the_task() && code::of(class) == failure.code)
}

/// What a task's acceptance said it costs (0 when it did not say).
fn charged_at_acceptance(task: &Task) -> f64 {
    use crate::progress::credits;
    credits(task.cost()).unwrap_or(0.0)
}

/// Submission stopped early: report the tasks already accepted.
fn finish_early(connection: &Connection, accepted: &[Accepted], failure: Failure) -> Result<(), Failure> {
    for task in accepted {
        print_resume(connection, &task.resume);
    }
    Err(failure)
}

/// Printed as soon as the service accepts a task, on a terminal or not.
fn announce(task: &Task) {
    out::err(&format!(
        "submitted task {} (polling URL {})",
        out::clean(task.id()),
        genapi_text::task_address(task.polling_url().as_str())
    ));
}

/// Waits for every task, saves the results and reports each one; progress
/// is said under `command`'s name.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
async fn complete(
    command: &'static str,
    global: &Global,
    connection: &Connection,
    plan: &Plan,
    accepted: Vec<Accepted>,
    deadline: Instant,
    interrupt: std::pin::Pin<&mut impl std::future::Future<Output = std::io::Result<()>>>,
) -> Result<(), Failure> {
    // What is said of each task not reported when an interruption comes:
    // its slot empties once its own report is out.
    let unreported: Vec<Mutex<Option<Unreported>>> = accepted
        .iter()
        .map(|a| {
            Mutex::new(Some(Unreported {
                id: a.task.id().to_string(),
                polling_url: a.task.polling_url().to_string(),
                model: a.model.clone(),
                resume: a.resume.clone(),
                last_status: Arc::default(),
            }))
        })
        .collect();
    let total = accepted.len() as u64;
    let progress = Progress::start(command, total);
    // The tasks were charged when accepted: the credits count from what
    // their acceptances said (none known for tasks picked up by id, sent by
    // another command), and each end puts what its task settled at in its
    // place (nothing, when moderation stopped it).
    let start = Figures {
        total,
        in_flight: total,
        credits: accepted
            .iter()
            .filter_map(|a| crate::progress::credits(a.task.cost()))
            .reduce(|sum, charged| sum + charged),
        ..Figures::default()
    };
    progress.show(&start);
    let figures = Mutex::new(start);
    // What each kind's tasks settled at, as a batch learns it: the price of
    // a model whose acceptance says none (the older families' cost comes
    // with the result).
    let settled_prices = Mutex::new(genapi_batch::Prices::default());
    let runs = accepted.into_iter().zip(&unreported).map(|(accepted, slot)| {
        let (progress, figures, settled_prices) = (&progress, &figures, &settled_prices);
        let last_status = slot
            .lock()
            .ok()
            .and_then(|slot| slot.as_ref().map(|task| task.last_status.clone()))
            .unwrap_or_default();
        async move {
            let charged = charged_at_acceptance(&accepted.task);
            let id = accepted.task.id().to_string();
            let polling_url = accepted.task.polling_url().to_string();
            let outcome = finish(
                &connection.client,
                accepted.task,
                plan,
                accepted.index,
                deadline,
                global,
                (last_status.clone(), progress.clone()),
            )
            .await;
            // Nothing is left of the task to fetch: its result saved, or
            // its end.
            let over = outcome.as_ref().map_or_else(ends_the_task, |_| true);
            if let Ok(mut figures) = figures.lock() {
                // A task whose wait failed before its end is neither done
                // nor failed: it may go on at the service, paid for, and
                // the resume line picks it up. One seen `Ready` whose
                // result was not saved ended: failed, at what it settled.
                let still_running = !over && matches!(&outcome, Err(failure) if failure.ready.is_none());
                if !still_running {
                    figures.done += 1;
                    figures.worked += 1;
                    figures.in_flight = figures.in_flight.saturating_sub(1);
                }
                let settled_at = match &outcome {
                    Ok(saved) => crate::progress::credits(saved.output.cost()),
                    Err(Failure { ready: Some(ready), .. }) => crate::progress::credits(ready.cost),
                    Err(_) => None,
                };
                if let (Some(kind), Some(credits), Ok(mut prices)) = (&accepted.kind, settled_at, settled_prices.lock())
                {
                    prices.learn(kind, credits);
                }
                // What a task seen Ready settled at takes the place of
                // what its acceptance said; moderation charges nothing.
                let settled_at = match &outcome {
                    Err(_) if still_running => None,
                    Err(failure) if failure.code == code::of(genapi::FailureClass::Moderated) => Some(0.0),
                    _ => settled_at,
                };
                if let Some(settled_at) = settled_at {
                    figures.credits = Some(figures.credits.unwrap_or(0.0) + settled_at - charged);
                }
                if !still_running && outcome.is_err() {
                    figures.failed += 1;
                }
                progress.show(&figures);
            }
            let status = last_status.lock().map(|s| s.clone()).unwrap_or_default();
            // Polled, a task picked up by id is known where the service
            // keeps it (its polling host, not the first one tried).
            let polling_url = match &outcome {
                Ok(saved) => saved.output.reference().polling_url.to_string(),
                Err(_) => polling_url,
            };
            let saved = outcome.as_ref().ok().map(|saved| saved.file.as_path());
            crate::history::note(global, &id, if saved.is_some() { "Ready" } else { &status }, saved);
            // What scrubs the task's answers is kept until its result is
            // saved: a failed task is still looked up (`genapi get`), and
            // its answer quotes what it was sent.
            if over && outcome.is_ok() {
                crate::task_secrets::forget(&id);
            }
            // Reported now, at once: an interruption cannot come between.
            if let Ok(mut slot) = slot.lock() {
                *slot = None;
            }
            progress.suspend(|| {
                report(
                    global,
                    connection,
                    &id,
                    &polling_url,
                    accepted.model.as_deref(),
                    &accepted.resume,
                    &status,
                    outcome,
                )
            })
        }
    });
    let all = futures::future::join_all(runs);
    let finished = tokio::select! {
        codes = all => Some(codes),
        _ = interrupt => None,
    };
    progress.finish();
    if let Ok(prices) = settled_prices.into_inner() {
        if !prices.is_empty() {
            crate::learned::save_prices(connection.prices_key(), prices);
        }
    }
    match finished {
        Some(codes) => match codes.into_iter().find(|c| *c != 0) {
            None => Ok(()),
            Some(code) => Err(Failure::new(code, "")),
        },
        None => {
            out::err("error: interrupted");
            // Each task not reported yet goes on at the service, paid for:
            // reported as any other open task is, its resume command on
            // stderr and, with `--json`, in its line on stdout.
            for task in unreported
                .into_iter()
                .filter_map(|slot| slot.into_inner().ok().flatten())
            {
                let status = task.last_status.lock().map(|s| s.clone()).unwrap_or_default();
                let interrupted = Failure::new(
                    code::INTERRUPTED,
                    "interrupted while waiting; the task goes on at the service",
                );
                report(
                    global,
                    connection,
                    &task.id,
                    &task.polling_url,
                    task.model.as_deref(),
                    &task.resume,
                    &status,
                    Err(interrupted),
                );
            }
            Err(Failure::new(code::INTERRUPTED, ""))
        }
    }
}

/// A task an interruption may leave unreported, with what its report says.
struct Unreported {
    id: String,
    polling_url: String,
    model: Option<String>,
    resume: WaitCommand,
    /// The last status polling saw, kept up to date by the task's wait.
    last_status: Arc<Mutex<String>>,
}

/// One task, from waiting to the saved file; its status changes go to
/// `last_status` (for its report) and to the progress shown.
async fn finish(
    client: &Client,
    task: Task,
    plan: &Plan,
    index: Option<u32>,
    deadline: Instant,
    global: &Global,
    (last_status, progress): (Arc<Mutex<String>>, Progress),
) -> Result<Saved, Failure> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let label = format!("task {}", out::safe_component(task.id(), 8));
    // A poll that failed is said (once for each new reason), and the last
    // one is named if the deadline then passes: a service that cannot be
    // reached must not look like a task still running.
    let failing: Arc<Mutex<Option<String>>> = Arc::default();
    let (failed, answered) = (failing.clone(), failing.clone());
    let failure_label = label.clone();
    let failure_progress = progress.clone();
    let sources = crate::address_sources(global);
    let options = WaitOptions::default().timeout(remaining).on_poll_failure(move |error| {
        let mut reason = crate::describe(error).replace('\n', " ");
        if let Some(words) = crate::unreachable(error).and_then(|origin| crate::where_from(&sources, &origin)) {
            reason.push_str(&format!("; {words}"));
        }
        let new = failed
            .lock()
            .map(|mut last| last.replace(reason.clone()).as_ref() != Some(&reason));
        if new.unwrap_or(true) {
            failure_progress.warn(&format!(
                "{failure_label}: a poll failed, polling again until --timeout: {reason}"
            ));
        }
    });
    let options = options.on_progress(move |p| {
        if let Ok(mut last) = answered.lock() {
            *last = None;
        }
        let status = out::clean(p.status.as_str());
        let changed = last_status.lock().map(|mut last| {
            let changed = *last != status;
            *last = status.clone();
            changed
        });
        let percent = p.progress.map(|f| format!(" {:.0}%", f * 100.0)).unwrap_or_default();
        if changed.unwrap_or(true) {
            progress.note(&format!("{label}: {status}{percent}"));
        }
    });
    let waited = tokio::time::timeout_at(deadline, task.wait_with(options)).await;
    let output = match waited {
        Ok(Ok(output)) => output,
        Ok(Err(error)) if !matches!(error, genapi::Error::Timeout { .. }) => return Err(Failure::api(&error)),
        // The library's deadline and the command's are one: either may
        // be seen first.
        Ok(Err(_)) | Err(_) => {
            let last_failure = failing.lock().ok().and_then(|last| last.clone());
            let since = last_failure
                .map(|reason| format!("; its last poll failed: {reason}"))
                .unwrap_or_default();
            return Err(Failure::new(
                code::TIMEOUT,
                format!(
                    "--timeout {}s passed before the task finished{since}",
                    global.timeout_seconds()
                ),
            ));
        }
    };
    // From here the task has ended, charged: a failure to save its result
    // says so, for the figures.
    let ready = crate::Ready { cost: output.cost() };
    save_output(client, output, plan, index, deadline, global)
        .await
        .map_err(|failure| Failure {
            ready: Some(ready),
            ..failure
        })
}

#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
async fn save_output(
    client: &Client,
    output: Output,
    plan: &Plan,
    index: Option<u32>,
    deadline: Instant,
    global: &Global,
) -> Result<Saved, Failure> {
    if plan.to_stdout {
        return write_to_stdout(output, deadline, global).await;
    }
    // The name that will really be written, checked before the download: a
    // result of another format than --out's extension gets that format's.
    let (planned, warning) = plan.path_for(index, output.id(), &[], output.sample());
    if let Some(warning) = &warning {
        out::err(&format!("warning: {warning}"));
    }
    // The task is paid for by now: not a usage error (2 says nothing was
    // charged), a result that could not be written (1).
    let taken_by_other = |file: &Path| -> Failure {
        let reference = output.reference();
        // What --force would not replace either (a folder, a pipe, a device
        // put there while the task ran) is said as such.
        let said = match genapi_files::may_write(file, genapi_files::Existing::Replace) {
            Err(refused @ genapi_files::FileError::NotRegular { .. }) => {
                format!("cannot write {}", out::clean(&refused.to_string()))
            }
            _ => format!(
                "{} exists, so the result was not saved (nothing is replaced without --force)",
                shown(file)
            ),
        };
        Failure {
            resume: Some(Box::new(resume_command(
                global,
                client,
                &reference.id,
                &reference.polling_url,
                &free_name(file),
            ))),
            ..Failure::new(code::OTHER, said)
        }
    };
    if plan.file.is_some() && !plan.force && taken(&planned) {
        return Err(taken_by_other(&planned));
    }
    // Streamed to a temporary file beside the result (never held whole in
    // memory), named once its first bytes say what it is.
    let dir = plan
        .file
        .as_ref()
        .and_then(|f| f.parent())
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(&plan.dir);
    let partial = dir.join(format!(".genapi-{}.partial", out::safe_component(output.id(), 16)));
    // The hidden file is this command's own (one an interrupted run left is
    // replaced); whether the result may take its name is decided below.
    let saved = match tokio::time::timeout_at(deadline, output.save_replacing(&partial)).await {
        Ok(Ok(saved)) => saved,
        Ok(Err(error)) => return Err(Failure::api(&error)),
        Err(_) => {
            let _ = std::fs::remove_file(&partial);
            return Err(download_timed_out(global));
        }
    };
    // Read back as the file the command has just written, or not at all.
    let mut head = [0u8; 16];
    let read = genapi_files::open_written(&saved, u64::MAX)
        .ok()
        .and_then(|mut file| std::io::Read::read(&mut file, &mut head).ok())
        .unwrap_or(0);
    let (file, late_warning) = plan.path_for(index, output.id(), &head[..read], output.sample());
    if let (Some(late_warning), None) = (late_warning, &warning) {
        out::err(&format!("warning: {late_warning}"));
    }
    // By the file policy: without --force an existing file is never
    // replaced, and a link is never written through. No hidden file is left
    // behind either way: the result is fetched again by the command printed,
    // while the service keeps it.
    if let Err(refused) = genapi_files::publish(&saved, &file, crate::files::existing(plan.force)) {
        if let genapi_files::FileError::Exists { .. } = refused {
            return Err(taken_by_other(&file));
        }
        // A name that is no regular file (a link that came to lead to a
        // device while the task ran) is refused again however often the
        // command is run: it names a free one beside it.
        let resume_at = match refused {
            genapi_files::FileError::NotRegular { .. } => free_name(&file),
            _ => file.clone(),
        };
        let reference = output.reference();
        return Err(Failure {
            resume: Some(Box::new(resume_command(
                global,
                client,
                &reference.id,
                &reference.polling_url,
                &resume_at,
            ))),
            ..Failure::new(
                code::OTHER,
                format!("cannot write {}", out::clean(&refused.to_string())),
            )
        });
    }
    if plan.open {
        crate::opener::Opener::of(&global.settings).open(&file);
    }
    Ok(Saved { output, file })
}

/// `-o -`: the result's bytes, downloaded whole (within the client's bound
/// on a download), written to standard output.
async fn write_to_stdout(output: Output, deadline: Instant, global: &Global) -> Result<Saved, Failure> {
    // Streamed through a hidden file of the command's own (never held whole
    // in memory: a result may be as large as the download bound), removed
    // however this ends, in a folder no one else may change: the cache
    // folder as the files kept there make it (the user's alone), else a
    // folder of this run's own. A failure here leaves a task paid for and
    // its result not written: the report says what writes it again.
    let mut own_folder = None;
    let folder = match crate::cache::dir().filter(|folder| genapi_files::private_folder(folder).is_ok()) {
        Some(folder) => folder,
        None => {
            let made = RunFolder::make().map_err(|error| {
                Failure::new(
                    code::OTHER,
                    format!("no folder of the user's own to hold the image before standard output ({error})"),
                )
            })?;
            own_folder.insert(made).0.clone()
        }
    };
    let partial = folder.join(format!(
        ".genapi-{}-{}.partial",
        out::safe_component(output.id(), 16),
        std::process::id()
    ));
    let _removed = RemovedOnDrop(partial.clone());
    let saved = match tokio::time::timeout_at(deadline, output.save_replacing(&partial)).await {
        Ok(Ok(saved)) => saved,
        Ok(Err(error)) => return Err(Failure::api(&error)),
        Err(_) => return Err(download_timed_out(global)),
    };
    // Read back as the file the command has just written: never through a
    // link, never a pipe.
    let copied = genapi_files::open_written(&saved, u64::MAX)
        .map_err(std::io::Error::other)
        .and_then(|mut file| out::copy_bytes(&mut file));
    if let Err(error) = copied {
        return Err(Failure::new(
            code::OTHER,
            format!("standard output did not take the whole image ({error})"),
        ));
    }
    Ok(Saved {
        output,
        file: PathBuf::from("-"),
    })
}

/// A folder of one run's own under the system's folder for temporary
/// files: made the user's alone, under a name no one else can guess (so
/// no one can take it first), and removed with what it holds when this is
/// dropped.
struct RunFolder(PathBuf);

impl RunFolder {
    fn make() -> std::io::Result<RunFolder> {
        let mut last = std::io::Error::other("no name was free");
        for _ in 0..8 {
            let mut random = [0u8; 8];
            getrandom::fill(&mut random).map_err(|error| std::io::Error::other(error.to_string()))?;
            let path = std::env::temp_dir().join(format!(".genapi-{:016x}", u64::from_le_bytes(random)));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => return Ok(RunFolder(path)),
                Err(error) => last = error,
            }
        }
        Err(last)
    }
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file removed when this is dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The deadline passed while the result was downloading.
fn download_timed_out(global: &Global) -> Failure {
    Failure::new(
        code::TIMEOUT,
        format!("--timeout {}s passed during the download", global.timeout_seconds()),
    )
}

/// The first free name like `file`: `x-2.jpg`, `x-3.jpg`, …
fn free_name(file: &Path) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let extension = file
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (2..)
        .map(|n| file.with_file_name(format!("{stem}-{n}{extension}")))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| file.to_path_buf())
}

/// The extensions a save may add to an `--out` given without one.
const SAVED_EXTENSIONS: [&str; 7] = ["jpg", "png", "webp", "gif", "mp4", "mov", "bin"];

/// Prints one task's outcome; returns its exit code.
#[allow(clippy::too_many_arguments)]
fn report(
    global: &Global,
    connection: &Connection,
    id: &str,
    polling_url: &str,
    model: Option<&str>,
    resume: &WaitCommand,
    status: &str,
    outcome: Result<Saved, Failure>,
) -> u8 {
    // What is printed and kept names the task, never a token its address held.
    let polling_url = &genapi_text::task_address(polling_url);
    // The built-in mock, or a standalone one recognised by its mark.
    let mock = connection.on_a_mock();
    match outcome {
        Ok(saved) => {
            let duration = saved.output.duration();
            if global.json {
                out::out(
                    &json!({
                        "id": id, "polling_url": polling_url, "model": model, "status": "Ready",
                        "file": saved.file.display().to_string(), "seed": saved.output.seed(),
                        "cost": saved.output.cost(), "duration": duration, "mock": mock,
                    })
                    .to_string(),
                );
            } else {
                let cost = match saved.output.cost() {
                    Some(cost) if mock => format!("cost {cost} credits (illustrative mock price)"),
                    Some(cost) => format!("cost {cost} credits"),
                    None => "cost not reported".to_string(),
                };
                let seed = saved.output.seed().map(|s| format!("; seed {s}")).unwrap_or_default();
                let served = if mock { " by the MOCK service" } else { "" };
                let kept = if names_stdout(&saved.file) {
                    "written to standard output".to_string()
                } else {
                    format!("saved {}", shown(&saved.file))
                };
                out::out(&format!("task {}: Ready{served}; {cost}{seed}; {kept}", out::clean(id)));
            }
            0
        }
        Err(failure) => {
            // The message usually names the task already.
            if failure.message.contains(id) {
                out::err(&format!("error: {}", failure.message));
            } else {
                out::err(&format!("error: task {}: {}", out::clean(id), failure.message));
            }
            // Only a task that may still finish (or whose result could not be
            // saved) is worth resuming; a failed or moderated one is not
            // ([`ends_the_task`]: a refused key or the rate limit leave it
            // open). A polling host the key may not go to yet: the task is
            // paid for, and a `wait` that trusts the host picks it up.
            let resume = failure.resume.as_deref().unwrap_or(resume).clone();
            let resume = match &failure.untrusted {
                Some(origin) => resume.trusting(origin),
                None => resume,
            };
            let resumable = failure.untrusted.is_some() || !ends_the_task(&failure);
            if resumable {
                print_resume(connection, &resume);
            }
            if global.json {
                let status = if status.is_empty() { "unknown" } else { status };
                let resume = resumable.then(|| resume.to_string());
                out::out(
                    &json!({
                        "id": id, "polling_url": polling_url, "model": model, "status": status,
                        "error": failure.message, "exit_code": failure.code, "resume": resume, "mock": mock,
                    })
                    .to_string(),
                );
            }
            failure.code
        }
    }
}

/// `genapi submit`.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub async fn submit(global: &Global, request: RequestArgs, out_file: Option<PathBuf>) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout_of(global);
    let prepared = prepare(&request, out_file.as_deref()).await?;
    prepared.check()?;
    // The name `wait` will write is checked now, so the command printed
    // below can succeed.
    // `-o -` is for that `wait`: its standard output, not this command's.
    let target = match &out_file {
        Some(out) if names_stdout(out) => Some(out.clone()),
        Some(_) => Some(
            Plan::new(
                &SaveArgs {
                    out: out_file.clone(),
                    open: false,
                    force: global.force,
                    record: global.record.clone(),
                    json: false,
                },
                1,
                "genapi".into(),
            )
            .map_err(before_submitting)?
            .resume_target(None),
        ),
        None => None,
    };
    let connection = connect(global).await?;
    let on_builtin_mock = connection.ends_with_this_command();
    if on_builtin_mock {
        out::err(&format!("warning: this task cannot be waited for: {SUBMIT_THEN_WAIT}"));
    }
    let submission = connection
        .client
        .submit_raw(&prepared.model.operation.path, Value::Object(prepared.body.clone()));
    let task = match tokio::time::timeout_at(deadline, submission).await {
        Ok(Ok(task)) => task,
        Ok(Err(error)) => {
            return Err(Failure {
                message: prepared.in_flag_terms(&error),
                ..Failure::api(&error)
            })
        }
        Err(_) => {
            return Err(Failure::new(
                code::TIMEOUT,
                format!(
                    "--timeout {}s passed during submission; the task may have been accepted",
                    global.timeout_seconds()
                ),
            ))
        }
    };
    let (id, polling_url) = (
        task.id().to_string(),
        genapi_text::task_address(task.polling_url().as_str()),
    );
    // For the `wait` in another process, which never sent them.
    keep_secrets(&connection, &id, &prepared.body);
    crate::history::submitted(global, &id, &prepared.model.name);
    let line = if global.json {
        json!({"id": id, "polling_url": polling_url, "model": prepared.model.name, "status": "submitted", "cost": task.cost()}).to_string()
    } else {
        format!("{}\t{}", out::clean(&id), out::clean(&polling_url))
    };
    let reference = if url_is_fallback(&connection.client, &id, &polling_url) {
        &id
    } else {
        &polling_url
    };
    // Only a command that can succeed is printed.
    let wait = (!on_builtin_mock).then(|| {
        let command = match target {
            Some(target) => {
                WaitCommand::new(reference, &service_of(global), &target.display().to_string()).replacing(global.force)
            }
            None => WaitCommand::saved_by_default(reference, &service_of(global)),
        };
        format!("wait for it with: {command}")
    });
    if let Err(error) = out::out_required(&line) {
        // The task is paid for: its id must not be lost with stdout.
        announce(&task);
        let then = wait.map_or_else(
            || " (it ended with the built-in mock: see the warning above)".to_string(),
            |wait| format!(": {wait}"),
        );
        return Err(Failure::new(
            code::ID_NOT_WRITTEN,
            format!(
                "task {} was accepted, but its id could not be written to stdout ({error}); it is printed above{then}",
                out::clean(&id)
            ),
        ));
    }
    if let Some(wait) = wait {
        out::progress(&wait);
    }
    Ok(())
}

/// What `wait` and `get` say on the built-in mock, at once: a mock made
/// afresh for this command knows no task of another.
fn no_task_in_a_new_mock(global: &Global, reference: &str) -> Result<(), Failure> {
    if !crate::uses_builtin_mock(global) {
        return Ok(());
    }
    // Why the built-in mock would be used, and what uses the service
    // instead.
    let (why, instead) = match global.mock {
        true => ("--mock is given", "drop --mock to use the configured service"),
        false => (
            "no service is configured",
            "set that service's GENAPI_BASE_URL and GENAPI_API_KEY (for a `genapi mock`, the variables it \
             printed), or give --profile",
        ),
    };
    // A polling URL names its service: no built-in mock ever had it, and
    // the service it names needs its key, which nothing configured gives.
    if let Some(address) = reqwest_url(reference).ok().filter(|url| url.has_host()) {
        return Err(Failure::usage(format!(
            "{} is an address of {}, and {why}, so the command would use its built-in mock, which never had that \
             task: {instead}",
            genapi_text::shown_address(reference),
            genapi_text::shown_address(&address.origin().ascii_serialization())
        )));
    }
    // A task this command sent to a service: that service has it.
    let builtin = crate::service_shown(global);
    if let Some(service) = crate::history::sent_to(reference).filter(|service| *service != builtin) {
        return Err(Failure::usage(format!(
            "task {} was sent to {service} (genapi tasks lists it), and {why}, so the command would use its \
             built-in mock, which never had that task: {instead}",
            out::clean(reference)
        )));
    }
    Err(Failure::new(
        code::of(genapi::FailureClass::TaskFailed),
        format!("task {}: not found: {}", out::clean(reference), SUBMIT_THEN_WAIT),
    ))
}

/// How `submit` and `wait` (or `get`) work together without a service.
const SUBMIT_THEN_WAIT: &str = "the built-in mock lives only as long as one command, so `genapi wait` and `genapi \
     get` cannot find a task another command submitted to it. Between `genapi submit` and `genapi wait`, keep one \
     `genapi mock` running: start it in another terminal, set the variables it prints (GENAPI_BASE_URL, \
     GENAPI_API_KEY, GENAPI_TRUSTED_ORIGINS) in this one, then submit and wait; or use `genapi generate`, which \
     does both";

/// `genapi wait`.
pub async fn wait(global: &Global, reference: &str, save: SaveArgs) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout_of(global);
    let plan = Plan::new(&save, 1, "genapi".into())?;
    no_task_in_a_new_mock(global, reference)?;
    let connection = connect(global).await?;
    // A bare id is looked for on every configured API host when polled (a
    // regional task is unknown to the global one).
    let task = connection.client.task(reference).map_err(|e| Failure::api(&e))?;
    crate::task_secrets::learn(&connection.client, task.id());
    let resume = resume_command(
        global,
        &connection.client,
        task.id(),
        task.polling_url().as_str(),
        &plan.resume_target(None),
    );
    let model = crate::history::model_of(global, task.id());
    let accepted = vec![Accepted {
        task,
        index: None,
        resume,
        model,
        kind: None,
    }];
    let interrupt = crate::interrupt::interrupted();
    tokio::pin!(interrupt);
    complete("wait", global, &connection, &plan, accepted, deadline, interrupt).await
}

/// `genapi get`: the state; with `--out`, the result when Ready.
pub async fn get(global: &Global, reference: &str, save: SaveArgs) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout_of(global);
    let plan = match &save.out {
        Some(_) => Some(Plan::new(&save, 1, "genapi".into())?),
        None => None,
    };
    no_task_in_a_new_mock(global, reference)?;
    let connection = connect(global).await?;
    // A bare id is looked for on every configured API host when polled (a
    // regional task is unknown to the global one).
    let task = connection.client.task(reference).map_err(|e| Failure::api(&e))?;
    crate::task_secrets::learn(&connection.client, task.id());
    get_task(global, &connection, task, reference, plan, deadline).await
}

/// `failure` of task `id` said as any failure of a task is (with its
/// object under --json, and, when the task is left open, as a refused key
/// or the rate limit leave it, the command that picks it up): the failure
/// to return, its words said.
fn reported(
    global: &Global,
    connection: &Connection,
    id: &str,
    polling_url: &str,
    plan: Option<&Plan>,
    status: &str,
    failure: Failure,
) -> Failure {
    let target = plan.map_or_else(|| PathBuf::from("."), |plan| plan.resume_target(None));
    let resume = resume_command(global, &connection.client, id, polling_url, &target);
    let unreachable = failure.unreachable.clone();
    let model = crate::history::model_of(global, id);
    let code = report(
        global,
        connection,
        id,
        polling_url,
        model.as_deref(),
        &resume,
        status,
        Err(failure),
    );
    Failure {
        unreachable,
        ..Failure::new(code, "")
    }
}

/// `genapi get` once its task is known: polled once, saved when Ready and
/// asked to; the secrets kept for its answers are forgotten once nothing is
/// left of it to fetch.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
async fn get_task(
    global: &Global,
    connection: &Connection,
    task: Task,
    reference: &str,
    plan: Option<Plan>,
    deadline: Instant,
) -> Result<(), Failure> {
    let state = match tokio::time::timeout_at(deadline, task.poll()).await {
        Ok(Ok(state)) => state,
        polled => {
            let failure = match polled {
                Ok(Err(error)) => Failure::api(&error),
                _ => Failure::new(code::TIMEOUT, format!("--timeout {}s passed", global.timeout_seconds())),
            };
            let (id, polling_url) = (task.id(), task.polling_url().as_str());
            return Err(reported(
                global,
                connection,
                id,
                polling_url,
                plan.as_ref(),
                "",
                failure,
            ));
        }
    };
    crate::history::note(global, task.id(), state.status.as_str(), None);
    let mock = connection.on_a_mock();
    // With --json, the task's object is printed once: its state here, or
    // its saved result below.
    let state_printed = global.json && (plan.is_none() || !state.status.is_final());
    // A final state with --out is said once, by the report below.
    let said_by_the_report = plan.is_some() && state.status.is_final();
    if state_printed {
        let view = serde_json::to_value(&state).unwrap_or_default();
        out::out(
            &json!({
                "id": task.id(), "polling_url": genapi_text::task_address(task.polling_url().as_str()),
                "model": crate::history::model_of(global, task.id()), "status": state.status.as_str(),
                "progress": state.progress, "file": null, "seed": view["result"]["seed"], "cost": view["cost"],
                "duration": view["result"]["duration"], "mock": mock,
            })
            .to_string(),
        );
    } else if !global.json && !said_by_the_report {
        let percent = state
            .progress
            .map(|f| format!(" {:.0}%", f * 100.0))
            .unwrap_or_default();
        out::out(&format!(
            "task {}: {}{percent}",
            out::clean(task.id()),
            out::clean(state.status.as_str())
        ));
    }
    // A failure after the object is said on stderr only.
    let said = |failure: Failure| {
        if state_printed {
            out::err(&format!("error: {}", failure.message));
            Failure::new(failure.code, "")
        } else {
            failure
        }
    };
    if !state.status.is_final() {
        return match plan {
            None => Ok(()),
            Some(plan) => {
                let command = WaitCommand::new(
                    reference,
                    &service_of(global),
                    &plan.resume_target(None).display().to_string(),
                );
                Err(said(Failure::new(
                    code::TIMEOUT,
                    format!("the task is not finished yet; wait for it with: {command}"),
                )))
            }
        };
    }
    // A final state: the typed outcome (and the output when Ready).
    let options = WaitOptions::default()
        .not_found_grace(Duration::ZERO)
        .timeout(deadline.saturating_duration_since(Instant::now()));
    let task_id = task.id().to_string();
    let task_polling_url = task.polling_url().to_string();
    let output = match tokio::time::timeout_at(deadline, task.wait_with(options)).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => {
            // What scrubs the task's answers stays: a failed task is still
            // looked up, and its answer quotes what it was sent.
            let failure = Failure::api(&error);
            if state_printed {
                return Err(said(failure));
            }
            let status = state.status.as_str();
            return Err(reported(
                global,
                connection,
                &task_id,
                &task_polling_url,
                plan.as_ref(),
                status,
                failure,
            ));
        }
        Err(_) => {
            return Err(said(Failure::new(
                code::TIMEOUT,
                format!("--timeout {}s passed", global.timeout_seconds()),
            )))
        }
    };
    // Ready, and its result not fetched here: a later `wait` or `get
    // --out` polls it again, and what scrubs the answers stays for it.
    let Some(plan) = plan else { return Ok(()) };
    let id = output.id().to_string();
    // Where the service keeps the task (a bare id was looked for).
    let polling_url = output.reference().polling_url.to_string();
    let outcome = save_output(&connection.client, output, &plan, None, deadline, global).await;
    if let Ok(saved) = &outcome {
        crate::history::note(global, &id, "Ready", Some(&saved.file));
    }
    let resume = resume_command(global, &connection.client, &id, &polling_url, &plan.resume_target(None));
    let model = crate::history::model_of(global, &id);
    match report(
        global,
        connection,
        &id,
        &polling_url,
        model.as_deref(),
        &resume,
        "Ready",
        outcome,
    ) {
        0 => {
            crate::task_secrets::forget(&id);
            Ok(())
        }
        code => Err(Failure::new(code, "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_stay_in_the_output_directory() {
        let dir = std::env::temp_dir();
        let plan = Plan {
            file: None,
            dir: dir.clone(),
            force: false,
            stem: "x".into(),
            to_stdout: false,
            open: false,
        };
        for hostile in ["../../etc/passwd", "/abs/x.sh", "..", "a/b"] {
            let (path, _) = plan.path_for(None, hostile, b"", &format!("https://h/{hostile}"));
            assert_eq!(path.parent(), Some(dir.as_path()), "{}", path.display());
        }
        assert_eq!(extension_of_url("https://h/a/b.mp4?sig=1"), "mp4");
        assert_eq!(extension_of_url("https://h/a/..%2F..%2Fx"), "bin");
    }
}
