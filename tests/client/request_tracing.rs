//! What the spans say, under OpenTelemetry's names: each exchange carries
//! the HTTP-client attributes a collector's dashboards read, the submission
//! and the wait carry the operation, the model and the task; no field holds
//! the key, a signed query or the prompt.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use genapi::api::types;
use genapi::RetryPolicy;
use genapi_mock::{Fault, MockService};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span as a collector receives it: its name, every field recorded (and
/// how many times each was recorded after the span opened), and its
/// parent's name and task.
#[derive(Clone, Debug)]
struct Collected {
    name: &'static str,
    fields: BTreeMap<String, String>,
    recorded: BTreeMap<String, usize>,
    parent: Option<(&'static str, Option<String>)>,
}

impl Collected {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

/// Collects every span with its fields, in the order they were opened.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(Id, Collected)>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, context: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name();
        let mut spans = self.0.lock().unwrap();
        let parent = context.span(id).and_then(|span| span.parent()).map(|parent| {
            let task = spans
                .iter()
                .rev()
                .find(|(known, _)| *known == parent.id())
                .and_then(|(_, span)| span.get("gen_ai.response.id").map(str::to_string));
            (parent.name(), task)
        });
        let recorded = BTreeMap::new();
        spans.push((
            id.clone(),
            Collected {
                name,
                fields,
                recorded,
                parent,
            },
        ));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, span)) = spans.iter_mut().rev().find(|(known, _)| known == id) {
            let mut fields = BTreeMap::new();
            values.record(&mut Fields(&mut fields));
            for (name, value) in fields {
                *span.recorded.entry(name.clone()).or_default() += 1;
                span.fields.insert(name, value);
            }
        }
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<Collected> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(_, s)| s.clone())
            .collect()
    }
}

/// The names every exchange span carries, and no other.
const EXCHANGE_FIELDS: [&str; 12] = [
    "otel.name",
    "otel.kind",
    "otel.status_code",
    "http.request.method",
    "server.address",
    "server.port",
    "url.full",
    "genapi.operation",
    "genapi.keyed",
    "http.response.status_code",
    "http.request.resend_count",
    "error.type",
];

#[tokio::test(start_paused = true)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn spans_carry_opentelemetry_http_and_generation_attributes() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _guard = common::log_into(subscriber);

    let mock = MockService::start().await.unwrap();
    let retries = RetryPolicy::default()
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20));
    let client = mock.client_builder().retry_policy(retries).build().unwrap();
    let task = client
        // Long enough (on the paused clock) for the wait to poll a few times.
        .submit(types::Gen2ProRequest::builder().prompt("a secret prompt [mock:duration_ms=6000]"))
        .await
        .unwrap();
    mock.inject(Fault::status("/v1/get_result", 503).times(1));
    let output = task.wait().await.unwrap();
    output.bytes().await.unwrap();
    // A failure: a key the service refuses.
    let refused = genapi::Client::builder()
        .api_key("wrong")
        .base_url(mock.base_url())
        .build()
        .unwrap();
    refused
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap_err();

    let base = url::Url::parse(mock.base_url()).unwrap();
    let port = base.port().unwrap().to_string();
    let exchanges = spans.named("genapi.request");
    for span in &exchanges {
        for name in span.fields.keys() {
            assert!(EXCHANGE_FIELDS.contains(&name.as_str()), "{name} in {span:?}");
        }
        let url = span.get("url.full").unwrap();
        assert!(!url.contains('?') && !url.contains('#') && !url.contains('@'), "{url}");
        for secret in [mock.key(), "wrong", "secret prompt", "signature"] {
            assert!(!format!("{span:?}").contains(secret), "{secret} in {span:?}");
        }
        assert_eq!(span.get("otel.kind"), Some("client"));
        assert_eq!(span.get("otel.name"), span.get("http.request.method"));
    }
    let submission = &exchanges[0];
    assert_eq!(submission.get("genapi.operation"), Some("gen_2_pro"));
    assert_eq!(submission.get("http.request.method"), Some("POST"));
    assert_eq!(submission.get("server.address"), Some("127.0.0.1"));
    assert_eq!(submission.get("server.port"), Some(port.as_str()));
    assert_eq!(
        submission.get("url.full"),
        Some(format!("{}/v1/gen-2-pro", mock.base_url()).as_str())
    );
    assert_eq!(submission.get("http.response.status_code"), Some("200"));
    assert_eq!(submission.get("genapi.keyed"), Some("true"));
    assert_eq!(submission.get("http.request.resend_count"), None, "sent once");
    assert_eq!(submission.get("error.type"), None);

    // The poll that met a 503 was sent again once, and ended well: two
    // spans, one per request sent.
    let refused_poll: Vec<&Collected> = exchanges
        .iter()
        .filter(|s| s.get("http.response.status_code") == Some("503"))
        .collect();
    assert_eq!(refused_poll.len(), 1, "{exchanges:#?}");
    assert_eq!(refused_poll[0].get("error.type"), Some("503"));
    assert_eq!(refused_poll[0].get("otel.status_code"), Some("ERROR"));
    assert_eq!(refused_poll[0].get("http.request.resend_count"), None, "the first send");
    let retried: Vec<&Collected> = exchanges
        .iter()
        .filter(|s| s.get("http.request.resend_count") == Some("1"))
        .collect();
    assert_eq!(retried.len(), 1, "{exchanges:#?}");
    assert_eq!(retried[0].get("genapi.operation"), Some("get_result"));
    assert_eq!(retried[0].get("http.response.status_code"), Some("200"));
    assert_eq!(retried[0].get("error.type"), None);

    let download = exchanges
        .iter()
        .find(|s| s.get("genapi.operation") == Some("download"))
        .unwrap();
    assert_eq!(
        download.get("genapi.keyed"),
        Some("false"),
        "downloads go without the key"
    );
    assert_eq!(download.get("http.request.method"), Some("GET"));
    // In a trace, the download sits in a span of its task's.
    let task = mock.created_tasks()[0].id.clone();
    assert_eq!(download.parent, Some(("genapi.download", Some(task))), "{download:?}");

    let failed = exchanges.last().unwrap();
    assert_eq!(failed.get("http.response.status_code"), Some("403"));
    assert_eq!(failed.get("error.type"), Some("403"));
    assert_eq!(failed.get("otel.status_code"), Some("ERROR"));
    assert_eq!(submission.get("otel.status_code"), None, "a success is no error");

    let submits = spans.named("genapi.submit");
    let submit = &submits[0];
    assert_eq!(submit.get("gen_ai.operation.name"), Some("generate_content"));
    assert_eq!(submit.get("gen_ai.request.model"), Some("gen-2-pro"));
    assert_eq!(submit.get("genapi.operation"), Some("gen_2_pro"));
    let created = mock.created_tasks();
    assert_eq!(submit.get("gen_ai.response.id"), Some(created[0].id.as_str()));

    let waits = spans.named("genapi.wait");
    let wait = &waits[0];
    assert_eq!(wait.get("gen_ai.operation.name"), Some("generate_content"));
    assert_eq!(wait.get("gen_ai.request.model"), Some("gen-2-pro"));
    assert_eq!(wait.get("gen_ai.response.id"), Some(created[0].id.as_str()));
    // The wait counts polls, not requests: the 503 was asked again inside
    // one poll.
    let polls = mock.count("GET", "/v1/get_result") - 1;
    assert_eq!(wait.get("genapi.polls"), Some(polls.to_string().as_str()));
    // Recorded once, when the wait ends: a reader that prints each record
    // (the fmt layer does) sees one count.
    assert!(polls > 1, "{polls}");
    assert_eq!(wait.recorded.get("genapi.polls"), Some(&1), "{wait:?}");
}

#[tokio::test(start_paused = true)]
async fn an_exchange_that_gets_no_answer_names_its_class_of_failure() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _guard = common::log_into(subscriber);
    let nobody = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:1")
        .retry_policy(RetryPolicy::never())
        .build()
        .unwrap();
    nobody
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap_err();
    let exchanges = spans.named("genapi.request");
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0].get("error.type"), Some("network"));
    assert_eq!(exchanges[0].get("http.response.status_code"), None);
}
