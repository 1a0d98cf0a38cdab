//! A TCP relay in front of a server that can be told to stop answering: it
//! goes on accepting connections and bytes, and passes nothing more on in
//! either direction, as a server that hangs (or a network that drops every
//! packet without closing anything) would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The running relay.
pub struct Stall {
    /// The loopback port to connect to instead of the server's.
    pub port: u16,
    silent: Arc<AtomicBool>,
}

impl Stall {
    /// Relays loopback port [`Stall::port`] to loopback port `target`.
    pub async fn start(target: u16) -> Stall {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = Arc::new(AtomicBool::new(false));
        let flag = silent.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flag = flag.clone();
                tokio::spawn(async move {
                    if flag.load(Ordering::SeqCst) {
                        // Accepted, never answered.
                        return hold(client).await;
                    }
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        relay(client_read, server_write, flag.clone()),
                        relay(server_read, client_write, flag)
                    );
                });
            }
        });
        Stall { port, silent }
    }

    /// From now on nothing is passed on, on any connection, and new ones
    /// are accepted and never answered. Connections stay open.
    pub fn silence(&self) {
        self.silent.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either ends or the relay falls silent; then
/// holds both open for ever, reading nothing.
async fn relay(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if silent.load(Ordering::SeqCst) {
            let _keep = (from, to);
            return std::future::pending().await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// Keeps `stream` open without reading it.
async fn hold(stream: TcpStream) {
    let _keep = stream;
    std::future::pending::<()>().await
}
