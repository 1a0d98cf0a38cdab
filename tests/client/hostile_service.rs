//! A hostile service on loopback: oversized answers, echoed secrets,
//! redirects that fish for the signed address. The client stays bounded and
//! keeps its secrets.

use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy};
use serde_json::json;

use crate::common;
use common::hostile::{self, accepted, json};

const KEY: &str = "hostile-canary-key";
const SECRET: &str = "hostile-canary-secret";

fn prompt(text: &str) -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt(text)
}

fn client(base: &str) -> genapi::Client {
    genapi::Client::builder()
        .api_key(KEY)
        .base_url(base)
        .retry_policy(
            RetryPolicy::default()
                .initial_backoff(Duration::from_millis(5))
                .max_backoff(Duration::from_millis(20)),
        )
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn answers_are_read_within_limits_and_the_excess_is_a_typed_error_naming_the_task() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-big"),
        // A poll answer of 4 MiB, sent slowly enough to be read in chunks.
        "/v1/get_result" => hostile::trickle(64, 64 * 1024, Duration::from_millis(1)),
        _ => json(404, json!({})),
    })
    .await;
    let task = client(&service.base).submit(prompt("x")).await.unwrap();
    let error = task.poll().await.unwrap_err();
    let Error::TooLarge { limit, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*limit, 1 << 20, "the default JSON limit");
    assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-big"));

    // Downloads have their own, configurable limit.
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-dl"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-dl", "status": "Ready", "result": {"sample": format!("{base}/out")}}),
        ),
        _ => hostile::trickle(10, 1000, Duration::from_millis(1)),
    })
    .await;
    let small = genapi::Client::builder()
        .api_key(KEY)
        .base_url(&service.base)
        .max_download_bytes(4000)
        .build()
        .unwrap();
    let output = small.run(prompt("x")).await.unwrap();
    let error = output.bytes().await.unwrap_err();
    assert!(matches!(error, Error::TooLarge { limit: 4000, .. }), "{error}");
    assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-dl"));
    let dir = std::env::temp_dir().join(format!("genapi-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let error = output.save(dir.join("out")).await.unwrap_err();
    assert!(matches!(error, Error::TooLarge { .. }), "{error}");
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "no partial file is left behind"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_error_body_is_read_only_for_its_message() {
    let service = hostile::serve(|_, _, _| {
        let huge = "e".repeat(8 << 20);
        json(500, json!({ "detail": huge }))
    })
    .await;
    let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
    assert!(matches!(error, Error::Server { status: 500, .. }), "{error}");
    assert!(format!("{error:?}").len() < 20_000, "the message is cut");
}

#[tokio::test(start_paused = true)]
async fn a_422_that_echoes_the_whole_body_loses_the_secret_and_the_images() {
    let service = hostile::serve(|_, request, _| {
        // As the service's framework does for a missing field: the whole body.
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        json(
            422,
            json!({"detail": [{"type": "missing", "loc": ["body", "prompt"], "msg": "Field required", "input": body}]}),
        )
    })
    .await;
    let image = common::b64(&common::png_header(64, 64)) + &"A".repeat(50_000);
    let body = json!({"prompt": "x", "webhook_secret": SECRET, "input_image": image, "user": "u"});
    let error = client(&service.base)
        .submit_raw("/v1/gen-9-unknown", body)
        .await
        .unwrap_err();
    let Error::Validation { errors, .. } = &error else {
        panic!("{error}")
    };
    let echoed = errors[0].input.as_ref().unwrap();
    assert_eq!(echoed["webhook_secret"], "[redacted]");
    assert_eq!(echoed["prompt"], "x");
    assert!(echoed["input_image"].as_str().unwrap().len() < 200);
    for text in [format!("{error:?}"), error.to_string()] {
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.len() < 5_000, "{}", text.len());
    }
}

#[tokio::test(start_paused = true)]
async fn a_service_that_echoes_request_headers_cannot_put_the_key_in_an_error() {
    let service = hostile::serve(|_, request, _| {
        let headers: Vec<String> = request
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("")))
            .collect();
        // Not JSON: a decode error that keeps the body.
        (axum::http::StatusCode::OK, headers.join("\n")).into_response_for_test()
    })
    .await;
    let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
    let Error::Decode { body, .. } = &error else {
        panic!("{error}")
    };
    assert!(
        body.contains("x-key: [redacted]"),
        "the echo is kept, the key is not: {body}"
    );
    assert!(!format!("{error:?}").contains(KEY));
}

#[tokio::test(start_paused = true)]
async fn a_download_redirect_sends_no_referer_and_no_key() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-r"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-r", "status": "Ready", "result": {"sample": format!("{base}/signed?sig=private")}}),
        ),
        "/signed" => (
            axum::http::StatusCode::FOUND,
            [("location", format!("{base}/elsewhere"))],
        )
            .into_response_for_test(),
        _ => hostile::image(b"the result"),
    })
    .await;
    client(&service.base)
        .run(prompt("x"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let landed = service
        .seen()
        .into_iter()
        .find(|s| s.path == "/elsewhere")
        .expect("the redirect was followed");
    assert!(
        landed.headers.get("referer").is_none(),
        "the signed address is not leaked as Referer"
    );
    assert!(landed.headers.get("x-key").is_none());
    let signed = service.seen().into_iter().find(|s| s.path == "/signed").unwrap();
    assert!(signed.headers.get("x-key").is_none(), "downloads carry no key");
}

#[tokio::test(start_paused = true)]
async fn a_raw_path_can_never_send_the_body_elsewhere() {
    let service = hostile::serve(|_, _, _| json(200, json!({}))).await;
    let client = client(&service.base);
    for path in [
        "/v1/%2e%2e/admin",
        "@evil.example/x",
        "//evil.example/x",
        "https://evil.example/v1/x",
        "v1/gen-2-pro",
    ] {
        let error = client.submit_raw(path, json!({"prompt": "x"})).await.unwrap_err();
        assert!(
            matches!(error, Error::InvalidArgument { argument: "path", .. }),
            "{path}: {error}"
        );
    }
    assert!(service.seen().is_empty(), "nothing was sent anywhere");
}

#[test]
fn plain_http_off_loopback_is_refused_unless_asked_for() {
    let error = genapi::Client::builder()
        .api_key("k")
        .base_url("http://api.example.com")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("https"), "{error}");
    genapi::Client::builder()
        .api_key("k")
        .base_url("http://api.example.com")
        .allow_insecure_http(true)
        .build()
        .unwrap();
    let error = genapi::Client::builder()
        .api_key("k")
        .base_url("https://api.example.com")
        .trust_origin("http://poll.example.com")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("trusted origin"), "{error}");
}

/// `IntoResponse` under a name that does not clash with the helper module.
trait IntoResponseForTest {
    fn into_response_for_test(self) -> axum::response::Response;
}

impl<T: axum::response::IntoResponse> IntoResponseForTest for T {
    fn into_response_for_test(self) -> axum::response::Response {
        self.into_response()
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_straddling_the_cut_of_an_echoed_body_is_still_removed() {
    for pad in [4076, 4080, 4091, 4095] {
        let service =
            hostile::serve(move |_, _, _| json(500, json!({ "detail": format!("{}{KEY}", "A".repeat(pad)) }))).await;
        let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
        let text = format!("{error:?} {error}");
        assert!(!text.contains(&KEY[..8]), "pad {pad}: part of the key survived");
    }
}

/// The service sometimes answers a poll with 422 and the task itself; the
/// task is read, never taken for an empty validation error.
#[tokio::test(start_paused = true)]
async fn a_poll_answered_422_with_the_task_gives_the_task() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-422"),
        "/v1/get_result" => json(
            422,
            json!({"id": "t-422", "status": "Ready", "result": {"sample": format!("{base}/out")}}),
        ),
        _ => hostile::trickle(1, 100, Duration::from_millis(1)),
    })
    .await;
    let task = client(&service.base).submit(prompt("x")).await.unwrap();
    let result = task.poll().await.unwrap();
    assert_eq!(result.status, genapi::TaskStatus::Ready);
    let output = task.wait().await.unwrap();
    assert!(output.sample().ends_with("/out"));
}

/// A 422 that is not the validation shape keeps the service's message.
#[tokio::test(start_paused = true)]
async fn a_422_without_detail_keeps_its_message() {
    let service = hostile::serve(|_, _, _| json(422, json!({"message": "project P-7 is suspended"}))).await;
    let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
    assert!(matches!(error, Error::UnexpectedStatus { status: 422, .. }), "{error}");
    assert!(error.to_string().contains("P-7"), "{error}");
}

/// A key echoed by a trusted service in a 422's text never reaches the error.
#[tokio::test(start_paused = true)]
async fn a_key_echoed_in_a_422_is_removed_from_the_error() {
    let service = hostile::serve(|_, _, _| {
        json(
            422,
            json!({"detail": [{"loc": ["header", KEY], "msg": format!("key {KEY} is not allowed"), "type": "value_error", "input": KEY}]}),
        )
    })
    .await;
    let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
    assert!(matches!(error, Error::Validation { .. }), "{error}");
    for text in [format!("{error:?}"), error.to_string()] {
        assert!(!text.contains(KEY), "{text}");
    }
}

/// An announced length far beyond memory is refused, not reserved.
#[tokio::test(start_paused = true)]
async fn an_absurd_content_length_is_no_allocation() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-huge"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-huge", "status": "Ready", "result": {"sample": format!("{base}/out")}}),
        ),
        _ => hostile::announced(64 << 30, b"short"),
    })
    .await;
    let client = genapi::Client::builder()
        .api_key(KEY)
        .base_url(&service.base)
        .max_download_bytes(u64::MAX)
        .retry_policy(RetryPolicy::never())
        .build()
        .unwrap();
    let output = client.run(prompt("x")).await.unwrap();
    let error = output.bytes().await.unwrap_err();
    assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-huge"), "{error}");
}

/// A service that quotes back everything it was sent (the key, the webhook
/// secret, the webhook address's token, a prompt holding the secret), in a
/// failed task's details, in headers, in a 422 and in a field named like the
/// document's secret: none of it reaches an error, its `Debug` or a
/// recording, in the answer to the submission that carried it or in any
/// later one.
#[tokio::test(start_paused = true)]
async fn secrets_the_service_echoes_are_scrubbed_from_every_answer_shown_or_recorded() {
    const TOKEN: &str = "hook-token-4f9e2a71";
    let echo = format!("key {KEY} secret {SECRET} token {TOKEN}");
    let quoted = echo.clone();
    let service = hostile::serve(move |base, request, before| {
        let mut answer = match (request.path.as_str(), before) {
            // The first submission is refused with the whole body echoed.
            ("/v1/gen-2-pro", 0) => json(
                422,
                json!({"detail": [{"loc": ["body", "prompt"], "msg": quoted, "type": "value_error",
                                   "input": String::from_utf8_lossy(&request.body)}]}),
            ),
            ("/v1/gen-2-pro", _) => accepted(base, "t-echo"),
            _ => json(
                200,
                json!({"id": "t-echo", "status": "Error",
                       "details": {"error": quoted, "webhook_secret": "another-secret-value"},
                       "result": {"prompt": format!("a cat called {SECRET}")},
                       "webhook_secret": SECRET}),
            ),
        };
        answer.headers_mut().insert("x-echo", quoted.parse().unwrap());
        answer
    })
    .await;
    let dir = common::Dir::new("hostile-echoed-secrets");
    let har = dir.join("run.har");
    let client = genapi::Client::builder()
        .api_key(KEY)
        .base_url(&service.base)
        .record(&har)
        .build()
        .unwrap();
    let request = || {
        prompt(&format!("a cat called {SECRET}"))
            .webhook_url(format!("https://hooks.example.com/in?token={TOKEN}").as_str())
            .webhook_secret(genapi::WebhookSecret::new(SECRET))
    };
    let refused = client.submit(request()).await.unwrap_err();
    assert!(matches!(refused, Error::Validation { .. }), "{refused}");
    let failed = client.run(request()).await.unwrap_err();
    let Error::TaskFailed { details, .. } = &failed else {
        panic!("{failed}")
    };
    let details = details.as_ref().unwrap();
    assert_eq!(
        details["webhook_secret"], "[redacted]",
        "a field the document marks secret"
    );
    assert_eq!(details["error"], "key [redacted] secret [redacted] token [redacted]");
    let recording = std::fs::read_to_string(&har).unwrap();
    assert!(recording.contains("t-echo"), "the poll was recorded: {recording}");
    for text in [
        refused.to_string(),
        format!("{refused:?}"),
        failed.to_string(),
        format!("{failed:?}"),
        recording,
    ] {
        for secret in [KEY, SECRET, TOKEN] {
            assert!(!text.contains(secret), "{secret} shown or recorded: {text}");
        }
    }
}

/// An image address signed like the result's (the same algorithm, the same
/// date) teaches the scrubber only its long signature: the result address,
/// read from the poll, reaches the download whole, and the download works.
#[tokio::test(start_paused = true)]
async fn a_result_address_signed_like_an_input_image_is_downloaded_whole() {
    const SIGNED: &str = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261125T000000Z&X-Amz-Expires=600";
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-kontext-pro" => accepted(base, "t-s3"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-s3", "status": "Ready", "result": {
                "sample": format!("{base}/r.png?{SIGNED}&X-Amz-Signature={}", "f".repeat(64))}}),
        ),
        "/r.png" if request.query == format!("{SIGNED}&X-Amz-Signature={}", "f".repeat(64)) => hostile::image(b"ok"),
        _ => json(403, json!({"detail": "signature does not match"})),
    })
    .await;
    let input = format!(
        "https://bucket.s3.amazonaws.com/in.png?{SIGNED}&X-Amz-Signature={}",
        "e".repeat(64)
    );
    let request = types::GenKontextProRequest::builder()
        .prompt("the fox in the snow".to_string())
        .input_image(input);
    let output = client(&service.base).run(request).await.unwrap();
    assert!(
        output.bytes().await.unwrap().ends_with(b"ok"),
        "the signed address was sent whole"
    );
}

/// The error of a submission to `base` by a client that records, and the
/// recording, kept in a directory of this `name`.
async fn submit_recorded(base: &str, name: &str) -> (Error, String) {
    let dir = common::Dir::new(name);
    let har = dir.join("run.har");
    let client = genapi::Client::builder()
        .api_key(KEY)
        .base_url(base)
        .record(&har)
        .build()
        .unwrap();
    let error = client.submit(prompt("x")).await.unwrap_err();
    (error, std::fs::read_to_string(&har).unwrap())
}

/// A service answering every request with an error page of 64 KiB of `a`s
/// that ends with the first `cut_at` bytes of `secret` (the client's limit
/// for an error page cuts there), then the rest of it, in a second chunk.
async fn error_page_cut_at_its_limit(secret: String, cut_at: usize) -> hostile::Hostile {
    hostile::serve(move |_, _, _| {
        let first = format!("{}{}", "a".repeat(65536 - cut_at), &secret[..cut_at]);
        let second = format!("{} and more", &secret[cut_at..]);
        let stream = futures::StreamExt::then(futures::stream::iter([first, second]), |chunk| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, std::io::Error>(axum::body::Bytes::from(chunk))
        });
        (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::body::Body::from_stream(stream),
        )
            .into_response_for_test()
    })
    .await
}

/// An error page cut at its limit in the middle of the key loses the key's
/// beginning too: no part of it long enough to say anything is kept.
#[tokio::test]
async fn a_key_cut_by_the_limit_of_an_error_page_leaves_no_part_behind() {
    let service = error_page_cut_at_its_limit(KEY.to_string(), 12).await;
    let (error, recording) = submit_recorded(&service.base, "hostile-cut-key").await;
    for text in [error.to_string(), format!("{error:?}"), recording] {
        assert!(
            !text.contains(&KEY[..8]),
            "part of the key is kept: …{}",
            &text[text.len().saturating_sub(80)..]
        );
    }
}

/// An error page that spells the key with escapes, cut at its limit inside
/// one of them, loses what came before it of the key: the escape cut short
/// decodes to nothing, yet the thirteen characters before it are the key's.
#[tokio::test]
async fn a_key_escaped_and_cut_inside_an_escape_leaves_no_part_behind() {
    let escaped: String = KEY.bytes().map(|byte| format!(r"\u{byte:04x}")).collect();
    let service = error_page_cut_at_its_limit(escaped, 6 * 13 + 4).await;
    let (error, recording) = submit_recorded(&service.base, "hostile-cut-escape").await;
    for text in [error.to_string(), format!("{error:?}"), recording] {
        // The key's first character, escaped: the page holds only `a`s.
        assert!(
            !text.contains("u0068"),
            "part of the key is kept: …{}",
            &text[text.len().saturating_sub(120)..]
        );
    }
}

/// An HTML error page carrying an answer that quotes the request spells
/// the key with its escapes escaped once more (`\\u0068…`); that spelling
/// reaches no error and no recording either.
#[tokio::test]
async fn a_key_escaped_twice_in_an_html_error_page_reaches_no_error_or_recording() {
    let twice: String = KEY.bytes().map(|byte| format!(r"\\u{byte:04x}")).collect();
    let page = format!(r#"<html><script>var answer = "{{\"sent\":\"{twice}\"}}";</script></html>"#);
    let service = hostile::serve(move |_, _, _| {
        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, page.clone()).into_response_for_test()
    })
    .await;
    let (error, recording) = submit_recorded(&service.base, "hostile-escaped-twice").await;
    assert!(error.to_string().contains("[redacted]"), "{error}");
    for text in [error.to_string(), format!("{error:?}"), recording] {
        assert!(!text.contains("u0068"), "the key is kept, escaped twice: {text}");
    }
}

/// An HTML error page whose template wrote the key's characters as
/// character references (as some write every character of an attribute)
/// reaches no error and no recording with the key in any spelling.
#[tokio::test]
async fn a_key_spelled_with_html_character_references_reaches_no_error_or_recording() {
    let referenced: String = KEY.bytes().map(|byte| format!("&#x{byte:x};")).collect();
    let page = format!(r#"<html><body><form><input name="key" value="{referenced}"></form></body></html>"#);
    let service = hostile::serve(move |_, _, _| {
        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, page.clone()).into_response_for_test()
    })
    .await;
    let (error, recording) = submit_recorded(&service.base, "hostile-html-references").await;
    assert!(error.to_string().contains("[redacted]"), "{error}");
    for text in [error.to_string(), format!("{error:?}"), recording] {
        // The key's first two characters, as the page wrote them.
        assert!(!text.contains("&#x68;&#x6f;"), "the key is kept, as references: {text}");
    }
}

/// A JSON error whose message spells the key with numbers that omit their
/// `;` (as browsers read them), the last one ending the message, reaches no
/// error and no recording with the key in that spelling.
#[tokio::test]
async fn a_key_spelled_with_references_to_the_end_of_a_message_reaches_no_error_or_recording() {
    let referenced: String = KEY.bytes().map(|byte| format!("&#{byte}")).collect();
    let service = hostile::serve(move |_, _, _| {
        let body = json!({"detail": format!("sent {referenced}")});
        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response_for_test()
    })
    .await;
    let (error, recording) = submit_recorded(&service.base, "hostile-references-to-the-end").await;
    assert!(error.to_string().contains("[redacted]"), "{error}");
    for text in [error.to_string(), format!("{error:?}"), recording] {
        // The key's first two characters, as the message wrote them.
        assert!(!text.contains("&#104&#111"), "the key is kept, as references: {text}");
    }
}

/// Observers of answers' headers see every attempt's, a retried 429's too,
/// and never the key the service echoes in them.
#[tokio::test]
async fn header_observers_see_every_attempt_and_no_echoed_key() {
    let service = hostile::serve(move |base, _request, before| {
        let mut answer = match before {
            0 => json(429, json!({"detail": "slow down"})),
            _ => accepted(base, "t-observed"),
        };
        answer.headers_mut().insert("retry-after", "0".parse().unwrap());
        answer
            .headers_mut()
            .insert("x-echo", format!("key {KEY}").parse().unwrap());
        answer
    })
    .await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    let client = genapi::Client::builder()
        .api_key(KEY)
        .base_url(&service.base)
        .observe_headers(move |headers| {
            let shown: Vec<String> = headers
                .values()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            kept.lock().unwrap().push(shown.join(" "));
        })
        .build()
        .unwrap();
    let task = client.submit(prompt("observed")).await.unwrap();
    assert_eq!(task.id(), "t-observed");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "the 429 and the acceptance: {seen:?}");
    assert!(
        seen.iter().all(|headers| headers.contains("key ")),
        "the echo reached each: {seen:?}"
    );
    assert!(
        seen.iter().all(|headers| !headers.contains(KEY)),
        "the key reached an observer: {seen:?}"
    );
}

/// An acceptance whose cost is a number JSON allows but a float cannot hold
/// (`1e400`): the task was created (and is charged), so its id and polling
/// address are kept and the task is followed; only the cost is unknown.
#[tokio::test(start_paused = true)]
async fn an_acceptance_with_a_number_out_of_range_keeps_its_task() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => {
            let body = format!(r#"{{"id": "t-huge", "polling_url": "{base}/v1/get_result?id=t-huge", "cost": 1e400}}"#);
            let headers = [(axum::http::header::CONTENT_TYPE, "application/json")];
            (axum::http::StatusCode::OK, headers, body).into_response_for_test()
        }
        "/v1/get_result" => json(200, json!({"id": "t-huge", "status": "Pending"})),
        _ => json(404, json!({})),
    })
    .await;
    let task = client(&service.base).submit(prompt("x")).await.unwrap();
    assert_eq!(task.id(), "t-huge");
    assert_eq!(
        task.polling_url().as_str(),
        format!("{}/v1/get_result?id=t-huge", service.base)
    );
    assert_eq!(task.cost(), None);
}

/// A JSON answer that names a field twice keeps only the last: the key
/// spelled with escapes in the first is in the text and in no value, and it
/// reaches neither the error nor the recording.
#[tokio::test(start_paused = true)]
async fn a_key_escaped_in_a_field_named_twice_reaches_no_error_or_recording() {
    let escaped = format!(r"\u{:04x}{}", KEY.as_bytes()[0], &KEY[1..]);
    // No `detail`: the error's message is the answer's text.
    let body = format!(r#"{{"note":"bad key {escaped}","note":"bad key"}}"#);
    let service = hostile::serve(move |_, _, _| {
        (
            axum::http::StatusCode::BAD_REQUEST,
            [("content-type", "application/json")],
            body.clone(),
        )
            .into_response_for_test()
    })
    .await;
    let (error, recording) = submit_recorded(&service.base, "hostile-field-named-twice").await;
    assert!(recording.contains("bad key"), "the answer was recorded: {recording}");
    for text in [error.to_string(), format!("{error:?}"), recording] {
        assert!(!text.contains(&KEY[1..]), "the key is kept: {text}");
    }
}

/// The service's words may quote an address with its password and
/// signature (an input image it could not fetch), in a 422's message or
/// in JSON it quotes with escaped slashes: the error shows them by the
/// address rule, in its text and in the validation errors it carries.
#[tokio::test(start_paused = true)]
async fn an_address_the_service_quotes_in_a_refusal_is_shown_by_the_address_rule() {
    use axum::response::IntoResponse;
    let quoted = "could not fetch https://ana:correcthorse@files.example.com/in.png?X-Amz-Signature=SIGSECRET";
    // As a service that escapes slashes writes it: `https:\/\/…`.
    let escaped = format!(r#"{{"errors":[{{"title":"{}"}}]}}"#, quoted.replace('/', "\\/"));
    let refusal = json!({"detail": [{"loc": ["body", "input_image"], "msg": quoted, "type": "value_error"}]});
    for (status, body) in [(422, refusal.to_string()), (400, escaped)] {
        let service = hostile::serve(move |_, _, _| {
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                body.clone(),
            )
                .into_response()
        })
        .await;
        let error = client(&service.base).submit(prompt("x")).await.unwrap_err();
        let mut shown = vec![error.to_string(), format!("{error:?}")];
        shown.extend(
            error
                .validation_errors()
                .unwrap_or_default()
                .iter()
                .map(|e| e.msg.clone()),
        );
        for text in shown {
            assert!(text.contains("files.example.com"), "{text}");
            assert!(!text.contains("correcthorse") && !text.contains("SIGSECRET"), "{text}");
        }
    }
}
