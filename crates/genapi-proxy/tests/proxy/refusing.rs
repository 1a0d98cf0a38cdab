//! What the proxy refuses: to listen beyond loopback, bodies past the
//! service's bound.

use genapi_mock::{Fault, MockService};
use genapi_proxy::{Proxy, StartError};

use crate::common::{post, proxy, PATH};

#[tokio::test]
async fn it_listens_on_loopback_only() {
    let mock = MockService::start().await.unwrap();
    let refused = Proxy::builder(mock.client().unwrap())
        .start("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(refused, StartError::NotLoopback(_)), "{refused}");
}

#[tokio::test]
async fn a_body_past_the_bound_is_refused_and_never_sent() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let huge = "x".repeat(128 * 1024 * 1024 + 1);
    let response = post(&proxy, PATH, &huge, &[]).await;
    assert_eq!(response.status(), 413);
    assert_eq!(mock.count("POST", PATH), 0);
}

#[tokio::test]
async fn beyond_loopback_a_caller_needs_the_proxys_own_key_which_never_reaches_the_service() {
    let mock = MockService::start().await.unwrap();
    let weak = Proxy::builder(mock.client().unwrap())
        .allow_remote("short")
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(weak, StartError::WeakProxyKey), "{weak}");
    const OWN: &str = "the-proxys-own-key-7f3a";
    let proxy = Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .allow_remote(OWN)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for refused in [
        vec![],
        vec![("x-key", mock.key())],
        vec![("x-key", "the-proxys-own-key-7f3b")],
    ] {
        let answer = post(&proxy, PATH, &crate::common::job("x"), &refused).await;
        assert_eq!(answer.status(), 401, "{refused:?}");
    }
    let summary = crate::common::http()
        .get(format!("{}/_genapi/summary", proxy.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(summary.status(), 401, "the proxy's own routes too");
    assert_eq!(mock.count("POST", PATH), 0);
    let answer = post(&proxy, PATH, &crate::common::job("x"), &[("x-key", OWN)]).await;
    assert_eq!(answer.status(), 200);
    // Behind a front that ends TLS, the addresses handed out are https:
    // the proxy's key never goes back in clear.
    let behind_tls: serde_json::Value = post(
        &proxy,
        PATH,
        &crate::common::job("y"),
        &[("x-key", OWN), ("x-forwarded-proto", "https")],
    )
    .await
    .json()
    .await
    .unwrap();
    let polling_url = behind_tls["polling_url"].as_str().unwrap();
    assert!(polling_url.starts_with("https://127.0.0.1:"), "{polling_url}");
    let sent: Vec<_> = mock.requests().into_iter().filter(|r| r.method == "POST").collect();
    assert_eq!(sent.len(), 2);
    assert!(sent
        .iter()
        .all(|sent| !sent.body.contains(OWN) && sent.headers.iter().all(|(_, v)| !v.contains(OWN))));
}

#[tokio::test]
async fn two_proxies_never_share_a_memory() {
    let mock = MockService::start().await.unwrap();
    let memory = crate::common::memory_file("shared");
    let _first = proxy(&mock, Some(memory.clone())).await;
    let refused = Proxy::builder(mock.client().unwrap())
        .memory_file(&memory)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("another proxy is using it"), "{refused}");
}

#[tokio::test]
async fn the_service_quoting_the_key_never_hands_it_to_a_caller() {
    let mock = MockService::start().await.unwrap();
    let quoted = format!(r#"{{"detail":"invalid key {}"}}"#, mock.key());
    mock.inject(Fault::on(
        PATH,
        genapi_mock::FaultKind::Status {
            status: 403,
            retry_after: None,
            body: quoted,
        },
    ));
    let proxy = proxy(&mock, None).await;
    let answer = post(&proxy, PATH, &crate::common::job("x"), &[]).await;
    assert_eq!(answer.status(), 403);
    assert!(!answer.text().await.unwrap().contains(mock.key()));
}

/// A service that answers each poll with `key`, spelled as its query says
/// (`quoted` is every character a JSON escape).
async fn quoting(key: &'static str, quoted: String) -> genapi_test_common::hostile::Hostile {
    use axum::response::IntoResponse;
    use genapi_test_common::hostile;
    hostile::serve(move |_, request, _| match request.query.as_str() {
        "id=escaped" => (
            axum::http::StatusCode::OK,
            [("content-type", "application/json")],
            format!(r#"{{"id":"escaped","status":"Pending","debug":"sent with {quoted}"}}"#),
        )
            .into_response(),
        "id=text" => (axum::http::StatusCode::OK, format!("you sent {key}")).into_response(),
        "id=image" => (
            axum::http::StatusCode::OK,
            [("content-type", "image/png")],
            format!("\u{89}PNG {key}"),
        )
            .into_response(),
        "id=big" => (
            axum::http::StatusCode::OK,
            [("content-type", "image/png")],
            vec![7u8; 5 * 1024 * 1024],
        )
            .into_response(),
        "id=gzimage" => (
            axum::http::StatusCode::OK,
            [("content-type", "image/png"), ("content-encoding", "gzip")],
            format!("\u{89}PNG {key}"),
        )
            .into_response(),
        // A media type's case is not its meaning: JSON all the same.
        "id=upper" => (
            axum::http::StatusCode::OK,
            [("content-type", "Application/JSON")],
            format!("{{\"debug\":\"{key}\"}}"),
        )
            .into_response(),
        // Two lines of the header, the first plain: every line counts.
        "id=doubled" => (
            axum::http::StatusCode::OK,
            axum::response::AppendHeaders([
                ("content-type", "application/json"),
                ("content-encoding", "identity"),
                ("content-encoding", "gzip"),
            ]),
            format!("{{\"debug\":\"{key}\"}}"),
        )
            .into_response(),
        "id=base64" => (axum::http::StatusCode::OK, [("content-type", "text/plain")], {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(format!("sent: {key}"))
        })
            .into_response(),
        _ => (
            axum::http::StatusCode::OK,
            [("content-type", "application/json"), ("content-encoding", "gzip")],
            format!("{{\"debug\":\"{key}\"}}"),
        )
            .into_response(),
    })
    .await
}

/// A service that quotes the key in a way a text search misses (every
/// character a JSON escape, any text answer of its own, an answer
/// compressed though the proxy asked for it plain) still never hands it on.
#[tokio::test]
async fn the_key_quoted_escaped_or_compressed_never_reaches_a_caller() {
    const KEY: &str = "sk-quoted-0123456789";
    let escaped: String = KEY.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    let service = quoting(KEY, escaped.clone()).await;
    let client = genapi::Client::builder()
        .api_key(KEY)
        .base_url(&service.base)
        .build()
        .unwrap();
    let proxy = Proxy::builder(client)
        .key(KEY)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let http = crate::common::http();
    // A result larger than any answer read whole streams through.
    let big = http
        .get(format!("{}/v1/get_result?id=big", proxy.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(big.bytes().await.unwrap().len(), 5 * 1024 * 1024);
    for id in [
        "escaped",
        "text",
        "image",
        "base64",
        "compressed",
        "gzimage",
        "doubled",
        "upper",
    ] {
        let answer = http
            .get(format!("{}/v1/get_result?id={id}", proxy.base_url()))
            .send()
            .await;
        // A streamed answer that quotes the key is broken off there, its
        // head too when the key comes in its first bytes.
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) if id == "image" => continue,
            Err(error) => panic!("{id}: {error}"),
        };
        let (status, compressed) = (answer.status(), answer.headers().contains_key("content-encoding"));
        let body = answer.bytes().await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let encoded = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(format!("sent: {KEY}"))
        };
        assert!(
            !text.contains(KEY) && !text.contains(&escaped[..12]) && !text.contains(&encoded[8..24]),
            "{id}: {text}"
        );
        assert!(!compressed, "{id}: a compressed answer is not passed on unchecked");
        if ["compressed", "gzimage", "doubled"].contains(&id) {
            assert_eq!(status, 502, "{text}");
            assert!(text.contains("compressed"), "{text}");
        } else if id == "image" {
            assert_eq!(status, 200, "streamed as it came, until the key");
        } else {
            assert_eq!(status, 200, "{id}: {text}");
            assert!(text.contains("[redacted]"), "{id}: {text}");
        }
    }
    let asked: Vec<_> = service
        .seen()
        .iter()
        .map(|seen| seen.headers["accept-encoding"].clone())
        .collect();
    assert!(asked.iter().all(|coding| coding == "identity"), "{asked:?}");
}

#[tokio::test]
async fn other_hosts_get_polls_and_downloads_only() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let accepted: serde_json::Value = post(&proxy, PATH, &crate::common::job("x"), &[])
        .await
        .json()
        .await
        .unwrap();
    // The polling host's address, through the proxy, with another method.
    let polling_url = accepted["polling_url"].as_str().unwrap();
    let answer = crate::common::http().delete(polling_url).send().await.unwrap();
    assert_eq!(answer.status(), 405);
    assert_eq!(mock.requests().iter().filter(|r| r.method == "DELETE").count(), 0);
}

/// A delivery host's answer is no address book: an address in it is
/// passed on as it came, never opened as a route of the proxy, so a host
/// the service sends callers to cannot point the proxy anywhere else.
#[tokio::test]
async fn addresses_in_a_delivery_hosts_answer_open_no_route() {
    use genapi_test_common::hostile::{self, json};
    let delivery = hostile::serve(|_, _, _| {
        json(
            200,
            serde_json::json!({"polling_url": "http://127.0.0.1:9/internal-admin"}),
        )
    })
    .await;
    let sample = format!("{}/results/x.json", delivery.base);
    let service = hostile::serve(move |base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => hostile::accepted(base, "t-1"),
        _ => json(
            200,
            serde_json::json!({"id": "t-1", "status": "Ready", "result": {"sample": sample}}),
        ),
    })
    .await;
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url(&service.base)
        .build()
        .unwrap();
    let proxy = Proxy::builder(client)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let accepted: serde_json::Value = post(&proxy, PATH, "{}", &[]).await.json().await.unwrap();
    let http = crate::common::http();
    let poll: serde_json::Value = http
        .get(accepted["polling_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let download = poll["result"]["sample"].as_str().unwrap();
    assert!(
        download.starts_with(&proxy.base_url()),
        "the delivery host is reached through the proxy"
    );
    let answer: serde_json::Value = http.get(download).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        answer["polling_url"], "http://127.0.0.1:9/internal-admin",
        "passed on as it came"
    );
}

/// A caller that sends its request's head a byte at a time holds its
/// connection no longer than the head's bound: it is closed then.
#[tokio::test(start_paused = true)]
async fn a_caller_that_never_finishes_its_head_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let mut slow = tokio::net::TcpStream::connect(proxy.address()).await.unwrap();
    slow.write_all(b"POST /v1/gen-2-pro HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let began = tokio::time::Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(genapi_proxy::HEAD_WITHIN * 10, slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the connection is still open after ten times the bound");
    let waited = began.elapsed();
    assert!(
        waited >= genapi_proxy::HEAD_WITHIN && waited < genapi_proxy::HEAD_WITHIN * 2,
        "cut off after {waited:?}"
    );
    assert_eq!(mock.count("POST", PATH), 0);
}

/// Past the bound on connections, a caller is told at once, and nothing
/// of its request is sent.
#[tokio::test]
async fn a_connection_past_the_bound_is_answered_busy_and_nothing_is_sent() {
    let mock = MockService::start().await.unwrap();
    let proxy = Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .most_connections(2)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // Two connections that say nothing hold the two places.
    let _idle = [
        tokio::net::TcpStream::connect(proxy.address()).await.unwrap(),
        tokio::net::TcpStream::connect(proxy.address()).await.unwrap(),
    ];
    let answer = post(&proxy, PATH, &crate::common::job("x"), &[]).await;
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()[genapi_proxy::PROXY_HEADER], "busy");
    assert_eq!(answer.headers()["retry-after"], "1");
    let detail = answer.text().await.unwrap();
    assert!(detail.contains("nothing was sent"), "{detail}");
    assert_eq!(mock.count("POST", PATH), 0);
}

/// A caller's key with a byte no key has is refused, never read as no key
/// (the proxy's own then sent, another account paying).
#[tokio::test]
async fn a_key_no_service_could_read_is_refused_not_replaced_by_the_proxys() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let answer = crate::common::http()
        .post(format!("{}{PATH}", proxy.base_url()))
        .header("content-type", "application/json")
        .header(
            "x-key",
            reqwest::header::HeaderValue::from_bytes(b"my-own-account-key\xa0").unwrap(),
        )
        .body(crate::common::job("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert_eq!(answer.headers()[genapi_proxy::PROXY_HEADER], "refused");
    assert_eq!(mock.count("POST", PATH), 0);
}

/// A success that names no task (not JSON) is passed on as it came, and
/// remembered as an answer that may hold a task: the caller's retry is
/// refused (409), never sent again.
#[tokio::test]
async fn a_success_that_names_no_task_is_never_sent_again() {
    use axum::response::IntoResponse;
    use genapi_test_common::hostile;
    let service = hostile::serve(|_, _, _| {
        (
            axum::http::StatusCode::OK,
            [("content-type", "text/html")],
            "<html>accepted</html>",
        )
            .into_response()
    })
    .await;
    let client = service.client_builder().build().unwrap();
    let proxy = Proxy::builder(client)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let first = post(&proxy, PATH, &crate::common::job("x"), &[]).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.text().await.unwrap(), "<html>accepted</html>");
    let retry = post(&proxy, PATH, &crate::common::job("x"), &[]).await;
    assert_eq!(retry.status(), 409);
    assert_eq!(retry.headers()[genapi_proxy::PROXY_HEADER], "unknown");
    assert_eq!(service.count(PATH), 1, "the retry was not sent");
}

/// A transfer coding but `chunked` (`gzip, chunked`): the client undoes the
/// chunks and not the rest, which would reach a caller as it came, its
/// header dropped, the key inside unchecked. Refused as a compressed
/// answer. (A raw server: the test's HTTP server writes its own codings.)
#[tokio::test]
async fn an_answer_in_a_transfer_coding_not_asked_for_never_reaches_a_caller() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const KEY: &str = "sk-transfer-0123456789";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head).await;
            // The key compressed, as no search of the bytes can find it.
            let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut gzip, format!("\u{89}PNG {KEY}").as_bytes()).unwrap();
            let body = gzip.finish().unwrap();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ntransfer-encoding: gzip, chunked\r\n\r\n{:x}\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.write_all(b"\r\n0\r\n\r\n").await;
        }
    });
    let client = genapi::Client::builder().api_key(KEY).base_url(&base).build().unwrap();
    let proxy = Proxy::builder(client)
        .key(KEY)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let answer = crate::common::http()
        .get(format!("{}/v1/get_result?id=coded", proxy.base_url()))
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let body = answer.bytes().await.unwrap_or_default();
    let mut unzipped = String::new();
    let _ = std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut unzipped);
    assert!(!unzipped.contains(KEY), "the key reached the caller, compressed");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 502, "{text}");
    assert!(text.contains("compressed"), "{text}");
}
