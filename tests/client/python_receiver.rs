//! `examples/receiver.py`, the receiver of docs/webhooks.md for other
//! languages (Python's standard library only), works against the mock: it
//! submits with its own address as `webhook_url`, refuses forged and stale
//! deliveries, verifies the real one, saves the output fetched without the
//! key, polls `get_result` when no notification comes, and sends the key
//! to no polling address but the configured origins. Skipped, saying so,
//! where `python3` is not installed.

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use genapi::webhook::sign;
use genapi::WebhookSecret;
use genapi_mock::{MockConfig, MockService};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::common::{self, Dir};

/// 32 fixed bytes of key, in the `whsec_` form the receiver is given.
const SECRET: &str = "whsec_ZXhhbXBsZS1rZXktb2YtdGhpcnR5LXR3by1ieXRlcyE=";

fn python_is_installed() -> bool {
    let found = std::process::Command::new("python3").arg("--version").output();
    if found.is_err() {
        eprintln!("skipped: python3 is not installed, so examples/receiver.py cannot be run");
    }
    found.is_ok()
}

async fn mock(config: MockConfig) -> MockService {
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// `python3 examples/receiver.py` for `mock`, saving into `out`, with its
/// settings in the environment as `genapi mock` prints them.
fn receiver(mock: &MockService, out: &Dir, poll_every: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/receiver.py");
    let mut child = Command::new("python3")
        .args([
            script,
            "--prompt",
            "a lighthouse",
            "--timeout",
            "60",
            "--poll-every",
            poll_every,
        ])
        .arg("--out")
        .arg(&out.0)
        .env("GENAPI_BASE_URL", mock.base_url())
        .env("GENAPI_API_KEY", mock.key())
        .env("GENAPI_WEBHOOK_SECRET", SECRET)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// The next line the receiver prints, which must start with `word `: the rest.
async fn said(lines: &mut Lines<BufReader<ChildStdout>>, word: &str) -> String {
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the receiver said nothing for a minute")
        .unwrap()
        .unwrap_or_default();
    let rest = line.strip_prefix(&format!("{word} "));
    rest.unwrap_or_else(|| panic!("expected `{word} …`, got {line:?}"))
        .to_string()
}

/// Waits for the receiver to end with 0, and checks what it saved is an image.
async fn saved_an_image(mut child: Child, mut lines: Lines<BufReader<ChildStdout>>) {
    let path = said(&mut lines, "saved").await;
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    assert!(status.unwrap().unwrap().success());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        genapi::ImageFormat::sniff(&bytes),
        Some(genapi::ImageFormat::Jpeg),
        "{path}"
    );
}

/// Posts a delivery to the receiver: its answer's status.
async fn deliver(hook: &str, headers: &[(&str, String)], body: &str) -> u16 {
    let mut request = common::http().post(hook).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.unwrap().status().as_u16()
}

/// Standard Webhooks headers for `body`, signed with `secret` at `timestamp`.
fn signed(secret: &str, timestamp: i64, body: &str) -> Vec<(&'static str, String)> {
    let signature = sign(&WebhookSecret::from(secret), "msg_forged", timestamp, body.as_bytes()).unwrap();
    vec![
        ("webhook-id", "msg_forged".to_string()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signature),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_receiver_refuses_forgeries_verifies_and_downloads_without_the_key() {
    if !python_is_installed() {
        return;
    }
    // The task ends only when the test moves the mock's clock, after the forgeries.
    let config = MockConfig::default()
        .webhooks_to_loopback(true)
        .default_duration(Duration::from_secs(600));
    let mock = mock(config).await;
    let out = Dir::new("python-receiver");
    let (child, mut lines) = receiver(&mock, &out, "30");
    let hook = said(&mut lines, "listening").await;
    let id = said(&mut lines, "submitted").await;

    let forged =
        json!({"task_id": id, "status": "SUCCESS", "result": {"sample": "http://127.0.0.1:9/x.jpg"}}).to_string();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let other_key = "whsec_b3RoZXIta2V5LW9mLXRoaXJ0eS10d28tYnl0ZXMhIQ==";
    assert_eq!(deliver(&hook, &signed(other_key, now, &forged), &forged).await, 401);
    assert_eq!(
        deliver(&hook, &signed(SECRET, now - 3600, &forged), &forged).await,
        401,
        "stale"
    );
    let mut bare = signed(SECRET, now, &forged);
    bare[2].1 = "v1,".into();
    assert_eq!(deliver(&hook, &bare, &forged).await, 401, "a bare v1,");
    let echo = [("x-webhook-secret", SECRET.to_string())];
    assert_eq!(deliver(&hook, &echo, &forged).await, 401, "an echo without a signature");

    mock.advance(Duration::from_secs(600));
    saved_an_image(child, lines).await;
    let downloads: Vec<_> = mock.requests().into_iter().filter(|r| r.origin == "delivery").collect();
    assert_eq!(downloads.len(), 1, "{downloads:?}");
    assert!(
        downloads[0].headers.iter().all(|(name, _)| name != "x-key"),
        "{downloads:?}"
    );
    assert_eq!(mock.count("GET", "/v1/get_result"), 0, "the notification came first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_receiver_polls_get_result_when_no_notification_comes() {
    if !python_is_installed() {
        return;
    }
    // Without a target the mock never calls the receiver (and counts that).
    let mock = mock(MockConfig::default().default_duration(Duration::ZERO)).await;
    let out = Dir::new("python-receiver-polls");
    let (child, mut lines) = receiver(&mock, &out, "0.2");
    said(&mut lines, "listening").await;
    said(&mut lines, "submitted").await;
    saved_an_image(child, lines).await;
    assert_eq!(mock.stats().webhooks_refused, 1);
    assert!(mock.count("GET", "/v1/get_result") >= 1);
}

/// What the receiver does with a hostile service's addresses and ids, run in
/// Python against a server of its own: the key never follows a redirect, a
/// task id cannot steer where the output is saved, and only an image or
/// video fetched over http(s) is saved.
const HOSTILE_SERVICE: &str = r#"
import http.server, os, sys, tempfile, threading
sys.path.insert(0, sys.argv[1])
import receiver

seen_keys = []

class Service(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("location", "http://127.0.0.1:%d/elsewhere" % PORT)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if self.path == "/elsewhere":
            seen_keys.append(self.headers.get("x-key"))
        body = b"\xff\xd8\xff\xe0 a picture" if self.path == "/picture" else b"<html>not one</html>"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
PORT = server.server_address[1]
threading.Thread(target=server.serve_forever, daemon=True).start()
base = "http://127.0.0.1:%d" % PORT

try:
    receiver.call(base + "/redirect", key="sk-never-follows")
except Exception:
    pass
assert seen_keys == [], "the key followed a redirect: %r" % seen_keys

out = tempfile.mkdtemp()
saved = receiver.download(base + "/picture", out, "../../escape/x")
assert os.path.dirname(saved) == out, saved
for refused in (base + "/page", "file:///etc/hostname"):
    try:
        receiver.download(refused, out, "t")
    except (SystemExit, Exception):
        continue
    raise AssertionError("saved " + refused)
print("kept to itself")
"#;

#[test]
fn the_python_receiver_keeps_the_key_and_its_files_to_itself() {
    if !python_is_installed() {
        return;
    }
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let run = std::process::Command::new("python3")
        .args(["-c", HOSTILE_SERVICE, examples])
        // Nothing is written beside the example.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success() && said.contains("kept to itself"), "{said}");
}

/// Where the receiver polls a task whose `polling_url` points at each host,
/// run in Python with its `call` recording each request instead of sending
/// it: the key goes to the configured origins alone, the base URL's and
/// `GENAPI_REGIONAL_BASE_URL`'s, each exactly. A `polling_url` on a
/// neighbour under a platform's domain (anyone's host there), a regional host
/// not configured, another scheme or port, or with a user is not fetched:
/// the task is polled at the base URL's `get_result`.
const POLLING_HOSTS: &str = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import receiver

KEY = "sk-receiver-canary"
calls = []
receiver.call = lambda url, key=None, body=None: calls.append((url, key)) or {"status": "Pending"}

def polled(base, polling_url, regional=None):
    """The requests one poll makes, for a task answered with `polling_url`."""
    calls.clear()
    args = types.SimpleNamespace(base_url=base, regional_base_url=regional, key=KEY)
    receiver.poll(args, {"id": "t1", "polling_url": polling_url})
    return list(calls)

REFUSED = [
    ("https://genapi-prod.herokuapp.com", "https://attacker.herokuapp.com/v1/get_result?id=t1", None),
    ("https://genapi-prod.herokuapp.com", "https://attacker.herokuapp.com/v1/get_result?id=t1",
     "https://eu.genapi-prod.herokuapp.com"),
    ("https://genapi-7f3a.ngrok-free.app", "https://attacker-9c1d.ngrok-free.app/v1/get_result?id=t1", None),
    ("https://genapi.s3.amazonaws.com", "https://attacker.s3.amazonaws.com/v1/get_result?id=t1", None),
    ("https://genapi.azurewebsites.net", "https://attacker.azurewebsites.net/v1/get_result?id=t1", None),
    ("https://genapi.nip.io", "https://attacker.nip.io/v1/get_result?id=t1", None),
    ("https://genapi.10.0.0.5.nip.io", "https://attacker.10.0.0.5.nip.io/v1/get_result?id=t1", None),
    # A regional host of the service's own domain, but not configured.
    ("https://api.example.com", "https://api.eu4.example.com/v1/get_result?id=t1", None),
    # The configured hosts, by another scheme, port, or with a user.
    ("https://api.example.com", "http://api.example.com/v1/get_result?id=t1", None),
    ("https://api.example.com", "https://api.example.com:8443/v1/get_result?id=t1", None),
    ("https://api.example.com", "https://user@api.example.com/v1/get_result?id=t1", None),
    ("https://api.example.com", "https://api.example.com.evil.net/v1/get_result?id=t1", None),
    ("https://api.example.com", "http://api.eu4.example.com/v1/get_result?id=t1", "https://api.eu4.example.com"),
]
for base, polling_url, regional in REFUSED:
    made = polled(base, polling_url, regional)
    # One request, to the base URL's get_result: the polling_url is not fetched at all.
    assert made == [(base + "/v1/get_result?id=t1", KEY)], (polling_url, made)

ACCEPTED = [
    ("https://genapi-prod.herokuapp.com", "https://genapi-prod.herokuapp.com/v1/get_result?id=t1&at=1", None),
    ("https://api.example.com", "https://api.eu4.example.com/v1/get_result?id=t1", "https://api.eu4.example.com"),
    ("https://api.example.com/", "https://API.example.com:443/v1/get_result?id=t1", None),
    ("https://api.example.com", "https://api.eu4.example.com./v1/get_result?id=t1", "https://api.eu4.example.com/"),
    ("http://127.0.0.1:8787", "http://127.0.0.1:8788/v1/get_result?id=t1", "http://127.0.0.1:8788"),
]
for base, polling_url, regional in ACCEPTED:
    made = polled(base, polling_url, regional)
    assert made == [(polling_url, KEY)], (polling_url, made)
print("trusted as configured")
"#;

#[test]
fn the_python_receiver_sends_the_key_only_to_the_configured_origins() {
    if !python_is_installed() {
        return;
    }
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let run = std::process::Command::new("python3")
        .args(["-c", POLLING_HOSTS, examples])
        // Nothing is written beside the example.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success() && said.contains("trusted as configured"), "{said}");
}

/// A submission the service refuses for a missing field: its 422 quotes the
/// whole submission as the field's `input`, `webhook_secret` among it. The
/// receiver says which field and why, and never the secret or the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_receiver_says_why_a_submission_was_refused_without_its_secret() {
    if !python_is_installed() {
        return;
    }
    let mock = mock(MockConfig::default().webhooks_to_loopback(true)).await;
    let out = Dir::new("python-receiver-refused");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/receiver.py");
    let run = Command::new("python3")
        .args([
            script,
            "--prompt",
            "a lighthouse",
            "--model",
            "gen-pro-1.0-fill",
            "--timeout",
            "60",
        ])
        .arg("--out")
        .arg(&out.0)
        .env("GENAPI_BASE_URL", mock.base_url())
        .env("GENAPI_API_KEY", mock.key())
        .env("GENAPI_WEBHOOK_SECRET", SECRET)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the submission was refused: 422 body.image (missing)"),
        "{stderr}"
    );
    let key_part = SECRET.trim_start_matches("whsec_");
    for secret in [key_part, mock.key()] {
        assert!(!stderr.contains(secret), "{secret} was printed:\n{stderr}");
    }
    // What the service answers such a submission quotes it: the receiver
    // left it out.
    assert_eq!(mock.count("POST", "/v1/gen-pro-1.0-fill"), 1);
    let answer = common::http()
        .post(format!("{}/v1/gen-pro-1.0-fill", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "a lighthouse", "webhook_url": "http://127.0.0.1:9/hooks", "webhook_secret": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 422);
    assert!(
        answer.text().await.unwrap().contains(key_part),
        "the answer quotes the secret"
    );

    // Other shapes of refusal, as other servers write them: the secret
    // escaped (`\/`, `\u002B`), percent-encoded, upper-cased, split
    // between `loc` and `msg`, with zero-width characters inside, in HTML,
    // under a `detail` that is an object, a `loc` of null, escape codes.
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let run = std::process::Command::new("python3")
        .args(["-c", REFUSALS, examples, SECRET])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success() && said.contains("nothing shown"), "{said}");
}

/// `receiver.refusal` on answers that quote the secret in other forms:
/// none of its printed text holds the secret's key part, or an escape code.
const REFUSALS: &str = r#"
import base64, io, json, sys, urllib.parse
sys.path.insert(0, sys.argv[1])
import receiver

secret = sys.argv[2]
key = secret[len("whsec_"):]
escaped = json.dumps({"input": secret}).replace("/", "\\/").replace("+", "\\u002B")
half = len(key) // 2
answers = [
    ('{"detail": {"input": ' + json.dumps(secret) + '}}').encode(),
    ('{"error": ' + escaped + '}').encode(),
    ("<html><p>" + secret.replace("/", "&#x2F;") + "</p></html>").encode(),
    json.dumps({"detail": [{"loc": None, "msg": "bad \x1b[31mred"}]}).encode(),
    json.dumps({"detail": "refused " + secret}).encode(),
    json.dumps({"detail": [{"loc": ["body", key[:half]], "msg": key[half:], "type": "missing"}]}).encode(),
    json.dumps({"detail": [{"loc": ["body", urllib.parse.quote(secret, safe="")], "msg": "x"}]}).encode(),
    json.dumps({"detail": [{"loc": ["body", key.upper()], "msg": key.upper(), "type": key.lower()[:30]}]}).encode(),
    json.dumps({"detail": [{"loc": ["body", "\u200b".join(key)], "msg": "\u200b".join(key)}]}).encode(),
    # The secret encoded: base32 (lower case, as a field's name), hex.
    json.dumps({"detail": [{"loc": ["body", base64.b32encode(key.encode()).decode().lower()[:30]]}]}).encode(),
    json.dumps({"detail": [{"loc": ["body", "x" + key.encode().hex()[:30]]}]}).encode(),
    # A piece of the secret written as a field's name would be.
    json.dumps({"detail": [{"loc": ["body", "x" + "".join(c for c in key.lower() if c.isalnum())[:20]]}]}).encode(),
]
for body in answers:
    said = receiver.refusal(body, (secret, "sk-key"))
    shown = "".join(c for c in said if c.isalnum()).lower()
    for part in (key[:half], key[half:]):
        assert "".join(c for c in part if c.isalnum()).lower()[:6] not in shown, (body, said)
    assert "\x1b" not in said, (body, said)
# A failed task's details quoting the secret or the key in any encoding
# are not shown.
api_key = "sk-LONGSECRETKEY0123456789"
for quoted in [
    urllib.parse.quote(secret, safe=""),
    urllib.parse.quote(key, safe=""),
    key.encode().hex(),
    base64.b32encode(key.encode()).decode(),
    base64.urlsafe_b64encode(base64.b64decode(key)).decode(),
    secret.replace("/", "\\/"),
    # Encoded inside something longer: any alignment.
    base64.b64encode(b"x" + secret.encode()).decode(),
    base64.b64encode(b'{"webhook_secret":"' + secret.encode() + b'"}').decode(),
    base64.b32encode(b"abc" + secret.encode()).decode(),
    base64.b64encode(b"k" + base64.b64decode(key)).decode(),
    urllib.parse.quote(api_key, safe=""),
    base64.b64encode(api_key.encode()).decode(),
]:
    err = io.StringIO()
    sys.stderr, kept = err, sys.stderr
    try:
        receiver.failed("t1", "Error", {"error": "hook refused " + quoted}, (secret, api_key))
    finally:
        sys.stderr = kept
    said = err.getvalue()
    assert "not shown" in said and quoted[:12] not in said, (quoted, said)
# The id and status a failed task's answer names are the service's text too:
# no terminal control reaches the screen, and a secret there is not shown.
for task_id, status in [("t1\x1b]0;pwned\x07", "Error\x1b[2J"), ("t1", "Error: " + secret)]:
    err = io.StringIO()
    sys.stderr, kept = err, sys.stderr
    try:
        receiver.failed(task_id, status, {}, (secret, api_key))
    finally:
        sys.stderr = kept
    said = err.getvalue()
    assert "\x1b" not in said and "\x07" not in said and secret not in said, said
# What a validation error's fields are is said, by the names the submission uses.
said = receiver.refusal(json.dumps({"detail": [
    {"loc": ["body", "webhook_url"], "msg": "too long", "type": "string_too_long"},
    {"loc": ["body", "image"], "msg": "Field required", "type": "missing"},
]}).encode(), (secret,))
assert said == "body.webhook_url (string_too_long); body.image (missing)", said
print("nothing shown")
"#;
