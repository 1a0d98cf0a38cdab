//! `genapi mock`: the mock service (a test double), standalone.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use genapi_mock::{MockConfig, MockService, WebhookTarget, DEFAULT_KEY};
use serde_json::{Map, Value};

use crate::{code, out, Failure, Global};

/// The line printed after the variables, so a reader knows it has them all.
const READY_MARKER: &str = "# genapi mock ready";

/// Where a key of the user's may come from, kept off the command line
/// (where others on the machine can read it).
pub const KEY_VARIABLE: &str = "GENAPI_MOCK_KEY";

/// A receiver's origin the messages give as an example.
const EXAMPLE_TARGET: &str = "http://127.0.0.1:9000";

/// Settings of the standalone mock.
#[derive(Args, Debug)]
pub struct MockArgs {
    /// Address to listen on (loopback unless --allow-remote); the polling and delivery hosts take the two
    /// ports after it, so a mock started again on the same port has the same addresses, and a profile written
    /// for it keeps working [default: ports the system picks].
    #[arg(long, default_value = "127.0.0.1:0", hide_default_value = true)]
    addr: String,
    /// Allow listening on a non-loopback address.
    ///
    /// Its control routes are then reachable by others. It then needs a key of your own, and delivers webhooks only to the --webhook-target origins.
    #[arg(long)]
    allow_remote: bool,
    /// The key clients must send.
    ///
    /// [default: GENAPI_MOCK_KEY if set, else mock-key]. With --allow-remote, a
    /// key of your own is required: set GENAPI_MOCK_KEY (out of the process list) or pass this.
    #[arg(long)]
    key: Option<String>,
    /// How long tasks take, in milliseconds.
    #[arg(long, default_value_t = 3000)]
    duration_ms: u64,
    /// Credit balance (unlimited when not given); 402 once spent.
    #[arg(long)]
    credits: Option<f64>,
    /// Active tasks per key before 429.
    #[arg(long, value_name = "N")]
    max_active: Option<usize>,
    /// An origin webhooks may be delivered to; repeatable.
    ///
    /// A `webhook_url` elsewhere is never called: its delivery carries the secret. On loopback the mock also calls any address on this machine; a
    /// non-loopback origin needs --allow-remote, and with --allow-remote only these origins are called.
    #[arg(long, value_name = "ORIGIN")]
    webhook_target: Vec<String>,
    /// Answer from a recording (genapi --record FILE).
    ///
    /// Instead of simulating tasks: recorded
    /// submissions, their polls' statuses in order, their results (or placeholders of the
    /// recorded format and size), errors and 429s.
    #[arg(long, value_name = "FILE")]
    replay: Option<std::path::PathBuf>,
    /// Start the mock in the background and return once it answers.
    ///
    /// Prints the same lines, plus GENAPI_MOCK_PID (stop it with `kill $GENAPI_MOCK_PID`), so
    /// `eval "$(genapi mock --background)"` works typed at once, before the next command.
    #[arg(long)]
    background: bool,
}

/// Runs the mock until Ctrl-C or SIGTERM (or `--timeout`). Prints on stdout the variables a client
/// needs as lines a shell takes as they are, `export NAME='VALUE'` (or one JSON object with
/// `--json`), then `# genapi mock ready`.
pub async fn run(global: &Global, args: MockArgs) -> Result<(), Failure> {
    if args.background {
        return background(global).await;
    }
    let address: SocketAddr = args.addr.parse().map_err(|e| {
        Failure::usage(format!(
            "--addr {}: {e}; expected IP:PORT, e.g. 127.0.0.1:8787",
            args.addr
        ))
    })?;
    if !address.ip().is_loopback() && !args.allow_remote {
        return Err(Failure::usage(format!(
            "--addr {address} is not a loopback address: anyone who can reach it could use the mock's control \
             routes; pass --allow-remote to listen there anyway"
        )));
    }
    let config = config(&args)?;
    if !address.ip().is_loopback() {
        out::err(&format!(
            "warning: listening on {address}, reachable from other machines; the mock is a test double with \
             open control routes (webhooks go only to the --webhook-target origins)"
        ));
    }
    let mock = MockService::start_with(config, address)
        .await
        .map_err(|e| Failure::new(code::OTHER, not_started(address, &e)))?;
    out::err(&format!(
        "mock service (a test double) listening on {} (polling host {}, delivery host {}); stop it with Ctrl-C",
        mock.base_url(),
        mock.regional_url(),
        mock.delivery_url()
    ));
    let variables = variables(&mock);
    if global.json {
        let object: Map<String, Value> = variables
            .iter()
            .map(|(name, value)| (name.to_string(), Value::String(value.clone())))
            .collect();
        out::out(&Value::Object(object).to_string());
    } else {
        // Pasted into a shell (or sourced from a file), each line sets its
        // variable for the commands that follow, so they use this mock.
        for (name, value) in &variables {
            out::out(&format!("export {name}={}", shell_quoted(value)));
        }
        out::out(READY_MARKER);
    }
    // Whether or not anyone still reads stdout, the mock keeps serving.
    let stopped = crate::interrupt::served_until_stopped(global).await;
    mock.stop().await;
    stopped.map_err(|e| Failure::new(code::OTHER, format!("cannot wait for Ctrl-C: {e}")))
}

/// How long `--background` waits for the mock to answer: a hang detector
/// (a mock starts in well under a second).
const BACKGROUND_START: Duration = Duration::from_secs(120);

/// `--background`: this command again, without the flag, in a session of
/// its own (Ctrl-C in the terminal does not reach it); its lines are
/// passed on once it printed them all, which it does once it answers, with
/// its process id. A mock that did not start says why on stderr.
async fn background(global: &Global) -> Result<(), Failure> {
    use std::io::{BufRead as _, Read as _};
    use std::process::{Command, Stdio};

    let program = std::env::current_exe()
        .map_err(|e| Failure::new(code::OTHER, format!("--background: cannot find this program: {e}")))?;
    let args = std::env::args_os().skip(1).filter(|arg| arg != "--background");
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| Failure::new(code::OTHER, format!("--background: cannot start the mock: {e}")))?;
    let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(Failure::new(
            code::OTHER,
            "--background: the mock's output cannot be read",
        ));
    };
    let json = global.json;
    // Its lines up to the ready mark (its one line, with --json), read on a
    // thread: none when it ended first.
    let reading = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let last = json || line == READY_MARKER;
            lines.push(line);
            if last {
                return Some(lines);
            }
        }
        None
    });
    let lines = tokio::time::timeout(BACKGROUND_START, reading)
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
    let pid = child.id();
    let Some(mut lines) = lines else {
        let _ = child.kill();
        let _ = child.wait();
        let mut said = String::new();
        let _ = stderr.read_to_string(&mut said);
        out::err_raw(&said);
        return Err(Failure::new(code::OTHER, "--background: the mock did not start"));
    };
    match lines.last_mut() {
        Some(object) if json => {
            let mut value: Value = serde_json::from_str(object).unwrap_or_default();
            value["GENAPI_MOCK_PID"] = Value::String(pid.to_string());
            *object = value.to_string();
        }
        _ => lines.insert(lines.len().saturating_sub(1), format!("export GENAPI_MOCK_PID='{pid}'")),
    }
    out::err(&format!(
        "mock service (a test double) started in the background, process {pid}: stop it with kill {pid}"
    ));
    for line in lines {
        out::out(&line);
    }
    Ok(())
}

/// The mock's settings from the options, or what to fix in them.
fn config(args: &MockArgs) -> Result<MockConfig, Failure> {
    if args.credits.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(Failure::usage("--credits: expected a number of credits, 0 or more"));
    }
    // Signed webhooks go to the `webhook_url` a submission names, as the
    // service's do: on loopback, when it is on this machine or listed; when
    // others can reach the mock, only when listed, or a submission from
    // another machine could make it call services that trust loopback.
    let mut config = MockConfig::default()
        .key(key(args)?)
        .default_duration(Duration::from_millis(args.duration_ms))
        .credits(args.credits)
        .allow_remote(args.allow_remote)
        .webhooks_to_loopback(!args.allow_remote)
        .allow_remote_webhooks(args.allow_remote);
    for target in webhook_targets(args)? {
        config = config.webhook_target(target.origin());
    }
    if let Some(limit) = args.max_active {
        config = config.max_active_tasks(limit);
    }
    if let Some(path) = &args.replay {
        let shown = path.display();
        // A regular file within its limit, parsed as it is read.
        let file = genapi_files::open(path, crate::files::RECORDING_LIMIT)
            .map_err(|refused| Failure::usage(format!("--replay {shown}: {}", refused.reason())))?;
        let replay = genapi_mock::Replay::from_har_reader(file).map_err(|e| {
            Failure::usage(format!(
                "--replay {shown}: {}; give a recording written by `genapi --record FILE` (HAR)",
                out::clean(&e.to_string())
            ))
        })?;
        config = config.replay(replay);
    }
    Ok(config)
}

/// Why the mock did not start. A port taken after `--addr`'s is one of
/// the mock's other hosts (polling, then delivery): said so, with a port
/// whose three are all after the taken one.
fn not_started(asked: SocketAddr, error: &genapi_mock::Error) -> String {
    let said = format!("cannot start the mock: {}", out::clean(&error.to_string()));
    let genapi_mock::Error::Listen { addr, .. } = error else {
        return said;
    };
    let host = match addr.port().checked_sub(asked.port()) {
        Some(1) if asked.port() != 0 => "polling",
        Some(2) if asked.port() != 0 => "delivery",
        _ => return said,
    };
    let free = SocketAddr::new(asked.ip(), addr.port().saturating_add(1));
    format!(
        "{said}; port {} is the {host} host of --addr {asked} (the mock's polling and delivery hosts take the two \
         ports after --addr's): choose another port, e.g. --addr {free}",
        addr.port()
    )
}

/// The key clients must send.
///
/// The key clients must send: `--key`, else [`KEY_VARIABLE`], else the
/// mock's default, which a mock others can reach refuses (anyone who read
/// the docs knows it).
fn key(args: &MockArgs) -> Result<String, Failure> {
    let given = args.key.clone().or_else(|| std::env::var(KEY_VARIABLE).ok());
    if !args.allow_remote {
        return Ok(given.unwrap_or_else(|| DEFAULT_KEY.to_string()));
    }
    match given {
        Some(key) if !key.is_empty() && key != DEFAULT_KEY => Ok(key),
        _ => Err(Failure::usage(format!(
            "--allow-remote needs a key of your own: anyone who can reach the mock could use the default key \
             {DEFAULT_KEY}; set {KEY_VARIABLE} to a key you choose (or pass --key KEY)"
        ))),
    }
}

/// The origins given with `--webhook-target`, each one the mock can call:
/// an `http` or `https` URL, on this machine unless `--allow-remote`.
fn webhook_targets(args: &MockArgs) -> Result<Vec<WebhookTarget>, Failure> {
    let count = args.webhook_target.len();
    let targets = args.webhook_target.iter().enumerate().map(|(index, value)| {
        // The value is not repeated: it may be a secret pasted in the wrong place.
        let target = WebhookTarget::parse(value).map_err(|e| {
            let which = if count > 1 {
                format!(" (value {} of {count})", index + 1)
            } else {
                String::new()
            };
            Failure::usage(format!(
                "--webhook-target{which} is {e}: give a receiver's origin, e.g. {EXAMPLE_TARGET} (the value is \
                 not repeated here, in case it is a secret)"
            ))
        })?;
        if !target.is_loopback() && !args.allow_remote {
            return Err(Failure::usage(format!(
                "--webhook-target {target} needs --allow-remote: it is not on this machine, and each delivery \
                 carries the submitter's webhook secret there; pass --allow-remote (with a key of your own in \
                 {KEY_VARIABLE}), or give a receiver on this machine, e.g. {EXAMPLE_TARGET}"
            )));
        }
        Ok(target)
    });
    targets.collect()
}

/// `value` in single quotes, as a POSIX shell reads it back unchanged (a
/// quote in it closed, escaped and opened again).
fn shell_quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// Every variable a client of this mock needs.
fn variables(mock: &MockService) -> Vec<(&'static str, String)> {
    vec![
        ("GENAPI_BASE_URL", mock.base_url().to_string()),
        ("GENAPI_API_KEY", mock.key().to_string()),
        // The regional polling host, on another port of loopback.
        ("GENAPI_TRUSTED_ORIGINS", mock.trusted_origins().join(",")),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_with_a_quote_is_read_back_whole_by_a_shell() {
        let quoted = super::shell_quoted("it's $HOME `x` \\");
        let echoed = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {quoted}"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&echoed.stdout), "it's $HOME `x` \\");
    }
}
