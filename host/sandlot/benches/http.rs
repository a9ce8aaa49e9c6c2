//! The HTTP API under load: 10 concurrent clients sending `print(1)` to `sandlot
//! serve` (in this process, over real TCP), on wasm and on Docker with a pool, two
//! ways: `POST /v1/run` (a fresh sandbox per request) and `POST /v1/sessions/{id}/run`
//! (each client in a session of its own, as an agent works). Prints requests per
//! second and latency percentiles of each.
//!
//! Needs the Python runtime installed and Docker with the images (`tests/run.sh`).
//! Run with `cargo bench --bench http`; `SANDLOT_BENCH_BACKENDS=wasm` picks backends
//! and `SANDLOT_BENCH_SECONDS` sets the length of each measurement (default 20).

#![allow(missing_docs)]

use sandlot::backend::pool::{Exhausted, PoolOptions};
use sandlot::server::manager::{ManagerSettings, SessionManager};
use sandlot::server::serve::{HttpApi, ServeOptions, Token};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const CLIENTS: usize = 10;
const TOKEN: &str = "bench-0123456789abcdef0123456789";

/// What one measurement saw.
struct Measured {
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Measured {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted.get(index).copied().unwrap_or_default()
    }

    fn report(&self, what: &str) {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{what}: {:.1} requests/s over {:.0} s, {} errors; latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
            self.requests as f64 / self.elapsed.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            self.errors,
            ms(self.percentile(0.50)),
            ms(self.percentile(0.90)),
            ms(self.percentile(0.99)),
        );
    }
}

/// `CLIENTS` tasks sending what `request` makes, each waiting for its answer before
/// the next, for `window`.
async fn load(
    window: Duration,
    request: impl Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder + Send + Sync + 'static,
) -> Measured {
    let request = std::sync::Arc::new(request);
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let request = request.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let (mut latencies, mut errors) = (Vec::new(), 0);
                while started.elapsed() < window {
                    let sent = Instant::now();
                    let answer = request(&http, client).send().await;
                    let ok = match answer {
                        Ok(answer) if answer.status().is_success() => answer
                            .json::<Value>()
                            .await
                            .is_ok_and(|run| run["stdout"] == "1\n"),
                        _ => false,
                    };
                    if ok {
                        latencies.push(sent.elapsed());
                    } else {
                        errors += 1;
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut measured = Measured {
        requests: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
    };
    for task in tasks {
        let (latencies, errors) = task.await.unwrap();
        measured.requests += latencies.len();
        measured.errors += errors;
        measured.latencies.extend(latencies);
    }
    measured.elapsed = started.elapsed();
    measured
}

async fn bench(backend: &str, window: Duration) {
    let mut config = sandlot::Config::default();
    if backend != "wasm" {
        config.pools.insert(
            backend.to_string(),
            PoolOptions {
                min_idle: 4,
                max_size: 12,
                when_exhausted: Exhausted::Wait,
                acquire_timeout: Duration::from_secs(120),
                ..PoolOptions::default()
            },
        );
    }
    let service =
        sandlot::service::Service::from_config(config, &Default::default(), sandlot::providers())
            .unwrap();
    let manager = SessionManager::new(
        service,
        ManagerSettings::default()
            .max_per_client(64)
            .max_sessions(64),
    )
    .unwrap();
    let address = "127.0.0.1:0".parse().unwrap();
    let api = HttpApi::bind(
        manager.clone(),
        ServeOptions::new(address, vec![Token::new("bench", TOKEN)]),
    )
    .await
    .unwrap();
    let base = format!("http://{}", api.address());

    // One-off runs: a fresh sandbox per request.
    let run_url = format!("{base}/v1/run");
    let body = json!({ "language": "python", "backend": backend, "code": "print(1)" });
    let one_off = {
        let (url, body) = (run_url.clone(), body.clone());
        move |http: &reqwest::Client, _: usize| http.post(&url).bearer_auth(TOKEN).json(&body)
    };
    // Warm-up, untimed: the runtime compiled and the pool's key warm.
    load(Duration::from_secs(3), one_off.clone()).await;
    load(window, one_off)
        .await
        .report(&format!("{backend}: POST /v1/run, {CLIENTS} clients"));

    // A session per client.
    let http = reqwest::Client::new();
    let mut urls = Vec::new();
    for _ in 0..CLIENTS {
        let opened: Value = http
            .post(format!("{base}/v1/sessions"))
            .bearer_auth(TOKEN)
            .json(&json!({ "language": "python", "backend": backend }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = opened["id"].as_str().unwrap_or_else(|| panic!("{opened}"));
        urls.push(format!("{base}/v1/sessions/{id}/run"));
    }
    let code = json!({ "code": "print(1)" });
    let in_session = move |http: &reqwest::Client, client: usize| {
        http.post(&urls[client]).bearer_auth(TOKEN).json(&code)
    };
    load(Duration::from_secs(2), in_session.clone()).await;
    load(window, in_session).await.report(&format!(
        "{backend}: POST /v1/sessions/{{id}}/run, {CLIENTS} clients"
    ));

    api.shutdown().await;
    tokio::task::spawn_blocking(move || {
        manager.shutdown();
    })
    .await
    .unwrap();
}

fn main() {
    let only = std::env::var("SANDLOT_BENCH_BACKENDS").unwrap_or_default();
    let seconds = std::env::var("SANDLOT_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for backend in ["wasm", "docker"] {
        if !only.is_empty() && !only.split(',').any(|b| b == backend) {
            continue;
        }
        runtime.block_on(bench(backend, Duration::from_secs(seconds)));
    }
}
