//! The client's spans on the terminal: `tracing-subscriber`'s fmt layer,
//! each span printed as it closes with its fields (the HTTP exchanges at
//! DEBUG, the submission, the wait and the download at INFO). Against the
//! service when one is configured (the variables, or a profile), else against
//! a mock started here:
//!
//! ```sh
//! cargo run --example traced
//! ```
//!
//! In a program of your own, `tracing-subscriber` with `default-features =
//! false, features = ["fmt", "std", "registry"]` is all this needs.

use genapi::api::types::Gen2ProRequest;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A span's fields are printed when it closes: by then its answer's
    // status, its task's id and its count of polls are recorded. Only
    // genapi's spans, down to DEBUG (the HTTP client's own events left out).
    let printed = tracing_subscriber::fmt::layer()
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false);
    tracing_subscriber::registry()
        .with(printed)
        .with(Targets::new().with_target("genapi", tracing::Level::DEBUG))
        .init();
    // The configured service (the variables, else a profile), or a mock
    // that lives until the end of `main`.
    let (client, _mock) = match genapi::Client::from_env_if_any()? {
        Some(client) => (client, None),
        None => {
            let mock = genapi_mock::MockService::start().await?;
            (mock.client()?, Some(mock))
        }
    };
    let output = client
        .run(
            Gen2ProRequest::builder()
                .prompt("a lighthouse at dusk")
                .width(512)
                .height(512),
        )
        .await?;
    let bytes = output.bytes().await?;
    println!("{} bytes of {:?}", bytes.len(), genapi::ImageFormat::sniff(&bytes));
    Ok(())
}
