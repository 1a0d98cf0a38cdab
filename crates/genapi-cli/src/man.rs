//! `genapi man`: the man pages, made from the command's definition. The
//! first page, genapi(1), adds the ENVIRONMENT, FILES, EXIT STATUS and
//! EXAMPLES sections, from the lists `genapi --help` shows ([`crate::help`],
//! [`crate::code`]); each command has its page, genapi-COMMAND(1), which the
//! first refers to, and so has each command of a command (genapi-config-set(1),
//! which genapi-config(1) refers to). A command's page has the EXIT STATUS
//! too and refers to the first for the rest. clap's `help` command has no
//! page, so none refers to one. `--dir` writes them all, as the file policy
//! allows.

use std::io::Write;
use std::path::{Path, PathBuf};

use roff::{bold, roman, Roff};

use crate::{code, files, help, out, Failure};

/// Prints the page of the command `words` name (`config set`; the first
/// page without any), or writes every page into `dir`.
pub fn run(definition: clap::Command, words: Vec<String>, dir: Option<PathBuf>, force: bool) -> Result<(), Failure> {
    let mut definition = without_help(definition);
    definition.build();
    if let Some(dir) = dir {
        return write_all(&definition, &dir, force);
    }
    let page = if words.is_empty() {
        page(&definition, true)
    } else {
        let pages = command_pages(&definition);
        let name = format!("genapi-{}", words.join("-"));
        let Some(command) = pages
            .iter()
            .find(|command| command.get_display_name() == Some(name.as_str()))
        else {
            let known: Vec<String> = pages.iter().map(spoken).collect();
            return Err(Failure::usage(format!(
                "no command {}; the commands: {}",
                out::clean(&words.join(" ")),
                known.join(", ")
            )));
        };
        page(command, false)
    };
    out::out(String::from_utf8_lossy(&page?).trim_end());
    Ok(())
}

/// The definition without clap's `help` commands, at every level: they
/// have no page, so no page may list one.
fn without_help(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    names
        .iter()
        .fold(command.disable_help_subcommand(true), |command, name| {
            command.mut_subcommand(name, without_help)
        })
}

/// A command as the user types it after `genapi` (`config set`).
fn spoken(command: &clap::Command) -> String {
    command
        .get_bin_name()
        .unwrap_or_default()
        .trim_start_matches("genapi ")
        .to_string()
}

/// Every command that has a page, each named as its page names it
/// (genapi-config-set, run as `genapi config set`), parents first.
fn command_pages(definition: &clap::Command) -> Vec<clap::Command> {
    let mut pages = Vec::new();
    add_pages(definition, "genapi", "genapi", &mut pages);
    pages
}

fn add_pages(parent: &clap::Command, page: &str, typed: &str, pages: &mut Vec<clap::Command>) {
    for command in parent.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        let name = command.get_name();
        let (page, typed) = (format!("{page}-{name}"), format!("{typed} {name}"));
        pages.push(command.clone().display_name(&page).bin_name(&typed));
        add_pages(command, &page, &typed, pages);
    }
}

/// Writes genapi.1 and a page for every command into `dir` (made if
/// needed), replacing none without `force`: all are checked before any is
/// written.
fn write_all(definition: &clap::Command, dir: &Path, force: bool) -> Result<(), Failure> {
    let mut pages = vec![(dir.join("genapi.1"), page(definition, true)?)];
    for command in command_pages(definition) {
        let file = dir.join(format!("{}.1", command.get_display_name().unwrap_or_default()));
        pages.push((file, page(&command, false)?));
    }
    let refused = |error: genapi_files::FileError| Failure::usage(format!("man --dir: {}", files::said(&error)));
    for (file, _) in &pages {
        genapi_files::may_write(file, files::existing(force)).map_err(refused)?;
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::new(
            code::OTHER,
            format!("cannot make {}: {e}", out::clean(&dir.display().to_string())),
        )
    })?;
    for (file, text) in &pages {
        genapi_files::write_whole(file, text, files::existing(force)).map_err(refused)?;
        out::err(&format!("wrote {}", out::clean(&file.display().to_string())));
    }
    Ok(())
}

/// The page of `command` (built); `first` adds the sections of the first
/// page.
fn page(command: &clap::Command, first: bool) -> Result<Vec<u8>, Failure> {
    // Every page says the program and its version where a man page's header
    // names its source (clap would give a command's name alone).
    let man = clap_mangen::Man::new(command.clone()).source(format!("genapi {}", env!("CARGO_PKG_VERSION")));
    let mut text = Vec::new();
    let rendered = (|| -> std::io::Result<()> {
        man.render_title(&mut text)?;
        man.render_name_section(&mut text)?;
        man.render_synopsis_section(&mut text)?;
        man.render_description_section(&mut text)?;
        man.render_options_section(&mut text)?;
        if command.has_subcommands() {
            man.render_subcommands_section(&mut text)?;
        }
        let sections = if first { sections() } else { command_sections() };
        text.write_all(sections.to_roff().as_bytes())?;
        if command.get_version().is_some() {
            man.render_version_section(&mut text)?;
        }
        Ok(())
    })();
    rendered.map_err(|e| Failure::new(code::OTHER, format!("cannot write the man page: {e}")))?;
    Ok(text)
}

/// A term and what it means, in a section.
fn entry(roff: &mut Roff, term: &str, text: &str) {
    roff.control("TP", []).text([bold(term)]).text([roman(text)]);
}

/// ENVIRONMENT, FILES, EXIT STATUS and EXAMPLES.
fn sections() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, meaning) in help::ENVIRONMENT {
        entry(&mut roff, name, meaning);
    }
    roff.control("PP", []).text([roman(help::WITHOUT_SERVICE)]);
    roff.control("SH", ["FILES"]);
    for (file, holds) in help::files() {
        entry(&mut roff, &file, &holds);
    }
    roff.control("PP", []).text([roman(help::CLEARING)]);
    exit_status(&mut roff);
    roff.control("SH", ["EXAMPLES"]);
    for (line, does) in help::EXAMPLES {
        entry(&mut roff, line, does);
    }
    roff
}

/// EXIT STATUS, from the one table of codes.
fn exit_status(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in code::table() {
        entry(roff, &code.to_string(), &meaning);
    }
    roff.control("PP", [])
        .text([roman(format!("A batch exits {}.", code::batch_rule()))]);
}

/// A command's own sections: EXIT STATUS, and SEE ALSO the first page for
/// the rest, which is written there only.
fn command_sections() -> Roff {
    let mut roff = Roff::new();
    exit_status(&mut roff);
    roff.control("SH", ["SEE ALSO"]).text([
        bold("genapi"),
        roman("(1): its ENVIRONMENT section (the variables every command reads), FILES (the config file and what is kept between runs) and EXAMPLES."),
    ]);
    roff
}
