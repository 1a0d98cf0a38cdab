//! What the exchange spans' fields cost: the same poll of a finished task,
//! exchanged with a subscriber that reads every field of every span (as an
//! OpenTelemetry layer does when it turns them into attributes) and without
//! any subscriber, against one in-process mock.
//!
//! The two take turns exchange by exchange, who goes first alternating, on
//! one thread, so drift and bursts of load fall on both alike. Five rounds
//! of 2,000 pairs; each round's figure is the difference of the medians per
//! exchange, and the report gives the median of the five rounds and their
//! spread (lowest–highest). The poll's answer is a few hundred bytes: the
//! exchange itself (HTTP on loopback) is most of each figure.
//!
//! `cargo bench --bench span_fields`

use std::fmt::Write as _;
use std::time::Instant;

use genapi::api::types;
use genapi_mock::MockService;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

mod figures;
use figures::median;

const ROUNDS: usize = 5;
const PAIRS: usize = 2000;

/// Reads every field into text, as an exporter reads them into attributes.
struct ReadsEveryField;

struct Into<'a>(&'a mut String);

impl Visit for Into<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl<S: tracing::Subscriber> Layer<S> for ReadsEveryField {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut text = String::new();
        attrs.record(&mut Into(&mut text));
        std::hint::black_box(text);
    }
    fn on_record(&self, _: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut text = String::new();
        values.record(&mut Into(&mut text));
        std::hint::black_box(text);
    }
}

/// Microseconds of one poll.
async fn poll(task: &genapi::Task) -> f64 {
    let start = Instant::now();
    task.poll().await.expect("poll");
    start.elapsed().as_secs_f64() * 1e6
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mock = MockService::start().await.expect("mock");
        let client = mock.client().expect("client");
        let task = client
            .submit(types::Gen2ProRequest::builder().prompt("spans"))
            .await
            .expect("submit");
        let subscriber = tracing_subscriber::registry().with(ReadsEveryField);
        let dispatch = tracing::Dispatch::new(subscriber);
        let (mut with, mut without, mut cost) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (mut on, mut off) = (Vec::with_capacity(PAIRS), Vec::with_capacity(PAIRS));
            for pair in 0..PAIRS {
                let traced = async {
                    let _guard = tracing::dispatcher::set_default(&dispatch);
                    poll(&task).await
                };
                if pair % 2 == 0 {
                    on.push(traced.await);
                    off.push(poll(&task).await);
                } else {
                    off.push(poll(&task).await);
                    on.push(traced.await);
                }
            }
            let (on, off) = (median(&mut on), median(&mut off));
            with.push(on);
            without.push(off);
            cost.push(on - off);
        }
        let line = |name: &str, rounds: &mut Vec<f64>| println!("{}", figures::line(name, rounds, "µs", 2));
        println!("{ROUNDS} rounds of {PAIRS} interleaved polls of a finished task");
        line("a poll, every span field read", &mut with);
        line("a poll, no subscriber", &mut without);
        line("the spans' cost per exchange", &mut cost);
    });
}
