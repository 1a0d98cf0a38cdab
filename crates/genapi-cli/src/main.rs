//! The `genapi` command: generate images, follow tasks, list models, run the mock.
//!
//! With neither GENAPI_API_KEY nor GENAPI_BASE_URL set (or with `--mock`),
//! tasks run against the built-in mock service, and every result line says so.

mod batch;
mod cache;
mod catalog;
mod completions;
mod config;
mod config_edit;
mod files;
mod gallery;
mod grid;
mod help;
mod history;
mod interrupt;
mod key_input;
mod key_shape;
mod learned;
mod man;
mod mock;
mod models;
mod opener;
mod out;
mod progress;
mod proxy;
mod request;
mod resume;
mod task_secrets;
mod tasks;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use genapi::{Client, Error};
use genapi_mock::{MockConfig, MockService};

#[derive(Parser)]
#[command(
    name = "genapi",
    version,
    about = "Generate and edit images with the Image Generation and Editing Service",
    after_help = help::SHORT,
    after_long_help = help::long()
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand takes, listed after its own.
#[derive(Args, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Print one JSON object per result on stdout, and nothing else there.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress lines on stderr (errors, warnings and submitted task ids are still shown).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Use the built-in mock service (a test double) even when the service is configured.
    #[arg(long, global = true)]
    pub mock: bool,
    /// Stop the command after this many seconds (at least 1).
    ///
    /// [default: none for batch, mock and proxy, which run until done or interrupted; 600 for the other commands]
    #[arg(long, global = true, value_name = "SECONDS", value_parser = timeout_seconds)]
    pub timeout: Option<u64>,
    /// Another origin the key may be sent to (e.g. a regional polling host); repeatable.
    #[arg(long = "trust-origin", global = true, value_name = "ORIGIN")]
    pub trust_origins: Vec<String>,
    /// Record every exchange with the service to FILE (HAR 1.2).
    ///
    /// The recording leaves out the key, secrets and image bytes (see --record-images); `cargo xtask drift
    /// FILE` checks it against the document.
    #[arg(long, global = true, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With --record, keep image bytes (inputs and results) in the recording.
    #[arg(long, global = true, requires = "record")]
    pub record_images: bool,
    /// The profile of the config file to use.
    ///
    /// [default: GENAPI_PROFILE, else the file's default_profile]. `genapi config` shows what a profile sets.
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// What the command runs with: flags over the environment over the profile (`config::resolve`).
    #[arg(skip)]
    pub settings: config::Settings,
    /// Replace files that already have the names you give.
    ///
    /// The files of -o, --record, grid -o and man --dir; without it nothing is replaced. A link there is
    /// replaced by the file (what it points to is never written); a folder, pipe or device never.
    #[arg(long, global = true)]
    pub force: bool,
}

impl Global {
    /// The builder recording as `--record` and `--record-images` ask.
    fn recording(&self, builder: genapi::ClientBuilder) -> genapi::ClientBuilder {
        match &self.record {
            Some(path) => builder.record_with(path, self.record_options()),
            None => builder,
        }
    }

    /// How `--record` records: with `--record-images`, replacing a file
    /// there with `--force`.
    pub fn record_options(&self) -> genapi::RecordOptions {
        genapi::RecordOptions::default()
            .keep_images(self.record_images)
            .replace_existing(self.force)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Submit a request, wait for it, and save the result.
    Generate {
        #[command(flatten)]
        request: request::RequestArgs,
        #[command(flatten)]
        save: tasks::SaveArgs,
        /// Number of results (N tasks; files are numbered).
        ///
        /// `-n 3 -o fox.png` saves `fox-1.png`, `fox-2.png` and `fox-3.png`.
        #[arg(short = 'n', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=24))]
        count: u32,
    },
    /// Submit a request and print its task id and polling URL, without waiting.
    Submit {
        #[command(flatten)]
        request: request::RequestArgs,
        /// The file `genapi wait` will save the result to.
        ///
        /// Its extension asks for the format now, as with
        /// generate, and the `wait` command printed names it. Checked to be free, not written.
        #[arg(short = 'o', long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Wait for a submitted task and save its result.
    #[command(mut_arg("out", |out| out.long_help(format!(
        "File or directory for the result, or `-` for standard output.\n\n{}",
        tasks::PICKED_UP_OUT
    ))))]
    Wait {
        /// Task id or polling URL.
        id: String,
        #[command(flatten)]
        save: tasks::SaveArgs,
    },
    /// Show a task's state; with --out, save its result when it is Ready.
    Get {
        /// Task id or polling URL.
        id: String,
        /// Where to save the result when it is Ready; `-` writes its bytes to standard output.
        #[arg(short = 'o', long, value_name = "FILE|DIR|-", long_help = format!(
            "Where to save the result when it is Ready, or `-` for standard output.\n\n{}",
            tasks::PICKED_UP_OUT
        ))]
        out: Option<PathBuf>,
        /// Open the saved image with the desktop's opener (or GENAPI_OPENER).
        #[arg(long, requires = "out")]
        open: bool,
    },
    /// List the models, or show one model's fields.
    Models {
        /// A model to describe.
        #[arg(value_parser = completions::ModelName, hide_possible_values = true)]
        name: Option<String>,
    },
    /// Run many requests from a job file; run it again to resume after any interruption.
    Batch(batch::BatchArgs),
    /// Run the mock service (a test double) until interrupted.
    ///
    /// It prints `export NAME='VALUE'` lines: paste them into the shell of your client, or start it with
    /// `eval "$(genapi mock --background)"`, which returns once it answers.
    Mock(mock::MockArgs),
    /// Relay an SDK in any language to the service, paying once for each submission.
    ///
    /// Point the SDK's base URL at the address it prints. A submission sent again because its answer never
    /// arrived gets the first task instead of a second; polling and result addresses pass through it; a request
    /// without a key gets the configured one. Relays to the built-in mock when nothing is configured.
    Proxy(proxy::ProxyArgs),
    /// Make the gallery (index.html) of a batch's output folder again from its results.
    Gallery {
        /// The batch's output folder (its --out).
        dir: PathBuf,
    },
    /// Write the job lines of a sweep: prompts by rows, a field's values by columns.
    Grid(grid::GridArgs),
    /// Print the completion script of a shell.
    ///
    /// E.g. `genapi completions bash > ~/.local/share/bash-completion/completions/genapi`. Models and options
    /// are in the script; profiles are read from the config file when completing.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print genapi's man page (roff), or write them all.
    ///
    /// `genapi man` prints the first page, genapi(1), `genapi man batch` the page of a command, genapi-batch(1),
    /// which the first refers to (`genapi man config set`: genapi-config-set(1)); `genapi man --dir
    /// ~/.local/share/man/man1` writes them all.
    Man {
        /// The command whose page to print (`config set` for a command of a command).
        command: Vec<String>,
        /// Write every page into DIR instead: genapi.1 and genapi-COMMAND.1 for each command (genapi-config-set.1 for
        /// `config set`).
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
    /// Show the settings in use and where each came from.
    ///
    /// From a flag, the environment or the config file's profile; the key only as set, never its value. The
    /// config file is genapi/config.toml in your config folder (GENAPI_CONFIG names another); genapi(1) says
    /// what it and the command's other files hold (`genapi man`). `genapi config set` changes a profile.
    Config {
        #[command(subcommand)]
        change: Option<config_edit::ConfigChange>,
    },
    /// Save a profile's key by reference, and its service.
    ///
    /// The key is asked for without echo (or read from stdin) and kept in a file only you can read, or the file
    /// or variable you name; with --base-url, the profile's service too.
    Login(config_edit::LoginArgs),
    /// List recent submissions: id, model, when, status, where saved.
    Tasks(history::TasksArgs),
    /// The names a completion script reads when completing (`genapi __complete profiles`).
    #[command(name = "__complete", hide = true)]
    Complete {
        /// Which names.
        #[arg(value_enum)]
        names: completions::Names,
    },
}

pub mod code;

/// The exit code of a library error: the library's class decides.
pub fn exit_code(error: &Error) -> u8 {
    code::of(error.class())
}

/// A failure of the command: the exit code and the message (already printed
/// when `message` is empty).
#[derive(Debug)]
pub struct Failure {
    /// Exit code.
    pub code: u8,
    /// What to print after `error: `.
    pub message: String,
    /// An origin the task's polling host is at, which the key may not go
    /// to yet: a `wait` that trusts it picks the (paid) task up again.
    pub untrusted: Option<String>,
    /// The command that picks the task up, where the failure knows a
    /// better one than the task's own: a free name for a result that
    /// could not be saved under the one asked.
    pub resume: Option<Box<resume::WaitCommand>>,
    /// Set when the task was seen `Ready` before this failure, whose result
    /// was then not saved: it ended, charged.
    pub ready: Option<Ready>,
    /// The origin a connection could not be opened to, when that is why.
    pub unreachable: Option<String>,
}

/// A task seen `Ready`.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    /// What it settled at, when the service said.
    pub cost: Option<f64>,
}

impl Failure {
    /// A usage or validation failure.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(code::USAGE, message)
    }
    /// A failure with this code.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            untrusted: None,
            resume: None,
            ready: None,
            unreachable: None,
        }
    }
    /// A library error, its causes included.
    pub fn api(error: &Error) -> Failure {
        let untrusted = match error {
            Error::UntrustedOrigin { origin, .. } => Some(origin.clone()),
            _ => None,
        };
        Failure {
            untrusted,
            unreachable: unreachable(error),
            ..Failure::new(exit_code(error), describe(error))
        }
    }
}

/// The origin a connection could not be opened to, when that is what
/// `error` is: the address, not the service, is what to check.
pub fn unreachable(error: &Error) -> Option<String> {
    match error {
        // The error names the origin it met, never the whole address.
        Error::Transport { source, origin, .. } if source.is_connect() => Some(origin.clone()),
        _ => None,
    }
}

/// An error and its cause chain, one cause per line, without repeats.
pub fn describe(error: &Error) -> String {
    let mut text = out::clean(&error.to_string());
    if let Error::UntrustedOrigin { origin, .. } = error {
        text.push_str(&format!(
            " (or --trust-origin {}; with a profile, add it to the profile's trusted_origins)",
            out::clean(origin)
        ));
    }
    for cause in genapi_text::causes(error) {
        text.push_str("\n  caused by: ");
        text.push_str(&cause);
    }
    text
}

/// The global options each subcommand that does not talk to the service
/// uses: its help shows only these among them (the others are accepted
/// there, and mean nothing). A subcommand not listed uses them all.
const GLOBALS_USED: [(&str, &[&str]); 9] = [
    ("mock", &["json", "quiet", "timeout"]),
    ("login", &["profile"]),
    ("tasks", &["json"]),
    ("gallery", &["json", "quiet"]),
    ("grid", &["force"]),
    ("models", &["json"]),
    ("config", &["json", "profile", "mock", "trust_origins"]),
    ("completions", &[]),
    ("man", &["force"]),
];

/// Whether `command` talks to a service (or shows how it would), so the
/// config file is read for it.
fn reads_settings(command: &Command) -> bool {
    if let Command::Batch(args) = command {
        return args.reads_settings();
    }
    matches!(
        command,
        Command::Generate { .. }
            | Command::Submit { .. }
            | Command::Wait { .. }
            | Command::Get { .. }
            | Command::Proxy(_)
            | Command::Config { change: None }
    )
}

/// The command's definition, as parsed, completed and documented: each
/// subcommand's help lists its own options and the global ones it uses
/// ([`GLOBALS_USED`]), not those that concern a client of the service. A
/// subcommand that has an option of a global option's name is not given the
/// global one, so a hidden copy there keeps it out of the help.
fn definition() -> clap::Command {
    let mut command = Cli::command();
    for (name, used) in GLOBALS_USED {
        let unused: Vec<clap::Arg> = command
            .get_arguments()
            .filter(|arg| arg.is_global_set() && !used.contains(&arg.get_id().as_str()))
            .map(|arg| arg.clone().hide(true))
            .collect();
        command = command.mut_subcommand(name, |sub| sub.args(unused));
    }
    command
}

fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&definition().get_matches()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    init_logging();
    out::set_quiet(cli.global.quiet);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            out::err(&format!("error: cannot start the runtime: {e}"));
            return ExitCode::from(code::OTHER);
        }
    };
    // Commands whose --json stdout holds one object per task: a failure
    // before any task (a mistake caught before sending) is one too.
    let json_errors = cli.global.json
        && matches!(
            cli.command,
            Command::Generate { .. } | Command::Submit { .. } | Command::Wait { .. } | Command::Get { .. }
        );
    // Commands whose stdout carries tasks: a line of theirs that could not
    // be written is a task the user may not know of.
    let prints_tasks = match &cli.command {
        Command::Generate { .. } | Command::Submit { .. } | Command::Wait { .. } | Command::Get { .. } => true,
        Command::Batch(args) => args.prints_tasks(),
        _ => false,
    };
    let outcome = runtime.block_on(run(cli)).and_then(|()| match out::stdout_lost() {
        // What was to be printed was not all written: not a success.
        Some(error) if prints_tasks => Err(Failure::new(
            code::ID_NOT_WRITTEN,
            format!("stdout could not be written ({error}); the tasks are named on stderr"),
        )),
        // A reader that stopped early (`| head`) had what it wanted.
        Some(_) if out::stdout_closed_by_reader() => Ok(()),
        Some(error) => Err(Failure::new(
            code::OTHER,
            format!("stdout could not be written ({error})"),
        )),
        None => Ok(()),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // An empty message was said already, with its object.
            if !failure.message.is_empty() {
                out::err(&format!("error: {}", failure.message));
                if json_errors {
                    out::out(
                        &serde_json::json!({"status": "failed", "error": failure.message, "exit_code": failure.code})
                            .to_string(),
                    );
                }
            }
            ExitCode::from(failure.code)
        }
    }
}

/// `GENAPI_LOG` (e.g. `genapi=debug`): plain text on stderr, never colour.
fn init_logging() {
    let Ok(filter) = std::env::var("GENAPI_LOG") else {
        return;
    };
    let targets: tracing_subscriber::filter::Targets = match filter.parse() {
        Ok(targets) => targets,
        Err(e) => {
            out::err(&format!("warning: GENAPI_LOG={filter:?} ignored: {e}"));
            return;
        }
    };
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
                .log_internal_errors(false)
                .with_writer(std::io::stderr),
        )
        .with(targets)
        .try_init();
}

#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
async fn run(cli: Cli) -> Result<(), Failure> {
    let mut global = cli.global;
    if reads_settings(&cli.command) {
        let settings = config::resolve(global.profile.as_deref())?;
        // `genapi config` shows a broken profile; the others stop at it.
        global.settings = match cli.command {
            Command::Config { .. } => settings,
            _ => settings.usable()?,
        };
    }
    let settings = global.settings.clone();
    // A profile's defaults stand in for the flags not given.
    let default_out = settings.out.map(|out| as_folder(out.value));
    let mut command = cli.command;
    match &mut command {
        Command::Generate { request, save, .. } => {
            request.model = request.model.take().or(settings.model.map(|m| m.value));
            save.out = save.out.take().or(default_out);
        }
        Command::Submit { request, .. } => {
            request.model = request.model.take().or(settings.model.map(|m| m.value));
        }
        Command::Wait { save, .. } => save.out = save.out.take().or(default_out),
        _ => {}
    }
    // The recording is checked as -o is, before anything starts.
    if let Some(record) = &global.record {
        genapi_files::may_write(record, files::existing(global.force))
            .map_err(|refused| Failure::usage(format!("--record {}", files::said(&refused))))?;
    }
    let sources = address_sources(&global);
    let ran = match command {
        Command::Generate {
            request,
            mut save,
            count,
        } => {
            save.force = global.force;
            save.record = global.record.clone();
            save.json = global.json;
            tasks::generate(&global, request, save, count).await
        }
        Command::Submit { request, out } => tasks::submit(&global, request, out).await,
        Command::Wait { id, mut save } => {
            save.force = global.force;
            save.record = global.record.clone();
            save.json = global.json;
            tasks::wait(&global, &id, save).await
        }
        Command::Get { id, out, open } => {
            let save = tasks::SaveArgs {
                out,
                open,
                force: global.force,
                record: global.record.clone(),
                json: global.json,
            };
            tasks::get(&global, &id, save).await
        }
        Command::Models { name } => models::run(&global, name.as_deref()),
        Command::Batch(args) => batch::run(&global, args).await,
        Command::Mock(args) => mock::run(&global, args).await,
        Command::Proxy(args) => proxy::run(&global, args).await,
        Command::Gallery { dir } => gallery::run(&global, &dir),
        Command::Grid(args) => grid::run(args, global.force),
        Command::Completions { shell } => {
            out::out(completions::script(shell, definition()).trim_end());
            Ok(())
        }
        Command::Complete { names } => {
            completions::print(names);
            Ok(())
        }
        Command::Config { change: Some(change) } => config_edit::set(global.profile.as_deref(), change),
        Command::Login(args) => config_edit::login(global.profile.as_deref(), args),
        Command::Tasks(args) => history::list(&global, &args),
        Command::Config { change: None } => {
            config::show(
                &global.settings,
                &global.trust_origins,
                global.json,
                uses_builtin_mock(&global),
            );
            Ok(())
        }
        Command::Man { command, dir } => man::run(definition(), command, dir, global.force),
    };
    ran.map_err(|mut failure| {
        match failure
            .unreachable
            .as_deref()
            .and_then(|origin| where_from(&sources, origin))
        {
            // Said already, with its task: the note follows on its own.
            Some(words) if failure.message.is_empty() => out::err(&format!("note: {words}")),
            Some(words) => failure.message.push_str(&format!("; {words}")),
            None => {}
        }
        failure
    })
}

/// Where the addresses the command connects to came from: each configured
/// API origin (the base URL, the regional one) with the words that say so,
/// for a connection that could not be opened there. A service out of reach
/// is often one a profile named long ago (a `genapi mock` since stopped).
/// Empty on the built-in mock, which the command starts itself.
pub fn address_sources(global: &Global) -> Vec<(String, String)> {
    if uses_builtin_mock(global) {
        return Vec::new();
    }
    [
        ("base URL", &global.settings.base_url),
        ("regional base URL", &global.settings.regional_base_url),
    ]
    .into_iter()
    .filter_map(|(name, setting)| {
        let setting = setting.as_ref()?;
        let origin = url::Url::parse(&setting.value).ok()?.origin().ascii_serialization();
        let words = format!(
            "the {name} {} is from {} (genapi config shows every setting)",
            genapi_text::shown_address(&setting.value),
            out::clean(&setting.source.to_string())
        );
        Some((origin, words))
    })
    .collect()
}

/// The words of [`address_sources`] for `origin`, if it is one of them.
pub fn where_from<'a>(sources: &'a [(String, String)], origin: &str) -> Option<&'a str> {
    sources
        .iter()
        .find(|(configured, _)| configured == origin)
        .map(|(_, words)| words.as_str())
}

/// A profile's `out`, a folder whose results get generated names in it:
/// one separator at its end marks it so (`pics` and `pics/` both give
/// `pics/`, never `pics//`, which a printed command would repeat).
fn as_folder(out: PathBuf) -> PathBuf {
    let mut folder = out.into_os_string();
    if !folder.to_string_lossy().ends_with(std::path::MAIN_SEPARATOR) {
        folder.push(std::path::MAIN_SEPARATOR_STR);
    }
    PathBuf::from(folder)
}

/// The longest bound the command accepts; larger values mean "no practical
/// limit" and are clamped so no deadline arithmetic can overflow.
const MAX_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `--timeout`'s value: whole seconds, at least one. Zero would submit a
/// task, which is then paid for, with no time left to wait for it.
fn timeout_seconds(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("0 leaves no time to wait for a task, which would still be paid for: give at least 1".into()),
        Ok(seconds) => Ok(seconds),
        Err(error) => Err(format!("{error}: give whole seconds, at least 1")),
    }
}

/// The bound of `generate`, `submit`, `wait` and `get` without `--timeout`.
const DEFAULT_TIMEOUT: u64 = 600;

impl Global {
    /// The seconds `--timeout` gives (or the default), for messages.
    pub fn timeout_seconds(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }
}

/// `--timeout` (600 s by default), clamped.
pub fn timeout_of(global: &Global) -> Duration {
    Duration::from_secs(global.timeout_seconds()).min(MAX_TIMEOUT)
}

/// `--timeout` for a command that is not bounded by default (`batch`,
/// `mock`, `proxy`): a batch of any size runs to its end unless asked
/// otherwise.
pub fn timeout_if_given(global: &Global) -> Duration {
    global
        .timeout
        .map_or(MAX_TIMEOUT, |seconds| Duration::from_secs(seconds).min(MAX_TIMEOUT))
}

/// A client for the service, or the built-in mock (kept alive while used).
pub struct Connection {
    /// The client.
    pub client: Client,
    /// The mock serving it, when the mock is used.
    pub mock: Option<MockService>,
    /// The configured service's addresses, under which learned durations
    /// are kept, and the durations loaded for it.
    durations: Option<(String, genapi::Learned)>,
    /// Whether an answer carried the mock's mark ([`genapi_mock::MOCK_HEADER`]).
    marked: Arc<AtomicBool>,
    /// Whether the service is on this machine: only then is the mark
    /// believed.
    loopback: bool,
    /// What the prices this connection is charged are kept under, decided
    /// before anything was sent ([`learned::prices_key`]).
    prices_key: String,
}

impl Connection {
    /// What the prices this connection was charged are loaded and kept
    /// under ([`learned::prices_key`]).
    pub fn prices_key(&self) -> &str {
        &self.prices_key
    }

    /// Whether the service ends with this command (the built-in mock): no
    /// other command can pick up its tasks.
    pub fn ends_with_this_command(&self) -> bool {
        self.mock.is_some()
    }

    /// Whether the results are a mock's: the built-in one, or a standalone
    /// `genapi mock` on this machine recognised by the mark on its answers,
    /// so they are never presented as the service's. A remote service's
    /// mark is not believed: it would label real charges illustrative.
    pub fn on_a_mock(&self) -> bool {
        self.mock.is_some() || (self.loopback && self.marked.load(Ordering::Relaxed))
    }
}

/// Has `builder`'s client note in `marked` any answer carrying the mock's
/// mark.
fn noting_the_mock(builder: genapi::ClientBuilder, marked: &Arc<AtomicBool>) -> genapi::ClientBuilder {
    let marked = marked.clone();
    builder.observe_headers(move |headers| {
        if headers
            .get(genapi_mock::MOCK_HEADER)
            .is_some_and(|value| value == "true")
        {
            marked.store(true, Ordering::Relaxed);
        }
    })
}

impl Drop for Connection {
    /// Keeps what this run learned about task durations for the next one
    /// (not for the built-in mock, which lives only as long as the run),
    /// when it learned anything: a run that saw no task end (`submit`, a
    /// `get` of a task still running) leaves the file as it was.
    fn drop(&mut self) {
        if let Some((service, loaded)) = &self.durations {
            let learned = self.client.learned();
            if learned != *loaded {
                learned::DURATIONS.save(service, learned);
            }
        }
    }
}

/// What learned durations are kept under: every address the command was
/// given, not the base URL alone (one base URL may poll elsewhere). A
/// `genapi mock` restarted on the same `--addr` has the same addresses, so
/// it is the same service, as a live one is; a mock started without one
/// gets new ports, and starts from nothing.
fn service_key(global: &Global) -> String {
    global.settings.service_addresses()
}

/// An address spelled one way, to tell whether two name one service: as
/// parsed (its scheme and host in small letters, without its scheme's own
/// port), without a user name, password, query or fragment (which may be
/// secrets, and name no other service) and without the slash its path may
/// end with; as it is, but for that slash, when it is no address.
///
/// ```text
/// HTTPS://Api.Example.com:443/v1/  ->  https://api.example.com/v1
/// https://me:pa55@api.example.com?token=t0k  ->  https://api.example.com
/// ```
pub fn address_key(text: &str) -> String {
    let text = text.trim();
    match url::Url::parse(text) {
        Ok(mut address) => {
            // Refused only for addresses that cannot have them.
            let _ = address.set_username("");
            let _ = address.set_password(None);
            address.set_query(None);
            address.set_fragment(None);
            address.as_str().trim_end_matches('/').to_string()
        }
        Err(_) => text.trim_end_matches('/').to_string(),
    }
}

/// The service as the command names it: the built-in mock, or the
/// configured base URL without the secrets an address may carry.
pub fn service_shown(global: &Global) -> String {
    if uses_builtin_mock(global) {
        return "the built-in mock".to_string();
    }
    global.settings.base_url.as_ref().map_or_else(
        || "the configured service".to_string(),
        |base| genapi_text::shown_address(&base.value),
    )
}

/// Whether this run uses the built-in mock: `--mock`, or no service
/// configured.
pub fn uses_builtin_mock(global: &Global) -> bool {
    global.mock || !global.settings.names_a_service()
}

/// The configured service; the built-in mock with `--mock` or when nothing is
/// configured. Half a configuration is refused, naming what is missing.
pub async fn connect(global: &Global) -> Result<Connection, Failure> {
    connect_with(global, |builder| builder).await
}

/// [`connect`], with the client's builder set up further by `limited` (its
/// active-task limit).
pub async fn connect_with(
    global: &Global,
    limited: impl Fn(genapi::ClientBuilder) -> genapi::ClientBuilder,
) -> Result<Connection, Failure> {
    if !uses_builtin_mock(global) {
        let mut builder = global
            .settings
            .builder()
            .map_err(|why| Failure::api(&Error::Config(why)))?;
        if let Some(unused) = &global.settings.unused {
            out::progress(&format!("genapi: {}", out::clean(unused)));
        }
        for origin in &global.trust_origins {
            builder = builder.trust_origin(origin);
        }
        // What earlier runs learned about this service's task durations.
        let service = service_key(global);
        let loaded: genapi::Learned = learned::DURATIONS.load(&service);
        let marked = Arc::new(AtomicBool::new(false));
        let client = global
            .recording(noting_the_mock(limited(builder), &marked))
            .learned(loaded.clone())
            .build()
            .map_err(|e| Failure::api(&e))?;
        return Ok(Connection {
            client,
            mock: None,
            durations: Some((service, loaded)),
            marked,
            loopback: learned::on_loopback(global),
            prices_key: learned::prices_key(global),
        });
    }
    // On loopback, as `genapi mock`: webhooks may go to receivers on this
    // machine (a batch's --webhook-listen).
    let config = MockConfig::default()
        .default_duration(Duration::from_secs(3))
        .webhooks_to_loopback(true);
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let mock = MockService::start_with(config, address).await.map_err(|e| {
        Failure::new(
            code::OTHER,
            format!("cannot start the mock: {}", out::clean(&e.to_string())),
        )
    })?;
    let why = if global.mock {
        "--mock given"
    } else {
        "GENAPI_API_KEY and GENAPI_BASE_URL are not set"
    };
    out::err(&format!(
        "{why}: using the built-in mock service at {} (a test double; its images are marked MOCK and its prices are illustrative)",
        mock.base_url()
    ));
    let client = global
        .recording(limited(mock.client_builder()))
        .build()
        .map_err(|e| Failure::new(code::OTHER, describe(&e)))?;
    Ok(Connection {
        client,
        mock: Some(mock),
        durations: None,
        marked: Arc::new(AtomicBool::new(true)),
        loopback: true,
        prices_key: learned::prices_key(global),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One service however its address is written, and never a secret of
    /// the address in what it is known by.
    #[test]
    fn an_address_is_known_by_one_spelling_without_its_secrets() {
        for (written, key) in [
            ("https://api.example.com", "https://api.example.com"),
            ("https://api.example.com/", "https://api.example.com"),
            (" HTTPS://Api.Example.COM:443/v1/ ", "https://api.example.com/v1"),
            (
                "https://me:pa55@api.example.com?token=t0k#frag",
                "https://api.example.com",
            ),
            ("http://127.0.0.1:8787/", "http://127.0.0.1:8787"),
            ("the built-in mock", "the built-in mock"),
        ] {
            assert_eq!(address_key(written), key, "{written}");
        }
        for other in [
            "https://api.example.com:8443",
            "http://api.example.com",
            "https://api.example.com/v2",
        ] {
            assert_ne!(address_key(other), address_key("https://api.example.com"), "{other}");
        }
    }

    #[test]
    fn a_profiles_out_folder_ends_with_one_separator() {
        for given in ["pics", "pics/"] {
            // As text: paths compare by their components, which a second
            // separator does not change.
            assert_eq!(as_folder(PathBuf::from(given)).into_os_string(), "pics/", "{given}");
        }
    }

    #[test]
    fn an_untrusted_polling_host_is_described_with_the_flag_that_trusts_it() {
        let error = Error::UntrustedOrigin {
            origin: "https://eu.example.com".into(),
            task: genapi::TaskRef {
                id: "t1".into(),
                polling_url: "https://eu.example.com/v1/get_result?id=t1".into(),
            },
        };
        let text = describe(&error);
        assert!(
            !text.contains("ClientBuilder"),
            "the command speaks of its flags: {text}"
        );
        assert!(text.contains("(or --trust-origin https://eu.example.com;"), "{text}");
    }

    /// `--help` shows a summary, then the rest: the rest never opens by
    /// saying the summary again.
    #[test]
    fn no_long_help_repeats_its_summary() {
        fn opening(text: &str) -> String {
            text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        }
        fn repeats(summary: Option<&clap::builder::StyledStr>, long: Option<&clap::builder::StyledStr>) -> bool {
            let (Some(summary), Some(long)) = (summary, long) else {
                return false;
            };
            let long = long.to_string();
            let rest = long.split_once("\n\n").map(|(_, rest)| rest).unwrap_or_default();
            opening(rest) == opening(&summary.to_string())
        }
        fn walk(command: &clap::Command, found: &mut Vec<String>) {
            if repeats(command.get_about(), command.get_long_about()) {
                found.push(command.get_name().to_string());
            }
            for arg in command.get_arguments() {
                if repeats(arg.get_help(), arg.get_long_help()) {
                    found.push(format!("{} --{}", command.get_name(), arg.get_id()));
                }
            }
            command.get_subcommands().for_each(|sub| walk(sub, found));
        }
        let mut found = Vec::new();
        walk(&definition(), &mut found);
        assert!(found.is_empty(), "{found:?}");
    }
}
