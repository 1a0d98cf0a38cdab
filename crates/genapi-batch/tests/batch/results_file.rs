//! What a results file says of each line: the outcome and what was asked,
//! written by the runner and read back as the same `ResultLine`.

use futures::StreamExt;
use genapi_batch::{Batch, GridCell, JobFile, MemoryJournal, ResultLine, Standing};
use serde_json::json;

use crate::common::{store, Dir};

#[tokio::test(start_paused = true)]
async fn a_result_line_says_what_was_asked_and_reads_back_whole() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("results-file");
    let lines = [
        json!({"model": "gen-2-pro", "name": "fox-1", "prompt": "a red fox", "seed": 1, "width": 512, "height": 384,
               "grid": {"row": "a red fox", "column": "seed 1"}}),
        json!({"model": "gen-tools/deblur-v1", "name": "plain", "image": "https://example.com/blurry.jpg"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(dir.join("jobs.jsonl"), text).unwrap();
    let checked = JobFile::check(dir.join("jobs.jsonl")).unwrap();
    assert_eq!(
        checked.invalid_lines(),
        0,
        "a grid is not a field of the model: {:?}",
        checked.invalid()
    );
    let jobs: Vec<_> = checked.jobs().unwrap().collect::<Result<_, _>>().unwrap();
    assert!(
        jobs[0].body.get("grid").is_none(),
        "the grid is never sent: {:?}",
        jobs[0]
    );
    let outcomes: Vec<_> = Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), dir.join("out"))
        .run(jobs)
        .unwrap()
        .collect()
        .await;
    let fox = outcomes.iter().find(|o| o.line == 1).unwrap();
    assert_eq!(fox.standing, Standing::Saved, "{fox:?}");
    let written = fox.to_json();
    let read: ResultLine = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        written,
        "nothing lost on the way back"
    );
    assert_eq!(read.model.as_deref(), Some("gen-2-pro"));
    assert_eq!(read.prompt.as_deref(), Some("a red fox"));
    assert_eq!((read.width, read.height), (Some(512), Some(384)));
    assert_eq!(
        read.grid,
        Some(GridCell {
            row: "a red fox".into(),
            column: "seed 1".into()
        })
    );
    assert!(read.finished_at.is_some_and(|at| at > 1.7e9), "{read:?}");
    assert_eq!(read.seed, Some(1));
    let plain: ResultLine = serde_json::from_value(outcomes.iter().find(|o| o.line == 2).unwrap().to_json()).unwrap();
    assert_eq!(plain.model.as_deref(), Some("gen-tools/deblur-v1"));
    assert_eq!((plain.prompt, plain.width, plain.grid), (None, None, None));
}
