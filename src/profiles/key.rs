//! The key a profile names: the variable that holds it, or a file only its
//! owner can read. The key is never written in the config file, and what
//! could be a key (a name written where a variable's name belongs, a path
//! that is no file) is never quoted back.

use std::path::{Path, PathBuf};

use super::file::Profile;
use crate::ApiKey;

/// The largest key file read.
pub const KEY_FILE_LIMIT: u64 = 4096;

/// The key the profile `name` names: from its variable (read by `read`),
/// or from its file; why it cannot be had, without ever quoting what could
/// be the key itself. `Ok(None)` when the profile names no key.
///
/// ```
/// use genapi::profiles::{parse, profile_key};
/// let file = parse("[profiles.work]\nkey_env = \"WORK_GENAPI_KEY\"\n").unwrap();
/// let work = file.profiles["work"].as_ref().unwrap();
/// let key = profile_key("work", work, |name| (name == "WORK_GENAPI_KEY").then(|| "k-1".to_string()));
/// assert_eq!(key.unwrap().unwrap().expose(), "k-1");
/// let unset = profile_key("work", work, |_| None).unwrap_err();
/// assert_eq!(unset, "profile work: key_env names WORK_GENAPI_KEY, which is not set");
/// ```
pub fn profile_key(
    name: &str,
    profile: &Profile,
    read: impl Fn(&str) -> Option<String>,
) -> Result<Option<ApiKey>, String> {
    let name = genapi_text::clean(name);
    if let Some(variable_name) = &profile.key_env {
        return match read(variable_name).filter(|value| !value.trim().is_empty()) {
            Some(key) => Ok(Some(ApiKey::new(key.trim()))),
            None if is_variable_name(variable_name) && names_a_secret(variable_name) => Err(format!(
                "profile {name}: key_env names {variable_name}, which is not set"
            )),
            None if is_variable_name(variable_name) => Err(format!(
                "profile {name}: the variable key_env names is not set (its name is shown only when it ends in _KEY, \
                 _TOKEN, _SECRET or _PASSWORD, in case a key was written in its place)"
            )),
            None => Err(format!(
                "profile {name}: key_env does not name a variable (capital letters, digits and _); name the variable \
                 that holds the key, never the key itself"
            )),
        };
    }
    let Some(file) = &profile.key_file else { return Ok(None) };
    let path = expand_home(file);
    // A key pasted where its file's path belongs names no file: its value
    // is shown only once it is seen to be a path.
    if std::fs::symlink_metadata(&path).is_err() {
        return Err(format!(
            "profile {name}: key_file names no file that exists (not shown, in case it is the key itself); name a \
             file only you can read, which holds the key"
        ));
    }
    let shown = genapi_text::clean(&path.display().to_string());
    let refused = |why: String| format!("profile {name}: key_file {shown}: {}", genapi_text::clean(&why));
    let text = genapi_files::read_sensitive_text(&path, KEY_FILE_LIMIT, genapi_files::Sensitivity::HoldsASecret)
        .map_err(|e| refused(e.reason()))?;
    let key = text.trim();
    if key.is_empty() {
        return Err(refused("the file is empty".into()));
    }
    Ok(Some(ApiKey::new(key)))
}

/// Where a profile keeps its key, in words a message may show: its
/// variable's name only when that says it holds a secret (as
/// [`profile_key`] shows it), its file from `~/` when in the home folder.
///
/// ```
/// use genapi::profiles::{key_kept_in, parse};
/// let file = parse("[profiles.work]\nkey_env = \"WORK_GENAPI_KEY\"\n").unwrap();
/// assert_eq!(key_kept_in(file.profiles["work"].as_ref().unwrap()), "key_env WORK_GENAPI_KEY");
/// ```
pub fn key_kept_in(profile: &Profile) -> String {
    match (&profile.key_env, &profile.key_file) {
        (Some(name), _) if is_variable_name(name) && names_a_secret(name) => format!("key_env {name}"),
        (Some(_), _) => "key_env".to_string(),
        (None, Some(file)) => format!(
            "key_file {}",
            genapi_text::clean(
                &under_home(&expand_home(file), dirs::home_dir().as_deref())
                    .display()
                    .to_string()
            )
        ),
        (None, None) => "no key".to_string(),
    }
}

/// A path inside the home folder written from `~/`, as a config file may
/// write it: the words naming a refused key travel into results files and
/// galleries that are shared, and the home folder's path names its user.
fn under_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match home.and_then(|home| path.strip_prefix(home).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => Path::new("~").join(rest),
        _ => path.to_path_buf(),
    }
}

/// A path with a leading `~/` read as the home folder.
pub fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), dirs::home_dir()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

/// Whether `text` looks like the name of an environment variable (and not
/// like a key written where its variable's name belongs): shown only then.
///
/// ```
/// assert!(genapi::profiles::is_variable_name("WORK_GENAPI_KEY"));
/// assert!(!genapi::profiles::is_variable_name("sk-live-1234"));
/// ```
pub fn is_variable_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && !text.starts_with(|c: char| c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether a variable's name says it holds a secret (`WORK_GENAPI_KEY`,
/// `GENAPI_MOCK_KEY`, `DB_PASSWORD`), so showing it shows a name, not a key
/// written where the name belongs.
///
/// ```
/// assert!(genapi::profiles::names_a_secret("WORK_GENAPI_KEY"));
/// assert!(!genapi::profiles::names_a_secret("HOME"));
/// ```
pub fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_PASSWORD"]
        .iter()
        .any(|end| name.ends_with(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_in_the_home_folder_is_named_from_it() {
        let home = Path::new("/home/ada");
        let shown = |path: &str| under_home(Path::new(path), Some(home)).display().to_string();
        assert_eq!(
            shown("/home/ada/.config/genapi/keys/work"),
            "~/.config/genapi/keys/work"
        );
        assert_eq!(
            shown("/home/adam/key"),
            "/home/adam/key",
            "another folder that begins alike"
        );
        assert_eq!(shown("/etc/genapi/key"), "/etc/genapi/key");
        assert_eq!(shown("/home/ada"), "/home/ada");
        assert_eq!(under_home(Path::new("/home/ada/k"), None), Path::new("/home/ada/k"));
    }
}
