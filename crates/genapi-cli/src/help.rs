//! What `genapi --help` says after the options and the man page says in its
//! own sections: the environment, the files, examples and the exit codes,
//! each from one list ([`ENVIRONMENT`], [`files`], [`EXAMPLES`],
//! [`crate::code::table`]). `-h` only says where to find them.

use crate::{cache, code, mock, opener, proxy};

/// The variables the command reads, with what each means.
pub const ENVIRONMENT: [(&str, &str); 11] = [
    ("GENAPI_API_KEY", "project API key (never printed)"),
    ("GENAPI_BASE_URL", "service address"),
    (
        "GENAPI_REGIONAL_BASE_URL",
        "address of the fine-tuned endpoints (optional)",
    ),
    (
        "GENAPI_TRUSTED_ORIGINS",
        "more origins the key may go to, comma-separated (optional)",
    ),
    (
        genapi::profiles::PROFILE_VARIABLE,
        "the profile of the config file, when --profile is not given",
    ),
    (
        genapi::profiles::CONFIG_VARIABLE,
        "another config file than the one in FILES",
    ),
    (
        "GENAPI_LEDGER_URL",
        "the PostgreSQL ledger a batch is shared through, when --ledger is not given",
    ),
    ("GENAPI_LOG", "log filter, e.g. genapi=debug (plain text on stderr)"),
    (
        opener::VARIABLE,
        "the program --open opens saved images and galleries with, instead of the desktop's",
    ),
    (
        mock::KEY_VARIABLE,
        "the key `genapi mock` asks of its clients, when --key is not given",
    ),
    (
        proxy::KEY_VARIABLE,
        "the key of its own `genapi proxy --allow-remote` asks of its callers",
    ),
];

/// What the environment list ends with.
pub const WITHOUT_SERVICE: &str =
    "With neither key nor address set (nor a profile naming a service), the built-in mock service (a test double) is used.";

/// Command lines worth copying, each with what it does.
pub const EXAMPLES: [(&str, &str); 5] = [
    (
        "genapi generate \"a lighthouse at dusk\" -o lighthouse.png --size 1024x768 --seed 7",
        "one image, reproducible by its seed",
    ),
    (
        "genapi generate -m vto-v1 --image person.jpg --image garment.jpg \"a red coat\" --json",
        "a model with image inputs, the result as JSON",
    ),
    (
        "genapi batch jobs.jsonl --out shots",
        "many requests; run it again after any interruption: it resumes and never pays twice",
    ),
    ("genapi models gen-2-pro", "the fields a model takes"),
    ("genapi man --dir ~/.local/share/man/man1", "install every man page"),
];

/// The files the command reads and keeps, each with what it holds and what
/// deleting it costs.
pub fn files() -> Vec<(String, String)> {
    let config = (
        "~/.config/genapi/config.toml".to_string(),
        format!(
            "the profiles ({} names another file): a service's address, where its key is found, default model and \
             output folder; never the key itself. Only you may be able to change it. `genapi config` shows what is \
             used.",
            genapi::profiles::CONFIG_VARIABLE
        ),
    );
    let kept = cache::FILES.iter().map(|file| {
        (
            format!("~/.cache/genapi/{}", file.name),
            format!("{}. Safe to delete: {}.", upper_first(file.holds), file.deleting_costs),
        )
    });
    std::iter::once(config).chain(kept).collect()
}

/// `text` with its first letter a capital.
fn upper_first(text: &str) -> String {
    let mut letters = text.chars();
    letters
        .next()
        .map(|first| first.to_uppercase().chain(letters).collect())
        .unwrap_or_default()
}

/// What the list of files ends with.
pub const CLEARING: &str =
    "The folders are $XDG_CONFIG_HOME and $XDG_CACHE_HOME when set (~/Library/Application Support \
     and ~/Library/Caches on macOS). Nothing in genapi's cache folder is needed: `rm -r ~/.cache/genapi` clears it.";

/// The line `-h` ends with.
pub const SHORT: &str = "More: genapi --help (environment, files, examples, exit codes) and genapi man.";

/// The text after the options in `genapi --help`.
pub fn long() -> String {
    let mut text = String::from("Environment:\n");
    for (name, meaning) in ENVIRONMENT {
        text.push_str(&format!("  {name:<25} {meaning}\n"));
    }
    text.push_str(&format!("  {WITHOUT_SERVICE}\n\nFiles:\n"));
    for (file, holds) in files() {
        text.push_str(&format!("  {file}\n      {holds}\n"));
    }
    text.push_str(&format!("  {CLEARING}\n"));
    text.push_str("\nExamples:\n");
    for (line, does) in EXAMPLES {
        text.push_str(&format!("  {line}\n      {does}\n"));
    }
    text.push('\n');
    text.push_str(&code::help_section());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read only by tests, to try a document of their own: not listed.
    /// `GENAPI_MOCK_PID` is never read: `genapi mock --background` prints
    /// it for the user's shell (its process id, to stop it).
    const HIDDEN: [&str; 2] = ["GENAPI_DOCUMENT", "GENAPI_MOCK_PID"];

    /// Every `"GENAPI_…"` name written in the command's source, each a
    /// variable it reads, is in the list (or hidden on purpose).
    #[test]
    fn every_variable_the_command_reads_is_listed() {
        let mut read = Vec::new();
        let mut folders = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    read.extend(quoted_names(&std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        assert!(read.contains(&"GENAPI_OPENER".to_string()), "{read:?}");
        for name in read {
            assert!(
                ENVIRONMENT.iter().any(|(listed, _)| *listed == name) || HIDDEN.contains(&name.as_str()),
                "{name} is read but not in ENVIRONMENT"
            );
        }
    }

    /// The string literals of `source` that are a variable's name.
    fn quoted_names(source: &str) -> Vec<String> {
        source
            .match_indices("\"GENAPI_")
            .filter_map(|(at, _)| source[at + 1..].split('"').next())
            .filter(|text| text.len() > "GENAPI_".len() && text.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(str::to_string)
            .collect()
    }
}
