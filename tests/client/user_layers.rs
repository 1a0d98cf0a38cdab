//! The user's own tower layers run beneath genapi's guarantee: whatever a
//! layer does, a submission leaves once per attempt the user made, so even a
//! layer that retries everything cannot pay twice; polls it may retry, and a
//! metrics layer sees every exchange.

use std::future::{ready, Ready};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use genapi::api::types;
use genapi::tower::retry::{Policy, RetryLayer};
use genapi::tower::util::MapRequestLayer;
use genapi::tower::BoxError;
use genapi::{ClientBuilder, HttpRequest, HttpResponse, RetryPolicy};
use genapi_mock::{Fault, FaultKind, MockService};

const SUBMISSION: &str = "/v1/gen-2-pro";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Retries any error or 5xx, up to five times, whenever it can copy the
/// request: what the ecosystem's retry layers do to a POST.
#[derive(Clone)]
struct RetryEverything {
    left: usize,
}

impl Policy<HttpRequest, HttpResponse, BoxError> for RetryEverything {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut HttpRequest, result: &mut Result<HttpResponse, BoxError>) -> Option<Ready<()>> {
        let failed = result.as_ref().map_or(true, |answer| answer.status().is_server_error());
        (failed && self.left > 0).then(|| {
            self.left -= 1;
            ready(())
        })
    }

    fn clone_request(&mut self, request: &HttpRequest) -> Option<HttpRequest> {
        let body = request.body().as_bytes()?.to_vec();
        let mut copy = genapi::http::Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone())
            .version(request.version())
            .body(genapi::reqwest::Body::from(body))
            .ok()?;
        *copy.headers_mut() = request.headers().clone();
        Some(copy)
    }
}

/// The three set-ups: no layer, a metrics layer, a retry-everything layer.
#[derive(Clone, Copy, Debug)]
enum SetUp {
    Bare,
    Metrics,
    RetryEverything,
}

impl SetUp {
    /// The builder with this set-up's layer, and the metrics layer's count.
    fn apply(self, builder: ClientBuilder) -> (ClientBuilder, Arc<AtomicUsize>) {
        let seen = Arc::new(AtomicUsize::new(0));
        let builder = match self {
            SetUp::Bare => builder,
            SetUp::Metrics => builder.layer(counting(seen.clone())),
            SetUp::RetryEverything => builder.layer(RetryLayer::new(RetryEverything { left: 5 })),
        };
        (builder, seen)
    }
}

/// A metrics layer: counts the requests that pass it.
fn counting(seen: Arc<AtomicUsize>) -> MapRequestLayer<impl Fn(HttpRequest) -> HttpRequest + Clone> {
    MapRequestLayer::new(move |request: HttpRequest| {
        seen.fetch_add(1, Ordering::SeqCst);
        request
    })
}

fn status(code: u16, body: &str) -> FaultKind {
    FaultKind::Status {
        status: code,
        retry_after: None,
        body: body.into(),
    }
}

/// The seven failure shapes after a submission left, each with the number
/// of tasks the mock creates for it: 1 when the service acted before the
/// failure; 0 when it answered without acting (the status and not-JSON
/// faults), or was still holding the request when the client gave up (the
/// timeout: the mock drops a request whose connection closed).
fn shapes() -> Vec<(&'static str, FaultKind, usize)> {
    vec![
        ("connection reset after the task was created", FaultKind::LoseAnswer, 1),
        (
            "no answer within the timeout",
            FaultKind::Delay(Duration::from_secs(30)),
            0,
        ),
        ("500", status(500, "{}"), 0),
        (
            "502 with a body",
            status(502, "<html><h1>502 Bad Gateway</h1></html>"),
            0,
        ),
        ("a truncated answer", FaultKind::TruncatedAnswer, 1),
        ("an answer that is not JSON", FaultKind::MalformedBody, 0),
        (
            "a stall past the deadline",
            FaultKind::StalledAnswer(Duration::from_secs(30)),
            1,
        ),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_submission_leaves_once_per_attempt_whatever_the_layers_do() {
    for set_up in [SetUp::Bare, SetUp::Metrics, SetUp::RetryEverything] {
        for (shape, fault, created) in shapes() {
            let case = format!("{shape} under {set_up:?}");
            let mock = MockService::start().await.unwrap();
            mock.inject(Fault::on(SUBMISSION, fault).method("POST"));
            let (builder, seen) = set_up.apply(mock.client_builder().request_timeout(REQUEST_TIMEOUT));
            let client = builder.build().unwrap();
            let submitted = client.submit(types::Gen2ProRequest::builder().prompt("once")).await;
            let error = submitted.err().unwrap_or_else(|| panic!("{case}: succeeded"));
            // Whatever the service was still doing ends before counting.
            tokio::time::sleep(Duration::from_secs(60)).await;
            assert_eq!(mock.count("POST", SUBMISSION), 1, "{case}: submissions seen");
            assert_eq!(mock.created_tasks().len(), created, "{case}: tasks created");
            let said = error.to_string();
            assert!(
                said.contains("check for the task before submitting again"),
                "{case}: the error says what to do next: {said}"
            );
            assert!(!error.is_safe_to_resubmit(), "{case}: {said}");
            if let SetUp::Metrics = set_up {
                assert_eq!(seen.load(Ordering::SeqCst), 1, "{case}: the metrics layer saw it");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_layer_retries_polls_and_a_metrics_layer_sees_every_exchange() {
    let mock = MockService::start().await.unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    // genapi retries nothing here: what is retried, the layer retries.
    let client = mock
        .client_builder()
        .retry_policy(RetryPolicy::never())
        .layer(counting(seen.clone()))
        .layer(RetryLayer::new(RetryEverything { left: 5 }))
        .build()
        .unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("polled"))
        .await
        .unwrap();
    mock.inject(Fault::status("/v1/get_result", 500).times(2));
    let output = task.wait().await.unwrap();
    let bytes = output.bytes().await.unwrap();
    assert!(!bytes.is_empty());
    let polls = mock.count("GET", "/v1/get_result");
    assert!(polls >= 3, "two 500s, then the layer's third try: {polls}");
    let downloads = mock.requests().iter().filter(|r| r.origin == "delivery").count();
    assert_eq!(downloads, 1);
    // The metrics layer is outermost: it sees each exchange genapi made,
    // once, however often the retry layer beneath it sent it.
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1 + (polls - 2) + downloads,
        "one submission, the polls genapi made, one download"
    );
}

#[tokio::test(start_paused = true)]
async fn no_layer_sees_the_key_and_a_layer_that_holds_a_request_is_cut_off() {
    let mock = MockService::start().await.unwrap();
    let saw_key = Arc::new(AtomicUsize::new(0));
    let looked = saw_key.clone();
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(MapRequestLayer::new(move |request: HttpRequest| {
            if request.headers().contains_key("x-key") {
                looked.fetch_add(1, Ordering::SeqCst);
            }
            request
        }))
        .build()
        .unwrap();
    client
        .run(types::Gen2ProRequest::builder().prompt("keyed beneath"))
        .await
        .unwrap();
    assert_eq!(saw_key.load(Ordering::SeqCst), 0, "the key is added beneath the layers");
    let keyed = mock.requests().iter().filter(|r| r.header("x-key").is_some()).count();
    assert!(keyed >= 2, "yet the service got it: {keyed}");

    // A layer that never answers: the submission fails at the deadline,
    // is sent no more, and says what to do.
    let held = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(genapi::tower::layer::layer_fn(|_inner| {
            genapi::tower::service_fn(|_request: HttpRequest| async {
                std::future::pending::<Result<HttpResponse, BoxError>>().await
            })
        }))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let error = held
        .submit(types::Gen2ProRequest::builder().prompt("held"))
        .await
        .unwrap_err();
    assert!(matches!(error, genapi::Error::Layer { .. }), "{error}");
    assert!(
        started.elapsed() <= REQUEST_TIMEOUT + Duration::from_secs(1),
        "cut off at the deadline"
    );
    assert!(
        error.to_string().contains("check for the task before submitting again"),
        "{error}"
    );
}

/// A layer that reads a request's body and puts the same bytes back (as a
/// signing or body-logging layer does), making it a body anyone can copy.
fn rebuilding() -> impl genapi::tower::Layer<genapi::HttpService, Service = genapi::HttpService> + Clone {
    genapi::tower::layer::layer_fn(|inner: genapi::HttpService| {
        genapi::HttpService::new(genapi::tower::service_fn(move |request: HttpRequest| {
            let inner = inner.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = read_body(body).await?;
                let rebuilt = genapi::http::Request::from_parts(parts, genapi::reqwest::Body::from(bytes));
                genapi::tower::ServiceExt::oneshot(inner, rebuilt).await
            }
        }))
    })
}

#[tokio::test(start_paused = true)]
async fn a_body_rebuilt_above_a_retry_layer_still_leaves_once() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(SUBMISSION, FaultKind::LoseAnswer).method("POST"));
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(rebuilding())
        .layer(RetryLayer::new(RetryEverything { left: 5 }))
        .build()
        .unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("rebuilt"))
        .await
        .unwrap_err();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        mock.count("POST", SUBMISSION),
        1,
        "sent again after its body was rebuilt"
    );
    assert!(!error.is_safe_to_resubmit(), "{error}");
    assert!(
        error.to_string().contains("check for the task before submitting again"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_layers_own_connection_error_is_not_taken_for_the_submissions() {
    let mock = MockService::start().await.unwrap();
    // After the submission is answered, the layer reports to a collector
    // that is down, and returns the error of its own client.
    let collector = genapi::reqwest::Client::new();
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(genapi::tower::layer::layer_fn(move |inner: genapi::HttpService| {
            let collector = collector.clone();
            genapi::HttpService::new(genapi::tower::service_fn(move |request: HttpRequest| {
                let (inner, collector) = (inner.clone(), collector.clone());
                async move {
                    let answer = genapi::tower::ServiceExt::oneshot(inner, request).await?;
                    collector.post("http://127.0.0.1:9/metrics").send().await?;
                    Ok::<HttpResponse, BoxError>(answer)
                }
            }))
        }))
        .build()
        .unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("side call"))
        .await
        .unwrap_err();
    assert_eq!(
        mock.count("POST", SUBMISSION),
        1,
        "sent again after the layer's own error"
    );
    assert!(matches!(error, genapi::Error::Layer { .. }), "{error}");
    assert!(!error.is_safe_to_resubmit(), "{error}");
}

#[test]
fn a_layers_words_are_shown_after_the_advice_and_made_safe() {
    let error = genapi::Error::Layer {
        operation: "gen_2_pro".into(),
        source: genapi::LayerError::new(
            "shed\u{1b}]0;pwned\u{7}\n\nCaused by:\n    nothing was sent: safe to resubmit",
        ),
        task: None,
    };
    let said = error.to_string();
    assert!(!said.contains('\u{1b}') && !said.contains('\n'), "{said:?}");
    let advice = said.find("check for the task").unwrap();
    assert!(advice < said.find("the layer said").unwrap(), "{said}");
}

/// The key is added beneath the layers, to the address a request finally
/// goes to, and only when that address is trusted: a layer that points the
/// requests at another host sends them there without it.
#[tokio::test(start_paused = true)]
async fn a_layer_that_points_requests_elsewhere_sends_them_without_the_key() {
    let trusted = MockService::start().await.unwrap();
    let elsewhere = MockService::start().await.unwrap();
    let other = elsewhere.base_url().trim_end_matches('/').to_string();
    let client = trusted
        .client_builder()
        .layer(MapRequestLayer::new(move |mut request: HttpRequest| {
            let path = request.uri().path_and_query().map_or("/", |path| path.as_str());
            *request.uri_mut() = format!("{other}{path}").parse().unwrap();
            request
        }))
        .build()
        .unwrap();
    // Refused there: without the key, the other host does not know it.
    let refused = client
        .submit(types::Gen2ProRequest::builder().prompt("pointed away"))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let sent = elsewhere.requests();
    assert!(!sent.is_empty(), "the layer pointed the submission elsewhere");
    assert!(sent.iter().all(|request| request.header("x-key").is_none()), "{sent:?}");
    assert!(trusted.requests().is_empty(), "nothing went to the trusted host");
}

/// The body's bytes, read out of a request's body stream.
async fn read_body(mut body: genapi::reqwest::Body) -> Result<Vec<u8>, BoxError> {
    let mut bytes = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| http_body::Body::poll_frame(std::pin::Pin::new(&mut body), cx)).await
    {
        if let Ok(data) = frame?.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// A retry layer of the worst kind: it reads the submission's body, makes
/// `copies` copies of the request (method, address, version, headers and
/// the bytes, as any copy of a request is; its extensions left behind),
/// and sends each from a task of its own, detached from genapi's. It
/// answers with the first answer that came, and keeps what the inner
/// service said to each of the others. With `kept`, a copy keeps only the
/// headers named there, as a layer that forwards known headers does.
fn detaching_copier(
    copies: usize,
    refusals: Arc<std::sync::Mutex<Vec<BoxError>>>,
    kept: Option<&'static [&'static str]>,
) -> impl genapi::tower::Layer<genapi::HttpService, Service = genapi::HttpService> + Clone {
    genapi::tower::layer::layer_fn(move |inner: genapi::HttpService| {
        let refusals = refusals.clone();
        genapi::HttpService::new(genapi::tower::service_fn(move |request: HttpRequest| {
            let (inner, refusals) = (inner.clone(), refusals.clone());
            async move {
                let (parts, body) = request.into_parts();
                let bytes = read_body(body).await?;
                let sending: Vec<_> = (0..copies)
                    .map(|_| {
                        let mut copy = genapi::http::Request::builder()
                            .method(parts.method.clone())
                            .uri(parts.uri.clone())
                            .version(parts.version)
                            .body(genapi::reqwest::Body::from(bytes.clone()))
                            .unwrap();
                        match kept {
                            None => *copy.headers_mut() = parts.headers.clone(),
                            Some(names) => {
                                for name in names {
                                    if let Some(value) = parts.headers.get(*name) {
                                        copy.headers_mut().insert(*name, value.clone());
                                    }
                                }
                            }
                        }
                        tokio::spawn(genapi::tower::ServiceExt::oneshot(inner.clone(), copy))
                    })
                    .collect();
                let mut first = None;
                for copy in sending {
                    match copy.await? {
                        Ok(answer) if first.is_none() => first = Some(answer),
                        Ok(_) => {}
                        Err(error) => refusals.lock().unwrap().push(error),
                    }
                }
                first.ok_or_else(|| BoxError::from("no copy was answered"))
            }
        }))
    })
}

/// A layer whose copies keep only the headers it knows, sent from tasks of
/// their own, carries no mark at all: nothing is sent, and the error says
/// which header to keep.
#[tokio::test(start_paused = true)]
async fn a_layer_whose_copies_lose_every_mark_sends_nothing() {
    let mock = MockService::start().await.unwrap();
    let refusals = Arc::new(std::sync::Mutex::new(Vec::new()));
    const KNOWN: &[&str] = &["content-type", "content-length", "accept", "user-agent"];
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(detaching_copier(3, refusals.clone(), Some(KNOWN)))
        .build()
        .unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("copied without marks"))
        .await
        .unwrap_err();
    assert_eq!(mock.count("POST", SUBMISSION), 0, "submissions the service saw");
    assert!(matches!(error, genapi::Error::Layer { .. }), "{error}");
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 3);
    for refusal in refusals.iter() {
        assert_eq!(
            refusal.downcast_ref::<genapi::SendOnceRefused>(),
            Some(&genapi::SendOnceRefused::Unmarked),
            "{refusal}"
        );
        assert!(refusal.to_string().contains("x-genapi-send-once"), "{refusal}");
    }
}

/// A layer that copies a submission without its extensions and sends the
/// copies from tasks of their own still sends it once: the mark travels in
/// a header, which every copy keeps and the wire takes off.
#[tokio::test(start_paused = true)]
async fn a_layer_that_sends_copies_from_tasks_of_their_own_sends_a_submission_once() {
    let mock = MockService::start().await.unwrap();
    let refusals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(detaching_copier(3, refusals.clone(), None))
        .build()
        .unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("copied thrice"))
        .await
        .unwrap();

    assert_eq!(mock.count("POST", SUBMISSION), 1, "submissions the service saw");
    assert_eq!(mock.created_tasks().len(), 1, "tasks created (and paid for)");
    assert_eq!(mock.created_tasks()[0].id, task.id());
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 2, "the two other copies were refused");
    for refusal in refusals.iter() {
        assert_eq!(
            refusal.downcast_ref::<genapi::SendOnceRefused>(),
            Some(&genapi::SendOnceRefused::SentAlready),
            "{refusal}"
        );
    }
    let marked: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|request| request.header(genapi::SEND_ONCE_HEADER).is_some())
        .collect();
    assert!(marked.is_empty(), "the mark never reaches the service: {marked:?}");
}

/// The mark a layer sees cannot be made up to let a copy through: a token
/// the client did not give is refused before anything leaves.
#[tokio::test(start_paused = true)]
async fn a_made_up_send_once_mark_is_refused_before_anything_leaves() {
    let mock = MockService::start().await.unwrap();
    let client = mock
        .client_builder()
        .request_timeout(REQUEST_TIMEOUT)
        .layer(MapRequestLayer::new(|mut request: HttpRequest| {
            request.headers_mut().insert(
                genapi::SEND_ONCE_HEADER,
                genapi::http::HeaderValue::from_static("0123456789abcdef0123456789abcdef"),
            );
            request
        }))
        .build()
        .unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("forged"))
        .await
        .unwrap_err();
    let genapi::Error::Layer { source, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(
        source.downcast_ref::<genapi::SendOnceRefused>(),
        Some(&genapi::SendOnceRefused::UnknownMark),
        "{error}"
    );
    assert!(error.to_string().contains("this request was not sent"), "{error}");
    assert_eq!(mock.count("POST", SUBMISSION), 0, "nothing left");
    assert!(mock.created_tasks().is_empty());
}

/// A layer whose error quotes the request it was given (its sealed body,
/// with the webhook secret and the receiver's token) is shown without
/// them: the client scrubs a layer's words as it does a service's, and
/// keeps the error itself for the program.
#[tokio::test(start_paused = true)]
async fn a_layers_error_quoting_the_request_is_shown_without_its_secrets() {
    const SECRET: &str = "whsec-Layer7Quote3Secret9x";
    const TOKEN: &str = "tok3nQuoted7byLayer4x";
    let mock = MockService::start().await.unwrap();
    let client = mock
        .client_builder()
        .layer(genapi::tower::layer::layer_fn(|_inner: genapi::HttpService| {
            genapi::HttpService::new(genapi::tower::service_fn(|request: HttpRequest| async move {
                let (parts, body) = request.into_parts();
                let body = String::from_utf8_lossy(&read_body(body).await?).into_owned();
                Err::<HttpResponse, BoxError>(
                    std::io::Error::other(format!("cannot send {} with body {body}", parts.uri)).into(),
                )
            }))
        }))
        .build()
        .unwrap();
    let request = types::Gen2ProRequest::builder()
        .prompt("a fox")
        .webhook_url(format!("https://hooks.example.com/in?token={TOKEN}").as_str())
        .webhook_secret(genapi::WebhookSecret::new(SECRET));
    let error = client.submit(request).await.unwrap_err();
    let genapi::Error::Layer { source, .. } = &error else {
        panic!("{error}")
    };
    assert!(
        source.downcast_ref::<std::io::Error>().is_some(),
        "the layer's error is kept"
    );
    assert!(
        error.to_string().contains("with body"),
        "the layer's words are shown: {error}"
    );
    for shown in [
        error.to_string(),
        format!("{error:?}"),
        source.to_string(),
        format!("{source:?}"),
    ] {
        assert!(!shown.contains(SECRET) && !shown.contains(TOKEN), "{shown}");
    }
    assert_eq!(mock.count("POST", SUBMISSION), 0);
}

/// A layer that fails a download quoting its address, in the forms code
/// writes one in: the result's signature (its only access control, which
/// the scrubber does not know) is left out of the error in every one.
#[tokio::test(start_paused = true)]
async fn a_layers_error_quoting_a_signed_result_address_leaves_out_its_signature() {
    let quotes: [fn(&genapi::reqwest::Url) -> String; 5] = [
        |url| format!("GET {url} failed"),
        |url| format!("cannot fetch {url:?}"),
        |url| format!("query {:?} refused", url.query()),
        |url| url::form_urlencoded::byte_serialize(url.as_str().as_bytes()).collect(),
        |url| format!("<{}>{{{}}}", url.path(), url.query().unwrap_or_default()),
    ];
    for quote in quotes {
        let mock = MockService::start().await.unwrap();
        let delivery = mock.delivery_url().to_string();
        let client = mock
            .client_builder()
            .layer(genapi::tower::layer::layer_fn(move |inner: genapi::HttpService| {
                let delivery = delivery.clone();
                genapi::HttpService::new(genapi::tower::service_fn(move |request: HttpRequest| {
                    let mut inner = inner.clone();
                    let url = genapi::reqwest::Url::parse(&request.uri().to_string()).unwrap();
                    let to_delivery = url.as_str().starts_with(&delivery);
                    async move {
                        if to_delivery {
                            let refusal = std::io::Error::other(format!("{}: the gateway refused", quote(&url)));
                            return Err::<HttpResponse, BoxError>(refusal.into());
                        }
                        genapi::tower::ServiceExt::ready(&mut inner).await?;
                        genapi::tower::Service::call(&mut inner, request).await
                    }
                }))
            }))
            .build()
            .unwrap();
        let task = client
            .submit(types::Gen2ProRequest::builder().prompt("a fox"))
            .await
            .unwrap();
        mock.advance(Duration::from_secs(600));
        let output = task.wait().await.unwrap();
        let signature = output
            .sample()
            .split("signature=")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap()
            .to_string();
        let error = output.bytes().await.unwrap_err();
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(shown.contains("the gateway refused"), "{shown}");
            assert!(!shown.contains(&signature), "{shown}");
        }
    }
}
