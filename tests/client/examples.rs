//! The programs under `examples/` work: their own code, included here, runs
//! against the mock service (as `cargo run --example NAME` does when no
//! service is configured).

use std::time::Duration;

use genapi_batch::Standing;
use genapi_mock::{MockConfig, MockService};

use crate::common::Dir;

// Only the examples' work is called; their `main` picks the client.
#[allow(dead_code)]
#[path = "../../examples/generate.rs"]
mod generate;

#[allow(dead_code)]
#[path = "../../examples/edit.rs"]
mod edit;

#[allow(dead_code)]
#[path = "../../examples/batch.rs"]
mod batch;

fn format_of(path: &std::path::Path) -> Option<genapi::ImageFormat> {
    genapi::ImageFormat::sniff(&std::fs::read(path).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generate_edit_and_batch_examples_work_against_the_mock() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client().unwrap();
    let dir = Dir::new("examples");

    let generated = generate::generate(&client, dir.join("lighthouse").to_str().unwrap())
        .await
        .unwrap();
    assert_eq!(
        format_of(&generated),
        Some(genapi::ImageFormat::Jpeg),
        "{}",
        generated.display()
    );

    let edited = edit::edit(&client, &generated, dir.join("snowy").to_str().unwrap())
        .await
        .unwrap();
    assert!(format_of(&edited).is_some(), "{}", edited.display());
    assert_eq!(mock.count("POST", "/v1/gen-kontext-pro"), 1);

    let shots = dir.join("shots");
    let prompts = ["a red fox", "a blue whale"];
    let outcomes = batch::batch(&client, &shots, &prompts).await.unwrap();
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:?}");
    // Run again: everything is answered from the journal, nothing is sent.
    let posts = mock.count("POST", "/v1/gen-2-pro");
    let again = batch::batch(&client, &shots, &prompts).await.unwrap();
    assert!(again.iter().all(|o| o.from_journal), "{again:?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), posts);
}
