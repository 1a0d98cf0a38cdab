//! The service's own Python SDK (`blackforest`), unmodified, through the
//! proxy against the mock: generate, poll and download.
//!
//! It needs a Python with the SDK installed: `GENAPI_SDK_PYTHON`, or the
//! virtual environment CI makes at `target/sdk-python` (`.ci/run` says how).
//! Under CI its absence fails the test; elsewhere the test says it was
//! skipped and why.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};

use crate::common::proxy;

/// The Python to run the SDK with, if there is one that has it.
fn python() -> Option<PathBuf> {
    let candidates = std::env::var_os("GENAPI_SDK_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/sdk-python/bin/python"
        ))]);
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import blackforest"])
            .output()
            .is_ok_and(|run| run.status.success())
    })
}

#[tokio::test]
async fn the_services_python_sdk_generates_polls_and_downloads_through_the_proxy() {
    let Some(python) = python() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Python with the blackforest SDK (GENAPI_SDK_PYTHON, or target/sdk-python made by .ci/run)"
        );
        eprintln!("skipped: no Python with the blackforest SDK; see .ci/run for the one line that makes it");
        return;
    };
    let config = MockConfig::default().default_duration(Duration::from_millis(200));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = proxy(&mock, None).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/proxy/sdk/blackforest_through_the_proxy.py"
    );
    let (base, key) = (proxy.base_url(), mock.key().to_string());
    let run = tokio::task::spawn_blocking(move || Command::new(python).arg(script).args([&base, &key]).output())
        .await
        .unwrap()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{said}");
    let task = said
        .lines()
        .find_map(|line| line.strip_prefix("TASK "))
        .unwrap_or_default();
    let created = mock.created_tasks();
    assert_eq!(created.len(), 1, "{said}");
    assert_eq!(created[0].id, task);
    let stats = mock.stats();
    assert_eq!(
        stats.downloads, 1,
        "the download went through the proxy to the delivery host"
    );
    assert_eq!(stats.keys_sent_to_delivery, 0);
    let summary = proxy.stop().await;
    assert_eq!((summary.submissions_sent, summary.tasks), (1, 1), "{summary}");
    assert!(
        summary.requests >= 3,
        "submission, polls and download passed the proxy: {summary}"
    );
}
