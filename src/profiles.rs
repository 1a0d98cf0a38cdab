//! The config file of profiles, read alike by [`crate::Client::from_env`]
//! and the `genapi` command.
//!
//! A user who works with several services (or accounts) keeps each as a
//! named profile in `config.toml`, in the platform's config folder
//! (`~/.config/genapi/config.toml` on Linux; `GENAPI_CONFIG` names another
//! file), and picks one with `GENAPI_PROFILE` (the command's `--profile`
//! too):
//!
//! ```toml
//! default_profile = "work"
//!
//! [profiles.work]
//! base_url = "https://api.example.com"
//! trusted_origins = ["https://eu.api.example.com"]
//! key_env = "WORK_GENAPI_KEY"        # the key, by the variable that holds it
//! model = "gen-2-pro"                # the command's -m when not given
//! out = "shots"                      # the command's -o folder when not given
//!
//! [profiles.lab]
//! base_url = "https://lab.example.com"
//! key_file = "~/.config/genapi/lab.key"  # a file only you can read
//! ```
//!
//! The profile used is `GENAPI_PROFILE`'s, else the file's
//! `default_profile`, else one named `default`. The key is never written
//! in the file: a profile names the variable that holds it, or a file only
//! its owner can read (a file others can read is refused, as ssh refuses
//! such a key). Whoever can change the config file decides where the key
//! goes, so it must be the user's own (or root's) and writable by no one
//! else, after links; otherwise it is refused, before anything is sent.
//! Both rules are genapi-files' one rule for files that steer a secret.
//!
//! The service's address and the key come as a pair: when the environment
//! names a service ([`SERVICE_OVER_PROFILES`]), no profile's service
//! settings are used at all, so a profile's key is never sent to an
//! address the environment gave, nor the other way round. A profile with
//! a mistake fails only the programs that use it ([`parse`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

mod file;
mod key;

pub use file::{
    not_a_profiles_key_variable, parse, Broken, ConfigFile, KeyKeptAt, Profile, PROFILE_FIELDS, SERVICE_OVER_PROFILES,
};
pub use key::{expand_home, is_variable_name, key_kept_in, names_a_secret, profile_key, KEY_FILE_LIMIT};

/// The variable naming another config file.
pub const CONFIG_VARIABLE: &str = "GENAPI_CONFIG";
/// The variable naming the profile (the command's `--profile` wins).
pub const PROFILE_VARIABLE: &str = "GENAPI_PROFILE";
/// The largest config file read.
pub const FILE_LIMIT: u64 = 1 << 20;

/// The config file's path: the one `named` by [`CONFIG_VARIABLE`], else
/// `genapi/config.toml` in the platform's config folder (none when the
/// platform has none). The second value says whether it was named (a named
/// file must exist).
///
/// ```
/// use std::path::Path;
/// let (path, named) = genapi::profiles::file_path(Some("/etc/genapi.toml".into())).unwrap();
/// assert_eq!((path.as_path(), named), (Path::new("/etc/genapi.toml"), true));
/// ```
pub fn file_path(named: Option<OsString>) -> Option<(PathBuf, bool)> {
    if let Some(named) = named.filter(|named| !named.is_empty()) {
        return Some((PathBuf::from(named), true));
    }
    Some((dirs::config_dir()?.join("genapi").join("config.toml"), false))
}

/// The config file at `path` read and parsed, under the file policy for
/// files that steer a secret; what is wrong with the file as a whole, said
/// with its path (a broken profile is kept, to be said when it is used).
pub fn read_file(path: &Path) -> Result<ConfigFile, String> {
    let shown = genapi_text::clean(&path.display().to_string());
    // Whoever can change this file decides where the key goes.
    let text = genapi_files::read_sensitive_text(path, FILE_LIMIT, genapi_files::Sensitivity::SteersASecret)
        .map_err(|refused| format!("config file {shown}: {}", genapi_text::clean(&refused.reason())))?;
    parse(&text).map_err(|why| format!("config file {shown}, {why}"))
}

/// What chose a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChosenBy {
    /// The program's own choice (the command's `--profile`).
    Program,
    /// [`PROFILE_VARIABLE`].
    Variable,
    /// The config file's `default_profile`.
    DefaultProfile,
    /// Its name, `default`, in a config file without a `default_profile`.
    NamedDefault,
}

/// The profile to use, and what chose it: the `program`'s choice, else the
/// `variable`'s ([`PROFILE_VARIABLE`]), else the file's `default_profile`,
/// else a profile named `default` when the file `has_default`.
///
/// ```
/// use genapi::profiles::{choose, ChosenBy};
/// let chosen = choose(None, Some("lab".into()), Some("work"), false);
/// assert_eq!(chosen, Some(("lab".to_string(), ChosenBy::Variable)));
/// assert_eq!(choose(None, None, None, true), Some(("default".to_string(), ChosenBy::NamedDefault)));
/// assert_eq!(choose(None, None, None, false), None);
/// ```
pub fn choose(
    program: Option<&str>,
    variable: Option<String>,
    default_profile: Option<&str>,
    has_default: bool,
) -> Option<(String, ChosenBy)> {
    match (program, variable.filter(|name| !name.trim().is_empty())) {
        (Some(name), _) => Some((name.to_string(), ChosenBy::Program)),
        (None, Some(name)) => Some((name.trim().to_string(), ChosenBy::Variable)),
        (None, None) => match default_profile {
            Some(name) => Some((name.to_string(), ChosenBy::DefaultProfile)),
            None => has_default.then(|| ("default".to_string(), ChosenBy::NamedDefault)),
        },
    }
}
