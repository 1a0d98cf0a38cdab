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

/// `genapi wait [--out FILE] [--trust-origin ORIGIN] -- TASK`.
#[derive(Clone, Debug)]
pub struct WaitCommand {
    task: String,
    out: Option<String>,
    trust_origin: Option<String>,
}

impl WaitCommand {
    /// Waits for `task` (an id or a polling URL) and saves it to `out`.
    pub fn new(task: &str, out: &str) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            out: Some(out.to_string()),
            trust_origin: None,
        }
    }

    /// Waits for `task` and saves it where `genapi wait` saves by default
    /// (a name made from the task, in the current folder).
    pub fn saved_by_default(task: &str) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            out: None,
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
        f.write_str("genapi wait")?;
        if let Some(file) = &self.out {
            write!(f, " --out {}", out::shell_quote(file))?;
        }
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
        assert_eq!(WaitCommand::saved_by_default("-t").to_string(), "genapi wait -- -t");
    }
}
