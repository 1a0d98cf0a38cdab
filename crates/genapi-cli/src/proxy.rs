//! `genapi proxy`: the paying-once guarantee for an SDK in any language.
//!
//! The proxy relays to the service the command is configured for (a
//! profile or the environment, as every command), or to the built-in mock
//! when nothing is configured, and says which. What it does with each
//! submission is `genapi-proxy`'s; this module only starts it with the
//! command's settings and reports what it saw when stopped.

use std::net::SocketAddr;

use clap::Args;

use crate::{code, connect, out, service_shown, Failure, Global};

/// Settings of `genapi proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Address to listen on (loopback only).
    #[arg(long, default_value = "127.0.0.1:8788")]
    listen: String,
}

/// Runs the proxy until Ctrl-C or SIGTERM (or `--timeout`), then prints
/// what it saw.
pub async fn run(global: &Global, args: ProxyArgs) -> Result<(), Failure> {
    let address: SocketAddr = args.listen.parse().map_err(|e| {
        Failure::usage(format!(
            "--listen {}: {e}; expected IP:PORT, e.g. 127.0.0.1:8788",
            out::clean(&args.listen)
        ))
    })?;
    let connection = connect(global).await?;
    let key = match &connection.mock {
        Some(mock) => Some(mock.key().to_string()),
        None => global.settings.key.as_ref().map(|key| key.value.expose().to_string()),
    };
    let mut builder = genapi_proxy::Proxy::builder(connection.client.clone()).on_mismatch(|mismatch| {
        out::err(&format!(
            "warning: the traffic differs from openapi.json: {}",
            out::clean(&mismatch.to_string())
        ))
    });
    if let Some(key) = key {
        builder = builder.key(key);
    }
    // The built-in mock's tasks end with it: nothing to remember.
    if connection.mock.is_none() {
        if let Some(file) = memory_file(global) {
            builder = builder.memory_file(file);
        }
    }
    let proxy = builder
        .start(address)
        .await
        .map_err(|e| Failure::new(code::OTHER, out::clean(&e.to_string())))?;
    let service = service_shown(global);
    let test_double = if connection.mock.is_some() {
        " (nothing is configured: a test double, whose tasks end with the proxy)"
    } else {
        ""
    };
    out::err(&format!(
        "proxy listening on {}, relaying to {service}{test_double}; point your SDK's base URL at it; stop it with Ctrl-C",
        proxy.base_url()
    ));
    out::out(&proxy.base_url());
    let stopped = crate::interrupt::served_until_stopped(global).await;
    let summary = proxy.stop().await;
    if global.json {
        out::out(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        out::err(&format!("proxy stopped: {summary}"));
    }
    stopped.map_err(|e| Failure::new(code::OTHER, format!("cannot wait for Ctrl-C: {e}")))
}

/// The memory of the proxy for the configured service, in the cache.
fn memory_file(global: &Global) -> Option<std::path::PathBuf> {
    let service = global.settings.service_addresses();
    let digest = ring::digest::digest(&ring::digest::SHA256, service.as_bytes());
    let name: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    Some(
        crate::cache::dir()?
            .join(crate::cache::PROXY.name)
            .join(format!("{name}.json")),
    )
}
