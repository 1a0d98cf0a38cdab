//! A batch of typed requests, kept in a journal so that running it again
//! after any interruption polls what was accepted instead of paying twice.
//! Against the service when one is configured (`GENAPI_API_KEY` with
//! `GENAPI_BASE_URL`, or a profile of the config file),
//! else against a mock service started here:
//!
//! ```sh
//! cargo run --example batch
//! ```

use std::path::Path;

use futures::StreamExt;
use genapi::api::types::Gen2ProRequest;
use genapi_batch::{Batch, FileJournal, Job, JobOutcome, JournalStore};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (client, _mock) = client().await?;
    for outcome in batch(
        &client,
        Path::new("shots"),
        &["a red fox", "a blue whale", "a grey owl"],
    )
    .await?
    {
        println!(
            "line {}: {} {:?}",
            outcome.line,
            outcome.standing.as_str(),
            outcome.file
        );
    }
    Ok(())
}

/// One job per prompt, saved in `out` (made if need be) with the journal.
pub async fn batch(
    client: &genapi::Client,
    out: &Path,
    prompts: &[&str],
) -> Result<Vec<JobOutcome>, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out)?;
    // The journal, read and kept open (locked) for this run's events.
    let store = JournalStore::open(FileJournal::open(out.join("journal.jsonl"))?)?;
    // Jobs from the same typed builders `Client::submit` takes; each line's
    // number is its place in the journal, so it must not change between runs.
    let jobs = prompts
        .iter()
        .enumerate()
        .map(|(index, prompt)| {
            let request = Gen2ProRequest::builder().prompt(*prompt).width(512).height(512);
            Ok(Job::from_request(index as u64 + 1, request)?.name(format!("image-{}", index + 1)))
        })
        .collect::<genapi::Result<Vec<Job>>>()?;
    let outcomes = Batch::new(client.clone(), store, out).run(jobs)?;
    Ok(outcomes.collect().await)
}

/// The configured service, or a mock (kept alive by the caller) when none is.
async fn client() -> Result<(genapi::Client, Option<genapi_mock::MockService>), Box<dyn std::error::Error>> {
    // The variables' service, else the config file's profile, as the
    // `genapi` command reads them.
    if let Some(client) = genapi::Client::from_env_if_any()? {
        return Ok((client, None));
    }
    let mock = genapi_mock::MockService::start().await?;
    eprintln!("no service is configured (GENAPI_API_KEY or a profile): using a mock service (a test double)");
    Ok((mock.client()?, Some(mock)))
}
