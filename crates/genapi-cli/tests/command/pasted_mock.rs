//! What `genapi mock` prints is what a shell takes: its lines pasted into
//! `sh` point the commands that follow at that mock, so a batch stopped
//! early resumes on it, polling its tasks instead of sending them again.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use crate::common::{genapi_alone, write_jobs, Dir};

/// `script` run by `sh` in `dir`, with nothing of genapi's configuration
/// in its environment but what the script sets.
fn sh(dir: &Dir, script: &str) -> Output {
    let mut command = Command::new("sh");
    for (name, _) in std::env::vars() {
        if name.starts_with("GENAPI_") {
            command.env_remove(name);
        }
    }
    command
        .arg("-c")
        .arg(script)
        .env("GENAPI", env!("CARGO_BIN_EXE_genapi"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .current_dir(&dir.0)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_lines_genapi_mock_prints_pasted_into_sh_let_a_batch_stop_and_resume_on_it() {
    let dir = Dir::new("pasted-mock");
    let mut mock = genapi_alone(&dir)
        .args(["mock", "--duration-ms", "2500"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pasted = String::new();
    for line in BufReader::new(mock.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        pasted.push_str(&line);
        pasted.push('\n');
        if line == "# genapi mock ready" {
            break;
        }
    }
    assert!(pasted.starts_with("export GENAPI_"), "{pasted}");
    write_jobs(&dir.join("jobs.jsonl"), 3, "pasted");
    let batch = |timeout: u32| {
        sh(
            &dir,
            &format!("{pasted}\"$GENAPI\" batch jobs.jsonl --out out --timeout {timeout}"),
        )
    };
    let text = |run: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
    };
    // Stopped while its tasks run: accepted, not yet finished.
    let stopped = batch(1);
    assert_eq!(stopped.status.code(), Some(8), "{}", text(&stopped));
    // Resumed in another shell from the same pasted lines.
    let resumed = batch(60);
    let _ = mock.kill();
    let _ = mock.wait();
    for run in [&stopped, &resumed] {
        assert!(!text(run).contains("built-in mock"), "{}", text(run));
    }
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    assert!(text(&resumed).contains("3 saved"), "{}", text(&resumed));
    let journal = std::fs::read_to_string(dir.join("out/journal.jsonl")).unwrap();
    let sent = journal
        .lines()
        .filter(|line| line.contains("\"event\":\"intent\""))
        .count();
    assert_eq!(sent, 3, "each line sent once, the resumed run polled them: {journal}");
}
