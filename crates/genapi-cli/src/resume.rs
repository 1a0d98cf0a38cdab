//! The command printed to pick a paid task up again.
//!
//! Every message that names a task the user may still collect prints the
//! same `genapi wait`: its options first, then `--` and the task. The task
//! is an id or a polling URL the service chose, so it may start with `-`:
//! after `--` it is read as the task, never as an option. Each word is
//! quoted for a POSIX shell (and cleaned of terminal controls) by
//! [`out::shell_quote`].

use std::fmt;

use crate::out;

/// `genapi wait --out FILE [--trust-origin ORIGIN] -- TASK`.
#[derive(Clone, Debug)]
pub struct WaitCommand {
    task: String,
    out: String,
    trust_origin: Option<String>,
}

impl WaitCommand {
    /// Waits for `task` (an id or a polling URL) and saves it to `out`
    /// (a path, or a placeholder such as `FILE`).
    pub fn new(task: &str, out: &str) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            out: out.to_string(),
            trust_origin: None,
        }
    }

    /// The same command, trusting `origin` with the key.
    pub fn trusting(&self, origin: &str) -> WaitCommand {
        WaitCommand {
            trust_origin: Some(origin.to_string()),
            ..self.clone()
        }
    }
}

impl fmt::Display for WaitCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "genapi wait --out {}", out::shell_quote(&self.out))?;
        if let Some(origin) = &self.trust_origin {
            write!(f, " --trust-origin {}", out::shell_quote(origin))?;
        }
        write!(f, " -- {}", out::shell_quote(&self.task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_comes_after_the_options_and_a_double_dash() {
        let command = WaitCommand::new("-rf", "out/fox.jpg");
        assert_eq!(command.to_string(), "genapi wait --out out/fox.jpg -- -rf");
        assert_eq!(
            command.trusting("https://eu.example.com").to_string(),
            "genapi wait --out out/fox.jpg --trust-origin https://eu.example.com -- -rf"
        );
        assert_eq!(
            WaitCommand::new("--help'; rm x", "my file.jpg").to_string(),
            r"genapi wait --out 'my file.jpg' -- '--help'\''; rm x'"
        );
    }
}
