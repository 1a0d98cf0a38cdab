//! The command printed to pick a paid task up again.
//!
//! Every message that names a task the user may still collect prints the
//! same `genapi wait`: its options first, then `--` and the task. The task
//! is an id or a polling URL the service chose, so it may start with `-`:
//! after `--` it is read as the task, never as an option. Each word is
//! quoted for a POSIX shell (and cleaned of terminal controls) by
//! [`out::shell_quote`].
//!
//! The command names the run's service the way the run found it
//! ([`ServiceOfRun`]), so the task is picked up at the same service wherever
//! the command is pasted:
//!
//! - from a profile (chosen by `--profile`, `GENAPI_PROFILE` or the file's
//!   default), the command names it, even in a shell where `GENAPI_PROFILE`
//!   is not set or after the file's default changed. Naming a profile that
//!   would have been chosen anyway costs nothing; leaving one out sends
//!   another profile's key;
//! - from the environment over a profile's own service, the command starts
//!   with the variables that named the service: pasted in a shell without
//!   them, the profile would send its own key to its own service, which
//!   never saw the task (and might say "not found" of a task that is paid
//!   for). It still names the profile, whose other settings (the `out`
//!   folder a result is saved in) the run used. The key is never printed: the command
//!   takes it from `GENAPI_API_KEY` where it is pasted, and stops before
//!   sending anything when it is unset. A run whose service only the
//!   environment gave, with no profile's service to mistake it for, gets
//!   the plain command.

use std::fmt;

use crate::config::Settings;
use crate::out;

/// The variables that name a service, in the order a command line gives them.
const SERVICE_VARIABLES: [&str; 3] = ["GENAPI_BASE_URL", "GENAPI_REGIONAL_BASE_URL", "GENAPI_TRUSTED_ORIGINS"];

/// How a pasted command reaches the service a run used: by the profile
/// that named it, or by the environment's variables that did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceOfRun {
    profile: Option<String>,
    /// `(variable, value)` pairs, set before the command.
    environment: Vec<(&'static str, String)>,
}

impl ServiceOfRun {
    /// The service `settings` chose.
    pub fn of(settings: &Settings) -> ServiceOfRun {
        // Set only when the environment named the service over a profile's
        // own: pasted without the variables, the command would go to that
        // profile's service. Where no profile has one, the variables are
        // left to the shell, as the run found them there.
        let profile = settings.profile.as_ref().map(|profile| profile.value.clone());
        if settings.overridden.is_none() {
            return ServiceOfRun {
                profile,
                environment: Vec::new(),
            };
        }
        let origins: Vec<&str> = settings
            .trusted_origins
            .iter()
            .map(|origin| origin.value.as_str())
            .collect();
        let values = [
            settings.base_url.as_ref().map(|url| url.value.clone()),
            settings.regional_base_url.as_ref().map(|url| url.value.clone()),
            (!origins.is_empty()).then(|| origins.join(",")),
        ];
        ServiceOfRun {
            profile,
            environment: SERVICE_VARIABLES
                .into_iter()
                .zip(values)
                .filter_map(|(name, value)| value.map(|value| (name, value)))
                .collect(),
        }
    }
}

/// `genapi [--profile NAME] wait [--out FILE] [--trust-origin ORIGIN] -- TASK`.
#[derive(Clone, Debug)]
pub struct WaitCommand {
    task: String,
    service: ServiceOfRun,
    out: Option<String>,
    trust_origin: Option<String>,
    /// `--force`: the file at `out` is replaced.
    force: bool,
}

impl WaitCommand {
    /// Waits for `task` (an id or a polling URL) at the run's `service`
    /// and saves it to `out`.
    pub fn new(task: &str, service: &ServiceOfRun, out: &str) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            service: service.clone(),
            out: Some(out.to_string()),
            trust_origin: None,
            force: false,
        }
    }

    /// Waits for `task` and saves it where `genapi wait` saves by default
    /// (a name made from the task, in the current folder).
    pub fn saved_by_default(task: &str, service: &ServiceOfRun) -> WaitCommand {
        WaitCommand {
            task: task.to_string(),
            service: service.clone(),
            out: None,
            trust_origin: None,
            force: false,
        }
    }

    /// The same command, trusting `origin` with the key.
    pub fn trusting(&self, origin: &str) -> WaitCommand {
        WaitCommand {
            trust_origin: Some(origin.to_string()),
            ..self.clone()
        }
    }

    /// The same command, replacing the file it saves to (`--force`), as
    /// the run that printed it was told to.
    pub fn replacing(self, force: bool) -> WaitCommand {
        WaitCommand { force, ..self }
    }
}

impl fmt::Display for WaitCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in &self.service.environment {
            write!(f, "{name}={} ", out::shell_quote(value))?;
        }
        f.write_str("genapi")?;
        if let Some(profile) = &self.service.profile {
            write!(f, " {}", out::shell_option("--profile", profile))?;
        }
        f.write_str(" wait")?;
        if let Some(file) = &self.out {
            write!(f, " {}", out::shell_option("--out", file))?;
        }
        if self.force {
            f.write_str(" --force")?;
        }
        if let Some(origin) = &self.trust_origin {
            write!(f, " {}", out::shell_option("--trust-origin", origin))?;
        }
        write!(f, " -- {}", out::shell_quote(&self.task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn profile(name: &str) -> ServiceOfRun {
        ServiceOfRun {
            profile: Some(name.to_string()),
            environment: Vec::new(),
        }
    }

    #[test]
    fn the_task_comes_after_the_options_and_a_double_dash() {
        let command = WaitCommand::new("-rf", &ServiceOfRun::default(), "out/fox.jpg");
        assert_eq!(command.to_string(), "genapi wait --out out/fox.jpg -- -rf");
        assert_eq!(
            command.trusting("https://eu.example.com").to_string(),
            "genapi wait --out out/fox.jpg --trust-origin https://eu.example.com -- -rf"
        );
        assert_eq!(
            WaitCommand::new("--help'; rm x", &ServiceOfRun::default(), "my file.jpg").to_string(),
            r"genapi wait --out 'my file.jpg' -- '--help'\''; rm x'"
        );
        assert_eq!(
            WaitCommand::saved_by_default("-t", &ServiceOfRun::default()).to_string(),
            "genapi wait -- -t"
        );
        assert_eq!(
            WaitCommand::new("t1", &ServiceOfRun::default(), "fox.jpg")
                .replacing(true)
                .to_string(),
            "genapi wait --out fox.jpg --force -- t1"
        );
    }

    #[test]
    fn the_profile_of_the_run_is_named_before_the_subcommand() {
        assert_eq!(
            WaitCommand::saved_by_default("t1", &profile("lab eu")).to_string(),
            "genapi --profile 'lab eu' wait -- t1"
        );
        assert_eq!(
            WaitCommand::new("t1", &profile("m"), "a.jpg")
                .trusting("https://eu.example.com")
                .to_string(),
            "genapi --profile m wait --out a.jpg --trust-origin https://eu.example.com -- t1"
        );
        // A name holding a line break is named as it is, never cleaned into
        // a profile that does not exist, and prints no line break.
        assert_eq!(
            WaitCommand::saved_by_default("t1", &profile("lab\neu")).to_string(),
            r"genapi --profile $'lab\x0aeu' wait -- t1"
        );
        // Values that begin as options do are given with `=`.
        assert_eq!(
            WaitCommand::new("-t1", &profile("-x"), "--a b.png").to_string(),
            "genapi --profile=-x wait --out='--a b.png' -- -t1"
        );
    }

    /// A run whose service the environment named over a profile's is
    /// picked up there again, not at the profile's service.
    #[test]
    fn a_service_named_by_the_environment_over_a_profiles_is_named_the_same_way() {
        use crate::config::Sourced;
        let from = |name: &str, value: &str| Sourced {
            value: value.to_string(),
            source: Source::Environment(name.into()),
        };
        let settings = Settings {
            overridden: Some("the service of profile work is not used".into()),
            profile: Some(Sourced {
                value: "work".into(),
                source: Source::Environment("GENAPI_PROFILE".into()),
            }),
            base_url: Some(from("GENAPI_BASE_URL", "https://staging.example.com")),
            regional_base_url: Some(from("GENAPI_REGIONAL_BASE_URL", "https://eu.staging.example.com")),
            trusted_origins: vec![
                from("GENAPI_TRUSTED_ORIGINS", "https://a.example.com"),
                from("GENAPI_TRUSTED_ORIGINS", "https://b example.com"),
            ],
            ..Settings::default()
        };
        let command = WaitCommand::new("t1", &ServiceOfRun::of(&settings), "a.jpg").to_string();
        assert_eq!(
            command,
            "GENAPI_BASE_URL=https://staging.example.com GENAPI_REGIONAL_BASE_URL=https://eu.staging.example.com \
             GENAPI_TRUSTED_ORIGINS='https://a.example.com,https://b example.com' genapi --profile work wait --out a.jpg \
             -- t1"
        );

        let by_profile = Settings {
            base_url: Some(Sourced {
                value: "https://api.example.com".into(),
                source: Source::Profile("work".into()),
            }),
            ..settings
        };
        let by_profile = Settings {
            overridden: None,
            trusted_origins: Vec::new(),
            regional_base_url: None,
            ..by_profile
        };
        assert_eq!(
            WaitCommand::saved_by_default("t1", &ServiceOfRun::of(&by_profile)).to_string(),
            "genapi --profile work wait -- t1"
        );
    }
}
