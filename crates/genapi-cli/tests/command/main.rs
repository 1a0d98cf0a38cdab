//! The `genapi` command as a user runs it: against a mock, with nothing
//! configured, in batches killed and resumed, and with workers sharing a
//! PostgreSQL ledger.

/// The workspace's shared test helpers, and the command under test.
mod common {
    pub use genapi_test_common::*;

    /// This build's `genapi`, run in `dir` against `mock`.
    pub fn genapi(dir: &Dir, mock: &genapi_mock::MockService) -> std::process::Command {
        genapi_test_common::genapi(env!("CARGO_BIN_EXE_genapi"), dir, mock)
    }

    /// A job file at `path` of `count` small gen-2-pro lines, named
    /// `img-N`, whose prompts are `tag N` (a test's mock counts them by
    /// prompt).
    pub fn write_jobs(path: &std::path::Path, count: u64, tag: &str) {
        let lines: Vec<String> = (1..=count)
            .map(|n| {
                serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("{tag} {n}"),
                                   "width": 64, "height": 64})
                .to_string()
            })
            .collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    /// This build's `genapi` with nothing configured, run in `dir`.
    pub fn genapi_alone(dir: &Dir) -> std::process::Command {
        genapi_test_common::genapi_alone(env!("CARGO_BIN_EXE_genapi"), dir)
    }

    /// The first of `count` loopback ports in a row, free when looked at,
    /// for `genapi mock --addr` (its polling and delivery hosts take the two
    /// after it), chosen below the ports the system hands out for
    /// connections: one of those (port 0 gives one) can be taken by any
    /// test's connection between the look and the mock's listening, or be
    /// next to one in use. No two calls of one process get the same port.
    pub fn free_ports(count: u16) -> u16 {
        static LOOKED_AT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        let handed_out_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768);
        // Test processes running at once start apart.
        let start = 10_000 + (std::process::id() % 500) as u16 * 40;
        let start = if start + count < handed_out_from { start } else { 1025 };
        loop {
            let first = start.saturating_add(LOOKED_AT.fetch_add(count, std::sync::atomic::Ordering::SeqCst));
            assert!(
                first.saturating_add(count) < handed_out_from,
                "no {count} free ports below the range handed out for connections"
            );
            if (first..first + count).all(|port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()) {
                return first;
            }
        }
    }
}

mod batch;
mod batch_stdout;
mod cli;
mod completions;
mod echoed_secrets;
mod estimate;
mod gallery;
mod hardening_files;
mod help_pages;
mod honest_exits;
#[cfg(unix)]
mod image_to_stdout;
#[cfg(unix)]
mod interrupts;
mod learned_prices;
mod ledger;
mod ledger_carried;
mod ledger_claims;
mod ledger_hardening;
mod ledger_outage;
mod ledger_pool_size;
mod ledger_seat_lost;
mod ledger_status;
mod logging_in;
mod mending_a_profile;
mod mock_ports;
#[cfg(unix)]
mod mock_webhooks;
mod opening;
#[cfg(unix)]
mod pasted_mock;
mod picking_up;
mod plain_words;
mod profiles;
#[cfg(unix)]
mod progress;
mod raising_the_cap;
mod readme_tour;
mod recent_tasks;
mod record;
mod refused_lines;
mod refused_sizes;
mod replay;
#[cfg(unix)]
mod resuming_under_a_profile;
#[cfg(unix)]
mod terminal;
