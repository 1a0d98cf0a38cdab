//! `genapi man`: the man pages, made from the command's definition. The
//! first page, genapi(1), adds the ENVIRONMENT, FILES, EXIT STATUS and
//! EXAMPLES sections, from the lists `genapi --help` shows ([`crate::help`],
//! [`crate::code`]); each command has its page, genapi-COMMAND(1), which the
//! first refers to. `--dir` writes them all, as the file policy allows.

use std::io::Write;
use std::path::{Path, PathBuf};

use roff::{bold, roman, Roff};

use crate::{code, files, help, out, Failure};

/// Prints the page of `name` (the first page without one), or writes
/// every page into `dir`.
pub fn run(definition: clap::Command, name: Option<String>, dir: Option<PathBuf>, force: bool) -> Result<(), Failure> {
    let mut definition = definition;
    definition.build();
    if let Some(dir) = dir {
        return write_all(&definition, &dir, force);
    }
    let page = match name {
        None => page(&definition, true),
        Some(name) => {
            let Some(command) = definition.find_subcommand(&name).filter(|sub| is_documented(sub)) else {
                let known: Vec<&str> = commands(&definition).map(clap::Command::get_name).collect();
                return Err(Failure::usage(format!(
                    "no command {}; the commands: {}",
                    out::clean(&name),
                    known.join(", ")
                )));
            };
            page(&named(command), false)
        }
    };
    out::out(String::from_utf8_lossy(&page?).trim_end());
    Ok(())
}

/// The commands that have a page: not `help`, nor hidden ones.
fn commands(definition: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    definition.get_subcommands().filter(|sub| is_documented(sub))
}

fn is_documented(command: &clap::Command) -> bool {
    !command.is_hide_set() && command.get_name() != "help"
}

/// A command as its page names it: genapi-batch, run as `genapi batch`.
fn named(command: &clap::Command) -> clap::Command {
    let name = command.get_name();
    command
        .clone()
        .display_name(format!("genapi-{name}"))
        .bin_name(format!("genapi {name}"))
}

/// Writes genapi.1 and genapi-COMMAND.1 for every command into `dir`
/// (made if needed), replacing none without `force`: all are checked
/// before any is written.
fn write_all(definition: &clap::Command, dir: &Path, force: bool) -> Result<(), Failure> {
    let mut pages = vec![(dir.join("genapi.1"), page(definition, true)?)];
    for command in commands(definition) {
        let file = dir.join(format!("genapi-{}.1", command.get_name()));
        pages.push((file, page(&named(command), false)?));
    }
    let refused = |error: genapi_files::FileError| Failure::usage(format!("man --dir {}", files::said(&error)));
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
    let man = clap_mangen::Man::new(command.clone());
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
        if first {
            text.write_all(sections().to_roff().as_bytes())?;
        } else {
            text.write_all(see_also().to_roff().as_bytes())?;
        }
        if command.get_version().is_some() {
            man.render_version_section(&mut text)?;
        }
        Ok(())
    })();
    rendered.map_err(|e| Failure::new(code::OTHER, format!("cannot write the man page: {e}")))?;
    Ok(text)
}

/// ENVIRONMENT, FILES, EXIT STATUS and EXAMPLES.
fn sections() -> Roff {
    let mut roff = Roff::new();
    let entry = |roff: &mut Roff, term: &str, text: &str| {
        roff.control("TP", []).text([bold(term)]).text([roman(text)]);
    };
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
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in code::table() {
        entry(&mut roff, &code.to_string(), &meaning);
    }
    roff.control("PP", [])
        .text([roman(format!("A batch exits {}.", code::batch_rule()))]);
    roff.control("SH", ["EXAMPLES"]);
    for (line, does) in help::EXAMPLES {
        entry(&mut roff, line, does);
    }
    roff
}

/// A command's page refers to the first.
fn see_also() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]).text([
        bold("genapi"),
        roman("(1): the environment, files, exit status and examples."),
    ]);
    roff
}
