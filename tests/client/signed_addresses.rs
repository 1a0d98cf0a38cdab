//! A signed address stays out of everything shown or kept: when a poll or
//! a download cannot reach its host, the error (its text and its Debug
//! form, which the command, a batch's results and the gallery show), what
//! `on_poll_failure` is given, and every log event and span field name the
//! operation and the host, never the address's query (a token, a
//! signature).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy, WaitOptions};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use crate::common;
use common::hostile::{self, json};

const TOKEN: &str = "SECRET-TOKEN-5c1e";
const SIGNATURE: &str = "SIG-a94f02";

/// The query a signed address carries.
fn signed_query() -> String {
    format!("token={TOKEN}&X-Amz-Signature={SIGNATURE}")
}

/// Every span field and event a collector would receive, as text: a
/// span's name and fields (as opened, and as recorded later), an event's
/// fields and the names of the spans it happened in.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<String>>>);

impl Collected {
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S> Layer<S> for Collected
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        let text = format!("span {} {:?}", attrs.metadata().name(), fields.0);
        self.0.lock().unwrap().push(text);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        values.record(&mut fields);
        let name = ctx.span(id).map_or("?", |span| span.name());
        self.0
            .lock()
            .unwrap()
            .push(format!("span {name} recorded {:?}", fields.0));
    }
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let scope: Vec<&str> = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().map(|span| span.name()).collect())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push(format!("event in {scope:?} {:?}", fields.0));
    }
}

/// Fails naming where a signed query's token or signature shows.
fn assert_unsigned(what: &str, text: &str) {
    assert!(
        !text.contains(TOKEN) && !text.contains(SIGNATURE),
        "{what} shows the signed query: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_cannot_connect_names_the_host_never_the_signed_polling_address() {
    let collected = Collected::default();
    let _guard = common::log_into(tracing_subscriber::registry().with(collected.clone()));
    // A port nothing listens on: a connection to it is refused at once.
    let refusing = genapi_test_common::RefusingPort::new();
    let host = refusing.address;
    let polling_url = format!("http://{host}/v1/get_result?id=t-signed&{}", signed_query());
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url(format!("http://{host}"))
        .build()
        .unwrap();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = failures.clone();
    let options = WaitOptions::default()
        .timeout(Duration::from_secs(30))
        .on_poll_failure(move |error| {
            assert!(matches!(error, Error::Transport { .. }), "{error}");
            seen.lock().unwrap().push(format!("{error}\n{error:?}"));
        });
    let error = client.task(&polling_url).unwrap().wait_with(options).await.unwrap_err();

    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    assert_unsigned("the wait's error", &error.to_string());
    assert_unsigned("the wait's error (Debug)", &format!("{error:?}"));
    assert!(
        error.to_string().contains(&format!("http://{host}/v1/get_result?…")),
        "the task is named by its polling URL without the query: {error}"
    );
    assert_eq!(
        error.task().map(|task| task.polling_url.as_str()),
        Some(polling_url.as_str()),
        "the whole address is the program's still, to resume with"
    );

    let failures = failures.lock().unwrap().clone();
    assert!(!failures.is_empty(), "on_poll_failure was called");
    for failure in &failures {
        assert_unsigned("what on_poll_failure was given", failure);
        assert!(
            failure.contains(&format!("network error during the poll of a task at http://{host}")),
            "it names the operation and the host: {failure}"
        );
    }

    let collected = collected.all();
    let poll_failed: Vec<&String> = collected
        .iter()
        .filter(|text| text.contains("poll failed; will poll again"))
        .collect();
    assert!(!poll_failed.is_empty(), "{collected:#?}");
    for event in poll_failed {
        assert!(event.contains("\"genapi.wait\""), "within the wait's span: {event}");
        assert!(
            event.contains(&format!("at http://{host}")),
            "it names the host: {event}"
        );
    }
    for text in &collected {
        assert_unsigned("a span or event", text);
    }
}

#[tokio::test(start_paused = true)]
async fn a_download_that_cannot_connect_names_the_host_never_the_signed_result_address() {
    let collected = Collected::default();
    let _guard = common::log_into(tracing_subscriber::registry().with(collected.clone()));
    // The service signs its polling address too; the result's host is down.
    let refusing = genapi_test_common::RefusingPort::new();
    let delivery = refusing.address;
    let sample = format!("http://{delivery}/results/t-signed.png?{}", signed_query());
    let service = hostile::serve(move |base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => json(
            200,
            json!({"id": "t-signed", "polling_url": format!("{base}/v1/get_result?id=t-signed&{}", signed_query())}),
        ),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-signed", "status": "Ready", "result": {"sample": sample}}),
        ),
        _ => json(404, json!({})),
    })
    .await;
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url(&service.base)
        .retry_policy(RetryPolicy::default().initial_backoff(Duration::from_millis(5)))
        .build()
        .unwrap();
    let output = client
        .run(types::Gen2ProRequest::builder().prompt("a signed fox"))
        .await
        .unwrap();
    let error = output.bytes().await.unwrap_err();

    assert!(matches!(error, Error::Transport { .. }), "{error}");
    let (said, debug) = (error.to_string(), format!("{error:?}"));
    assert_unsigned("the download's error", &said);
    assert_unsigned("the download's error (Debug)", &debug);
    assert!(
        said.starts_with(&format!("network error during download at http://{delivery}: ")),
        "it names the operation and the host: {said}"
    );
    assert!(
        said.contains("task t-signed (polling URL http://127.0.0.1:") && said.contains("/v1/get_result?…)"),
        "the task is named without its polling address's query: {said}"
    );
    assert!(error.is_worth_waiting_again(), "{said}");
    for text in collected.all() {
        assert_unsigned("a span or event", &text);
    }
}
