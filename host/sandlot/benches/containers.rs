//! The Docker and Podman backends side by side, on the same engines in one run:
//! a cold open + `print(1)` + close of a Python container (its first run starts the
//! kernel), a warm `print(1)` in an open session as a cell of the kernel, as a new
//! process through the agent (a one-shot session), and through `docker exec`, and
//! close on its own; and the same Docker reached over TCP with TLS, as a remote engine
//! is (the agent copied in, spoken to over an attach stream); then a warm cell of the
//! JavaScript, R, Ruby and Bash kernels on Docker. Needs both engines, the TLS proxy
//! and the images (`tests/services.sh`). Run with
//! `cargo bench --bench containers`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::Criterion;
use sandlot::docker::Engine;
use sandlot::docker::{ContainerBackend, TlsFiles};

use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let runtimes = tempfile::tempdir().unwrap();
    let remote = ContainerBackend::builder(Engine::Docker)
        .endpoint("tcp://127.0.0.1:2376")
        .tls(TlsFiles::from_dir(
            "/var/lib/sandlot-tests/docker-tls/client".as_ref(),
        ))
        .name("docker-tls")
        .connect()
        .expect("the TLS proxy of tests/services.sh");
    let sandlot = sandlot::builder(plugins)
        .runtimes_dir(runtimes.path())
        .backend(Arc::new(remote))
        .build()
        .unwrap();
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(15));
    for (engine, choice) in [
        (Engine::Docker, "docker"),
        (Engine::Podman, "podman"),
        (Engine::Docker, "docker-tls"),
    ] {
        let backend = sandlot::docker::ContainerBackend::of(&sandlot, engine).unwrap();
        let open_as = |one_shot: bool| {
            let mut builder = sandlot.session("python");
            builder.backend(choice).one_shot(one_shot);
            builder.open().unwrap()
        };
        let open = || open_as(false);
        let mut group = criterion.benchmark_group(format!("python ({choice})"));
        group.bench_function("cold open + print 1 + close", |b| {
            b.iter(|| {
                let mut session = open();
                assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n");
                session.close();
            })
        });
        let mut session = open();
        group.bench_function("warm print 1 in the kernel", |b| {
            b.iter(|| assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n"))
        });
        session.close();
        let mut session = open_as(true);
        group.bench_function("warm print 1 as a new process through the agent", |b| {
            b.iter(|| assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n"))
        });
        let name = session.sandbox_name().unwrap();
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
    // The other kernels, on Docker: a warm cell that prints 1.
    let mut group = criterion.benchmark_group("kernels (docker)");
    for (language, code, printed) in [
        ("javascript", "console.log(1)", "1\n"),
        ("r", "cat('1\\n')", "1\n"),
        ("ruby", "puts 1", "1\n"),
        ("bash", "echo 1", "1\n"),
    ] {
        let mut builder = sandlot.session(language);
        builder.backend("docker");
        let mut session = builder.open().unwrap();
        assert_eq!(session.run(code).unwrap().stdout_text(), printed);
        group.bench_function(format!("warm {language} cell"), |b| {
            b.iter(|| assert_eq!(session.run(code).unwrap().stdout_text(), printed))
        });
        session.close();
    }
    group.finish();
    criterion.final_summary();
}
