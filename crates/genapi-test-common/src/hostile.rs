//! A scriptable service on loopback that misbehaves on purpose: odd answers,
//! echoed secrets, huge bodies, broken downloads. It records what it saw.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// A request the hostile service received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The running service.
pub struct Hostile {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Hostile {
    /// Everything received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    /// Requests to this path.
    pub fn count(&self, path: &str) -> usize {
        self.seen().iter().filter(|s| s.path == path).count()
    }
    /// A client builder aimed at this service, with a key.
    pub fn client_builder(&self) -> genapi::ClientBuilder {
        genapi::Client::builder().api_key("k").base_url(&self.base)
    }
}

type Handler = dyn Fn(&str, &Seen, usize) -> Response + Send + Sync;

/// Serves `handler(base_url, request, how many requests to this path came
/// before)` on an ephemeral loopback port.
pub async fn serve(handler: impl Fn(&str, &Seen, usize) -> Response + Send + Sync + 'static) -> Hostile {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handler: Arc<Handler> = Arc::new(handler);
    let (record, url) = (seen.clone(), base.clone());
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let (record, url, handler) = (record.clone(), url.clone(), handler.clone());
        async move {
            let request = Seen {
                method,
                path: uri.path().to_string(),
                query: uri.query().unwrap_or("").to_string(),
                headers,
                body,
            };
            let before = {
                let mut all = record.lock().unwrap();
                let before = all.iter().filter(|s| s.path == request.path).count();
                all.push(request.clone());
                before
            };
            handler(&url, &request, before)
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Hostile { base, seen }
}

/// A JSON answer.
pub fn json(status: u16, body: serde_json::Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An accepted submission whose task is polled on this service.
pub fn accepted(base: &str, id: &str) -> Response {
    json(
        200,
        serde_json::json!({"id": id, "polling_url": format!("{base}/v1/get_result?id={id}")}),
    )
}

/// A result: a PNG header (a 1x1 image, as far as a reader of headers
/// can tell) followed by `tail`, served as `image/png`.
pub fn image(tail: &[u8]) -> Response {
    let mut bytes = crate::png_header(1, 1);
    bytes.extend_from_slice(tail);
    (StatusCode::OK, [("content-type", "image/png")], bytes).into_response()
}

/// A body that sends `head`, then breaks the connection.
pub fn broken_after(head: &'static [u8]) -> Response {
    let stream = futures::stream::iter([
        Ok::<Bytes, std::io::Error>(Bytes::from_static(head)),
        Err(std::io::Error::other("connection dropped on purpose")),
    ]);
    (StatusCode::OK, Body::from_stream(stream)).into_response()
}

/// A body of `chunks` pieces of `size` bytes, one every `every`; it starts
/// as a PNG does, so as a download it is an image.
pub fn trickle(chunks: usize, size: usize, every: std::time::Duration) -> Response {
    let stream = futures::stream::unfold(0usize, move |sent| async move {
        if sent == chunks {
            return None;
        }
        tokio::time::sleep(every).await;
        let mut chunk = vec![b'x'; size];
        if sent == 0 {
            let signature = &crate::png_header(1, 1)[..8];
            let start = signature.len().min(size);
            chunk[..start].copy_from_slice(&signature[..start]);
        }
        Some((Ok::<Bytes, std::io::Error>(Bytes::from(chunk)), sent + 1))
    });
    (StatusCode::OK, Body::from_stream(stream)).into_response()
}

/// A body that announces `length` bytes in `Content-Length` and sends only
/// `sent` before the connection ends.
pub fn announced(length: u64, sent: &'static [u8]) -> Response {
    let stream = futures::stream::iter([Ok::<Bytes, std::io::Error>(Bytes::from_static(sent))]);
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    response
        .headers_mut()
        .insert("content-length", axum::http::HeaderValue::from(length));
    response
}
