//! Helpers shared by the behaviour tests of the workspace's crates: working
//! directories, sample bodies and images, a hostile service, a throwaway
//! PostgreSQL cluster, and the `genapi` command run against a mock.
//!
//! Not published: it exists for the tests.

use serde_json::{json, Map, Value};

/// A 1x1 PNG, the smallest valid image input.
pub const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The embedded document as JSON.
pub fn document() -> Value {
    serde_json::from_str(genapi::validate::EMBEDDED_DOCUMENT).expect("embedded document is JSON")
}

pub mod browser;
pub mod hostile;

pub mod pg;
pub mod results;

pub mod stall;
pub mod store_contract;

/// A valid value for a field schema (references followed with the crate's
/// own document reader).
pub fn sample(doc: &Value, schema: &Value) -> Value {
    let schema = match schema["allOf"].get(0) {
        Some(first) => first,
        None => schema,
    };
    let schema = genapi_document::resolve(doc, schema).expect("the document's references resolve");
    if let Some(first) = schema["anyOf"].as_array().and_then(|b| b.first()) {
        return sample(doc, first);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") if schema.get("x-image").is_some() => json!(PNG_1X1),
        Some("string") if schema["format"] == "uri" => json!("https://example.com/hook"),
        Some("string") if schema.get("pattern").is_some() => json!("my-lora"),
        Some("string") if schema.get("x-aspect-ratio-range").is_some() => json!("16:9"),
        Some("string") => json!("text"),
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(1)),
        Some("number") => json!(schema["minimum"].as_f64().unwrap_or(1.5)),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(doc, &schema["items"])]),
        _ => json!("any"),
    }
}

/// A body of the named request schema: required fields only, or all.
pub fn body(doc: &Value, schema_name: &str, all: bool) -> Value {
    let schema = &doc["components"]["schemas"][schema_name];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Map::new();
    for (name, property) in schema["properties"].as_object().unwrap() {
        if all || required.contains(&name.as_str()) {
            out.insert(name.clone(), sample(doc, property));
        }
    }
    Value::Object(out)
}

/// A PNG header claiming `width` x `height` (enough for size checks).
pub fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = vec![
        0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, b'I', b'H', b'D', b'R',
    ];
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

/// Base64 of bytes.
pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Makes ring the process's default rustls provider (unless one is), so a
/// plain reqwest client can be built: genapi's reqwest has none compiled in.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A plain reqwest client, for talking to the mock directly.
pub fn http() -> reqwest::Client {
    install_tls_provider();
    reqwest::Client::new()
}

/// Submits a small gen-2-pro task to the mock at `base_url` with `key`,
/// whose notification goes to `webhook_url` signed with `secret`: the
/// answer's status and body (`null` if not JSON).
pub async fn submit_with_webhook(
    http: &reqwest::Client,
    base_url: &str,
    key: &str,
    webhook_url: &str,
    secret: &str,
) -> (u16, Value) {
    let response = http
        .post(format!("{base_url}/v1/gen-2-pro"))
        .header("x-key", key)
        .json(&json!({"prompt": "a hook", "width": 64, "height": 64,
                       "webhook_url": webhook_url, "webhook_secret": secret}))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// The first of `count` loopback ports in a row, free when looked at, for
/// a mock on a port of the test's choosing (its polling and delivery hosts
/// take the two after it), chosen below the ports the system hands out for
/// connections: one of those (port 0 gives one) can be taken by any test's
/// connection between the look and the mock's listening, or between one
/// mock and the next on the same port. No two calls of one process get the
/// same port.
pub fn free_ports(count: u16) -> u16 {
    static LOOKED_AT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let handed_out_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    // Test processes running at once start apart.
    let start = 10_000 + (std::process::id() % 500) as u16 * 40;
    let start = if start + count < handed_out_from { start } else { 1025 };
    loop {
        let first = start.saturating_add(LOOKED_AT.fetch_add(count, std::sync::atomic::Ordering::SeqCst));
        assert!(
            first.saturating_add(count) < handed_out_from,
            "no {count} free ports below the range handed out for connections"
        );
        if (first..first + count).all(|port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()) {
            return first;
        }
    }
}

/// A fresh working directory for one test, removed at the end.
pub struct Dir(pub std::path::PathBuf);

impl Dir {
    /// `genapi-test-NAME-PID` in the temporary directory, empty.
    pub fn new(name: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("genapi-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }
    /// A path inside it.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `genapi` command at `program`, run in `dir` against `mock` (the
/// command's tests pass `env!("CARGO_BIN_EXE_genapi")`).
pub fn genapi(program: &str, dir: &Dir, mock: &genapi_mock::MockService) -> std::process::Command {
    let mut command = genapi_alone(program, dir);
    command
        .env("GENAPI_BASE_URL", mock.base_url())
        .env("GENAPI_API_KEY", mock.key())
        .env("GENAPI_TRUSTED_ORIGINS", mock.trusted_origins().join(","));
    command
}

/// A variable `genapi mock` prints, `export NAME='VALUE'`, as its name and
/// value (a quote in the value written `'\''`, as a shell reads it); `None`
/// for any other line.
pub fn mock_variable(line: &str) -> Option<(String, String)> {
    let (name, quoted) = line.strip_prefix("export ")?.split_once('=')?;
    let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    Some((name.to_string(), inner.replace("'\\''", "'")))
}

/// An image's width and height, read by the `image` crate (not by the
/// client under test), or `None` when `bytes` is not a PNG, JPEG or WebP.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .into_dimensions()
        .ok()
}

/// A mock on a loopback port whose tasks take `duration_ms`, with room for
/// every task a test submits (so submissions and accepted tasks are the same
/// count) and a request log that keeps them all.
pub async fn roomy_mock(duration_ms: u64) -> genapi_mock::MockService {
    let config = genapi_mock::MockConfig::default()
        .default_duration(std::time::Duration::from_millis(duration_ms))
        .max_active_tasks(10_000)
        .request_log_capacity(100_000);
    genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The task the mock created for `prompt`, as a user finds it in the
/// service's records.
pub fn created_for(mock: &genapi_mock::MockService, prompt: &str) -> genapi_mock::CreatedTask {
    mock.created_tasks()
        .into_iter()
        .find(|task| task.prompt == prompt)
        .unwrap_or_else(|| panic!("no task was created for {prompt:?}"))
}

/// Submissions of `/v1/gen-2-pro` the mock received, by prompt; one whose
/// body the mock did not keep (it refused the key before reading it) or
/// that has no prompt is counted under `""`.
pub fn posts_by_prompt(mock: &genapi_mock::MockService) -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    for request in mock.requests() {
        if request.method == "POST" && request.path == "/v1/gen-2-pro" {
            let body: Value = serde_json::from_str(&request.body).unwrap_or_default();
            let prompt = body["prompt"].as_str().unwrap_or_default().to_string();
            *counts.entry(prompt).or_default() += 1;
        }
    }
    counts
}

/// The `genapi` command at `program` with nothing configured (so on its
/// built-in mock), run in `dir`; what it keeps between runs stays there.
pub fn genapi_alone(program: &str, dir: &Dir) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    for name in [
        "GENAPI_API_KEY",
        "GENAPI_BASE_URL",
        "GENAPI_REGIONAL_BASE_URL",
        "GENAPI_TRUSTED_ORIGINS",
        "GENAPI_LOG",
        "GENAPI_DOCUMENT",
        "GENAPI_LEDGER_URL",
        "GENAPI_CONFIG",
        "GENAPI_PROFILE",
        "GENAPI_MOCK_KEY",
        "GENAPI_PROXY_KEY",
    ] {
        command.env_remove(name);
    }
    command.env("XDG_CACHE_HOME", dir.0.join("cache"));
    // No config file of the user's: a test writes its own when it wants one.
    command.env("XDG_CONFIG_HOME", dir.0.join("config"));
    command.current_dir(&dir.0).stdin(std::process::Stdio::null());
    command
}

/// Makes the mock answer its next `gen-2-pro` submission with a 200 and
/// `body`, whatever was sent: a service's answer, chosen by the test.
pub fn answer_next_submission(mock: &genapi_mock::MockService, body: String) {
    mock.inject(genapi_mock::Fault::on(
        "/v1/gen-2-pro",
        genapi_mock::FaultKind::Status {
            status: 200,
            retry_after: None,
            body,
        },
    ));
}

/// Makes the mock answer its next `times` polls with a 200 and `body`,
/// whatever task they ask for: a service's answer, chosen by the test.
pub fn answer_polls(mock: &genapi_mock::MockService, body: String, times: usize) {
    mock.inject(
        genapi_mock::Fault::on(
            "/v1/get_result",
            genapi_mock::FaultKind::Status {
                status: 200,
                retry_after: None,
                body,
            },
        )
        .times(times),
    );
}

/// Copies `from` to `to` as an executable (mode 755) for a test to run.
/// The copy is written by another process (`cp`): a file this process
/// writes stays open for writing, for a moment, in every child another
/// test thread starts meanwhile, and running it then fails with "text file
/// busy".
#[cfg(unix)]
pub fn install_executable(from: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let copied = std::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(copied.success(), "cp {} {}", from.display(), to.display());
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("the copy's mode");
}

/// The first of `names` on `PATH`: a program a test drives (`what`, from
/// Debian's `package`). Under CI, which installs it, a missing one fails
/// the test; elsewhere the test says it skipped that part and gets `None`.
pub fn installed(names: &[&str], what: &str, package: &str) -> Option<std::path::PathBuf> {
    let found = names.iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is not installed (Debian's {package} package); CI must have it"
        );
        eprintln!("skipped: {what} is not installed (Debian's {package} package)");
    }
    found
}

/// Makes `subscriber` this thread's default until the guard is dropped, for
/// a test that reads what was logged.
///
/// `tracing` decides once for the whole process whether each place that
/// logs is on, when that place is first reached. While a single subscriber
/// is registered in the process, that decision is made by the subscriber of
/// the thread that reached the place first: a test beside this one, with no
/// subscriber, switches off a span this test waits for, on every thread.
/// A second subscriber, registered once and kept for the whole run, makes
/// every such decision ask each subscriber alive, this one included.
pub fn log_into<S>(subscriber: S) -> tracing::subscriber::DefaultGuard
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    static SECOND: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    tracing::subscriber::set_default(subscriber)
}

/// Where a `tracing_subscriber` writes, for a test to read what was logged.
#[derive(Clone, Default)]
pub struct LogCapture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl LogCapture {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A loopback port that refuses every connection, and that no other test's
/// server can take while it is held: bound, never listened on. (A port
/// bound and let go may be given to the next server that asks.)
pub struct RefusingPort {
    _socket: tokio::net::TcpSocket,
    /// `127.0.0.1:PORT`.
    pub address: std::net::SocketAddr,
}

impl Default for RefusingPort {
    fn default() -> RefusingPort {
        RefusingPort::new()
    }
}

impl RefusingPort {
    /// A port of its own.
    pub fn new() -> RefusingPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = socket.local_addr().unwrap();
        RefusingPort {
            _socket: socket,
            address,
        }
    }
}
