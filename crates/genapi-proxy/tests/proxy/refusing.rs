//! What the proxy refuses: to listen beyond loopback, bodies past the
//! service's bound.

use genapi_mock::MockService;
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
    let sent: Vec<_> = mock.requests().into_iter().filter(|r| r.method == "POST").collect();
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].body.contains(OWN) && sent[0].headers.iter().all(|(_, v)| !v.contains(OWN)));
}
