//! A service that quotes the key, a line's webhook secret and its webhook
//! address's token in a failed task's details: none of them reaches the
//! terminal, any file a batch writes (results, journal, gallery) or the
//! records of a shared ledger.

use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::common::{self, Dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn details_quoting_secrets_are_scrubbed_from_the_terminal_and_every_file_of_a_batch() {
    const KEY: &str = "cli-canary-key-9d2e";
    const SECRET: &str = "cli-canary-secret-5f1";
    const TOKEN: &str = "cli-token-77aa31";
    let mock = MockService::start_with(MockConfig::default().key(KEY), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let quoting = json!({"id": "any", "status": "Error",
                         "details": {"error": format!("refused {KEY} {SECRET} {TOKEN}")}});
    common::answer_polls(&mock, quoting.to_string(), 100);
    let dir = Dir::new("echoed-secrets");
    let line = json!({"model": "gen-2-pro", "name": "fox", "prompt": "a red fox", "width": 64, "height": 64,
                      "webhook_url": format!("http://127.0.0.1:9/hook?token={TOKEN}"), "webhook_secret": SECRET});
    std::fs::write(dir.join("jobs.jsonl"), format!("{line}\n")).unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_ne!(run.status.code(), Some(0), "the line failed:\n{stderr}");
    let mut texts = vec![
        ("stderr", stderr),
        ("stdout", String::from_utf8_lossy(&run.stdout).into_owned()),
    ];
    for file in ["results.jsonl", "journal.jsonl", "index.html"] {
        texts.push((file, std::fs::read_to_string(dir.join("out").join(file)).unwrap()));
    }
    // The same batch shared through a ledger: its records hold the same
    // outcome, scrubbed as well.
    if let Some(pg) = common::pg::Postgres::start("echoed-secrets") {
        let run = common::genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "shared", "--ledger"])
            .arg(pg.url())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_ne!(run.status.code(), Some(0), "the line failed:\n{stderr}");
        let tables = pg.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
        let mut dump = String::new();
        for name in tables.lines() {
            dump.push_str(&pg.sql(&format!("SELECT to_jsonb(r)::text FROM \"{name}\" r")));
            dump.push('\n');
        }
        assert!(dump.contains("[redacted]"), "the outcome was stored: {dump}");
        texts.push(("the ledger's records", dump));
        texts.push(("stderr of the ledger's run", stderr));
    }
    let results = &texts[2].1;
    assert!(
        results.contains("refused [redacted] [redacted] [redacted]"),
        "{results}"
    );
    for (name, text) in &texts {
        for secret in [KEY, SECRET, TOKEN] {
            assert!(!text.contains(secret), "{secret} is in {name}:\n{text}");
        }
    }
}
