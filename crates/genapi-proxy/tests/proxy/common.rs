//! A mock service, a proxy in front of it, and a plain HTTP client of the
//! kind any SDK is.

use std::path::PathBuf;
use std::time::Duration;

use genapi_mock::MockService;
use genapi_proxy::Proxy;

/// The submission path the tests use.
pub const PATH: &str = "/v1/gen-2-pro";

/// A body for `PATH`.
pub fn job(prompt: &str) -> String {
    serde_json::json!({ "prompt": prompt, "width": 512, "height": 512 }).to_string()
}

/// A proxy for `mock`, holding its key, remembering in `memory` if given.
pub async fn proxy(mock: &MockService, memory: Option<PathBuf>) -> Proxy {
    let mut builder = Proxy::builder(mock.client().unwrap()).key(mock.key());
    if let Some(memory) = memory {
        builder = builder.memory_file(memory);
    }
    builder.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// A proxy on the memory `file` once the proxy dropped before it has let
/// go of it (its tasks end on the runtime a moment after the drop): a
/// minute is a hang, not a verdict.
pub async fn proxy_when_free(mock: &MockService, file: &std::path::Path) -> Proxy {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let started = Proxy::builder(mock.client().unwrap())
            .key(mock.key())
            .memory_file(file)
            .start("127.0.0.1:0".parse().unwrap())
            .await;
        match started {
            Ok(proxy) => return proxy,
            Err(e) if std::time::Instant::now() < until && e.to_string().contains("another proxy") => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Why a proxy remembering in `memory` alone could not start.
pub async fn proxy_refused(mock: &MockService, memory: &std::path::Path) -> String {
    Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .memory_file(memory)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err()
        .to_string()
}

/// A plain HTTP client: what a Python or JavaScript SDK sends.
pub fn http() -> reqwest::Client {
    genapi::http_client_builder().unwrap().build().unwrap()
}

/// Posts `body` to `path` at the proxy, with no key (the proxy has one).
pub async fn post(proxy: &Proxy, path: &str, body: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = http()
        .post(format!("{}{path}", proxy.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Waits for `condition`, checking every few milliseconds; a minute is a
/// hang, not a verdict.
pub async fn until(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "still waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fresh folder for a memory file.
pub fn memory_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("genapi-proxy-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("memory.json")
}

/// The tasks the mock made.
pub fn tasks(mock: &MockService) -> usize {
    mock.created_tasks().len()
}

/// A mock that holds the next submission unanswered (an hour on its
/// clock), with credits to count charges.
pub async fn holding_mock() -> MockService {
    let mock = MockService::start_with(
        genapi_mock::MockConfig::default().credits(Some(100.0)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    mock.inject(genapi_mock::Fault::on(PATH, genapi_mock::FaultKind::Delay(Duration::from_secs(3600))).method("POST"));
    mock
}
