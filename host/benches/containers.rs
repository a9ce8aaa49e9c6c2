//! The Docker and Podman backends side by side, on the same engines in one run:
//! a cold open + `print(1)` + close of a Python container, a warm `print(1)` in an open
//! session through the agent against the same program through `docker exec`, and
//! close on its own. Needs both engines and the `sandlot/python` image
//! (`tests/services.sh`). Run with `cargo bench --bench containers`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::Criterion;
use sandlot::{BackendChoice, Engine, Sandlot};
use std::time::{Duration, Instant};

fn main() {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let runtimes = tempfile::tempdir().unwrap();
    let sandlot = Sandlot::new(plugins, runtimes.path(), None).unwrap();
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(15));
    for (engine, choice) in [
        (Engine::Docker, BackendChoice::Docker),
        (Engine::Podman, BackendChoice::Podman),
    ] {
        let backend = sandlot.containers(engine).unwrap();
        let open = || {
            let mut builder = sandlot.session("python");
            builder.backend(choice);
            builder.open().unwrap()
        };
        let mut group = criterion.benchmark_group(format!("python ({})", engine.name()));
        group.bench_function("cold open + print 1 + close", |b| {
            b.iter(|| {
                let mut session = open();
                assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n");
                session.close();
            })
        });
        let mut session = open();
        group.bench_function("warm print 1 through the agent", |b| {
            b.iter(|| assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n"))
        });
        let name = session.sandbox_name().unwrap().to_string();
        group.bench_function(
            format!("warm print 1 through {} exec", engine.name()),
            |b| {
                b.iter(|| {
                    let (code, stdout) =
                        backend.exec(&name, &["python3", "-c", "print(1)"]).unwrap();
                    assert_eq!((code, stdout.as_slice()), (0, b"1\n".as_slice()));
                })
            },
        );
        session.close();
        group.bench_function("close", |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let session = open();
                    let started = Instant::now();
                    session.close();
                    total += started.elapsed();
                }
                total
            })
        });
        group.finish();
    }
    criterion.final_summary();
}
