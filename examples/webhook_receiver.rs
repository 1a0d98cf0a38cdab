//! A webhook receiver with axum, and a program whose wait polls its task the
//! moment the task's notification arrives (and on its schedule, should none
//! come). Runs against the mock service:
//!
//! ```sh
//! cargo run --example webhook_receiver
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use genapi::api::types::{Gen2ProRequest, WebhookUrl};
use genapi::webhook::{DuplicateGuard, Inbox, Verifier};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/// What the receiver shares between requests.
struct Receiver {
    verifier: Verifier,
    guard: DuplicateGuard,
    inbox: Arc<Inbox>,
}

/// The receiver: verify, drop replays, hand over.
async fn receive(receiver: Arc<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let Receiver { verifier, guard, inbox } = &*receiver;
    match verifier.verify(&headers, &body) {
        Ok(event) if guard.first_time_event(&event) => {
            inbox.deliver(event);
            StatusCode::NO_CONTENT
        }
        Ok(_replayed) => StatusCode::OK,
        Err(rejection) => {
            eprintln!("rejected a notification: {rejection}");
            StatusCode::UNAUTHORIZED
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let inbox = Arc::new(Inbox::new());
    // The secret is checked here, once: an empty or malformed one stops the
    // program before it listens.
    let receiver = Arc::new(Receiver {
        verifier: Verifier::new(SECRET)?,
        guard: DuplicateGuard::new(100_000, Duration::from_secs(3600)),
        inbox: inbox.clone(),
    });
    let app = axum::Router::new().route(
        "/genapi-webhook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| receive(receiver.clone(), headers, body)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/genapi-webhook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The mock delivers webhooks (and their secret) only where it is told to.
    let config = genapi_mock::MockConfig::default().webhook_target(&hook);
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse()?).await?;
    println!("using the mock service (a test double) at {}", mock.base_url());
    let client = mock.client()?;
    let request = Gen2ProRequest::builder()
        .prompt("a lighthouse at dusk")
        .webhook_url(WebhookUrl::try_from(hook.as_str())?)
        .webhook_secret(genapi::WebhookSecret::new(SECRET));
    let task = client.submit(request).await?;
    let output = inbox.wait(task).await?;
    println!(
        "task {} ready: {} ({} polls)",
        output.id(),
        output.sample(),
        mock.count("GET", "/v1/get_result")
    );
    Ok(())
}
