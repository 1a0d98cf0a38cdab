//! What the proxy adds to each exchange, against talking to the mock
//! directly: latency (p50 and p99 of every request's time to its last
//! byte) and CPU (the process's user and system time per exchange, proxy
//! included in the proxied arm).
//!
//! The workload is a plain HTTP client running tasks as an SDK does:
//! submit, poll every 20 ms until Ready, download. Tasks take mixed times
//! on the mock (none, 50 ms, 200 ms, and one in ten a 1 s outlier), eight
//! at a time. The two arms run interleaved, five rounds each, in one
//! process; each round prints its figures, then the ratios' medians and
//! spreads.
//!
//! `cargo bench -p genapi-proxy --bench overhead`

use std::time::{Duration, Instant};

use genapi_mock::{MockConfig, MockService};
use serde_json::Value;

const ROUNDS: usize = 5;
const TASKS: usize = 48;
const AT_ONCE: usize = 8;

/// The kinds of exchange, as an SDK makes them.
const KINDS: [&str; 3] = ["submission", "poll", "download"];

/// One round's figures: p50 and p99 by kind, CPU per exchange.
struct Figures {
    p50: [Duration; 3],
    p99: [Duration; 3],
    cpu_per_exchange: Duration,
    exchanges: usize,
}

fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Runs one task: its exchanges' kinds and times.
async fn task(http: &reqwest::Client, base: &str, key: &str, n: usize) -> Vec<(usize, Duration)> {
    let duration = match n % 10 {
        0 => 1000,
        1 | 4 | 7 => 0,
        2 | 5 | 8 => 50,
        _ => 200,
    };
    let mut times = Vec::new();
    let body = serde_json::json!({
        "prompt": format!("bench {n} [mock:duration_ms={duration}]"),
        "width": 512,
        "height": 512,
    });
    let started = Instant::now();
    let accepted: Value = http
        .post(format!("{base}/v1/gen-2-pro"))
        .header("x-key", key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    times.push((0, started.elapsed()));
    let polling_url = accepted["polling_url"].as_str().unwrap().to_string();
    let sample = loop {
        let started = Instant::now();
        let poll: Value = http
            .get(&polling_url)
            .header("x-key", key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        times.push((1, started.elapsed()));
        if poll["status"] == "Ready" {
            break poll["result"]["sample"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let started = Instant::now();
    let image = http.get(&sample).send().await.unwrap().bytes().await.unwrap();
    assert!(!image.is_empty());
    times.push((2, started.elapsed()));
    times
}

async fn round(base: &str, key: &str) -> Figures {
    let http = genapi::http_client_builder().unwrap().build().unwrap();
    let before = cpu_time();
    let mut running = tokio::task::JoinSet::new();
    let mut times = Vec::new();
    for n in 0..TASKS {
        if running.len() == AT_ONCE {
            times.extend(running.join_next().await.unwrap().unwrap());
        }
        let (http, base, key) = (http.clone(), base.to_string(), key.to_string());
        running.spawn(async move { task(&http, &base, &key, n).await });
    }
    while let Some(done) = running.join_next().await {
        times.extend(done.unwrap());
    }
    let cpu = cpu_time() - before;
    let quantile = |kind: usize, q: f64| {
        let mut of: Vec<Duration> = times.iter().filter(|(k, _)| *k == kind).map(|(_, t)| *t).collect();
        of.sort_unstable();
        of[((of.len() - 1) as f64 * q).round() as usize]
    };
    Figures {
        p50: [0, 1, 2].map(|kind| quantile(kind, 0.50)),
        p99: [0, 1, 2].map(|kind| quantile(kind, 0.99)),
        cpu_per_exchange: cpu / times.len() as u32,
        exchanges: times.len(),
    }
}

fn median_and_spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[0], values[values.len() - 1])
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = MockConfig::default()
            .max_active_tasks(10_000)
            .request_log_capacity(100_000);
        let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let proxy = genapi_proxy::Proxy::builder(mock.client().unwrap())
            .key(mock.key())
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let (direct, through) = (mock.base_url().to_string(), proxy.base_url());
        // Warm both paths once.
        round(&direct, mock.key()).await;
        round(&through, mock.key()).await;
        let mut added: Vec<Vec<f64>> = vec![Vec::new(); 6];
        let mut cpu_ratios = Vec::new();
        println!("round  arm      exchanges  p50/p99 ms: submission      poll  download  cpu µs/exchange");
        for n in 1..=ROUNDS {
            // Interleaved, the order swapped each round.
            let (first, second) = if n % 2 == 1 {
                (&direct, &through)
            } else {
                (&through, &direct)
            };
            let a = round(first, mock.key()).await;
            let b = round(second, mock.key()).await;
            let (d, p) = if n % 2 == 1 { (a, b) } else { (b, a) };
            for (arm, f) in [("direct", &d), ("proxied", &p)] {
                let ms = |t: Duration| t.as_secs_f64() * 1e3;
                let kinds: Vec<String> = (0..3)
                    .map(|k| format!("{:.2}/{:.2}", ms(f.p50[k]), ms(f.p99[k])))
                    .collect();
                println!(
                    "{n:>5}  {arm:<7}  {:>9}  {:>22}  {:>9}  {:>9}  {:>15.1}",
                    f.exchanges,
                    kinds[0],
                    kinds[1],
                    kinds[2],
                    f.cpu_per_exchange.as_secs_f64() * 1e6
                );
            }
            for kind in 0..3 {
                added[kind].push((p.p50[kind].as_secs_f64() - d.p50[kind].as_secs_f64()) * 1e3);
                added[3 + kind].push((p.p99[kind].as_secs_f64() - d.p99[kind].as_secs_f64()) * 1e3);
            }
            cpu_ratios.push(p.cpu_per_exchange.as_secs_f64() / d.cpu_per_exchange.as_secs_f64());
        }
        let stats = mock.stats();
        println!(
            "the mock saw {} submissions, {} polls, {} downloads",
            stats.submissions.values().sum::<u64>(),
            stats.polls,
            stats.downloads
        );
        for (index, values) in added.into_iter().enumerate() {
            let (median, low, high) = median_and_spread(values);
            let (quantile, kind) = (if index < 3 { "p50" } else { "p99" }, KINDS[index % 3]);
            println!(
                "{quantile} latency added to a {kind}: {median:.2} ms (median of {ROUNDS}; {low:.2} to {high:.2})"
            );
        }
        let (median, low, high) = median_and_spread(cpu_ratios);
        println!("CPU per exchange, proxied / direct: {median:.2}× (median of {ROUNDS}; {low:.2}–{high:.2})");
        println!("summary: {}", proxy.stop().await);
    });
}
