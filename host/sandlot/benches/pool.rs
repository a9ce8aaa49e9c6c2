//! Pools against cold opens, in one run, on wasm, Docker, Kubernetes and native (Python):
//!
//! - latency: acquire + `print(1)` + release from a pool that has caught up (the
//!   timed part starts once every sandbox is ready and the used ones are destroyed,
//!   as for an agent that calls every few seconds), and back to back (once one
//!   sandbox is ready), next to a cold open + `print(1)` + close;
//! - throughput: runs per second of open + `print(1)` + close with 1, 4 and 16
//!   concurrent callers, with and without a pool. Every pooled session gets a fresh
//!   sandbox, so a pool's sustained rate is the rate at which it can make them.
//!
//! Needs the Python runtime installed, Docker with the images and the local cluster
//! with `KUBECONFIG` pointing at it (`tests/run.sh` sees to all three). Run with
//! `cargo bench --bench pool`; `SANDLOT_BENCH_BACKENDS=docker,kubernetes` picks
//! backends.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::Criterion;
use sandlot::backend::pool::{Exhausted, PoolOptions, PoolStats};
use sandlot::Sandlot;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sandlot(pooled: Option<(&str, usize)>) -> Sandlot {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    let mut builder = sandlot::builder(plugins)
        .runtimes_dir(dirs.runtimes_dir())
        .cache_dir(dirs.cache.value.clone());
    if let Some((backend, size)) = pooled {
        builder = builder.pool(
            backend,
            PoolOptions {
                min_idle: size,
                max_size: size,
                when_exhausted: Exhausted::Wait,
                acquire_timeout: Duration::from_secs(300),
                ..PoolOptions::default()
            },
        );
    }
    builder.build().unwrap()
}

fn print_one(sandlot: &Sandlot, backend: &str) {
    let mut session = sandlot.session("python").backend(backend).open().unwrap();
    assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n");
    session.close();
}

/// Whether a pool of `size` has caught up: every sandbox ready, none being warmed,
/// none waiting to be destroyed.
fn caught_up(stats: &PoolStats, size: usize) -> bool {
    stats.idle == size && stats.warming == 0 && stats.created - stats.destroyed == size as u64
}

/// Runs per second of `print_one` with `callers` threads for `window`.
fn throughput(sandlot: &Sandlot, backend: &str, callers: usize, window: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (sandlot, done, backend) = (sandlot.clone(), done.clone(), backend.to_string());
            std::thread::spawn(move || {
                while started.elapsed() < window {
                    print_one(&sandlot, &backend);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    // SANDLOT_BENCH_BACKENDS=wasm measures one of them.
    let only = std::env::var("SANDLOT_BENCH_BACKENDS").unwrap_or_default();
    for (backend, size, window, callers) in [
        ("wasm", 4, Duration::from_secs(5), &[1, 4, 16][..]),
        ("docker", 4, Duration::from_secs(15), &[1, 4, 16][..]),
        ("native", 4, Duration::from_secs(10), &[1, 4, 16][..]),
        // A pod takes seconds: fewer samples, one iteration each, shorter runs.
        ("kubernetes", 3, Duration::from_secs(30), &[1, 4][..]),
    ] {
        if !only.is_empty() && !only.split(',').any(|b| b == backend) {
            continue;
        }
        let cold = sandlot(None);
        let pooled = sandlot(Some((backend, size)));
        pooled.session("python").backend(backend).warm().unwrap();
        let pool = pooled.pool(backend).unwrap();
        let mut group = criterion.benchmark_group(format!("python ({backend})"));
        if backend == "kubernetes" {
            group
                .sample_size(10)
                .sampling_mode(criterion::SamplingMode::Flat)
                .measurement_time(Duration::from_secs(30));
        }
        group.bench_function("cold open + print 1 + close", |b| {
            b.iter(|| print_one(&cold, backend))
        });
        // Untimed before each: the pool catches up, as between an agent's calls; or,
        // back to back, only until a sandbox is ready, while the pool is still
        // replacing and destroying the ones before on the other cores.
        for (name, ready) in [
            (
                "pooled acquire + print 1 + release",
                caught_up as fn(&PoolStats, usize) -> bool,
            ),
            ("pooled, back to back", |stats: &PoolStats, _| {
                stats.idle > 0
            }),
        ] {
            group.bench_function(name, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let waited = Instant::now();
                        loop {
                            let stats = pool.stats();
                            if ready(&stats, size) {
                                break;
                            }
                            assert!(
                                waited.elapsed() < Duration::from_secs(120),
                                "the pool did not catch up in 2 minutes: {stats:?}"
                            );
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        let started = Instant::now();
                        print_one(&pooled, backend);
                        total += started.elapsed();
                    }
                    total
                })
            });
        }
        group.finish();
        for &callers in callers {
            let unpooled = throughput(&cold, backend, callers, window);
            let with_pool = throughput(&pooled, backend, callers, window);
            println!(
                "python ({backend}) throughput, {callers} callers: {unpooled:.1} runs/s cold, \
                 {with_pool:.1} runs/s pooled"
            );
        }
        println!("python ({backend}) pool stats: {:?}", pool.stats());
        pool.close(Duration::from_secs(30));
    }
}
