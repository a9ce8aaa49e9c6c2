//! The native backend beside Docker, in one run: a cold open + `print(1)` + close of a
//! Python sandbox (its first run starts the kernel), a warm `print(1)` as a cell of the
//! kernel and as a new process through the agent, and the CPU a fresh sandbox costs:
//! this process and its children (`getrusage`: the jail and everything in it; for
//! Docker, only the client side), and the whole machine (`/proc/stat`: also the
//! engine's daemons and the kernel's own work, such as tearing namespaces down), per
//! sandbox, with 4 callers opening them. Needs bubblewrap, Docker and the images
//! (`tests/services.sh`). Run with `cargo bench -p sandlot --features full --bench
//! native`; throughput with 1, 4 and 16 callers is in `--bench pool`.
//! `SANDLOT_BENCH_PROFILE=S` runs only fresh native sandboxes with 4 callers for S
//! seconds, for `perf record -a`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]
#[path = "support/cpu.rs"]
mod cpu;

use cpu::{machine_cpu, own_cpu};
use criterion::Criterion;
use std::time::{Duration, Instant};

fn print_one(sandlot: &sandlot::Sandlot, backend: &str) {
    let mut session = sandlot.session("python").backend(backend).open().unwrap();
    assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n");
    session.close();
}

/// Opens `count` sandboxes with `callers` threads; returns the CPU per sandbox of
/// this process tree and of the machine.
fn cpu_per_sandbox(
    sandlot: &sandlot::Sandlot,
    backend: &str,
    callers: usize,
    count: usize,
) -> (Duration, Duration) {
    let (own, machine) = (own_cpu(), machine_cpu());
    std::thread::scope(|scope| {
        for _ in 0..callers {
            scope.spawn(|| {
                for _ in 0..count / callers {
                    print_one(sandlot, backend);
                }
            });
        }
    });
    let done = (count / callers * callers) as u32;
    ((own_cpu() - own) / done, (machine_cpu() - machine) / done)
}

fn main() {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    let sandlot = sandlot::builder(plugins)
        .runtimes_dir(dirs.runtimes_dir())
        .cache_dir(dirs.cache.value.clone())
        .build()
        .unwrap();
    if let Ok(seconds) = std::env::var("SANDLOT_BENCH_PROFILE") {
        let seconds: u64 = seconds.parse().expect("SANDLOT_BENCH_PROFILE: seconds");
        print_one(&sandlot, "native");
        let started = Instant::now();
        let (mut done, mut own, mut machine) = (0u32, Duration::ZERO, Duration::ZERO);
        while started.elapsed() < Duration::from_secs(seconds) {
            let (o, m) = cpu_per_sandbox(&sandlot, "native", 4, 40);
            (own, machine, done) = (own + o, machine + m, done + 1);
        }
        println!(
            "python (native), 4 callers: {:.1} sandboxes/s, CPU per sandbox: this \
             process and its children {:.1} ms, the machine {:.1} ms",
            f64::from(done * 40) / started.elapsed().as_secs_f64(),
            (own / done).as_secs_f64() * 1e3,
            (machine / done).as_secs_f64() * 1e3,
        );
        return;
    }
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    for backend in ["native", "docker"] {
        let open_as = |one_shot: bool| {
            let mut builder = sandlot.session("python");
            builder.backend(backend).one_shot(one_shot);
            builder.open().unwrap()
        };
        let mut group = criterion.benchmark_group(format!("python ({backend})"));
        group.bench_function("cold open + print 1 + close", |b| {
            b.iter(|| print_one(&sandlot, backend))
        });
        let mut session = open_as(false);
        group.bench_function("warm print 1 in the kernel", |b| {
            b.iter(|| assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n"))
        });
        session.close();
        let mut session = open_as(true);
        group.bench_function("warm print 1 as a new process through the agent", |b| {
            b.iter(|| assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n"))
        });
        session.close();
        group.finish();
    }
    for (backend, count) in [("native", 200), ("docker", 40)] {
        let started = Instant::now();
        let (own, machine) = cpu_per_sandbox(&sandlot, backend, 4, count);
        println!(
            "python ({backend}) CPU per fresh sandbox (open + print 1 + close, 4 callers, \
             {count} sandboxes in {:.1} s): this process and its children {:.1} ms, the \
             machine {:.1} ms",
            started.elapsed().as_secs_f64(),
            own.as_secs_f64() * 1e3,
            machine.as_secs_f64() * 1e3,
        );
    }
}
