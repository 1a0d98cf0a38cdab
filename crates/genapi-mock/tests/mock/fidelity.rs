//! The mock answers as the service does, by default: three hosts, `Pending`
//! while in progress, the webhook answer's shape, free moderation outcomes,
//! 422 bodies that echo the input, large bodies, video results, the seed as
//! given, and counters of what it saw. All over real HTTP on loopback.

use std::time::Duration;

use genapi::api::types;
use genapi_mock::{MockConfig, MockService, MockStats};
use serde_json::{json, Value};

use crate::common;

async fn start(config: MockConfig) -> MockService {
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Submits `body` to `path` on the API host with the key; the answer's JSON.
async fn submit(mock: &MockService, path: &str, body: Value) -> Value {
    let response = common::http()
        .post(format!("{}{path}", mock.base_url()))
        .header("x-key", mock.key())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

async fn get_json(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = common::http().get(url);
    if let Some(key) = key {
        request = request.header("x-key", key);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(start_paused = true)]
async fn polling_is_on_the_regional_host_with_the_key_and_samples_on_the_delivery_host_without() {
    let mock = MockService::start().await.unwrap();
    assert_eq!(mock.trusted_origins(), vec![mock.regional_url().to_string()]);
    let hosts = [mock.base_url(), mock.regional_url(), mock.delivery_url()];
    assert!(hosts[0] != hosts[1] && hosts[1] != hosts[2] && hosts[0] != hosts[2]);

    let client = mock.client().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("three hosts"))
        .await
        .unwrap();
    assert!(task.polling_url().as_str().starts_with(mock.regional_url()));
    let output = task.wait().await.unwrap();
    assert!(output.sample().starts_with(mock.delivery_url()), "{}", output.sample());
    output.bytes().await.unwrap();

    let log = mock.requests();
    let polls: Vec<_> = log.iter().filter(|r| r.path == "/v1/get_result").collect();
    assert!(!polls.is_empty());
    assert!(polls
        .iter()
        .all(|r| r.origin == "regional" && r.header("x-key") == Some("[redacted]")));
    let download = log.iter().find(|r| r.origin == "delivery").unwrap();
    assert_eq!(download.header("x-key"), None);
    assert_eq!(mock.stats().keys_sent_to_delivery, 0);

    // The global host answers 404 for a regional task; the regional host takes no submissions.
    let on_global = format!("{}/v1/get_result?id={}", mock.base_url(), output.id());
    assert_eq!(get_json(&on_global, Some(mock.key())).await.0, 404);
    let submit_on_regional = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.regional_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(submit_on_regional.status(), 404);
    // A key sent to the delivery host is counted, and not needed.
    let with_key = common::http()
        .get(output.sample())
        .header("x-key", mock.key())
        .send()
        .await
        .unwrap();
    assert_eq!(with_key.status(), 200);
    assert_eq!(mock.stats().keys_sent_to_delivery, 1);
}

#[tokio::test(start_paused = true)]
async fn in_progress_is_pending_with_progress_and_the_observed_extras_are_opt_in() {
    let hour = Duration::from_secs(3600);
    let status_at = |mock: &MockService, url: String, key: String| async move {
        let _ = mock;
        get_json(&url, Some(&key)).await.1
    };
    for (observed, path, body, expected) in [
        (
            false,
            "/v1/gen-2-pro",
            json!({"prompt": "p"}),
            ["Pending", "Pending", "Pending"],
        ),
        (
            true,
            "/v1/gen-2-pro",
            json!({"prompt": "p"}),
            ["Pending", "Reasoning", "Generating"],
        ),
        (
            true,
            "/v1/gen-3-video",
            json!({"mode": "t2v", "prompt": "p"}),
            ["Queued", "Generating", "Uploading"],
        ),
    ] {
        let mock = start(MockConfig::default().default_duration(hour).observed_statuses(observed)).await;
        let answer = submit(&mock, path, body).await;
        let url = answer["polling_url"].as_str().unwrap().to_string();
        let mut seen = Vec::new();
        for advance in [0, 1080, 1800] {
            mock.advance(Duration::from_secs(advance));
            let poll = status_at(&mock, url.clone(), mock.key().to_string()).await;
            assert!(poll["progress"].as_f64().is_some(), "{poll}");
            seen.push(poll["status"].as_str().unwrap().to_string());
        }
        assert_eq!(seen, expected, "observed extras: {observed}, {path}");
        mock.advance(Duration::from_secs(800));
        assert_eq!(status_at(&mock, url, mock.key().to_string()).await["status"], "Ready");
    }
    // A prompt marker still scripts an unknown in-progress status.
    let mock = start(MockConfig::default().default_duration(hour)).await;
    let answer = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "[mock:status=Thinking]"})).await;
    let poll = get_json(answer["polling_url"].as_str().unwrap(), Some(mock.key()))
        .await
        .1;
    assert_eq!(poll["status"], "Thinking");
}

#[tokio::test(start_paused = true)]
async fn a_webhook_submission_answers_without_polling_url_and_the_global_host_serves_its_result() {
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(50))).await;
    let answer = submit(
        &mock,
        "/v1/gen-2-pro",
        json!({"prompt": "p", "webhook_url": "http://127.0.0.1:9/hook", "webhook_secret": "s3cret"}),
    )
    .await;
    let mut keys: Vec<&str> = answer.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["cost", "id", "input_mp", "output_mp", "status", "webhook_url"],
        "{answer}"
    );
    assert_eq!(answer["status"], "Pending");
    let id = answer["id"].as_str().unwrap();
    let url = format!("{}/v1/get_result?id={id}", mock.base_url());
    let (status, poll) = get_json(&url, Some(mock.key())).await;
    assert_eq!(status, 200);
    assert_eq!(poll["id"], id);

    // The client's fallback, end to end: it polls the global host.
    let task = mock
        .client()
        .unwrap()
        .submit(
            types::Gen2ProRequest::builder()
                .prompt("hooked")
                .webhook_url(types::WebhookUrl::try_from("http://127.0.0.1:9/hook").unwrap()),
        )
        .await
        .unwrap();
    assert!(task.polling_url().as_str().starts_with(mock.base_url()));
    let output = task.wait().await.unwrap();
    let polls: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/get_result" && r.query.as_deref() == Some(&format!("id={}", output.id())))
        .collect();
    assert!(!polls.is_empty() && polls.iter().all(|r| r.origin == "api"));
}

#[tokio::test(start_paused = true)]
async fn moderation_outcomes_are_not_charged() {
    let mock = start(
        MockConfig::default()
            .credits(Some(100.0))
            .default_duration(Duration::from_millis(1)),
    )
    .await;
    for marker in ["[mock:request-moderated]", "[mock:content-moderated]"] {
        let answer = submit(&mock, "/v1/gen-2-pro", json!({"prompt": marker})).await;
        mock.advance(Duration::from_secs(1));
        let poll = get_json(answer["polling_url"].as_str().unwrap(), Some(mock.key()))
            .await
            .1;
        assert!(poll["status"].as_str().unwrap().ends_with("Moderated"), "{poll}");
        assert_eq!(mock.credits(), Some(100.0), "{marker} is free");
    }
    let answer = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "fine"})).await;
    let cost = answer["cost"].as_f64().unwrap();
    assert!(cost > 0.0);
    assert_eq!(mock.credits(), Some(100.0 - cost));
}

#[tokio::test(start_paused = true)]
async fn a_422_echoes_the_input_as_the_services_framework_does() {
    let mock = MockService::start().await.unwrap();
    let image = common::b64(&common::png_header(64, 64));
    let body = json!({"input_image": image, "webhook_url": "http://127.0.0.1:9/h", "webhook_secret": "whsec_echoed", "seed": 3});
    let response = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let detail: Value = response.json().await.unwrap();
    let missing = detail["detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "missing")
        .unwrap();
    assert_eq!(missing["loc"], json!(["body", "prompt"]));
    assert_eq!(missing["input"], body, "the whole body, secret and image included");

    let long_prompt_bad_seed = json!({"prompt": "p".repeat(300), "seed": "x".repeat(300)});
    let response = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&long_prompt_bad_seed)
        .send()
        .await
        .unwrap();
    let detail: Value = response.json().await.unwrap();
    let bad = detail["detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["loc"] == json!(["body", "seed"]))
        .unwrap();
    assert_eq!(bad["input"], json!("x".repeat(300)), "the value, whole");
    assert!(
        !format!("{:?}", mock.requests()).contains("whsec_echoed"),
        "the log still holds no secret"
    );
}

#[tokio::test(start_paused = true)]
async fn eight_large_reference_images_fit_and_oversize_bodies_get_a_json_413() {
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(1))).await;
    // A 4 MP PNG header followed by 3 MB of data: about 4 MB of base64 each.
    let mut png = common::png_header(2048, 2048);
    png.resize(3 * 1024 * 1024, 0);
    let image = common::b64(&png);
    let mut body = json!({"prompt": "eight", "width": 1024, "height": 1024, "input_image": image});
    for n in 2..=8 {
        body[format!("input_image_{n}")] = json!(image);
    }
    let answer = submit(&mock, "/v1/gen-2-pro", body).await;
    assert!(answer["input_mp"].as_f64().unwrap() > 33.0, "{answer}");

    let small = start(MockConfig::default().max_body_bytes(1024 * 1024)).await;
    let response = common::http()
        .post(format!("{}/v1/gen-2-pro", small.base_url()))
        .header("x-key", small.key())
        .header("content-type", "application/json")
        .body(format!("{{\"prompt\": \"{}\"}}", "x".repeat(2 * 1024 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let detail: Value = response.json().await.unwrap();
    assert!(detail["detail"].as_str().unwrap().contains("1048576"), "{detail}");
}

#[tokio::test(start_paused = true)]
async fn video_results_are_mp4_valid_about_two_hours_and_images_ten_minutes() {
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(1))).await;
    let video = submit(&mock, "/v1/gen-3-video", json!({"mode": "t2v", "prompt": "waves"})).await;
    let image = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "still"})).await;
    mock.advance(Duration::from_secs(1));
    let sample = |answer: Value| {
        let key = mock.key().to_string();
        async move {
            let poll = get_json(answer["polling_url"].as_str().unwrap(), Some(&key)).await.1;
            poll["result"]["sample"].as_str().unwrap().to_string()
        }
    };
    let (video, image) = (sample(video).await, sample(image).await);
    let response = common::http().get(&video).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "video/mp4");
    let bytes = response.bytes().await.unwrap();
    assert_eq!(&bytes[4..12], b"ftypisom");
    assert!(bytes.windows(4).any(|w| w == b"moov"));

    mock.advance(Duration::from_secs(11 * 60));
    let status = |url: String| async move { common::http().get(url).send().await.unwrap().status().as_u16() };
    assert_eq!(status(image.clone()).await, 403, "images: 10 minutes");
    assert_eq!(status(video.clone()).await, 200, "video: still valid");
    mock.advance(Duration::from_secs(110 * 60));
    assert_eq!(status(video).await, 403, "video: about 2 hours");
}

#[tokio::test(start_paused = true)]
async fn input_mp_start_time_ultra_ratio_and_seed_are_as_the_service_answers() {
    let mock = start(
        MockConfig::default()
            .default_duration(Duration::from_millis(1))
            .task_ttl(Duration::from_secs(24 * 3600)),
    )
    .await;
    let raw = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "no images"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(raw.contains("\"input_mp\":0.0"), "no negative zero: {raw}");

    // start_time follows the mock clock.
    let first = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "a"})).await;
    mock.advance(Duration::from_secs(5000));
    let second = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "b"})).await;
    let start = |answer: Value| {
        let key = mock.key().to_string();
        async move {
            let poll = get_json(answer["polling_url"].as_str().unwrap(), Some(&key)).await.1;
            poll["result"]["start_time"].as_f64().unwrap()
        }
    };
    mock.advance(Duration::from_secs(1));
    let (a, b) = (start(first).await, start(second).await);
    assert!(b - a >= 5000.0, "{a} then {b}");

    // Ultra without an aspect ratio uses the document's 16:9 default.
    let output = mock
        .client()
        .unwrap()
        .run(types::GenPro1p1UltraRequest::builder().prompt("wide"))
        .await
        .unwrap();
    let (w, h) = crate::common::dimensions(&output.bytes().await.unwrap()).unwrap();
    assert!((w as f64 / h as f64 - 16.0 / 9.0).abs() < 0.02, "{w}x{h}");

    // Any integer seed up to 2^64-1 is echoed as given.
    for seed in ["18446744073709551615", "9223372036854775808", "-5", "0"] {
        let body: Value = serde_json::from_str(&format!("{{\"prompt\": \"s\", \"seed\": {seed}}}")).unwrap();
        let answer = submit(&mock, "/v1/gen-2-pro", body).await;
        mock.advance(Duration::from_secs(1));
        let poll = common::http()
            .get(answer["polling_url"].as_str().unwrap())
            .header("x-key", mock.key())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(poll.contains(&format!("\"seed\":{seed},")), "{seed}: {poll}");
        let poll: Value = serde_json::from_str(&poll).unwrap();
        let image = common::http()
            .get(poll["result"]["sample"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(image.status(), 200, "renders with seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn stats_count_what_the_service_saw_in_rust_and_over_http() {
    let mock = start(
        MockConfig::default()
            .max_active_tasks(1)
            .default_duration(Duration::from_secs(3600))
            .limited_key("viewer", &["get_result"]),
    )
    .await;
    let answer = submit(&mock, "/v1/gen-2-pro", json!({"prompt": "one"})).await;
    let refused = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "two"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    mock.advance(Duration::from_secs(3601));
    mock.set_credits(Some(0.0));
    let broke = common::http()
        .post(format!("{}/v1/gen-2-flex", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "three"}))
        .send()
        .await
        .unwrap();
    assert_eq!(broke.status(), 402);
    let poll = get_json(answer["polling_url"].as_str().unwrap(), Some(mock.key()))
        .await
        .1;
    let download = common::http()
        .get(poll["result"]["sample"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);

    let stats = mock.stats();
    assert_eq!(stats.submissions.get("/v1/gen-2-pro"), Some(&1));
    assert_eq!(stats.submissions.get("/v1/gen-2-flex"), None);
    assert_eq!(
        (
            stats.polls,
            stats.too_many_requests,
            stats.payment_required,
            stats.downloads
        ),
        (1, 1, 1, 1)
    );
    assert_eq!((stats.active_tasks, stats.tasks_kept), (0, 1));

    let url = format!("{}/mock/stats", mock.base_url());
    assert_eq!(get_json(&url, None).await.0, 403, "needs the key");
    let (status, over_http) = get_json(&url, Some(mock.key())).await;
    assert_eq!(status, 200);
    let over_http: MockStats = serde_json::from_value(over_http).unwrap();
    assert_eq!(over_http, mock.stats());

    // The tasks created, as a user would look them up in the service's records.
    let created = mock.created_tasks();
    assert_eq!(created.len(), 1, "refused submissions create nothing");
    assert_eq!(
        (created[0].id.as_str(), created[0].prompt.as_str()),
        (answer["id"].as_str().unwrap(), "one")
    );
    let url = format!("{}/mock/tasks", mock.base_url());
    assert_eq!(get_json(&url, None).await.0, 403, "needs the key");
    let (status, tasks) = get_json(&url, Some(mock.key())).await;
    assert_eq!(status, 200);
    assert_eq!(tasks["tasks"][0]["id"], answer["id"]);
    assert_eq!(tasks["tasks"][0]["prompt"], "one");
    // Enough to tell apart tasks of one prompt, and the batch's time format.
    let listed = &tasks["tasks"][0];
    assert!(listed["width"].as_u64().is_some() && listed["height"].as_u64().is_some() && listed["seed"].is_number());
    let submitted = httpdate::parse_http_date(listed["submitted"].as_str().unwrap()).unwrap();
    let at = submitted.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((at - listed["submitted_at"].as_f64().unwrap()).abs() < 1.0, "{listed}");
    assert_eq!(
        get_json(&url, Some("viewer")).await.0,
        403,
        "scripting the mock is for its owner, not a key limited to some operations"
    );
}

/// A client written for the live service, in any language, as third-party
/// clients do it: submit, read `id` and `polling_url`, poll accepting only
/// the statuses they know, read `result.sample`, download with a plain GET.
#[tokio::test(start_paused = true)]
async fn a_client_written_for_the_live_service_works_unmodified() {
    const KNOWN: [&str; 5] = ["Pending", "Ready", "Error", "Failed", "Request Moderated"];
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(200))).await;
    let http = common::http();
    for (prompt, expected) in [
        ("a harbour at dawn", "Ready"),
        ("[mock:error]", "Error"),
        ("[mock:request-moderated]", "Request Moderated"),
    ] {
        let submitted: Value = http
            .post(format!("{}/v1/gen-2-pro", mock.base_url()))
            .header("x-key", mock.key())
            .header("accept", "application/json")
            .json(&json!({"prompt": prompt, "width": 512, "height": 512}))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = submitted["id"].as_str().unwrap();
        let mut polling_url = submitted["polling_url"].as_str().unwrap().to_string();
        if !polling_url.contains("?id=") {
            polling_url = format!("{polling_url}?id={id}");
        }
        let result = loop {
            let poll: Value = http
                .get(&polling_url)
                .header("x-key", mock.key())
                .send()
                .await
                .unwrap()
                .error_for_status()
                .unwrap()
                .json()
                .await
                .unwrap();
            let status = poll["status"].as_str().unwrap();
            assert!(KNOWN.contains(&status), "a status such clients reject: {status}");
            if status != "Pending" {
                break poll;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(result["status"], expected);
        if expected == "Ready" {
            assert!(result["result"]["seed"].is_number());
            assert!(result["result"]["start_time"].is_number() && result["result"]["end_time"].is_number());
            let image = http
                .get(result["result"]["sample"].as_str().unwrap())
                .send()
                .await
                .unwrap()
                .error_for_status()
                .unwrap()
                .bytes()
                .await
                .unwrap();
            assert_eq!(crate::common::dimensions(&image), Some((512, 512)));
        }
    }
    assert_eq!(mock.stats().keys_sent_to_delivery, 0);
}

#[tokio::test(start_paused = true)]
async fn sizes_are_validated_from_the_document_not_hard_coded() {
    // The contract's "multiples of 16" for gen-2-* width/height, as the document states it.
    let mut document = common::document();
    for side in ["width", "height"] {
        document["components"]["schemas"]["Gen2ProRequest"]["properties"][side]["multipleOf"] = json!(16);
    }
    let mock = start(MockConfig::default().document(Some(document.to_string()))).await;
    let response = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "p", "width": 1000, "height": 1008}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let detail: Value = response.json().await.unwrap();
    assert_eq!(detail["detail"][0]["type"], "multiple_of", "{detail}");
    assert_eq!(detail["detail"][0]["input"], 1000);
    assert_eq!(
        submit(
            &mock,
            "/v1/gen-2-pro",
            json!({"prompt": "p", "width": 1024, "height": 1008})
        )
        .await["output_mp"],
        1.03
    );
}

#[tokio::test(start_paused = true)]
async fn a_prompt_marker_sets_one_tasks_duration() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client
        .run(types::Gen2ProRequest::builder().prompt("[mock:duration_ms=1200] slow"))
        .await
        .unwrap();
    assert_eq!(output.duration(), Some(1.2));
    let quick = client
        .run(types::Gen2ProRequest::builder().prompt("quick"))
        .await
        .unwrap();
    assert_eq!(quick.duration(), Some(0.3), "others keep the default");
}

/// An edit's result shows its input, so a gallery tells an edit from a
/// generation, and two edits of different images apart: a small copy of
/// the input in a framed box at the top left, through the client, as any
/// program would see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edits_result_shows_its_input() {
    let mock = MockService::start_with(
        MockConfig::default().default_duration(Duration::from_millis(50)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let client = mock.client().unwrap();
    let input = |colour: [u8; 3]| {
        let mut png = Vec::new();
        image::RgbImage::from_pixel(120, 120, image::Rgb(colour))
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        common::b64(&png)
    };
    let edited = |colour| {
        let body = json!({"prompt": "the same, in snow", "input_image": input(colour), "output_format": "png",
                          "width": 320, "height": 320, "seed": 5});
        let client = client.clone();
        async move {
            let output = client
                .submit_raw("/v1/gen-2-pro", body)
                .await
                .unwrap()
                .wait()
                .await
                .unwrap();
            let bytes = output.bytes().await.unwrap();
            image::load_from_memory(&bytes).unwrap().to_rgb8()
        }
    };
    let red = edited([240, 10, 10]).await;
    let green = edited([10, 240, 10]).await;
    assert_eq!(red.get_pixel(50, 50).0, [240, 10, 10], "the input, in its box");
    assert_eq!(green.get_pixel(50, 50).0, [10, 240, 10], "another input shows");
    let generated = client
        .submit_raw(
            "/v1/gen-2-pro",
            json!({"prompt": "the same, in snow", "output_format": "png", "width": 320, "height": 320, "seed": 5}),
        )
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    let plain = image::load_from_memory(&generated.bytes().await.unwrap())
        .unwrap()
        .to_rgb8();
    assert_ne!(plain.get_pixel(50, 50).0, [240, 10, 10], "a generation has no box");
}
