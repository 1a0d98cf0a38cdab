//! Submit, wait and download through real HTTP against the mock.

use genapi::api::types::{self, OutputFormat};
use genapi::ImageFormat;

use crate::common::dimensions;
use genapi_mock::MockService;

use crate::common;

#[tokio::test(start_paused = true)]
async fn text_to_image_returns_the_model_chosen_size() {
    let mock = MockService::start().await.unwrap();
    let marked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = marked.clone();
    let client = mock
        .client_builder()
        .observe_headers(move |headers| {
            if headers.get(genapi_mock::MOCK_HEADER).is_some_and(|v| v == "true") {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .build()
        .unwrap();
    let output = client
        .run(types::Gen2ProRequest::builder().prompt("a lighthouse"))
        .await
        .unwrap();
    assert!(
        marked.load(std::sync::atomic::Ordering::Relaxed),
        "an observer sees the mock's mark on its answers"
    );
    let bytes = output.bytes().await.unwrap();
    assert_eq!(ImageFormat::sniff(&bytes), Some(ImageFormat::Jpeg));
    assert_eq!(dimensions(&bytes), Some((1024, 1024)));
    assert!(
        output.sample().starts_with(mock.delivery_url()),
        "served by the delivery host"
    );
    assert!(output.cost().unwrap() > 0.0);
    assert!(output.seed().is_some());
}

#[tokio::test(start_paused = true)]
async fn requested_size_and_format_are_honoured_and_save_adds_the_extension() {
    let mock = MockService::start().await.unwrap();
    let request = types::Gen2FlexRequest::builder()
        .prompt("a fox")
        .width(512)
        .height(384)
        .output_format(OutputFormat::Webp);
    let output = mock.client().unwrap().run(request).await.unwrap();
    let dir = std::env::temp_dir().join(format!("genapi-save-{}", output.id()));
    std::fs::create_dir_all(&dir).unwrap();
    let saved = output.save(dir.join("fox")).await.unwrap();
    assert_eq!(saved.extension().unwrap(), "webp");
    let bytes = std::fs::read(&saved).unwrap();
    assert_eq!(dimensions(&bytes), Some((512, 384)));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_result_that_cannot_be_written_names_its_file_and_its_paid_task() {
    let mock = MockService::start().await.unwrap();
    let output = mock
        .client()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    let nowhere = std::env::temp_dir()
        .join(format!("genapi-no-such-dir-{}", output.id()))
        .join("fox.jpg");
    let error = output.save(&nowhere).await.unwrap_err();
    let genapi::Error::Write { target, task, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        target,
        &nowhere.display().to_string(),
        "the file asked for, not a temporary one"
    );
    assert_eq!(task.as_ref().map(|t| t.id.as_str()), Some(output.id()));
    assert_eq!(error.class(), genapi::FailureClass::Write);
    assert!(
        error.is_worth_waiting_again() && !error.is_safe_to_resubmit(),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn aspect_ratio_and_input_images_shape_the_output() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let ultra = client
        .run(types::GenPro1p1UltraRequest::builder().aspect_ratio("16:9".to_string()))
        .await
        .unwrap();
    let (w, h) = dimensions(&ultra.bytes().await.unwrap()).unwrap();
    assert!((w as f64 / h as f64 - 16.0 / 9.0).abs() < 0.05, "{w}x{h}");

    let input = common::b64(&common::png_header(640, 480));
    let edit = client
        .run(
            types::GenPro1p0ExpandRequest::builder()
                .image(input)
                .left(100u16)
                .top(20u16),
        )
        .await
        .unwrap();
    assert_eq!(dimensions(&edit.bytes().await.unwrap()), Some((740, 500)));
}

#[tokio::test(start_paused = true)]
async fn older_families_report_cost_on_the_poll_result() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let task = client
        .submit(types::GenDevRequest::builder().prompt("x".to_string()))
        .await
        .unwrap();
    assert_eq!(task.cost(), None, "gen-dev reports no cost at submission");
    let output = task.wait().await.unwrap();
    assert!(output.cost().unwrap() > 0.0, "settled cost comes from the poll result");

    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    assert!(task.cost().is_some() && task.input_mp().is_some() && task.output_mp().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_webhook_submission_still_yields_a_waitable_task() {
    let mock = MockService::start().await.unwrap();
    let request = types::Gen2ProRequest::builder()
        .prompt("x")
        .webhook_url(types::WebhookUrl::try_from("http://127.0.0.1:9/hook").unwrap())
        .webhook_secret(genapi::WebhookSecret::new("s3cret"));
    let task = mock.client().unwrap().submit(request).await.unwrap();
    assert!(task.polling_url().as_str().starts_with(mock.base_url()));
    task.wait().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn raw_submission_reaches_any_path_with_the_same_waiting() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    // A field the document does not know goes through (the schema is open).
    let task = client
        .submit_raw("/v1/gen-2-pro", serde_json::json!({"prompt": "a cat", "user": "u-1"}))
        .await
        .unwrap();
    let output = task.wait().await.unwrap();
    assert!(!output.bytes().await.unwrap().is_empty());
    let logged = mock.requests().into_iter().find(|r| r.path == "/v1/gen-2-pro").unwrap();
    assert!(logged.body.contains("\"user\":\"u-1\""));
    // A path the document does not know: sent as is; the service's 404 is typed.
    let error = client
        .submit_raw("/v1/gen-9-future", serde_json::json!({"prompt": "x"}))
        .await
        .unwrap_err();
    assert!(
        matches!(error, genapi::Error::UnexpectedStatus { status: 404, .. }),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_can_be_resumed_from_its_id_or_polling_url() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    let (id, url) = (task.id().to_string(), task.polling_url().to_string());
    drop(task);
    assert!(url.starts_with(mock.regional_url()), "{url}");
    let by_url = client.task(&url).unwrap();
    assert_eq!(by_url.id(), id);
    assert_eq!(by_url.wait().await.unwrap().id(), id);
    // From the id alone the client can only ask the global host, which (as the
    // service does) serves tasks submitted with a webhook: their answer has no
    // polling_url.
    let hooked = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&serde_json::json!({"prompt": "x", "webhook_url": "http://127.0.0.1:9/hook"}))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let hooked_id = hooked["id"].as_str().unwrap();
    let by_id = client.task(hooked_id).unwrap();
    assert_eq!(
        by_id.polling_url().as_str(),
        format!("{}/v1/get_result?id={hooked_id}", mock.base_url())
    );
    assert_eq!(by_id.wait().await.unwrap().id(), hooked_id);
}

#[tokio::test(start_paused = true)]
async fn download_timeout_bounds_the_whole_download_not_each_attempt() {
    use genapi_mock::Fault;
    use std::time::Duration;
    let mock = MockService::start().await.unwrap();
    let output = small_output(mock.client_builder().download_timeout(Duration::from_secs(5))).await;
    // Every attempt is answered at once with 503 and "Retry-After: 3": four
    // attempts, each far within 5 s, would hold the download for 9 s.
    mock.inject(Fault::unavailable("/mock/results/", 3).times(4));
    let started = tokio::time::Instant::now();
    let error = output.bytes().await.unwrap_err();
    let held = started.elapsed();
    assert!(held <= Duration::from_secs(5), "the download was held {held:?}");
    assert!(error.to_string().contains("download timeout"), "{error}");
    assert_eq!(error.class(), genapi::FailureClass::Timeout, "{error}");
    assert_eq!(error.task(), Some(output.reference()), "the task is named");
    assert!(error.is_worth_waiting_again());
    // Saving is bounded the same way, and leaves no partial file behind.
    mock.inject(Fault::unavailable("/mock/results/", 3).times(4));
    let dir = std::env::temp_dir().join(format!("genapi-download-timeout-{}", output.id()));
    std::fs::create_dir_all(&dir).unwrap();
    let started = tokio::time::Instant::now();
    let error = output.save(dir.join("x.jpg")).await.unwrap_err();
    assert!(started.elapsed() <= Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(error.class(), genapi::FailureClass::Timeout, "{error}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reqwest_factorys_own_timeout_does_not_cut_a_download_short() {
    use genapi_mock::{Fault, FaultKind};
    use std::time::Duration;
    crate::common::install_tls_provider();
    let mock = MockService::start().await.unwrap();
    // The client sets its own timeouts on what the factory builds: a total
    // timeout of 1 s there must not bound a download the client allows 15
    // minutes.
    let output = small_output(
        mock.client_builder()
            .reqwest_builder(|| genapi::reqwest::Client::builder().timeout(Duration::from_secs(1))),
    )
    .await;
    mock.inject(Fault::on("/mock/results/", FaultKind::Delay(Duration::from_secs(2))).times(4));
    let bytes = output.bytes().await.unwrap();
    assert_eq!(dimensions(&bytes), Some((64, 64)));
    assert_eq!(mock.stats().downloads, 1, "one attempt, answered after 2 s");
}

/// A 64×64 image made by a client built from `builder`, ready to download.
async fn small_output(builder: genapi::ClientBuilder) -> genapi::Output {
    builder
        .build()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("x").width(64).height(64))
        .await
        .unwrap()
}

mod image_inputs {
    use genapi::{Error, ImageInput};

    #[tokio::test(start_paused = true)]
    async fn files_and_bytes_become_raw_base64_and_urls_pass_only_where_accepted() {
        let png = super::common::png_header(4, 4);
        let path = std::env::temp_dir().join(format!("genapi-input-{}.png", std::process::id()));
        std::fs::write(&path, &png).unwrap();
        let from_file = ImageInput::path(&path).to_base64().await.unwrap();
        assert_eq!(from_file, super::common::b64(&png));
        assert!(!from_file.starts_with("data:"));
        assert_eq!(ImageInput::bytes(png.clone()).to_base64().await.unwrap(), from_file);
        std::fs::remove_file(&path).unwrap();

        let url = "https://example.com/cat.png";
        assert_eq!(ImageInput::url(url).to_field(true).await.unwrap(), url);
        let refused = ImageInput::url(url).to_field(false).await.unwrap_err();
        assert!(
            matches!(&refused, Error::Input { message, .. } if message.contains("not a URL")),
            "{refused}"
        );
        let ftp = ImageInput::url("ftp://example.com/cat.png")
            .to_field(true)
            .await
            .unwrap_err();
        assert!(ftp.to_string().contains("http"), "{ftp}");
    }

    #[tokio::test(start_paused = true)]
    async fn unreadable_and_unsupported_files_are_clear_errors() {
        let missing = ImageInput::path("/no/such/image.png").to_base64().await.unwrap_err();
        assert!(
            missing.to_string().contains("/no/such/image.png") && missing.to_string().contains("cannot read"),
            "{missing}"
        );
        let text = ImageInput::bytes(b"hello, not an image".to_vec())
            .to_base64()
            .await
            .unwrap_err();
        assert!(text.to_string().contains("not a PNG, JPEG, WebP or GIF"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn only_regular_image_files_of_at_most_32_mib_are_read() {
        use std::io::Write;
        let path = std::env::temp_dir().join(format!("genapi-input-big-{}.png", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&super::common::png_header(4, 4)).unwrap();
        // A PNG of 32 MiB and a byte (sparse: nothing is written to the disk).
        file.set_len((32 << 20) + 1).unwrap();
        let input = ImageInput::path(&path);
        // Never unwrap_err: an accepted file would print 43 MB of base64.
        for error in [input.to_base64().await.err(), input.to_field_blocking(false).err()] {
            let error = error.expect("a file over 32 MiB is refused");
            assert!(
                matches!(&error, Error::Input { message, .. } if message.contains("32 MiB")),
                "{error}"
            );
        }
        file.set_len(32 << 20).unwrap();
        assert!(input.to_base64().await.is_ok(), "32 MiB is within the limit");
        std::fs::remove_file(&path).unwrap();

        for special in ["/dev/zero", "/dev/null", "/"] {
            let input = ImageInput::path(special);
            for error in [
                input.to_base64().await.unwrap_err(),
                input.to_field_blocking(true).unwrap_err(),
            ] {
                assert!(
                    matches!(&error, Error::Input { message, .. } if message.contains("not a regular file")),
                    "{special}: {error}"
                );
            }
        }
    }

    #[test]
    fn formats_are_sniffed_from_magic_bytes() {
        use genapi::ImageFormat;
        assert_eq!(ImageFormat::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(ImageFormat::Jpeg));
        assert_eq!(ImageFormat::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(ImageFormat::Webp));
        assert_eq!(ImageFormat::sniff(b"GIF89a"), Some(ImageFormat::Gif));
        assert_eq!(ImageFormat::sniff(b"%PDF"), None);
    }
}

/// `save` never replaces a file: the save is refused with an error naming
/// the file and the way to replace it, and the file is left as it was;
/// `save_replacing` replaces it.
#[tokio::test(start_paused = true)]
async fn save_keeps_an_existing_file_and_save_replacing_replaces_it() {
    let mock = MockService::start().await.unwrap();
    let output = mock
        .client()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("a fox").width(64).height(64))
        .await
        .unwrap();
    let dir = common::Dir::new("save-keeps-existing");
    let mine = dir.join("fox.jpg");
    std::fs::write(&mine, b"my own picture").unwrap();
    let fetched = || {
        let requests = mock.requests();
        requests.iter().filter(|r| r.path.starts_with("/mock/results/")).count()
    };

    let before = fetched();
    let error = output.save(&mine).await.unwrap_err();
    let genapi::Error::FileExists { path, task } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(path, &mine);
    assert_eq!(task.id, output.id());
    let said = error.to_string();
    assert!(said.contains(&mine.display().to_string()), "{said}");
    assert!(said.contains("save_replacing"), "{said}");
    assert_eq!(error.class(), genapi::FailureClass::Write);
    assert_eq!(std::fs::read(&mine).unwrap(), b"my own picture");
    assert_eq!(fetched(), before, "a name taken is refused before the download");

    // Without an extension the name is known only once the format is: it
    // is refused then, and nothing is left beside it either.
    let error = output.save(dir.join("fox")).await.unwrap_err();
    assert!(
        matches!(&error, genapi::Error::FileExists { path, .. } if path == &mine),
        "{error:?}"
    );
    assert_eq!(std::fs::read(&mine).unwrap(), b"my own picture");
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1, "only the user's file");

    let saved = output.save_replacing(&mine).await.unwrap();
    assert_eq!(saved, mine);
    assert!(fetched() > before, "downloads are counted");
    let bytes = std::fs::read(&mine).unwrap();
    assert_eq!(ImageFormat::sniff(&bytes), Some(ImageFormat::Jpeg));
    assert_eq!(dimensions(&bytes), Some((64, 64)));
}

/// A downloaded result holds bytes of its own: kept as the chunk it came
/// in, it would share (and keep alive) the connection's read buffer, which
/// may be far larger than the result and than `max_download_bytes`.
#[tokio::test(start_paused = true)]
async fn a_downloaded_result_holds_only_its_own_bytes() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().build().unwrap();
    let output = client
        .run(
            types::Gen2ProRequest::builder()
                .prompt("a small lighthouse")
                .width(64)
                .height(64),
        )
        .await
        .unwrap();
    let bytes = output.bytes().await.unwrap();
    assert_eq!(dimensions(&bytes), Some((64, 64)));
    let length = bytes.len();
    // Made mutable, the bytes show what they hold: only they own it, and
    // it is no larger than they are.
    let held = bytes
        .try_into_mut()
        .expect("no other owner shares the downloaded bytes");
    assert_eq!(
        held.capacity(),
        length,
        "the result holds no buffer beyond its own bytes"
    );
}
