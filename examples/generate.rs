//! Generate an image and save it as `example-lighthouse.jpg` (replacing a
//! file of that name; not the README's `lighthouse.jpg`). Against the service
//! when one is configured (`GENAPI_API_KEY` with `GENAPI_BASE_URL`, or a
//! profile of the config file), else against a mock
//! service started here:
//!
//! ```sh
//! cargo run --example generate
//! ```

use std::path::PathBuf;

use genapi::api::types::Gen2ProRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The mock, when used, lives until the end of `main`.
    let (client, _mock) = client().await?;
    let saved = generate(&client, "example-lighthouse").await?;
    println!("saved {}", saved.display());
    Ok(())
}

/// Submits one request, waits for it and saves the result as `stem` plus
/// the extension of its format, replacing a file of that name.
pub async fn generate(client: &genapi::Client, stem: &str) -> genapi::Result<PathBuf> {
    let request = Gen2ProRequest::builder()
        .prompt("a lighthouse at dusk")
        .width(1024)
        .height(768);
    // Every error says what to do; one after the submission names the task,
    // so it can be picked up again with `client.task(id)`.
    let output = client.run(request).await?;
    // Run again, the example writes its picture anew.
    output.save_replacing(stem).await
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
