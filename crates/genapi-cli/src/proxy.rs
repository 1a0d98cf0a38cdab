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
    /// Address to listen on (loopback unless --allow-remote).
    ///
    /// The default is clear of a `genapi mock --addr 127.0.0.1:8787` and its two hosts (8788, 8789).
    #[arg(long, default_value = "127.0.0.1:8790")]
    listen: String,
    /// Listen beyond loopback, for callers that send the proxy's own key.
    ///
    /// The key is GENAPI_PROXY_KEY (16 characters or more; kept out of the process list): callers send it as their
    /// x-key, and the proxy sends the service's key instead.
    #[arg(long)]
    allow_remote: bool,
    /// Share what the proxy remembers with other proxies through a PostgreSQL database.
    ///
    /// Proxies on this machine or others, for the same service, through this database
    /// (postgres://USER:PASSWORD@HOST:PORT/DB; default: GENAPI_LEDGER_URL, the batches' ledger): a caller's retry that
    /// reaches another proxy gets the first one's task. Instead of the memory file in the cache.
    #[arg(long, value_name = "URL")]
    ledger: Option<String>,
    /// Print what the proxy at --listen saw so far, and exit.
    #[arg(long)]
    status: bool,
}

/// The variable that holds the proxy's own key.
pub const KEY_VARIABLE: &str = "GENAPI_PROXY_KEY";

/// Runs the proxy until Ctrl-C or SIGTERM (or `--timeout`), then prints
/// what it saw.
pub async fn run(global: &Global, args: ProxyArgs) -> Result<(), Failure> {
    // The address as the proxy printed it (`http://127.0.0.1:PORT`) is
    // taken too: it is what a user copies for --status.
    let listen = args.listen.trim().trim_start_matches("http://").trim_end_matches('/');
    let address: SocketAddr = listen.parse().map_err(|e| {
        Failure::usage(format!(
            "--listen {}: {e}; expected IP:PORT, e.g. 127.0.0.1:8790",
            out::clean(&args.listen)
        ))
    })?;
    if args.status {
        return status(global, address).await;
    }
    // The proxy records what it relays; its client sends nothing itself,
    // and records nothing.
    let unrecorded = Global {
        record: None,
        ..global.clone()
    };
    let connection = connect(&unrecorded).await?;
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
    let (builder, memory) = remembering(builder, global, &args, &connection)?;
    let mut builder = builder;
    if let Some(record) = &global.record {
        builder = builder.record(record, global.record_options());
    }
    if args.allow_remote {
        let key = crate::config::variable(KEY_VARIABLE).ok_or_else(|| {
            Failure::usage(format!(
                "--allow-remote needs a key of the proxy's own, which its callers send: set {KEY_VARIABLE}"
            ))
        })?;
        builder = builder.allow_remote(key);
    }
    let proxy = builder.start(address).await.map_err(|e| {
        let said = out::clean(&e.to_string());
        match e {
            genapi_proxy::StartError::NotLoopback(_) => Failure::usage(format!("{said} (--allow-remote)")),
            genapi_proxy::StartError::WeakProxyKey => Failure::usage(format!("{said}: {KEY_VARIABLE}")),
            // The command keeps its memory in the cache folder, one per
            // service: another proxy for the same service needs another.
            genapi_proxy::StartError::Memory(_) => Failure::new(
                code::OTHER,
                format!("{said} (genapi proxy keeps it in the cache folder; several proxies share one with --ledger)"),
            ),
            _ => Failure::new(code::OTHER, said),
        }
    })?;
    let service = service_shown(global);
    let test_double = if connection.mock.is_some() {
        " (nothing is configured: a test double, whose tasks end with the proxy)"
    } else {
        ""
    };
    out::err(&format!(
        "proxy listening on {}, relaying to {service}{test_double}{memory}; point your SDK's base URL at it; stop it \
         with Ctrl-C",
        proxy.base_url()
    ));
    out::out(&proxy.base_url());
    let stopped = crate::interrupt::served_until_stopped(global).await;
    out::err(&format!(
        "proxy stopping: finishing the exchanges under way and waiting for the answers owed to callers (up to {} s)",
        genapi_proxy::STOP_WAITS_FOR.as_secs()
    ));
    let summary = proxy.stop().await;
    if global.json {
        out::out(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        out::err(&format!("proxy stopped: {summary}"));
    }
    stopped.map_err(|e| Failure::new(code::OTHER, format!("cannot wait for Ctrl-C: {e}")))
}

/// Where the proxy remembers what it sent: the ledger (`--ledger`, or
/// `GENAPI_LEDGER_URL`) shared with other proxies, else a file in the
/// cache; nothing for the built-in mock, whose tasks end with it.
fn remembering(
    builder: genapi_proxy::ProxyBuilder,
    global: &Global,
    args: &ProxyArgs,
    connection: &crate::Connection,
) -> Result<(genapi_proxy::ProxyBuilder, String), Failure> {
    let ledger = args
        .ledger
        .clone()
        .or_else(|| crate::config::variable(crate::config::LEDGER_VARIABLE))
        .filter(|url| !url.trim().is_empty());
    match (ledger, &connection.mock) {
        (Some(_), Some(_)) => Err(Failure::usage(
            "--ledger (or GENAPI_LEDGER_URL) shares what proxies of one service remember, but this proxy would \
                 relay to its own built-in mock, which no other proxy can see and which ends with it: set GENAPI_BASE_URL and \
                 GENAPI_API_KEY, for instance to a `genapi mock` the proxies share",
        )),
        (Some(url), None) => {
            let shown = format!("; sharing what it remembers through the ledger at {}", genapi_text::shown_address(&url));
            // The service's memory file is held, so no proxy remembering
            // in it alone runs beside this one, and what it remembers is
            // not left behind.
            let builder = match memory_file(global) {
                Some(file) => builder.memory_file(file),
                None => builder,
            };
            Ok((builder.ledger(url), shown))
        }
        // The built-in mock's tasks end with it: nothing to remember.
        (None, Some(_)) => Ok((builder, String::new())),
        (None, None) => Ok(match memory_file(global) {
            Some(file) => {
                let shown = format!("; remembering what it sent in {}", out::clean(&file.display().to_string()));
                (builder.memory_file(file), shown)
            }
            None => (builder, String::new()),
        }),
    }
}

/// `genapi proxy --status`: the summary of the proxy listening at
/// `address`.
async fn status(global: &Global, address: SocketAddr) -> Result<(), Failure> {
    let unreachable = |why: String| {
        Failure::new(
            code::OTHER,
            format!("no proxy answers at {address}: {why} (`genapi proxy --listen {address}` starts one there)"),
        )
    };
    let http = genapi::http_client_builder()
        .and_then(|builder| {
            builder
                // The proxy's own key goes to the proxy alone, never where
                // an answer redirects.
                .redirect(genapi::reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| genapi::Error::Config(e.without_url().to_string()))
        })
        .map_err(|e| Failure::api(&e))?;
    let mut request = http.get(format!("http://{address}/_genapi/summary"));
    if let Some(key) = crate::config::variable(KEY_VARIABLE) {
        request = request.header("x-key", key);
    }
    let answer = request
        .send()
        .await
        .map_err(|e| unreachable(e.without_url().to_string()))?;
    if answer.status().as_u16() == 401 {
        return Err(Failure::new(
            code::OTHER,
            format!("the proxy at {address} asks for its own key: set {KEY_VARIABLE} as it was set for the proxy"),
        ));
    }
    if !answer.status().is_success() {
        return Err(unreachable(format!("it answered {}", answer.status())));
    }
    let summary: genapi_proxy::Summary = answer
        .json()
        .await
        .map_err(|e| unreachable(e.without_url().to_string()))?;
    if global.json {
        out::out(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        out::out(&summary.to_string());
    }
    Ok(())
}

/// The memory of the proxy for the configured service, in the cache: one
/// per base URL, however its polling hosts and trusted origins are given
/// (a restart that gives them otherwise must find what it remembered).
fn memory_file(global: &Global) -> Option<std::path::PathBuf> {
    let service = global
        .settings
        .base_url
        .as_ref()
        .map(|base| crate::address_key(&base.value))
        .unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, service.as_bytes());
    let name: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    Some(
        crate::cache::dir()?
            .join(crate::cache::PROXY.name)
            .join(format!("{name}.json")),
    )
}
