//! Shared by the benches that need the mock in a separate process, so that
//! only client work is measured in the bench's own process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A `genapi mock` child process; killed when dropped.
pub struct MockProcess {
    child: Child,
    /// Its base URL.
    pub base_url: String,
    /// The origin of its regional polling host, which a client must trust.
    pub regional_origin: String,
}

impl MockProcess {
    /// Starts `genapi mock` with this key and task duration.
    pub fn start(key: &str, duration_ms: u64) -> MockProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genapi"))
            .args(["mock", "--key", key, "--duration-ms", &duration_ms.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the mock");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let _banner = lines.next();
        let base_url = lines
            .next()
            .and_then(Result::ok)
            .and_then(|l| l.strip_prefix("GENAPI_BASE_URL=").map(str::to_string))
            .expect("the mock prints its base URL");
        let regional_origin = regional_origin(&base_url, key);
        MockProcess {
            child,
            base_url,
            regional_origin,
        }
    }
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Finds the regional host from one submission's `polling_url`, as a user of
/// the service would learn it.
fn regional_origin(base_url: &str, key: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        genapi::transport::ensure_tls_provider();
        let answer: serde_json::Value = reqwest::Client::new()
            .post(format!("{base_url}/v1/gen-2-pro"))
            .header("x-key", key)
            .json(&serde_json::json!({"prompt": "probe", "width": 64, "height": 64}))
            .send()
            .await
            .expect("probe submission")
            .json()
            .await
            .expect("probe answer");
        let polling = reqwest::Url::parse(answer["polling_url"].as_str().expect("polling_url")).expect("absolute");
        polling.origin().ascii_serialization()
    })
}
