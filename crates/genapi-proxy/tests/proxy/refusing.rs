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
