//! The `genapi` command: generate an image, read a task, or run the mock.
//!
//! With neither GENAPI_API_KEY nor GENAPI_BASE_URL set, `generate` runs
//! against the built-in mock service and says so.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use genapi::mock::{MockConfig, MockService};
use genapi::validate::Document;
use genapi::{Client, ImageInput, WaitOptions};
use serde_json::{Map, Value};

#[derive(Parser)]
#[command(
    name = "genapi",
    version,
    about = "Generate and edit images with the Image Generation and Editing Service"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Submit a request, wait for it, and save the image.
    Generate {
        /// Model endpoint, e.g. gen-2-pro, gen-2-flex, gen-dev, gen-tools/deblur-v1.
        #[arg(long, default_value = "gen-2-pro")]
        model: String,
        /// Where to save the image; the extension is added when missing.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Extra field, FIELD=VALUE; VALUE is read as JSON when it parses, else as text.
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        set: Vec<String>,
        /// Image file for the model's image fields, in order.
        #[arg(long = "image", value_name = "PATH")]
        images: Vec<PathBuf>,
        /// The prompt.
        prompt: Option<String>,
    },
    /// Print a task's state, by id or polling URL.
    Get {
        /// Task id or polling URL.
        id_or_polling_url: String,
    },
    /// Run the mock service (a test double) until interrupted.
    Mock {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// The key clients must send.
        #[arg(long, default_value = "mock-key")]
        key: String,
        /// How long tasks take, in milliseconds.
        #[arg(long, default_value_t = 3000)]
        duration_ms: u64,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("GENAPI_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The client, or the built-in mock when nothing is configured (kept alive while used).
async fn client_or_mock() -> Result<(Client, Option<MockService>), String> {
    let configured = ["GENAPI_API_KEY", "GENAPI_BASE_URL"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
    if configured {
        return Ok((Client::from_env().map_err(|e| e.to_string())?, None));
    }
    let config = MockConfig {
        default_duration: Duration::from_secs(3),
        ..MockConfig::default()
    };
    let address = "127.0.0.1:0".parse().map_err(|_| "bad address".to_string())?;
    let mock = MockService::start_with(config, address)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "GENAPI_API_KEY and GENAPI_BASE_URL are not set: using the built-in mock service at {} (a test double; its images are marked MOCK)",
        mock.base_url()
    );
    let client = mock.client().map_err(|e| e.to_string())?;
    Ok((client, Some(mock)))
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Generate {
            model,
            out,
            timeout,
            set,
            images,
            prompt,
        } => generate(model, out, timeout, set, images, prompt).await,
        Command::Get { id_or_polling_url } => {
            let (client, _mock) = client_or_mock().await?;
            let state = client
                .task(&id_or_polling_url)
                .map_err(|e| e.to_string())?
                .poll()
                .await
                .map_err(|e| e.to_string())?;
            println!("{}", serde_json::to_string_pretty(&state).map_err(|e| e.to_string())?);
            Ok(())
        }
        Command::Mock { addr, key, duration_ms } => {
            let address = addr.parse().map_err(|e| format!("--addr {addr}: {e}"))?;
            let config = MockConfig {
                keys: vec![(key, None)],
                default_duration: Duration::from_millis(duration_ms),
                ..MockConfig::default()
            };
            let mock = MockService::start_with(config, address)
                .await
                .map_err(|e| e.to_string())?;
            println!("mock service (a test double) listening");
            println!("GENAPI_BASE_URL={}", mock.base_url());
            println!("GENAPI_API_KEY={}", mock.key());
            tokio::signal::ctrl_c().await.map_err(|e| e.to_string())?;
            mock.stop().await;
            Ok(())
        }
    }
}

async fn generate(
    model: String,
    out: Option<PathBuf>,
    timeout: u64,
    set: Vec<String>,
    images: Vec<PathBuf>,
    prompt: Option<String>,
) -> Result<(), String> {
    let path = format!("/v1/{}", model.trim_start_matches('/').trim_start_matches("v1/"));
    let document = Document::embedded();
    let operation = document
        .operations()
        .into_iter()
        .find(|op| op.path == path && op.method == "POST")
        .ok_or_else(|| {
            format!(
                "unknown model {model:?}; try gen-2-pro, gen-2-flex, gen-dev, gen-kontext-pro or gen-tools/deblur-v1"
            )
        })?;
    let schema = operation
        .request_schema
        .as_deref()
        .and_then(|s| document.schema(s))
        .cloned()
        .unwrap_or(Value::Null);
    let mut body = Map::new();
    if let Some(prompt) = prompt {
        body.insert("prompt".into(), Value::String(prompt));
    }
    // Image fields in the order the document lists them.
    let image_fields: Vec<(String, bool)> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, p)| {
            p["x-image"]
                .as_str()
                .map(|kind| (name.clone(), kind == "base64-or-url"))
        })
        .collect();
    if images.len() > image_fields.len() {
        return Err(format!(
            "{model} takes at most {} image(s); {} given",
            image_fields.len(),
            images.len()
        ));
    }
    for (file, (field, accepts_url)) in images.iter().zip(&image_fields) {
        let value = ImageInput::path(file)
            .to_field(*accepts_url)
            .await
            .map_err(|e| e.to_string())?;
        body.insert(field.clone(), Value::String(value));
    }
    for pair in set {
        let (field, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--set {pair}: expected FIELD=VALUE"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        body.insert(field.to_string(), value);
    }

    let (client, _mock) = client_or_mock().await?;
    let task = client
        .submit_raw(&path, Value::Object(body))
        .await
        .map_err(|e| e.to_string())?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message(format!("task {} submitted", task.id()));
    let progress_bar = bar.clone();
    let options = WaitOptions::default()
        .timeout(Duration::from_secs(timeout))
        .on_progress(move |p| {
            let percent = p.progress.map(|f| format!(" {:>3.0}%", f * 100.0)).unwrap_or_default();
            progress_bar.set_message(format!("{}{percent}  {:.1}s", p.status, p.elapsed.as_secs_f64()));
        });
    let id = task.id().to_string();
    let result = task.wait_with(options).await;
    bar.finish_and_clear();
    let output = result.map_err(|e| e.to_string())?;
    let saved = output
        .save(out.unwrap_or_else(|| PathBuf::from(&id)))
        .await
        .map_err(|e| e.to_string())?;
    let cost = output
        .cost
        .map(|c| format!("{c} credits"))
        .unwrap_or_else(|| "not reported".into());
    println!("task {id}: Ready; cost {cost}; saved {}", saved.display());
    Ok(())
}
