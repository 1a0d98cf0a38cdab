//! `genapi login` and `genapi config set`: a profile made or changed in
//! the config file, which is otherwise kept as the user wrote it (other
//! profiles, comments, order and layout).
//!
//! The key itself is never written in the config file: `login` keeps a key
//! it is given in a file of its own beside the config file (`keys/NAME.key`)
//! and names that file in the profile (`key_file`), or names the file or
//! variable the user says holds it. Both files are written by genapi-files'
//! rule for files that steer or hold a secret: the user's alone (mode 600)
//! in a folder no one else may change, judged before the key is asked for
//! so a refused folder is left without a key in it. The file is checked as
//! every command reads it before it is written: a change that would break
//! the profile is refused, and the file stays as it was.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use toml_edit::{DocumentMut, Item, Table, TableLike};

use crate::key_shape::looks_like_a_key;
use crate::{code, config, key_input, out, Failure};
use genapi::profiles::{self, ConfigFile};

/// The fields that say what the key is: a profile has one at most.
const KEY_FIELDS: [&str; 4] = ["key_env", "key_file", "key", "api_key"];

/// What `genapi config` changes.
#[derive(Subcommand)]
pub enum ConfigChange {
    /// Set one field of a profile: the one --profile (or GENAPI_PROFILE) names, else the file's default_profile,
    /// else `default`; the file and the profile are made when missing. Never a key: name its variable (key_env)
    /// or its file (key_file), or use `genapi login`.
    Set {
        /// The field.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(profiles::PROFILE_FIELDS))]
        field: String,
        /// Its value (trusted_origins: origins separated by commas).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

/// `genapi login`'s options.
#[derive(Args)]
pub struct LoginArgs {
    /// The service's address, saved as the profile's base_url.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Name this file, which holds the key and only you can read, instead of being asked for the key.
    #[arg(long, value_name = "PATH", conflicts_with = "key_env")]
    pub key_file: Option<PathBuf>,
    /// Name this environment variable, which holds the key, instead of being asked for the key.
    #[arg(long, value_name = "NAME")]
    pub key_env: Option<String>,
}

/// The config file being changed, and the profile changed in it.
struct Editing {
    path: PathBuf,
    document: DocumentMut,
    read: ConfigFile,
    profile: String,
    /// Whether the profile was named (`--profile`, `GENAPI_PROFILE`), not
    /// taken as the default one.
    named: bool,
}

/// The name a file's first profile gets when none was named and its
/// service is on this machine: not `default`, which every command would
/// use after the mock it names has ended.
const LOCAL_PROFILE: &str = "local";

fn shown(path: &Path) -> String {
    out::clean(&path.display().to_string())
}

/// The config file as it is (none yet is an empty one), and the profile
/// to change; a file that cannot be read, or is broken as a whole, is
/// left as it is.
fn open(flag_profile: Option<&str>) -> Result<Editing, Failure> {
    let Some((path, _)) = config::file_path() else {
        return Err(Failure::usage(
            "there is no config folder to keep the file in; name the file with GENAPI_CONFIG",
        ));
    };
    let file = shown(&path);
    // Written as a file of genapi's own: a link is not replaced by one.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Failure::usage(format!(
            "config file {file} is a link; change the file it leads to by hand, or name that file with GENAPI_CONFIG"
        )));
    }
    // Refused now, before a key is asked for or kept beside it.
    genapi_files::may_write_private(&path)
        .map_err(|refused| Failure::new(code::OTHER, crate::files::said(&refused)))?;
    let text = if genapi_files::is_taken(&path) {
        genapi_files::read_sensitive_text(&path, profiles::FILE_LIMIT, genapi_files::Sensitivity::SteersASecret)
            .map_err(|refused| Failure::usage(format!("config file {file}: {}", out::clean(&refused.reason()))))?
    } else {
        String::new()
    };
    let left = "it is left as it is";
    let read = profiles::parse(&text).map_err(|why| Failure::usage(format!("config file {file}, {why}; {left}")))?;
    let document: DocumentMut = text
        .parse()
        .map_err(|_| Failure::usage(format!("config file {file} cannot be edited; {left}")))?;
    let profile = config::profile_to_change(flag_profile, read.default_profile.as_deref());
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if profile.is_empty() || profile.len() > 64 || !profile.chars().all(plain) {
        return Err(Failure::usage(
            "a profile's name is ASCII letters, digits, - and _ (at most 64): give such a name with --profile",
        ));
    }
    let named = flag_profile.is_some()
        || config::variable(profiles::PROFILE_VARIABLE).is_some()
        || read.default_profile.is_some();
    Ok(Editing {
        path,
        document,
        read,
        profile,
        named,
    })
}

impl Editing {
    /// The profile's table, made when missing.
    fn fields(&mut self) -> Result<&mut dyn TableLike, Failure> {
        let profiles = self.document.entry("profiles").or_insert_with(|| {
            // `[profiles.NAME]` alone, without a `[profiles]` line.
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        });
        let not_a_table = || Failure::usage("the config file's profiles are not tables; change it by hand");
        profiles
            .as_table_like_mut()
            .ok_or_else(not_a_table)?
            .entry(&self.profile)
            .or_insert_with(|| Item::Table(Table::new()))
            .as_table_like_mut()
            .ok_or_else(not_a_table)
    }

    /// Gives the profile being made another name (its table moved).
    fn rename_to(&mut self, name: &str) {
        if let Some(profiles) = self.document.get_mut("profiles").and_then(Item::as_table_like_mut) {
            if let Some(table) = profiles.remove(&self.profile) {
                profiles.insert(name, table);
            }
        }
        self.profile = name.to_string();
    }

    /// Sets `field`; a field naming the key replaces any other that does.
    fn set(&mut self, field: &str, value: Item) -> Result<(), Failure> {
        let fields = self.fields()?;
        if KEY_FIELDS.contains(&field) {
            for other in KEY_FIELDS {
                fields.remove(other);
            }
        }
        fields.insert(field, value);
        Ok(())
    }

    /// A setting goes to a profile the file already uses, or to the first:
    /// a file whose profiles are all named only when asked for (`local`,
    /// kept for a service on this machine) gets no `default` profile from
    /// a change that named none, which every command would then use.
    fn chosen_or_first(&self) -> Result<(), Failure> {
        if self.named || self.read.profiles.is_empty() || self.read.profiles.contains_key(&self.profile) {
            return Ok(());
        }
        let known: Vec<&str> = self.read.profiles.keys().map(String::as_str).collect();
        Err(Failure::usage(format!(
            "which profile? {} has {} and none is used without --profile; name it (`genapi --profile {} config set …`), or name `--profile {}` to make a profile every command uses; nothing was written",
            shown(&self.path),
            match known.as_slice() {
                [one] => format!("profile {}", out::clean(one)),
                _ => format!("profiles {}", out::clean(&known.join(", "))),
            },
            out::clean(known.first().copied().unwrap_or(LOCAL_PROFILE)),
            self.profile,
        )))
    }

    /// The first profile of a file, not named by `--profile`, for a service
    /// on this machine (`local`) is named `local` rather than `default`,
    /// which every command would use: settled before anything is named
    /// after it (the key's file).
    fn named_for(&mut self, local: bool) {
        if local && !self.named && self.read.profiles.is_empty() && self.profile == "default" {
            self.rename_to(LOCAL_PROFILE);
        }
    }

    /// Checks the changed file as every command reads it, writes it, and
    /// says so with `done`; when `key_changed`, says at once what keeps the
    /// key from being had, if anything.
    fn save(mut self, done: &str, key_changed: bool) -> Result<(), Failure> {
        // The first profile of a file is the one used without --profile,
        // unless its service is on this machine: a mock's address outlives
        // the mock, and every command would go to it after it ended.
        let local = crate::learned::loopback(self.fields()?.get("base_url").and_then(|url| url.as_str()));
        self.named_for(local);
        let first = self.read.profiles.is_empty() && self.read.default_profile.is_none() && self.profile != "default";
        if first && !local {
            self.document
                .insert("default_profile", toml_edit::value(self.profile.clone()));
        }
        let text = self.document.to_string();
        let file = shown(&self.path);
        let unchanged = "the config file is left as it is";
        let read = profiles::parse(&text).map_err(|why| Failure::usage(format!("{why}; {unchanged}")))?;
        let profile = match read.profiles.get(&self.profile) {
            Some(Ok(profile)) => profile,
            Some(Err(broken)) => {
                return Err(Failure::usage(format!(
                    "profile {} would not be usable (line {}: {}); {unchanged}: correct line {} of {file} in an editor",
                    self.profile, broken.line, broken.why, broken.line
                )))
            }
            None => {
                return Err(Failure::usage(format!(
                    "profile {} was not made; {unchanged}",
                    self.profile
                )))
            }
        };
        genapi_files::write_private(&self.path, text.as_bytes(), genapi_files::Existing::Replace)
            .map_err(|refused| Failure::new(code::OTHER, crate::files::said(&refused)))?;
        let default = match (first, local) {
            (true, false) => "; it is the default profile".to_string(),
            (true, true) => format!(
                "; it is not made the default profile, since its service is on this machine (a mock ends, its \
                 address stays): use it with --profile {} (or GENAPI_PROFILE={})",
                self.profile, self.profile
            ),
            _ => String::new(),
        };
        out::out(&format!("profile {} saved in {file}: {done}{default}", self.profile));
        // Said now rather than at the next command.
        if let (true, Err(problem)) = (key_changed, config::profile_key(&self.profile, profile)) {
            out::err(&format!("note: {problem}"));
        }
        Ok(())
    }
}

/// `genapi config set FIELD VALUE`. No message says the value back, for
/// any field: it may be a key pasted in the wrong place. A value with the
/// shape of a key ([`looks_like_a_key`]), or holding the key the command
/// would find (whatever its shape, wherever it is kept), is refused for
/// every field that does not name the key, before anything is written.
pub fn set(flag_profile: Option<&str>, change: ConfigChange) -> Result<(), Failure> {
    let ConfigChange::Set { field, value } = change;
    let mut editing = open(flag_profile)?;
    editing.chosen_or_first()?;
    // Every key the command could find, whether or not the settings can be
    // read whole (a file being mended may not be).
    let mut keys = config::Key::all_known(&editing.read.profiles);
    keys.extend(
        config::resolve(flag_profile)
            .ok()
            .and_then(|settings| settings.key)
            .map(|key| key.value),
    );
    let a_key = looks_like_a_key(&value) || keys.iter().any(|key| key.is_in(&value));
    if !KEY_FIELDS.contains(&field.as_str()) && a_key {
        return Err(Failure::usage(format!(
            "{field} is not set: what was given has the shape of a key, or holds the key in use (it is not shown, and \
             nothing was written). A \
             key is never written in the config file: run `genapi login` to keep it in a file only you can read, or \
             name where it is kept with `genapi config set key_env NAME` (the variable that holds it) or `genapi \
             config set key_file PATH` (a file only you can read)"
        )));
    }
    if field == "model" {
        // Refused now, with the models there are, rather than at generate.
        let catalog = crate::catalog::load().map_err(Failure::usage)?;
        catalog.find(&value).map_err(|unknown| {
            let known = match &unknown.suggestion {
                Some(suggestion) => format!("did you mean {suggestion}?"),
                None => format!("known models: {}", unknown.known.join(", ")),
            };
            Failure::usage(format!(
                "unknown model (what was given is not shown, in case it is a key); {} (see `genapi models`)",
                out::clean(&known)
            ))
        })?;
    }
    let item = match field.as_str() {
        "base_url" | "regional_base_url" => toml_edit::value(address(&field, &value)?),
        "trusted_origins" => {
            let origins: Result<toml_edit::Array, Failure> = value
                .split(',')
                .map(str::trim)
                .filter(|origin| !origin.is_empty())
                .map(|origin| address(&field, origin))
                .collect();
            toml_edit::value(origins?)
        }
        "key_env" => toml_edit::value(variable_name(&value)?),
        "key_file" => toml_edit::value(key_file(Path::new(&value))?),
        _ => toml_edit::value(value.clone()),
    };
    editing.set(&field, item)?;
    editing.save(&format!("{field} set"), KEY_FIELDS.contains(&field.as_str()))
}

/// `genapi login`: the profile's key (asked for, read from stdin, or the
/// file or variable named) and, with `--base-url`, its service. A key
/// without its service is refused before anything is asked or written:
/// every command would then stop at the half configuration.
pub fn login(flag_profile: Option<&str>, args: LoginArgs) -> Result<(), Failure> {
    let mut editing = open(flag_profile)?;
    let base_url = args.base_url.map(|url| address("--base-url", &url)).transpose()?;
    let has_base_url = matches!(editing.read.profiles.get(&editing.profile), Some(Ok(p)) if p.base_url.is_some());
    if base_url.is_none() && !has_base_url {
        return Err(Failure::usage(format!(
            "profile {} has no service (base_url) to send the key to; give its address: genapi login --profile {} \
             --base-url URL (nothing was written)",
            editing.profile, editing.profile
        )));
    }
    let service = base_url
        .clone()
        .or_else(|| match editing.read.profiles.get(&editing.profile) {
            Some(Ok(profile)) => profile.base_url.clone(),
            _ => None,
        });
    editing.named_for(crate::learned::loopback(service.as_deref()));
    let (field, reference, said) = match (args.key_file, args.key_env) {
        (Some(file), _) => {
            let path = key_file(&file)?;
            let said = format!("the key in the file {}", out::clean(&path));
            ("key_file", path, said)
        }
        (None, Some(name)) => {
            let name = variable_name(&name)?;
            (
                "key_env",
                name.clone(),
                format!("the key in the variable {}", config::shown_variable(&name)),
            )
        }
        (None, None) => {
            let key = key_input::read_key(&format!("API key for profile {} (not shown): ", editing.profile))?;
            let kept = kept_key_file(&editing.path, &editing.profile);
            genapi_files::write_private(&kept, format!("{key}\n").as_bytes(), genapi_files::Existing::Replace)
                .map_err(|refused| Failure::new(code::OTHER, crate::files::said(&refused)))?;
            let shown_kept = shown(&kept);
            let path = kept.to_string_lossy().into_owned();
            (
                "key_file",
                path,
                format!("the key, kept in {shown_kept} (readable by you alone)"),
            )
        }
    };
    editing.set(field, toml_edit::value(reference))?;
    if let Some(base_url) = base_url {
        editing.set("base_url", toml_edit::value(base_url))?;
    }
    editing.save(&said, true)
}

/// Where `login` keeps a profile's key: `keys/NAME.key` beside the config
/// file.
fn kept_key_file(config_file: &Path, profile: &str) -> PathBuf {
    let folder = config_file.parent().unwrap_or(Path::new("."));
    folder.join("keys").join(format!("{profile}.key"))
}

/// An `http` or `https` address, as given; what is wrong is said without
/// the value, which could be a key pasted in the wrong place.
fn address(what: &str, text: &str) -> Result<String, Failure> {
    match url::Url::parse(text.trim()) {
        // A user name, a password or a query in a service's address is a
        // credential written where none belongs (the library refuses such
        // an address when it is used): refused before it is kept.
        Ok(url)
            if !url.username().is_empty()
                || url.password().is_some()
                || url.query().is_some()
                || url.fragment().is_some()
                || url.path().contains(';')
                || url.path().to_ascii_lowercase().contains("%3f") =>
        {
            Err(Failure::usage(format!(
                "{what} takes an address without a user name, password, query, fragment or path parameter (what was given \
                 is not shown, in case it holds a secret); a key goes in with `genapi login`"
            )))
        }
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(text.trim().to_string()),
        _ => Err(Failure::usage(format!(
            "{what} takes an http or https address (what was given is not shown, in case it is a key)"
        ))),
    }
}

/// The name of an environment variable, never a key written in its place.
fn variable_name(text: &str) -> Result<String, Failure> {
    if profiles::not_a_profiles_key_variable(text).is_some() {
        return Err(Failure::usage(format!(
            "key_env may not name {}: each picks the environment's service over every profile; name one of the \
             profile's own (key_env = \"MYSERVICE_KEY\")",
            profiles::SERVICE_OVER_PROFILES.join(" or ")
        )));
    }
    // A name with the shape of a key (a UUID in capitals, a random run) is
    // a key pasted where its variable's name belongs.
    if profiles::is_variable_name(text) && !looks_like_a_key(text) {
        return Ok(text.to_string());
    }
    Err(Failure::usage(
        "key_env takes the name of the variable that holds the key (capital letters, digits and _), never the key \
         itself; what was given is not shown",
    ))
}

/// The path of a file that holds the key, which must exist: made absolute
/// (a command run in another folder reads it), or kept under `~/`.
fn key_file(path: &Path) -> Result<String, Failure> {
    if !genapi_files::is_taken(&profiles::expand_home(path)) {
        return Err(Failure::usage(
            "key_file names no file that exists (not shown, in case it is the key itself); name a file only you can \
             read, which holds the key",
        ));
    }
    if path.starts_with("~") {
        return Ok(path.to_string_lossy().into_owned());
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(absolute.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::variable_name;

    #[test]
    fn a_key_pasted_where_its_variables_name_belongs_is_refused() {
        for pasted in ["AC8A2F3E9B1D4B6C9D7E5A4F3B2C1D0E", "A7K3M9Q2X8B4N6P1Z5R0T2W9"] {
            assert!(variable_name(pasted).is_err(), "{pasted}");
        }
        for name in ["MYSERVICE_KEY", "STUDIO_WORK", "IMAGES_API_KEY_2"] {
            assert_eq!(variable_name(name).ok().as_deref(), Some(name));
        }
    }
}
