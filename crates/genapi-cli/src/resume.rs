//! The command printed to pick a paid task up again.
//!
//! Every message that names a task the user may still collect prints the
//! same `genapi wait`: its options first, then `--` and the task. The task
//! is an id or a polling URL the service chose, so it may start with `-`:
//! after `--` it is read as the task, never as an option. Each word is
//! quoted for a POSIX shell (and cleaned of terminal controls) by
//! [`out::shell_quote`].
//!
//! The command names the profile the run used, whenever one was chosen
//! (by `--profile`, `GENAPI_PROFILE` or the file's default): the task is
//! picked up with the same key at the same service wherever the command is
//! pasted, even in a shell where `GENAPI_PROFILE` is not set or after the
//! file's default changed. Naming a profile that would have been chosen
//! anyway costs nothing; leaving one out sends another profile's key.

use std::fmt;

use crate::out;

/// `genapi [--profile NAME] wait [--out FILE] [--trust-origin ORIGIN] -- TASK`.
#[derive(Clone, Debug)]
pub struct WaitCommand {
    task: String,
    profile: Option<String>,
    out: Option<String>,
    trust_origin: Option<String>,
}

impl WaitCommand {
    /// Waits for `task` (an id or a polling URL) under `profile` (the
    /// run's, when one was chosen) and saves it to `out`.
    pub fn new(task: &str, profile: Option<&str>, out: &str) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            profile: profile.map(str::to_string),
            out: Some(out.to_string()),
            trust_origin: None,
        }
    }

    /// Waits for `task` and saves it where `genapi wait` saves by default
    /// (a name made from the task, in the current folder).
    pub fn saved_by_default(task: &str, profile: Option<&str>) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            profile: profile.map(str::to_string),
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
        f.write_str("genapi")?;
        if let Some(profile) = &self.profile {
            write!(f, " --profile {}", out::shell_quote(profile))?;
        }
        f.write_str(" wait")?;
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
        let command = WaitCommand::new("-rf", None, "out/fox.jpg");
        assert_eq!(command.to_string(), "genapi wait --out out/fox.jpg -- -rf");
        assert_eq!(
            command.trusting("https://eu.example.com").to_string(),
            "genapi wait --out out/fox.jpg --trust-origin https://eu.example.com -- -rf"
        );
        assert_eq!(
            WaitCommand::new("--help'; rm x", None, "my file.jpg").to_string(),
            r"genapi wait --out 'my file.jpg' -- '--help'\''; rm x'"
        );
        assert_eq!(
            WaitCommand::saved_by_default("-t", None).to_string(),
            "genapi wait -- -t"
        );
    }

    #[test]
    fn the_profile_of_the_run_is_named_before_the_subcommand() {
        assert_eq!(
            WaitCommand::saved_by_default("t1", Some("lab eu")).to_string(),
            "genapi --profile 'lab eu' wait -- t1"
        );
        assert_eq!(
            WaitCommand::new("t1", Some("m"), "a.jpg")
                .trusting("https://eu.example.com")
                .to_string(),
            "genapi --profile m wait --out a.jpg --trust-origin https://eu.example.com -- t1"
        );
    }
}
