//! From flags to a request body: only what the user set is sent, and every
//! flag is checked against the model's fields in the document.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use genapi::ImageInput;
use serde_json::{Map, Number, Value};

use crate::catalog;
use crate::{files, out, Failure};
use genapi::validate::{Field, Model};

/// The model of a request that names none (and of a profile that names
/// none).
pub const DEFAULT_MODEL: &str = "gen-2-pro";

/// What to submit.
#[derive(Args, Clone, Debug)]
pub struct RequestArgs {
    /// Model, e.g. gen-2-pro (`genapi models` lists them).
    ///
    /// Others: deblur-v1, gen-tools/vto-v1, … [default: the profile's model, else gen-2-pro].
    #[arg(short = 'm', long, value_parser = crate::completions::ModelName, hide_possible_values = true)]
    pub model: Option<String>,
    /// The prompt; `-` reads it from stdin.
    pub prompt: Option<String>,
    /// Read the prompt from this file (`-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// Seed, for reproducible results (negative values too: `--seed -5`).
    #[arg(long, allow_hyphen_values = true)]
    pub seed: Option<String>,
    /// Output size in pixels.
    #[arg(long, value_name = "WxH")]
    pub size: Option<String>,
    /// Output aspect ratio, e.g. 16:9.
    #[arg(long, value_name = "W:H")]
    pub aspect_ratio: Option<String>,
    /// Output format; by default taken from --out's extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// An input image, file or URL; repeatable.
    ///
    /// Without FIELD=, images fill the model's image fields in the
    /// document's order (`genapi models NAME` lists them).
    #[arg(long = "image", value_name = "[FIELD=]PATH|URL")]
    pub images: Vec<String>,
    /// A field of the model; VALUE is read as JSON when it parses, else as text.
    ///
    /// `genapi models NAME` lists the fields: `--set seed=42`, or
    /// `--set webhook_url=https://… --set webhook_secret=…` for the
    /// service's notification when the task ends.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub set: Vec<String>,
    /// Like --set, without checking that the model has the field.
    #[arg(long = "set-raw", value_name = "FIELD=VALUE")]
    pub set_raw: Vec<String>,
}

/// An image format of `output_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// JPEG.
    #[value(alias = "jpg")]
    Jpeg,
    /// PNG.
    Png,
    /// WebP.
    Webp,
}

impl Format {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Jpeg => "jpeg",
            Format::Png => "png",
            Format::Webp => "webp",
        }
    }

    /// From a file extension: the names each format's files go by
    /// (`.jfif` and `.jpe` are JPEG too).
    pub fn from_extension(extension: &str) -> Option<Format> {
        match extension.to_ascii_lowercase().as_str() {
            "jpg" | "jpeg" | "jpe" | "jfif" => Some(Format::Jpeg),
            "png" => Some(Format::Png),
            "webp" => Some(Format::Webp),
            _ => None,
        }
    }
}

/// A request ready to send.
#[derive(Debug)]
pub struct Prepared {
    /// The model, with its fields in document order.
    pub model: &'static Model,
    /// The body.
    pub body: Map<String, Value>,
    /// The prompt, if any (for file names).
    pub prompt: Option<String>,
    /// Fields given by `--set`/`--set-raw`, named after those flags in messages.
    pub set_by_name: Vec<(String, &'static str)>,
}

impl Prepared {
    /// Checks the body against the document, as the client does before
    /// sending, so a mistake is reported before any service (or the
    /// built-in mock) is reached.
    pub fn check(&self) -> Result<(), Failure> {
        let Some(schema) = self.model.operation.request_schema.as_deref() else {
            return Ok(());
        };
        let body = Value::Object(self.body.clone());
        let errors = genapi::validate::Document::embedded().validate(schema, &body);
        if errors.is_empty() {
            return Ok(());
        }
        // A refused size is followed by the nearest ones the model takes.
        let nearest = genapi::validate::Document::embedded()
            .nearest_sizes_said(schema, &body)
            .map(|said| format!("; {said}"))
            .unwrap_or_default();
        let error = genapi::Error::Validation {
            errors,
            checked: genapi::Checked::Locally,
        };
        Err(Failure {
            message: format!("{}{nearest}", self.in_flag_terms(&error)),
            ..Failure::api(&error)
        })
    }

    /// A validation message in the user's terms: flags instead of JSON paths.
    pub fn in_flag_terms(&self, error: &genapi::Error) -> String {
        let mut text = crate::describe(error);
        for problem in error.validation_errors().unwrap_or_default() {
            let location: Vec<String> = problem.loc.iter().map(ToString::to_string).collect();
            let Some(field) = location.get(1) else { continue };
            let set_with = self.set_by_name.iter().rev().find(|(name, _)| name == field);
            let flag = match field.as_str() {
                name if set_with.is_some() => format!("{} {name}", set_with.map_or("--set", |(_, flag)| *flag)),
                "prompt" => "the prompt".to_string(),
                "seed" => "--seed".to_string(),
                "width" | "height" => format!("--size ({field})"),
                "aspect_ratio" => "--aspect-ratio".to_string(),
                "output_format" => "--format".to_string(),
                name if self.model.fields.iter().any(|f| f.name == name && f.image().is_some()) => {
                    format!("--image {name}=…")
                }
                name => format!("--set {name}"),
            };
            text = text.replace(&format!("{}: ", location.join(".")), &format!("{flag}: "));
        }
        text
    }
}

/// Builds the body for `args`; `out` is the `--out` file (its extension
/// chooses the format).
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub async fn prepare(args: &RequestArgs, out_file: Option<&Path>) -> Result<Prepared, Failure> {
    let catalog = catalog::load().map_err(Failure::usage)?;
    let model = catalog::find(catalog, args.model.as_deref().unwrap_or(DEFAULT_MODEL)).map_err(Failure::usage)?;
    if model.operation.deprecated {
        out::err(&format!(
            "warning: {} is deprecated in the service's description; see `genapi models` for its successors",
            model.name
        ));
    }
    let fields = &model.fields;
    let has = |name: &str| fields.iter().any(|f| f.name == name);
    let lacks = |flag: &str| {
        Failure::usage(format!(
            "{flag}: {} has no such setting (see `genapi models {}`)",
            model.name, model.name
        ))
    };
    let mut body = Map::new();

    let prompt = read_prompt(args)?;
    if let Some(prompt) = &prompt {
        if !has("prompt") {
            return Err(Failure::usage(format!(
                "{} takes no prompt (see `genapi models {}`)",
                model.name, model.name
            )));
        }
        body.insert("prompt".into(), Value::String(prompt.clone()));
    }
    if let Some(seed) = &args.seed {
        if !has("seed") {
            return Err(lacks("--seed"));
        }
        let number = seed
            .parse::<i64>()
            .map(Number::from)
            .or_else(|_| seed.parse::<u64>().map(Number::from))
            .map_err(|_| Failure::usage(format!("--seed {seed}: expected a whole number")))?;
        body.insert("seed".into(), Value::Number(number));
    }
    if let Some(size) = &args.size {
        if !has("width") || !has("height") {
            let hint = if has("aspect_ratio") {
                "; use --aspect-ratio"
            } else {
                ""
            };
            return Err(Failure::usage(format!(
                "--size: {} takes no width and height{hint}",
                model.name
            )));
        }
        let (width, height) = size
            .split_once(['x', 'X', '×'])
            .and_then(|(w, h)| Some((w.trim().parse::<u32>().ok()?, h.trim().parse::<u32>().ok()?)))
            .ok_or_else(|| Failure::usage(format!("--size {size}: expected WIDTHxHEIGHT, e.g. 1024x768")))?;
        body.insert("width".into(), width.into());
        body.insert("height".into(), height.into());
    }
    if let Some(ratio) = &args.aspect_ratio {
        if !has("aspect_ratio") {
            let hint = if has("width") { "; use --size" } else { "" };
            return Err(Failure::usage(format!(
                "--aspect-ratio: {} takes no aspect ratio{hint}",
                model.name
            )));
        }
        let valid = ratio
            .split_once(':')
            .is_some_and(|(w, h)| w.parse::<u32>().is_ok_and(|w| w > 0) && h.parse::<u32>().is_ok_and(|h| h > 0));
        if !valid {
            return Err(Failure::usage(format!(
                "--aspect-ratio {ratio}: expected W:H, e.g. 16:9"
            )));
        }
        body.insert("aspect_ratio".into(), Value::String(ratio.clone()));
    }
    if let Some(format) = output_format(args, out_file, model, fields)? {
        body.insert("output_format".into(), Value::String(format.as_str().into()));
    }
    add_images(args, model, fields, &mut body).await?;
    let mut set_by_name = Vec::new();
    for pair in &args.set {
        let (name, value) = split_pair("--set", pair)?;
        if !has(name) {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            let hint = genapi::validate::closest(name, names.iter().copied())
                .map(|s| format!("did you mean {s}? "))
                .unwrap_or_default();
            return Err(Failure::usage(format!(
                "--set {name}: {} has no field {name:?}; {hint}its fields: {} (--set-raw sends it anyway)",
                model.name,
                names.join(", ")
            )));
        }
        set_by_name.push((name.to_string(), "--set"));
        body.insert(name.to_string(), value);
    }
    for pair in &args.set_raw {
        let (name, value) = split_pair("--set-raw", pair)?;
        set_by_name.push((name.to_string(), "--set-raw"));
        body.insert(name.to_string(), value);
    }
    Ok(Prepared {
        model,
        body,
        prompt,
        set_by_name,
    })
}

/// The format to request: `--format`, else `--out`'s extension; the two must agree.
fn output_format(
    args: &RequestArgs,
    out_file: Option<&Path>,
    model: &Model,
    fields: &[Field],
) -> Result<Option<Format>, Failure> {
    let field = fields.iter().find(|f| f.name == "output_format");
    let extension = out_file
        .and_then(|p| p.extension())
        .map(|e| e.to_string_lossy().into_owned());
    let from_extension = match (&extension, field) {
        (Some(ext), Some(_)) => Some(Format::from_extension(ext).ok_or_else(|| {
            Failure::usage(format!(
                "--out: .{} is not an image format {} writes; use .jpg, .png or .webp",
                out::clean(ext),
                model.name
            ))
        })?),
        _ => None,
    };
    let format = match (args.format, from_extension) {
        (Some(flag), Some(ext)) if flag != ext => {
            return Err(Failure::usage(format!(
                "--format {} does not match --out's extension .{}",
                flag.as_str(),
                extension.unwrap_or_default()
            )))
        }
        (flag, ext) => flag.or(ext),
    };
    match (format, field) {
        (Some(format), Some(field)) => {
            let choices = catalog::choices(field);
            if !choices.is_empty() && !choices.iter().any(|c| c == format.as_str()) {
                return Err(Failure::usage(format!(
                    "--format {}: {} writes {}",
                    format.as_str(),
                    model.name,
                    choices.join(", ")
                )));
            }
            Ok(Some(format))
        }
        (Some(_), None) if args.format.is_some() => Err(Failure::usage(format!(
            "--format: {} has no output format setting",
            model.name
        ))),
        _ => Ok(None),
    }
}

pub(crate) fn split_pair<'a>(flag: &str, pair: &'a str) -> Result<(&'a str, Value), Failure> {
    let (name, value) = pair
        .split_once('=')
        .ok_or_else(|| Failure::usage(format!("{flag} {pair}: expected FIELD=VALUE")))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(Failure::usage(format!("{flag} {pair}: the field name is empty")));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok((name, value))
}

fn read_prompt(args: &RequestArgs) -> Result<Option<String>, Failure> {
    let limit = files::PROMPT_LIMIT;
    let from_stdin = || {
        let mut text = String::new();
        std::io::stdin()
            .take(limit + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::usage(format!("cannot read the prompt from stdin: {e}")))?;
        if text.len() as u64 > limit {
            return Err(Failure::usage(format!(
                "the prompt on stdin is larger than {}, the most a prompt may be",
                genapi_files::shown_size(limit)
            )));
        }
        Ok::<_, Failure>(text)
    };
    let text = match (&args.prompt, &args.prompt_file) {
        (Some(prompt), _) if prompt == "-" => from_stdin()?,
        (Some(prompt), _) => return Ok(Some(prompt.clone())),
        (None, Some(file)) if file.as_os_str() == "-" => from_stdin()?,
        (None, Some(file)) => files::read_to_string(file, limit).map_err(|e| {
            Failure::usage(format!(
                "--prompt-file {}: {e} (to pipe a prompt in, pass --prompt-file -)",
                file.display()
            ))
        })?,
        (None, None) => return Ok(None),
    };
    let text = text.trim_end_matches(['\n', '\r']).to_string();
    if text.trim().is_empty() {
        return Err(Failure::usage("the prompt read is empty"));
    }
    Ok(Some(text))
}

/// `--image [FIELD=]PATH|URL`: named ones first, then the rest in document order.
async fn add_images(
    args: &RequestArgs,
    model: &Model,
    fields: &[Field],
    body: &mut Map<String, Value>,
) -> Result<(), Failure> {
    let image_fields: Vec<&Field> = fields.iter().filter(|f| f.image().is_some()).collect();
    let mut named: Vec<(&Field, &str)> = Vec::new();
    let mut positional: Vec<&str> = Vec::new();
    for value in &args.images {
        match value
            .split_once('=')
            .and_then(|(name, rest)| image_fields.iter().find(|f| f.name == name).map(|f| (*f, rest)))
        {
            Some(pair) => named.push(pair),
            None => {
                // `name=…` that names no image field and no existing file is a
                // misspelt field, not a file name.
                if let Some((name, _)) = value.split_once('=') {
                    let looks_like_field = !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !value.contains("://");
                    if looks_like_field && !std::path::Path::new(value.as_str()).exists() {
                        let names: Vec<&str> = image_fields.iter().map(|f| f.name.as_str()).collect();
                        let known = if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        };
                        return Err(Failure::usage(format!(
                            "--image {value}: {} has no image field {name:?}; its image fields: {known}",
                            model.name
                        )));
                    }
                }
                positional.push(value)
            }
        }
    }
    let free: Vec<&Field> = image_fields
        .iter()
        .copied()
        .filter(|f| !named.iter().any(|(n, _)| n.name == f.name))
        .collect();
    if positional.len() > free.len() {
        let names: Vec<&str> = image_fields.iter().map(|f| f.name.as_str()).collect();
        return Err(Failure::usage(format!(
            "--image: {} takes {} image(s) ({}); {} given",
            model.name,
            names.len(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
            args.images.len()
        )));
    }
    for (field, source) in named.into_iter().chain(free.into_iter().zip(positional)) {
        let accepts_url = catalog::takes_url(field);
        let value = ImageInput::from_source(source, "")
            .to_field(accepts_url)
            .await
            .map_err(|e| Failure::usage(format!("--image {}: {}", field.name, crate::describe(&e))))?;
        body.insert(field.name.clone(), Value::String(value));
    }
    Ok(())
}
