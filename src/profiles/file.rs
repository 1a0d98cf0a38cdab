//! The config file as read: the file as a whole, then each profile on its
//! own, so a profile with a mistake (a bad value, a misspelt field, a key
//! written in the file) fails only the commands that use it. The others,
//! and `genapi config`, keep working; the broken profile is named with the
//! line of its mistake. What is wrong with the file as a whole (it is not
//! TOML, or has a field outside the profiles) still stops every command
//! that reads it.
//!
//! Nothing that could be a key is quoted back: a parser's message keeps
//! only the names of fields ([`unquoted`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::IgnoredAny;
use serde::Deserialize;
use toml::de::{DeValue, ValueDeserializer};
use toml::Spanned;

/// The config file: the profile used when none is named, and each profile
/// as written or what is wrong with it.
#[derive(Debug, Default)]
pub struct ConfigFile {
    /// The profile used when none is named.
    pub default_profile: Option<String>,
    /// Each profile, or why it cannot be used.
    pub profiles: BTreeMap<String, Result<Profile, Broken>>,
}

/// The file's own fields, profiles aside (read as a whole first).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    default_profile: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    profiles: Option<IgnoredAny>,
}

/// One profile, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The service's address.
    pub base_url: Option<String>,
    /// The regional polling host.
    pub regional_base_url: Option<String>,
    /// More origins the key may go to.
    #[serde(default)]
    pub trusted_origins: Vec<String>,
    /// The variable that holds the key.
    pub key_env: Option<String>,
    /// A file holding the key, readable by its owner alone.
    pub key_file: Option<PathBuf>,
    /// `generate`'s and `submit`'s model when `-m` is not given.
    pub model: Option<String>,
    /// `generate`'s folder when `-o` is not given.
    pub out: Option<PathBuf>,
    /// Refused: a key is never written in the file. Read only to say so.
    key: Option<IgnoredAny>,
    /// Refused, as `key`.
    api_key: Option<IgnoredAny>,
}

/// Why a profile cannot be used: its mistake and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The line (from 1) of the mistake.
    pub line: usize,
    /// What is wrong, without any value that could be a key.
    pub why: String,
    /// Where the profile says its key is kept, as written, though the
    /// profile cannot be used: a check that no setting holds a key still
    /// reads the key kept there.
    pub key_kept_at: KeyKeptAt,
}

/// The places a profile names for its key, as written in the file (not
/// shown by Debug: a key may have been written where a name belongs).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyKeptAt {
    /// The `key_env` written, if a string.
    pub key_env: Option<String>,
    /// The `key_file` written, if a string.
    pub key_file: Option<PathBuf>,
}

impl std::fmt::Debug for KeyKeptAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyKeptAt(not shown)")
    }
}

/// What is wrong with the file as a whole, with its line when known.
pub fn parse(text: &str) -> Result<ConfigFile, String> {
    let head: Head = toml::from_str(text).map_err(|e| said_at(text, e.span(), e.message()))?;
    let root = toml::de::DeTable::parse(text).map_err(|e| said_at(text, e.span(), e.message()))?;
    let mut profiles = BTreeMap::new();
    let written = root.get_ref().iter().find(|(name, _)| name.get_ref() == "profiles");
    if let Some((_, table)) = written {
        let Some(entries) = table.get_ref().as_table() else {
            return Err(said_at(text, Some(table.span()), "profiles must be a table"));
        };
        for (name, profile) in entries.iter() {
            profiles.insert(name.get_ref().to_string(), read_profile(text, profile));
        }
    }
    Ok(ConfigFile {
        default_profile: head.default_profile,
        profiles,
    })
}

/// One profile read on its own; its mistake with its line.
fn read_profile(text: &str, written: &Spanned<DeValue<'_>>) -> Result<Profile, Broken> {
    let written_string = |field: &str| {
        written
            .get_ref()
            .as_table()
            .and_then(|fields| fields.get(field))
            .and_then(|value| value.get_ref().as_str())
            .map(str::to_string)
    };
    let key_kept_at = KeyKeptAt {
        key_env: written_string("key_env"),
        key_file: written_string("key_file").map(PathBuf::from),
    };
    let broken = |span: Option<std::ops::Range<usize>>, why: String| Broken {
        line: line_of(text, span.unwrap_or_else(|| written.span()).start),
        why,
        key_kept_at: key_kept_at.clone(),
    };
    let profile = Profile::deserialize(ValueDeserializer::from(written.clone()))
        .map_err(|e| broken(e.span(), said_of_a_profile(e.message())))?;
    if profile.key.is_some() || profile.api_key.is_some() {
        let at = written.get_ref().as_table().and_then(|fields| {
            fields
                .iter()
                .find(|(name, _)| matches!(name.get_ref().as_ref(), "key" | "api_key"))
                .map(|(name, _)| name.span())
        });
        return Err(broken(
            at,
            "a key is never written in the config file; name the variable that holds it (key_env = \"NAME\") or a \
             file only you can read (key_file = \"PATH\"), as `genapi login` does"
                .into(),
        ));
    }
    if profile.key_env.is_some() && profile.key_file.is_some() {
        return Err(broken(None, "key_env and key_file both name the key; keep one".into()));
    }
    if let Some(why) = profile.key_env.as_deref().and_then(not_a_profiles_key_variable) {
        return Err(broken(None, why));
    }
    Ok(profile)
}

/// A parser's message about a profile: a misspelt field is named (when it
/// has a field's shape) with the fields a profile may have, the one list
/// [`PROFILE_FIELDS`] (the parser's own list has the refused `key` too).
fn said_of_a_profile(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return unquoted(message);
    };
    let name = rest.split('`').next().unwrap_or_default();
    let name = if is_field_like(name) { name } else { "…" };
    format!(
        "unknown field `{name}`; a profile's fields are {}",
        PROFILE_FIELDS.join(", ")
    )
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    before.matches('\n').count() + 1
}

/// A parser's message for the file as a whole, with its line.
fn said_at(text: &str, span: Option<std::ops::Range<usize>>, message: &str) -> String {
    match span {
        Some(span) => format!("line {}: {}", line_of(text, span.start), unquoted(message)),
        None => unquoted(message),
    }
}

/// A parser's message without the values it quotes: a key written under
/// the wrong name, or where a name or a path belongs, must not be shown
/// back. Strings (`"…"`) are hidden; of the text quoted with backticks,
/// only names of the file's fields stay (and a misspelt field's name, which
/// the parser quotes after "unknown field"); values such as a number
/// written for `key_env` (`` invalid type: integer `1234` ``) are hidden.
fn unquoted(message: &str) -> String {
    let mut strings_hidden = String::new();
    for (index, part) in message.split('"').enumerate() {
        strings_hidden.push_str(if index % 2 == 1 { "\"…" } else { part });
        if index % 2 == 1 {
            strings_hidden.push('"');
        }
    }
    let mut shown = String::new();
    let mut before = "";
    for (index, part) in strings_hidden.split('`').enumerate() {
        if index % 2 == 0 {
            shown.push_str(part);
            before = part;
            continue;
        }
        let misspelt_field = before.ends_with("unknown field ") && is_field_like(part);
        shown.push('`');
        shown.push_str(
            if PROFILE_FIELDS.contains(&part) || OTHER_FIELDS.contains(&part) || misspelt_field {
                part
            } else {
                "…"
            },
        );
        shown.push('`');
    }
    genapi_text::clean(&shown)
}

/// The fields of a profile a user sets (`genapi config set`).
pub const PROFILE_FIELDS: [&str; 7] = [
    "base_url",
    "regional_base_url",
    "trusted_origins",
    "key_env",
    "key_file",
    "model",
    "out",
];

/// The file's other fields, and those read only to be refused.
const OTHER_FIELDS: [&str; 4] = ["default_profile", "profiles", "key", "api_key"];

/// Whether `text` has the shape of a field's name (a short lower-case
/// identifier, digits allowed after its first letter: `base_ur1`), not of
/// a key, which is longer or has capitals or other signs.
fn is_field_like(text: &str) -> bool {
    (1..=24).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Why a profile's `key_env` may not name `name`, when it may not: the
/// variables that name a service of the environment's own
/// (`GENAPI_API_KEY`, `GENAPI_BASE_URL`) are read over every profile, so a
/// profile whose key came from one would, set, give way to the environment
/// and, unset, have no key.
pub fn not_a_profiles_key_variable(name: &str) -> Option<String> {
    SERVICE_OVER_PROFILES.contains(&name).then(|| {
        format!(
            "key_env = \"{name}\" names a variable that picks the environment's service over every profile; name \
             one of the profile's own (key_env = \"MYSERVICE_KEY\")"
        )
    })
}

/// The variables that name the environment's service, over any profile.
pub const SERVICE_OVER_PROFILES: [&str; 2] = ["GENAPI_API_KEY", "GENAPI_BASE_URL"];

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "default_profile = \"a\"\n\n[profiles.a]\nbase_url = \"https://a.example.com\"\n\n\
                        [profiles.b]\nbase_url = \"https://b.example.com\"\napi_key = \"sk-in-the-file\"\n\n\
                        [profiles.c]\nkey_env = 48151623\n\n[profiles.d]\nbase_ur1 = \"x\"\n\n\
                        [profiles.e]\nsk_live_a1b2c3d4e5f6g7h8i9 = \"x\"\n";

    #[test]
    fn a_broken_profile_is_kept_apart_with_the_line_of_its_mistake() {
        let file = parse(FILE).unwrap();
        assert_eq!(file.default_profile.as_deref(), Some("a"));
        let a = file.profiles["a"].as_ref().unwrap();
        assert_eq!(a.base_url.as_deref(), Some("https://a.example.com"));
        let b = file.profiles["b"].as_ref().unwrap_err();
        assert_eq!(b.line, 8, "{b:?}");
        assert!(b.why.contains("a key is never written"), "{b:?}");
        let c = file.profiles["c"].as_ref().unwrap_err();
        assert_eq!(c.line, 11, "{c:?}");
        assert!(c.why.contains("invalid type") && !c.why.contains("48151623"), "{c:?}");
        let d = file.profiles["d"].as_ref().unwrap_err();
        assert_eq!(d.line, 14, "{d:?}");
        assert_eq!(
            d.why,
            "unknown field `base_ur1`; a profile's fields are base_url, regional_base_url, trusted_origins, key_env, \
             key_file, model, out"
        );
        let e = file.profiles["e"].as_ref().unwrap_err();
        assert!(
            e.why.starts_with("unknown field `…`;") && !e.why.contains("sk_live"),
            "{e:?}"
        );
        assert!(!format!("{file:?}").contains("sk-in-the-file"));
    }

    #[test]
    fn a_mistake_outside_the_profiles_is_the_whole_files_with_its_line() {
        let refused = parse("[profiles.a]\n\nmodel = [\n").unwrap_err();
        assert!(refused.starts_with("line "), "{refused}");
        let refused = parse("default_profile = \"a\"\nkeys = \"sk-1\"\n").unwrap_err();
        assert!(refused.starts_with("line 2:") && !refused.contains("sk-1"), "{refused}");
        let refused = parse("profiles = 3\n").unwrap_err();
        assert!(refused.starts_with("line 1:"), "{refused}");
    }
}
