//! Opening the ledger's connection: each host of the URL in turn, each
//! address under the connect timeout from the first packet to the end of
//! authentication, the server's bytes watched ([`crate::guard`]) and TLS as
//! the URL asks ([`crate::tls`]).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode, SslNegotiation, TargetSessionAttrs};
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{ChannelBinding, TlsConnect};
use tokio_postgres::{Client, Config};

use crate::error::{describe, LedgerError};
use crate::guard::{Guarded, Start, Watch};
use crate::tls::Security;

/// The connect timeout when the URL gives none (`connect_timeout`).
pub(super) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The ledger's connection, to be polled for as long as its client is used.
pub(super) type Connection = tokio_postgres::Connection<Guarded<Socket>, Tls<Guarded<Socket>>>;

/// A connected socket.
#[derive(Debug)]
pub(super) enum Socket {
    Tcp(tokio::net::TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// One host of the URL.
struct Target {
    /// Host and port, for messages.
    at: String,
    place: Place,
    port: u16,
}

enum Place {
    /// `host` (a name or an address) or `hostaddr`, or both: the address
    /// is dialled, the name is what the certificate must hold.
    Tcp { name: Option<String>, addr: Option<IpAddr> },
    #[cfg(unix)]
    Unix(std::path::PathBuf),
}

/// Connects to the first host of `config` that answers, as `security`
/// asks.
pub(super) async fn connect(config: &Config, security: Security) -> Result<(Client, Connection), LedgerError> {
    let security = Arc::new(security);
    let limit = config.get_connect_timeout().copied().unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    // Reading `sslrootcert` is part of connecting: a file that cannot be
    // read in time (a stalled network file system) stops at the deadline.
    let tls = tokio::time::timeout(limit, security.client_config())
        .await
        .map_err(|_| LedgerError::Settings {
            reason: format!(
                "the CA file (sslrootcert) was not read within {} s (connect_timeout)",
                limit.as_secs_f64()
            ),
        })??;
    let mut targets = targets(config)?;
    let random = config.get_load_balance_hosts() == LoadBalanceHosts::Random;
    if random {
        fastrand::shuffle(&mut targets);
    }
    // A refusal for safety says more than a host that was down.
    let mut refused = None;
    let mut failed = None;
    for target in &targets {
        let late = || LedgerError::Unreachable {
            at: target.at.clone(),
            reason: format!("no complete answer within {} s (connect_timeout)", limit.as_secs_f64()),
        };
        let endpoints = match tokio::time::timeout(limit, endpoints(target, random)).await {
            Ok(Ok(endpoints)) => endpoints,
            Ok(Err(error)) => {
                failed = Some(error);
                continue;
            }
            Err(_) => {
                failed = Some(late());
                continue;
            }
        };
        for endpoint in endpoints {
            let attempt = attempt(endpoint, target, config, &security, tls.as_ref());
            match tokio::time::timeout(limit, attempt).await {
                Ok(Ok(connected)) => return Ok(connected),
                // The server itself answered: another host would not
                // change its mind.
                Ok(Err(error @ (LedgerError::Credentials { .. } | LedgerError::Database(_)))) => return Err(error),
                Ok(Err(error @ LedgerError::Insecure { .. })) => {
                    refused.get_or_insert(error);
                }
                Ok(Err(error)) => failed = Some(error),
                Err(_) => failed = Some(late()),
            }
        }
    }
    Err(refused.or(failed).unwrap_or_else(|| LedgerError::Url {
        reason: "it names no host".into(),
    }))
}

/// The hosts, each with its port and address, as libpq pairs them.
fn targets(config: &Config) -> Result<Vec<Target>, LedgerError> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let ports = config.get_ports();
    let invalid = |reason: &str| LedgerError::Url { reason: reason.into() };
    if !hosts.is_empty() && !addrs.is_empty() && hosts.len() != addrs.len() {
        return Err(invalid("it gives a number of hostaddr values other than of hosts"));
    }
    let count = hosts.len().max(addrs.len());
    if ports.len() > 1 && ports.len() != count {
        return Err(invalid("it gives a number of ports other than of hosts"));
    }
    Ok((0..count)
        .map(|i| {
            let port = ports.get(i).or_else(|| ports.first()).copied().unwrap_or(5432);
            let addr = addrs.get(i).copied();
            let (place, shown) = match hosts.get(i) {
                Some(Host::Tcp(name)) => (
                    Place::Tcp {
                        name: Some(name.clone()),
                        addr,
                    },
                    name.clone(),
                ),
                #[cfg(unix)]
                Some(Host::Unix(path)) => (Place::Unix(path.clone()), path.display().to_string()),
                None => (
                    Place::Tcp { name: None, addr },
                    addr.map(|a| a.to_string()).unwrap_or_default(),
                ),
            };
            Target {
                at: format!("{shown}:{port}"),
                place,
                port,
            }
        })
        .collect())
}

enum Endpoint {
    Tcp(SocketAddr),
    #[cfg(unix)]
    Unix(std::path::PathBuf),
}

/// Where to dial for one host: its `hostaddr`, else every address its name
/// resolves to.
async fn endpoints(target: &Target, random: bool) -> Result<Vec<Endpoint>, LedgerError> {
    match &target.place {
        Place::Tcp { addr: Some(addr), .. } => Ok(vec![Endpoint::Tcp(SocketAddr::new(*addr, target.port))]),
        Place::Tcp { name: Some(name), .. } => {
            let mut found: Vec<Endpoint> = tokio::net::lookup_host((name.as_str(), target.port))
                .await
                .map_err(|e| LedgerError::Unreachable {
                    at: target.at.clone(),
                    reason: format!("the name cannot be resolved ({e})"),
                })?
                .map(Endpoint::Tcp)
                .collect();
            if random {
                fastrand::shuffle(&mut found);
            }
            Ok(found)
        }
        Place::Tcp { name: None, addr: None } => Ok(Vec::new()),
        #[cfg(unix)]
        Place::Unix(dir) => Ok(vec![Endpoint::Unix(dir.join(format!(".s.PGSQL.{}", target.port)))]),
    }
}

/// One address: socket, TLS, start-up and authentication.
async fn attempt(
    endpoint: Endpoint,
    target: &Target,
    config: &Config,
    security: &Arc<Security>,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<(Client, Connection), LedgerError> {
    let at = target.at.as_str();
    let unreachable = |e: io::Error| LedgerError::Unreachable {
        at: at.to_string(),
        reason: e.to_string(),
    };
    let mut config = config.clone();
    let (socket, peer) = match endpoint {
        Endpoint::Tcp(addr) => (tcp(addr, &config).await.map_err(unreachable)?, Some(addr.ip())),
        #[cfg(unix)]
        Endpoint::Unix(path) => {
            // PostgreSQL offers no TLS on a Unix socket.
            config.ssl_mode(SslMode::Disable);
            let socket = tokio::net::UnixStream::connect(path).await.map_err(unreachable)?;
            (Socket::Unix(socket), None)
        }
    };
    let start = match (config.get_ssl_mode(), config.get_ssl_negotiation()) {
        (SslMode::Disable, _) => Start::Plain,
        (_, SslNegotiation::Direct) => Start::Tls,
        _ => Start::TlsAnswer,
    };
    let watch = Watch::new(security.clone(), start != Start::Plain && security.mode.requires_tls());
    let connector = Connector {
        config: tls.cloned(),
        name: server_name(&target.place, peer),
        security: security.clone(),
        watch: watch.clone(),
    };
    let stream = Guarded::new(socket, start, watch.clone());
    let (client, mut connection) = match config.connect_raw(stream, connector).await {
        Ok(connected) => connected,
        Err(error) => {
            return Err(match watch.refusal() {
                Some(refusal) => refusal.into_error(at),
                None => from_driver(&error, at),
            })
        }
    };
    let wanted = config.get_target_session_attrs();
    session_is(&client, &mut connection, wanted)
        .await
        .map_err(|reason| LedgerError::Unreachable {
            at: at.to_string(),
            reason,
        })?;
    Ok((client, connection))
}

/// The name the certificate must hold: the host's name, else its address.
fn server_name(place: &Place, peer: Option<IpAddr>) -> ServerName<'static> {
    let named = match place {
        Place::Tcp { name: Some(name), .. } => ServerName::try_from(name.clone()).ok(),
        Place::Tcp { name: None, addr } => addr.map(ServerName::from),
        #[cfg(unix)]
        Place::Unix(_) => None,
    };
    // A name that is no DNS name can match no certificate; the address
    // stands in, for SNI, when nothing is checked.
    named.unwrap_or_else(|| ServerName::from(peer.unwrap_or(IpAddr::from([127, 0, 0, 1]))))
}

/// A TCP connection with keepalive, the user timeout (Linux) and no delay.
async fn tcp(addr: SocketAddr, config: &Config) -> io::Result<Socket> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let socket = socket2::SockRef::from(&stream);
    if config.get_keepalives() {
        #[allow(unused_mut)]
        let mut keepalive = socket2::TcpKeepalive::new().with_time(config.get_keepalives_idle());
        #[cfg(target_os = "linux")]
        {
            if let Some(interval) = config.get_keepalives_interval() {
                keepalive = keepalive.with_interval(interval);
            }
            if let Some(retries) = config.get_keepalives_retries() {
                keepalive = keepalive.with_retries(retries);
            }
        }
        socket.set_tcp_keepalive(&keepalive)?;
    }
    #[cfg(target_os = "linux")]
    socket.set_tcp_user_timeout(config.get_tcp_user_timeout().copied())?;
    Ok(Socket::Tcp(stream))
}

/// Wraps one connection's socket in TLS for tokio-postgres, and watches
/// what comes out of it as the plain socket is watched.
pub(super) struct Connector {
    pub(super) config: Option<Arc<rustls::ClientConfig>>,
    /// For SNI and the certificate's name.
    pub(super) name: ServerName<'static>,
    pub(super) security: Arc<Security>,
    pub(super) watch: Arc<Watch>,
}

/// The TLS stream, decrypted bytes watched.
pub(super) type Tls<S> = Guarded<tokio_rustls::client::TlsStream<S>>;

impl<S> TlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Tls<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Tls<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let Some(config) = self.config else {
                return Err(io::Error::other("TLS was asked for with sslmode=disable"));
            };
            let name = self.name.clone();
            match tokio_rustls::TlsConnector::from(config)
                .connect(self.name, stream)
                .await
            {
                Ok(stream) => Ok(Guarded::encrypted(stream, self.watch)),
                Err(error) => {
                    let shown = match &name {
                        ServerName::DnsName(dns) => dns.as_ref().to_string(),
                        ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
                        _ => String::new(),
                    };
                    if let Some(refusal) = self.security.certificate_refusal(&error, &shown) {
                        self.watch.refuse(refusal);
                    }
                    Err(error)
                }
            }
        })
    }
}

impl<S> tokio_postgres::tls::TlsStream for Tls<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// None: SCRAM's channel binding (`tls-server-end-point`, a digest of
    /// the server's certificate chosen by its signature algorithm) is not
    /// offered. The server still authenticates the user, and `sslmode`'s
    /// certificate checks stand for the server.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

/// The server's error, in the ledger's terms.
fn from_driver(error: &tokio_postgres::Error, at: &str) -> LedgerError {
    let reason = describe(error);
    match error.code() {
        Some(code) if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            LedgerError::Credentials {
                at: at.to_string(),
                reason,
            }
        }
        Some(_) => LedgerError::Database(reason),
        None => LedgerError::Unreachable {
            at: at.to_string(),
            reason,
        },
    }
}

/// `target_session_attrs`: whether the server takes writes, asked once
/// connected, as libpq does.
async fn session_is(client: &Client, connection: &mut Connection, wanted: TargetSessionAttrs) -> Result<(), String> {
    if wanted == TargetSessionAttrs::Any {
        return Ok(());
    }
    let query = client.simple_query("SHOW transaction_read_only");
    let mut query = std::pin::pin!(query);
    let rows = std::future::poll_fn(|cx| {
        if connection.poll_unpin(cx).is_ready() {
            return Poll::Ready(Err("the connection closed".to_string()));
        }
        query.as_mut().poll(cx).map_err(|e| describe(&e))
    })
    .await?;
    let read_only = rows.iter().find_map(|message| match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(|value| value == "on"),
        _ => None,
    });
    match (read_only, wanted) {
        (Some(true), TargetSessionAttrs::ReadWrite) => Err("the server takes no writes (target_session_attrs)".into()),
        (Some(false), TargetSessionAttrs::ReadOnly) => Err("the server takes writes (target_session_attrs)".into()),
        (Some(_), _) => Ok(()),
        (None, _) => Err("the server did not say whether it takes writes".into()),
    }
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_read(cx, buf),
            #[cfg(unix)]
            Socket::Unix(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_write(cx, buf),
            #[cfg(unix)]
            Socket::Unix(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            #[cfg(unix)]
            Socket::Unix(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Tcp(stream) => stream.is_write_vectored(),
            #[cfg(unix)]
            Socket::Unix(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_flush(cx),
            #[cfg(unix)]
            Socket::Unix(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_shutdown(cx),
            #[cfg(unix)]
            Socket::Unix(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}
