//! Settings: flags over the environment over a profile of the config file.
//!
//! The config file's profiles, where it is, which profile is chosen and
//! the key a profile names are the library's ([`genapi::profiles`]), so
//! the command and `Client::from_env` read one configuration alike. What
//! the command adds: `--profile`, its flags over everything, and where
//! each value came from. A config file or key file others could change or
//! read stops every command that reads it (exit 2), saying what to run,
//! before anything is sent.
//!
//! The service's address and the key come as a pair: when the environment
//! names a service (`GENAPI_API_KEY` or `GENAPI_BASE_URL`), the profile's
//! service settings are not used at all, so a profile's key is never sent
//! to an address the environment gave, nor the other way round. A
//! profile's defaults (model, output folder) still apply; a flag wins over
//! everything. `genapi config` shows what was chosen and where each value
//! came from, the key as "set" and never its value. A profile with a
//! mistake stops only the commands that use it; `genapi login` and
//! `genapi config set` write profiles ([`crate::config_edit`]).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{out, Failure};
use genapi::profiles::{self, ConfigFile, Profile};

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A flag of the command line.
    Flag(&'static str),
    /// An environment variable.
    Environment(String),
    /// The profile of that name.
    Profile(String),
    /// The config file's `default_profile`.
    ConfigFile,
    /// The profile named `default`, in a config file without a
    /// `default_profile`.
    NamedDefault,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Environment(name) => write!(f, "environment {name}"),
            Source::Profile(name) => write!(f, "profile {name}"),
            Source::ConfigFile => f.write_str("the config file's default_profile"),
            Source::NamedDefault => f.write_str("its name: the config file has no default_profile"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

/// The API key: shown as "set", never as itself.
#[derive(Clone)]
pub struct Key(String);

impl Key {
    /// The key, to hand to the client.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `text` holds this key: is it (spaces aside), or has it
    /// inside when the key is long enough (8 characters) not to turn up
    /// there by chance. What a program is handed, or a file keeps, is
    /// checked by this.
    pub fn is_in(&self, text: &str) -> bool {
        let key = self.0.trim();
        !key.is_empty() && (text.trim() == key || (key.len() >= 8 && self.spellings().iter().any(|s| text.contains(s))))
    }

    /// The key as a value may hold it: as it is, backwards, as hex (either
    /// case) and as base64 (standard and URL-safe, without the padding a
    /// longer text would not end with).
    fn spellings(&self) -> Vec<String> {
        use base64::Engine as _;
        let key = self.0.trim();
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        vec![
            key.to_string(),
            key.chars().rev().collect(),
            hex.to_ascii_uppercase(),
            hex,
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(key),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key),
        ]
    }
}

impl Key {
    /// Every key the command could find, wherever it is kept, for a check
    /// that no other setting holds one: the environment's, each profile's
    /// variable and each profile's file, read whatever the file's mode
    /// (the check only compares; a file others may read is refused for
    /// use elsewhere, yet still holds a key).
    pub fn all_known(profiles: &std::collections::BTreeMap<String, Result<Profile, profiles::Broken>>) -> Vec<Key> {
        let mut keys: Vec<Key> = variable("GENAPI_API_KEY")
            .map(|key| Key(key.trim().to_string()))
            .into_iter()
            .collect();
        for profile in profiles.values() {
            let (key_env, key_file) = match profile {
                Ok(profile) => (profile.key_env.as_deref(), profile.key_file.as_ref()),
                // A profile that cannot be used (a misspelt field) still
                // names where its key is kept.
                Err(broken) => (
                    broken.key_kept_at.key_env.as_deref(),
                    broken.key_kept_at.key_file.as_ref(),
                ),
            };
            if let Some(key) = key_env.and_then(variable) {
                keys.push(Key(key.trim().to_string()));
            }
            if let Some(path) = key_file {
                if let Ok(key) = genapi_files::read_text(&profiles::expand_home(path), profiles::KEY_FILE_LIMIT) {
                    keys.push(Key(key.trim().to_string()));
                }
            }
        }
        keys
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(redacted)")
    }
}

/// What the command runs with, each value with its source.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The config file looked for, and whether it was there.
    pub file: Option<(PathBuf, bool)>,
    /// The profile chosen, if any.
    pub profile: Option<Sourced<String>>,
    /// The service's key.
    pub key: Option<Sourced<Key>>,
    /// Where the key is kept, when a profile gives it (`key_file PATH`, or
    /// `key_env NAME`): what a refused key's message names.
    pub key_kept_in: Option<String>,
    /// The variable the chosen profile's `key_env` names, whether or not
    /// its key is used (the environment's service may be used instead): it
    /// holds a key whatever its name, so no program genapi starts is handed
    /// it.
    pub key_variable: Option<String>,
    /// The service's address.
    pub base_url: Option<Sourced<String>>,
    /// The regional polling host.
    pub regional_base_url: Option<Sourced<String>>,
    /// Origins besides the base URL's the key may go to (`--trust-origin`
    /// flags come on top of these).
    pub trusted_origins: Vec<Sourced<String>>,
    /// `generate`'s and `submit`'s model when `-m` is not given.
    pub model: Option<Sourced<String>>,
    /// `generate`'s folder when `-o` is not given.
    pub out: Option<Sourced<PathBuf>>,
    /// Why the profile's service settings are not used, when they are not.
    pub overridden: Option<String>,
    /// A variable of the environment that is set and not used (the
    /// profile's service is), with what to do instead: said when the
    /// service is used, and by `genapi config`.
    pub unused: Option<String>,
    /// Why the profile's key could not be read (said when the service is
    /// used, so commands that do not need it, and `genapi config`, still run).
    pub key_problem: Option<String>,
    /// Why the chosen profile cannot be used at all (a mistake in it, with
    /// its line): every command that uses it stops, `genapi config` says so.
    pub broken: Option<String>,
}

impl Settings {
    /// These settings, for a command that runs with them: refused when the
    /// chosen profile is broken.
    pub fn usable(self) -> Result<Settings, Failure> {
        match &self.broken {
            Some(why) => Err(Failure::usage(why.clone())),
            None => Ok(self),
        }
    }

    /// Whether a service is configured (else the built-in mock is used).
    pub fn names_a_service(&self) -> bool {
        self.key.is_some() || self.base_url.is_some()
    }

    /// The client's builder for the configured service; half a
    /// configuration is refused, naming what is missing and where.
    pub fn builder(&self) -> Result<genapi::ClientBuilder, String> {
        let (key, base) = match (&self.key, &self.base_url) {
            (Some(key), Some(base)) => (key, base),
            (None, _) if self.key_problem.is_some() => {
                return Err(self.key_problem.clone().unwrap_or_default());
            }
            (None, Some(base)) => {
                return Err(half(
                    &base.source,
                    ("the base URL", "GENAPI_API_KEY", "key_env or key_file"),
                    "login",
                    self.overridden_profile(),
                ))
            }
            (Some(key), None) => {
                return Err(half(
                    &key.source,
                    ("the key", "GENAPI_BASE_URL", "base_url"),
                    "config set base_url URL",
                    self.overridden_profile(),
                ))
            }
            (None, None) => return Err("no service is configured".into()),
        };
        let origin = self.key_origin().unwrap_or_default();
        let mut builder = genapi::Client::builder()
            .api_key_from(key.value.expose(), origin)
            .base_url(&base.value);
        if let Some(regional) = &self.regional_base_url {
            builder = builder.regional_base_url(&regional.value);
        }
        for origin in &self.trusted_origins {
            builder = builder.trust_origin(&origin.value);
        }
        Ok(builder)
    }

    /// The chosen profile whose service the environment overrides.
    fn overridden_profile(&self) -> Option<&str> {
        self.overridden.as_ref()?;
        self.profile.as_ref().map(|profile| profile.value.as_str())
    }

    /// Whose key is sent, in words (`the key of profile m (key_file
    /// PATH)`, `the key in GENAPI_API_KEY`), for a message about a key the
    /// service refused: the origin the client is given with its key.
    fn key_origin(&self) -> Option<String> {
        let key = self.key.as_ref()?;
        Some(match (&key.source, &self.key_kept_in) {
            (Source::Environment(name), _) => format!("the key in {name}"),
            (source, Some(kept)) => format!("the key of {source} ({kept})"),
            (source, None) => format!("the key of {source}"),
        })
    }

    /// Every address the service is reached at, as one text: what learned
    /// durations are kept under, each address spelled one way
    /// ([`crate::address_key`]: never a password or query a base URL may
    /// carry).
    pub fn service_addresses(&self) -> String {
        let mut text = self
            .base_url
            .as_ref()
            .map(|b| crate::address_key(&b.value))
            .unwrap_or_default();
        if let Some(regional) = &self.regional_base_url {
            text.push_str(&format!(" regional={}", crate::address_key(&regional.value)));
        }
        if !self.trusted_origins.is_empty() {
            // In one order, as they name one set however they were listed.
            let origins: std::collections::BTreeSet<String> = self
                .trusted_origins
                .iter()
                .map(|o| crate::address_key(&o.value))
                .collect();
            let origins: Vec<String> = origins.into_iter().collect();
            text.push_str(&format!(" trusted={}", origins.join(",")));
        }
        text
    }
}

/// Half a service: `given` came from `source`, its other half is missing
/// (`variable` in the environment, `setting` in a profile, which
/// `genapi --profile NAME {fix}` gives); said with what to do. Half a
/// service in the environment still overrides the chosen profile's
/// (`overridden`), which unsetting the variable gives back.
fn half(
    source: &Source,
    (given, variable, setting): (&str, &str, &str),
    fix: &str,
    overridden: Option<&str>,
) -> String {
    let or_mock = "or pass --mock to use the built-in mock";
    match source {
        Source::Environment(name) => match overridden {
            Some(profile) => format!(
                "{name} is set but {variable} is not: set it too, or unset {name} to use the service of profile {}, \
                 {or_mock}",
                out::clean(profile)
            ),
            None => format!("{name} is set but {variable} is not: set it too, {or_mock}"),
        },
        Source::Profile(name) => format!(
            "profile {name} gives {given} but not its other half ({setting}): run `genapi {} {fix}`, \
             {or_mock}",
            out::shell_option("--profile", name)
        ),
        other => format!("{other} gives {given} but not its other half ({setting}); {or_mock}"),
    }
}

/// A variable's value, when set and not blank.
pub fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

/// The config file's path: `GENAPI_CONFIG`, else `genapi/config.toml` in
/// the platform's config folder. The second value says whether it was
/// named (a named file must exist).
pub fn file_path() -> Option<(PathBuf, bool)> {
    profiles::file_path(std::env::var_os(profiles::CONFIG_VARIABLE))
}

/// The profiles of the config file, for completing `--profile`: none when
/// there is no file or it cannot be used (completion says nothing; the
/// command that runs says why). A broken profile is still a name.
pub fn profile_names() -> Vec<String> {
    let Some((path, _)) = file_path() else {
        return Vec::new();
    };
    if !genapi_files::is_taken(&path) {
        return Vec::new();
    }
    read_file(&path).map_or_else(|_| Vec::new(), |file| file.profiles.into_keys().collect())
}

/// The config file's path shown to people.
fn shown_file(settings: &Settings) -> String {
    settings
        .file
        .as_ref()
        .map(|(path, _)| out::clean(&path.display().to_string()))
        .unwrap_or_default()
}

/// The config file (an empty one when there is none, unless it was named),
/// noted in `settings`.
fn read_config(settings: &mut Settings) -> Result<ConfigFile, Failure> {
    let Some((path, named)) = file_path() else {
        return Ok(ConfigFile::default());
    };
    let exists = genapi_files::is_taken(&path);
    settings.file = Some((path.clone(), exists));
    if exists {
        read_file(&path)
    } else if named {
        Err(Failure::usage(format!(
            "{}={}: no such file",
            profiles::CONFIG_VARIABLE,
            out::clean(&path.display().to_string())
        )))
    } else {
        Ok(ConfigFile::default())
    }
}

/// The profile asked for, and by what: `--profile`, `GENAPI_PROFILE`, the
/// file's `default_profile`, else a profile named `default` if there is one.
fn choose(flag_profile: Option<&str>, default_profile: Option<&str>, has_default: bool) -> Option<(String, Source)> {
    let variable = variable(profiles::PROFILE_VARIABLE);
    let (name, by) = profiles::choose(flag_profile, variable, default_profile, has_default)?;
    let source = match by {
        profiles::ChosenBy::Program => Source::Flag("--profile"),
        profiles::ChosenBy::Variable => Source::Environment(profiles::PROFILE_VARIABLE.into()),
        profiles::ChosenBy::DefaultProfile => Source::ConfigFile,
        profiles::ChosenBy::NamedDefault => Source::NamedDefault,
    };
    Some((name, source))
}

/// The name of the profile `genapi login` and `genapi config set` change:
/// the one other commands would use, else `default`.
pub fn profile_to_change(flag_profile: Option<&str>, default_profile: Option<&str>) -> String {
    choose(flag_profile, default_profile, false).map_or_else(|| "default".to_string(), |(name, _)| name)
}

/// The settings for `--profile` (`flag_profile`), read from the
/// environment and the config file. A broken profile chosen is noted in
/// [`Settings::broken`], for [`Settings::usable`] to refuse.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub fn resolve(flag_profile: Option<&str>) -> Result<Settings, Failure> {
    let mut settings = Settings::default();
    let file = read_config(&mut settings)?;
    let chosen = choose(
        flag_profile,
        file.default_profile.as_deref(),
        file.profiles.contains_key("default"),
    );
    let profile = match &chosen {
        // A name no printed command could give back as it is (a line
        // break, a terminal control, a NUL no argument can hold) is never
        // used: the resume line of a paid task must name the profile the
        // run used.
        Some((name, source)) if name.chars().any(genapi_text::is_unsafe_to_show) => {
            settings.broken = Some(format!(
                "the profile {} ({source}) holds a control character, which no printed command can name; rename \
                 it in {} (letters, digits, - and _)",
                out::shell_quote(name),
                shown_file(&settings)
            ));
            None
        }
        Some((name, source)) => match file.profiles.get(name) {
            Some(Ok(profile)) => Some((name.clone(), profile.clone())),
            Some(Err(broken)) => {
                settings.broken = Some(format!(
                    "config file {}, line {}: profile {}: {}",
                    shown_file(&settings),
                    broken.line,
                    out::clean(name),
                    broken.why
                ));
                None
            }
            None => {
                let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
                return Err(Failure::usage(format!(
                    "no profile {} ({source}) in {}; {}",
                    out::clean(name),
                    shown_file(&settings),
                    if known.is_empty() {
                        "it has no profiles".to_string()
                    } else {
                        format!("its profiles: {}", out::clean(&known.join(", ")))
                    }
                )));
            }
        },
        None => None,
    };
    settings.profile = chosen.map(|(value, source)| Sourced { value, source });
    let from_environment = profiles::SERVICE_OVER_PROFILES
        .iter()
        .any(|name| variable(name).is_some());
    let environment = |name: &str| {
        variable(name).map(|value| Sourced {
            value: value.trim().to_string(),
            source: Source::Environment(name.into()),
        })
    };
    if from_environment {
        settings.key = environment("GENAPI_API_KEY").map(|k| Sourced {
            value: Key(k.value),
            source: k.source,
        });
        settings.base_url = environment("GENAPI_BASE_URL");
        settings.regional_base_url = environment("GENAPI_REGIONAL_BASE_URL");
        settings.trusted_origins = origins_of(environment("GENAPI_TRUSTED_ORIGINS"));
        if let Some((name, profile)) = &profile {
            if profile.base_url.is_some() || profile.key_env.is_some() || profile.key_file.is_some() {
                settings.overridden = Some(format!(
                    "the service of profile {name} is not used: the environment names one (GENAPI_API_KEY or \
                     GENAPI_BASE_URL)"
                ));
            }
        }
    }
    if let Some((name, profile)) = &profile {
        settings.key_variable = profile.key_env.clone();
        let from = || Source::Profile(name.clone());
        if !from_environment && variable("GENAPI_TRUSTED_ORIGINS").is_some() {
            // A profile's key goes only to the origins the profile names:
            // never to one the environment gave for another service.
            settings.unused = Some(format!(
                "GENAPI_TRUSTED_ORIGINS is not used: the service of profile {name} is, whose key goes only to the \
                 origins it trusts; add one with `genapi --profile {name} config set trusted_origins ORIGIN`, or \
                 pass --trust-origin ORIGIN for one command"
            ));
        }
        if !from_environment {
            match profile_key(name, profile) {
                Ok(key) => {
                    settings.key_kept_in = key.as_ref().map(|_| profiles::key_kept_in(profile));
                    settings.key = key.map(|value| Sourced { value, source: from() });
                }
                Err(problem) => settings.key_problem = Some(problem),
            }
            settings.base_url = profile.base_url.clone().map(|value| Sourced { value, source: from() });
            settings.regional_base_url = profile
                .regional_base_url
                .clone()
                .map(|value| Sourced { value, source: from() });
            settings.trusted_origins = profile
                .trusted_origins
                .iter()
                .map(|value| Sourced {
                    value: value.clone(),
                    source: from(),
                })
                .collect();
        }
        settings.model = profile.model.clone().map(|value| Sourced { value, source: from() });
        settings.out = profile.out.clone().map(|value| Sourced {
            value: profiles::expand_home(&value),
            source: from(),
        });
    }
    Ok(settings)
}

/// `GENAPI_TRUSTED_ORIGINS`'s comma-separated origins, each with its source.
fn origins_of(list: Option<Sourced<String>>) -> Vec<Sourced<String>> {
    let Some(list) = list else { return Vec::new() };
    list.value
        .split(',')
        .map(str::trim)
        .filter(|origin| !origin.is_empty())
        .map(|origin| Sourced {
            value: origin.to_string(),
            source: list.source.clone(),
        })
        .collect()
}

/// The config file read and parsed; what is wrong with the file as a
/// whole, said with its path (a broken profile is kept, to be said when it
/// is used).
fn read_file(path: &Path) -> Result<ConfigFile, Failure> {
    profiles::read_file(path).map_err(Failure::usage)
}

/// A variable's name as shown: itself when it says it holds a secret (as
/// `WORK_GENAPI_KEY` does), else words that do not show it, in case a key
/// was written in its place.
pub fn shown_variable(name: &str) -> String {
    if profiles::is_variable_name(name) && profiles::names_a_secret(name) {
        name.to_string()
    } else {
        "key_env names (its name is shown only when it ends in _KEY, _TOKEN, _SECRET or _PASSWORD)".to_string()
    }
}

/// The variable naming the ledger a batch keeps its records in; its
/// address may carry the ledger's password.
pub const LEDGER_VARIABLE: &str = "GENAPI_LEDGER_URL";

/// Variables that hold a password or key by the convention of the program
/// that reads them, though their names do not end as [`profiles::names_a_secret`]
/// looks for (`PGPASSWORD`, which PostgreSQL's clients read).
const SECRETS_BY_CONVENTION: [&str; 3] = ["PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH"];

/// Whether the variable `name` of the environment, set to `value`, may
/// hold a secret: its name says so ([`profiles::names_a_secret`]), it is the ledger's
/// address or a variable that holds a password by convention (`PGPASSWORD`),
/// or its value holds an address with a password (`user:password@`), as
/// `DATABASE_URL=postgres://u:pw@host/db` does.
pub fn may_hold_a_secret(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    profiles::names_a_secret(name)
        || upper == LEDGER_VARIABLE
        || SECRETS_BY_CONVENTION.contains(&upper.as_str())
        || SECRET_WORDS.iter().any(|word| upper.contains(word))
        || SECRET_ENDS.iter().any(|end| upper.ends_with(end))
        || holds_an_address_with_a_password(value)
        || holds_a_password_setting(value)
}

/// Words that make any variable's name one that may hold a secret, where
/// they appear (`APIKEY`, `DB_PASSWD`, `MY_SECRET_X`).
const SECRET_WORDS: [&str; 6] = ["PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "API_KEY"];

/// Ends of a name that make it one that may hold a secret (`DB_PASS`,
/// `DB_PWD`, `NPM_CONFIG__AUTH`, `CLOUD_CREDENTIALS`); `PWD` and
/// `XAUTHORITY`, which do not end so, are left to the program.
const SECRET_ENDS: [&str; 5] = ["_PASS", "_PWD", "_AUTH", "_CREDENTIALS", "_CREDENTIAL"];

/// Whether `text` sets a password as connection strings do
/// (`password=…`, `pwd=…`, in a libpq or ODBC string or a URL's query).
fn holds_a_password_setting(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["password=", "passwd=", "pwd="]
        .iter()
        .any(|setting| lower.contains(setting))
}

/// Whether `text` holds an address whose authority carries a password
/// (`scheme://user:password@host`, `redis://:password@host`), anywhere in
/// it: a list of addresses, or one inside other words.
fn holds_an_address_with_a_password(text: &str) -> bool {
    text.match_indices("://").any(|(at, mark)| {
        let rest = &text[at + mark.len()..];
        // Up to its path: a password's `?` or `#` (which an address should
        // escape, and a hand-written one may not) does not end it early.
        let end = rest
            .find(|c: char| matches!(c, '/' | '\\') || c.is_whitespace())
            .unwrap_or(rest.len());
        rest[..end].rfind('@').is_some_and(|user_at| {
            let user = &rest[..user_at];
            // A password, or a token given as the user (`https://ghp_…@host`).
            user.contains(':') || crate::key_shape::looks_like_a_key(user)
        })
    })
}

/// The key a profile names, from the process's variables or its file
/// ([`profiles::profile_key`]).
pub fn profile_key(name: &str, profile: &Profile) -> Result<Option<Key>, String> {
    let key = profiles::profile_key(name, profile, variable)?;
    Ok(key.map(|key| Key(key.expose().to_string())))
}

/// `genapi config`: the settings and where each came from, in a fixed
/// order; the key as set or not, never its value; addresses without the
/// secrets they may carry. `flag_origins` are the `--trust-origin` flags.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub fn show(settings: &Settings, flag_origins: &[String], json: bool, uses_mock: bool) {
    let sourced = |value: String, source: &Source| serde_json::json!({"value": value, "from": source.to_string()});
    let service = if settings.broken.is_some() {
        "none: the profile cannot be used (see profile)".to_string()
    } else if uses_mock {
        "the built-in mock (a test double)".to_string()
    } else {
        match settings.builder() {
            Ok(_) => "configured".to_string(),
            Err(why) => format!("incomplete: {}", out::clean(&why)),
        }
    };
    let mut origins: Vec<serde_json::Value> = settings
        .trusted_origins
        .iter()
        .map(|o| sourced(genapi_text::shown_address(&o.value), &o.source))
        .collect();
    origins.extend(
        flag_origins
            .iter()
            .map(|origin| sourced(genapi_text::shown_address(origin), &Source::Flag("--trust-origin"))),
    );
    let api_key = match (&settings.key, &settings.key_problem) {
        (Some(key), _) => sourced("set".into(), &key.source),
        (None, Some(problem)) => serde_json::json!({"value": "not set", "problem": out::clean(problem)}),
        (None, None) => serde_json::Value::Null,
    };
    let null = serde_json::Value::Null;
    let fields: Vec<(&str, serde_json::Value)> = vec![
        (
            "config_file",
            settings.file.as_ref().map_or(
                null.clone(),
                |(path, found)| serde_json::json!({"path": out::clean(&path.display().to_string()), "found": found}),
            ),
        ),
        (
            "profile",
            settings.profile.as_ref().map_or(null.clone(), |p| {
                let mut shown = sourced(out::clean(&p.value), &p.source);
                if let Some(why) = &settings.broken {
                    shown["problem"] = serde_json::Value::String(out::clean(why));
                }
                shown
            }),
        ),
        ("service", serde_json::Value::String(service)),
        (
            "base_url",
            settings.base_url.as_ref().map_or(null.clone(), |b| {
                sourced(genapi_text::shown_address(&b.value), &b.source)
            }),
        ),
        (
            "regional_base_url",
            settings.regional_base_url.as_ref().map_or(null.clone(), |b| {
                sourced(genapi_text::shown_address(&b.value), &b.source)
            }),
        ),
        ("trusted_origins", serde_json::Value::Array(origins)),
        ("api_key", api_key),
        (
            "model",
            settings
                .model
                .as_ref()
                .map_or(null.clone(), |m| sourced(out::clean(&m.value), &m.source)),
        ),
        (
            "out",
            settings.out.as_ref().map_or(null.clone(), |o| {
                sourced(out::clean(&o.value.display().to_string()), &o.source)
            }),
        ),
    ];
    let mut fields = fields;
    if let Some(note) = &settings.overridden {
        fields.push(("note", serde_json::Value::String(note.clone())));
    }
    if let Some(unused) = &settings.unused {
        fields.push(("unused", serde_json::Value::String(unused.clone())));
    }
    if json {
        let object: serde_json::Map<String, serde_json::Value> = fields
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        out::out(&serde_json::Value::Object(object).to_string());
        return;
    }
    for (name, value) in fields {
        let text = match value {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(text) => text,
            serde_json::Value::Array(items) if items.is_empty() => "-".to_string(),
            serde_json::Value::Array(items) => items.iter().map(one_line).collect::<Vec<_>>().join("; "),
            other => one_line(&other),
        };
        out::out(&out::clean(&format!("{name}: {text}")));
    }
}

/// A shown value on one line: `VALUE (from SOURCE)`, a key not set with
/// why, or a file's path and whether it was found.
fn one_line(value: &serde_json::Value) -> String {
    let text = |key: &str| value.get(key).and_then(serde_json::Value::as_str).map(str::to_string);
    match (text("value"), text("from"), text("problem"), text("path")) {
        (Some(v), Some(from), Some(problem), _) => format!("{v} (from {from}), broken: {problem}"),
        (Some(v), Some(from), None, _) => format!("{v} (from {from})"),
        (Some(v), None, Some(problem), _) => format!("{v}: {problem}"),
        (_, _, _, Some(path)) => {
            let found = value.get("found").and_then(serde_json::Value::as_bool) == Some(true);
            format!("{path} ({})", if found { "found" } else { "not there" })
        }
        _ => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Learned durations are kept under the service's addresses however
    /// they were written: the same set of trusted origins in another order
    /// or spelling is the same service.
    #[test]
    fn a_service_s_addresses_are_one_text_however_written() {
        let settings = |base: &str, origins: &[&str]| Settings {
            base_url: Some(Sourced {
                value: base.to_string(),
                source: Source::Environment("GENAPI_BASE_URL".into()),
            }),
            trusted_origins: origins
                .iter()
                .map(|origin| Sourced {
                    value: origin.to_string(),
                    source: Source::Environment("GENAPI_TRUSTED_ORIGINS".into()),
                })
                .collect(),
            ..Settings::default()
        };
        let one = settings(
            "https://api.example.com",
            &["https://a.example.com", "https://b.example.com"],
        );
        let other = settings(
            "HTTPS://api.example.com/",
            &["https://b.example.com/", "https://A.example.com"],
        );
        assert_eq!(one.service_addresses(), other.service_addresses());
        assert_eq!(
            one.service_addresses(),
            "https://api.example.com trusted=https://a.example.com,https://b.example.com"
        );
    }

    #[test]
    fn a_key_is_never_shown() {
        let key = Key("sk-very-secret".into());
        assert_eq!(format!("{key:?}"), "Key(redacted)");
        let settings = Settings {
            key: Some(Sourced {
                value: key,
                source: Source::Profile("work".into()),
            }),
            ..Settings::default()
        };
        assert!(!format!("{settings:?}").contains("sk-very-secret"));
    }

    /// A variable may hold a secret by its name, by convention, or by an
    /// address with a password in its value; an address without one, and
    /// a plain value, are kept.
    #[test]
    fn a_variable_may_hold_a_secret_by_its_name_or_its_value() {
        for (name, value) in [
            ("DEPLOY_TOKEN", "x"),
            ("PGPASSWORD", "pg-canary"),
            ("pgpassword", "pg-canary"),
            ("GENAPI_LEDGER_URL", "postgres://127.0.0.1/db"),
            ("DATABASE_URL", "postgres://u:pw@host/db"),
            ("CACHE", "redis://:pw@cache:6379"),
            ("MIRRORS", "https://a.example.com, https://me:pw@b.example.com/x"),
            ("HAND_WRITTEN", "postgres://u:p?w#d@host/db"),
            ("PGURL", "postgres://u@db/x?password=pg-canary"),
            ("DSN", "host=db user=u password=pg-canary"),
            (
                "GITREMOTE",
                "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/x",
            ),
            ("APIKEY", "x"),
            ("PASSWORD", "x"),
            ("DB_PASS", "x"),
            ("DB_PWD", "x"),
            ("NPM_CONFIG__AUTH", "x"),
        ] {
            assert!(may_hold_a_secret(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("HOME", "/home/ada"),
            ("DATABASE_URL", "postgres://u@host/db"),
            ("GENAPI_BASE_URL", "https://api.example.com/v1?at=12:00"),
            ("MAILTO", "ada@example.com"),
            ("PAGE", "https://example.com/people/ada:1@home"),
            ("PWD", "/home/ada/shots"),
            ("XAUTHORITY", "/run/user/1000/xauth"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
            ("REMOTE", "ssh://git@github.com/x"),
        ] {
            assert!(!may_hold_a_secret(name, value), "{name}={value}");
        }
    }
}
