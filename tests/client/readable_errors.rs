//! `?` in `main` prints an error's Debug form: every public error of the
//! crates leads it with the text that says what to do, then the causes,
//! rather than the variant's fields. (The ledger's, the gallery's and the
//! pictures' errors are checked in their own crates' tests.)

use genapi::{Error, TaskRef};
use genapi_mock::{MockConfig, MockService};

/// Checks `error`'s Debug form is its text, then its causes, and returns it.
fn readable(error: &(dyn std::error::Error + 'static), debug: String) -> String {
    let text = error.to_string();
    assert!(
        debug.starts_with(&text),
        "Debug does not lead with the text:\n{debug}\n---\n{text}"
    );
    let rest = &debug[text.len()..];
    assert!(rest.is_empty() || rest.starts_with("\n\nCaused by:\n    "), "{debug}");
    for dump in ["{ ", "Some(", "TaskRef", "None"] {
        assert!(!debug.contains(dump), "a field dump in the Debug form: {debug}");
    }
    debug
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_errors_print_their_advice_when_main_returns_them() {
    let mock = MockService::start().await.unwrap();
    let wrong_key = genapi::Client::builder()
        .api_key("wrong")
        .base_url(mock.base_url())
        .build()
        .unwrap();
    let request = genapi::api::types::Gen2ProRequest::builder().prompt("a fox");
    let forbidden = wrong_key.submit(request.clone()).await.unwrap_err();
    assert!(matches!(forbidden, Error::Forbidden { .. }));
    let said = readable(&forbidden, format!("{forbidden:?}"));
    assert!(said.contains("check the API key the client was built with"), "{said}");
    assert!(!said.contains("GENAPI_API_KEY"), "not where this key came from: {said}");

    // A program that says where its key came from has it named.
    let named = genapi::Client::builder()
        .api_key_from("wrong-key-from-the-vault", "the key in the vault at ops/genapi")
        .base_url(mock.base_url())
        .build()
        .unwrap();
    let forbidden = named.submit(request.clone()).await.unwrap_err();
    let said = forbidden.to_string();
    assert!(said.contains("check the key in the vault at ops/genapi and"), "{said}");
    assert!(!said.contains("wrong-key-from-the-vault"), "{said}");

    // Words that quote the key never show it; empty words are none.
    let named = |origin: &str| {
        genapi::Client::builder()
            .api_key_from("wrong-key-from-the-vault", origin)
            .base_url(mock.base_url())
            .build()
            .unwrap()
    };
    let quoting = named("the key wrong-key-from-the-vault")
        .submit(request.clone())
        .await
        .unwrap_err();
    let said = format!("{quoting} {quoting:?}");
    assert!(said.contains("check the key [redacted] and"), "{said}");
    assert!(!said.contains("wrong-key-from-the-vault"), "{said}");
    let empty = named("  ").submit(request.clone()).await.unwrap_err().to_string();
    assert!(empty.contains("check the API key the client was built with"), "{empty}");

    let task = TaskRef {
        id: "t-1".into(),
        polling_url: "https://poll.example.com/v1/get_result?id=t-1".into(),
    };
    let untrusted = Error::UntrustedOrigin {
        origin: "https://poll.example.com".into(),
        task: task.clone(),
    };
    assert!(readable(&untrusted, format!("{untrusted:?}")).contains("GENAPI_TRUSTED_ORIGINS"));
    for error in [
        Error::Moderated {
            task: task.clone(),
            stage: genapi::Moderation::Content,
            details: None,
        },
        Error::TaskFailed {
            task: task.clone(),
            details: Some(serde_json::json!({"reason": "boom"})),
        },
        Error::Config("GENAPI_BASE_URL is not a URL".into()),
    ] {
        readable(&error, format!("{error:?}"));
    }

    // A refused connection: its causes follow the text when it has any.
    let nobody = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:1")
        .retry_policy(genapi::RetryPolicy::never())
        .build()
        .unwrap();
    let unreachable = nobody.submit(request).await.unwrap_err();
    readable(&unreachable, format!("{unreachable:?}"));
}

#[tokio::test]
async fn the_errors_of_the_other_crates_print_their_advice_too() {
    let mock = MockService::start_with(MockConfig::default(), "10.1.2.3:0".parse().unwrap())
        .await
        .err()
        .unwrap();
    readable(&mock, format!("{mock:?}"));
    let target = genapi_mock::WebhookTarget::parse("not an origin").unwrap_err();
    readable(&target, format!("{target:?}"));
    let secret = genapi::webhook::Verifier::new("short").unwrap_err();
    readable(&secret, format!("{secret:?}"));
    let folder = std::env::temp_dir();
    let file = genapi_files::may_write(&folder, genapi_files::Existing::Replace).unwrap_err();
    readable(&file, format!("{file:?}"));
    let store = genapi_batch::StoreError::new(genapi::FailureClass::Network, "the database did not answer");
    readable(&store, format!("{store:?}"));
}
