//! Edit an image: the picture given (or, without one, an image generated
//! first) with an instruction. Against the service when one is configured
//! (`GENAPI_API_KEY` with `GENAPI_BASE_URL`, or a profile of the config
//! file), else against a mock service started here:
//!
//! ```sh
//! cargo run --example edit -- photo.png
//! ```

use std::path::{Path, PathBuf};

use genapi::api::types::{Gen2ProRequest, GenKontextProRequest};
use genapi::ImageInput;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (client, _mock) = client().await?;
    let input = match std::env::args_os().nth(1) {
        Some(path) => PathBuf::from(path),
        None => {
            let output = client
                .run(Gen2ProRequest::builder().prompt("a red fox in a meadow"))
                .await?;
            output.save_replacing("fox").await?
        }
    };
    let saved = edit(&client, &input, "fox-in-snow").await?;
    println!("saved {}", saved.display());
    Ok(())
}

/// Edits the image at `input` and saves the result as `stem` plus the
/// extension of its format, replacing a file of that name.
pub async fn edit(client: &genapi::Client, input: &Path, stem: &str) -> genapi::Result<PathBuf> {
    // A file is sent as base64; the error of a file that cannot be used
    // (missing, too large, not an image) names it.
    let image = ImageInput::path(input).to_base64().await?;
    let request = GenKontextProRequest::builder()
        .prompt("the same scene, covered in fresh snow")
        .input_image(image);
    client.run(request).await?.save_replacing(stem).await
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
