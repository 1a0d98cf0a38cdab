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

    /// [`write_jobs`], but line 1 asks for a task that takes `held` on
    /// the mock clock (its prompt ends with the marker): whoever sent it
    /// surely still waits for it when the test acts, and a batch over the
    /// file cannot end before the test moves the mock's clock on. Returns
    /// line 1's prompt.
    pub fn write_jobs_with_line_1_held(
        path: &std::path::Path,
        count: u64,
        tag: &str,
        held: std::time::Duration,
    ) -> String {
        write_jobs(path, count, tag);
        let first = format!("{tag} 1 [mock:duration_ms={}]", held.as_millis());
        let text = std::fs::read_to_string(path).unwrap();
        let jobs: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(index, line)| {
                let mut job: serde_json::Value = serde_json::from_str(line).unwrap();
                if index == 0 {
                    job["prompt"] = first.clone().into();
                }
                job.to_string()
            })
            .collect();
        std::fs::write(path, jobs.join("\n") + "\n").unwrap();
        first
    }

    /// This build's `genapi` with nothing configured, run in `dir`.
    pub fn genapi_alone(dir: &Dir) -> std::process::Command {
        genapi_test_common::genapi_alone(env!("CARGO_BIN_EXE_genapi"), dir)
    }

    /// Runs `command` until `mock` has `posts` submissions, then stops it
    /// as Ctrl-C does, and gives what it said: the run ends with its lines
    /// sent, whatever the speed of the machine.
    pub async fn run_until_sent(
        mut command: std::process::Command,
        mock: &genapi_mock::MockService,
        posts: usize,
    ) -> std::process::Output {
        use std::process::Stdio;
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while mock.count("POST", "/v1/gen-2-pro") < posts {
            assert!(std::time::Instant::now() < limit, "the run did not send its lines");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
        tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap()
    }

    /// What a run said, stdout then stderr.
    pub fn said(run: &std::process::Output) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
    }
}

mod batch;
mod batch_notifications;
mod batch_stdout;
mod cli;
mod completions;
mod echoed_secrets;
mod edited_job_file;
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
mod proxying;
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
