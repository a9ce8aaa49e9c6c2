//! The wasm backend, Python and JavaScript: a warm session open + print 1 + close, a
//! warm run in an open session, and memory per idle session; for Python, the same
//! open + print 1 + close from a fresh interpreter and with warm starts (a base with
//! the data stack imported, restored copy-on-write), with the CPU each costs
//! (`getrusage` of this process) and how many a second 1 and 4 callers get, in this
//! process and in 2 worker processes (this program started again). Needs both
//! runtimes installed (`sandlot runtimes install python|javascript`). Run with
//! `cargo bench --bench wasm`. `SANDLOT_BENCH_PROFILE=S` runs only fresh Python
//! sandboxes with 4 callers (`SANDLOT_BENCH_CALLERS=N`: N) for S seconds, for `perf
//! record`, or to run copies side by side; `SANDLOT_BENCH_WORKERS=N` puts them in N
//! worker processes.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

#[path = "support/cpu.rs"]
mod cpu;

use criterion::Criterion;
use std::time::{Duration, Instant};

fn print_one(sandlot: &sandlot::Sandlot) {
    let mut session = sandlot.session("python").backend("wasm").open().unwrap();
    assert_eq!(session.run("print(1)").unwrap().stdout, b"1\n");
    session.close();
}

/// How many sandboxes [`rate_and_cpu`] opens with `callers` threads: about 200, the
/// same number for each.
fn round_of(callers: usize) -> usize {
    200 / callers * callers
}

/// Fresh sandboxes opened, used for `print(1)` and closed by `callers` threads, 200 in
/// all: how many a second, and the CPU of each (this process's, the machine's).
fn rate_and_cpu(sandlot: &sandlot::Sandlot, callers: usize) -> (f64, Duration, Duration) {
    let count = round_of(callers);
    let (started, cpu, machine) = (Instant::now(), cpu::own_cpu(), cpu::machine_cpu());
    std::thread::scope(|scope| {
        for _ in 0..callers {
            scope.spawn(|| {
                for _ in 0..count / callers {
                    print_one(sandlot);
                }
            });
        }
    });
    (
        count as f64 / started.elapsed().as_secs_f64(),
        (cpu::own_cpu() - cpu) / count as u32,
        (cpu::machine_cpu() - machine) / count as u32,
    )
}

/// Fresh sandboxes in worker processes, 1, 4 and 16 callers, fifteen rounds of each in
/// turn: the medians. (With five, the 4 / 1 ratio moved by 0.05 from one run to the next:
/// a round is a quarter of a second.)
fn in_workers_scaling(workers: usize) {
    let sandlot = in_workers(workers);
    print_one(&sandlot);
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let callers = [1, 4, 16];
    let (mut rates, mut cpus) = (callers.map(|_| Vec::new()), callers.map(|_| Vec::new()));
    for _ in 0..15 {
        for (at, callers) in callers.into_iter().enumerate() {
            let (rate, _, machine) = rate_and_cpu(&sandlot, callers);
            rates[at].push(rate);
            cpus[at].push(machine.as_secs_f64() * 1e3);
        }
    }
    let [one, four, sixteen] = rates.map(median);
    let [cpu_one, cpu_four, _] = cpus.map(median);
    println!(
        "python (wasm, {workers} worker processes), fresh interpreter: fresh sandboxes/s 1 / 4 \
         / 16 callers {one:.0} / {four:.0} / {sixteen:.0} (4 / 1: {:.2}x); CPU per sandbox \
         (the machine) 1 / 4 callers {cpu_one:.2} / {cpu_four:.2} ms",
        four / one
    );
}

/// Fresh interpreters against warm starts.
fn warm_starts(criterion: &mut Criterion, sandlot: &sandlot::Sandlot) {
    let mut group = criterion.benchmark_group("python (wasm), open + print 1 + close");
    sandlot.set_warm_start(false);
    group.bench_function("fresh interpreter", |b| b.iter(|| print_one(sandlot)));
    sandlot.set_warm_start(true);
    assert!(sandlot.session("python").backend("wasm").warm_up().unwrap());
    group.bench_function("warm start", |b| b.iter(|| print_one(sandlot)));
    group.finish();
    for warm in [false, true] {
        sandlot.set_warm_start(warm);
        if warm {
            assert!(sandlot.session("python").backend("wasm").warm_up().unwrap());
        }
        let (one, cpu_one, _) = rate_and_cpu(sandlot, 1);
        let (four, cpu_four, _) = rate_and_cpu(sandlot, 4);
        println!(
            "python (wasm), {}: fresh sandboxes/s 1 / 4 callers {one:.0} / {four:.0} \
             ({:.2}x); CPU per sandbox (this process) {:.2} / {:.2} ms",
            if warm {
                "warm start"
            } else {
                "fresh interpreter"
            },
            four / one,
            cpu_one.as_secs_f64() * 1e3,
            cpu_four.as_secs_f64() * 1e3,
        );
    }
    sandlot.set_warm_start(false);
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Fresh Python sandboxes with `callers` threads for `seconds`, and what they cost:
/// the CPU of this process (which misses workers) and of the whole machine.
fn profile(sandlot: &sandlot::Sandlot, seconds: u64, callers: usize) {
    sandlot.set_warm_start(false);
    let started = Instant::now();
    let (mut rounds, mut cpu, mut machine) = (0u32, Duration::ZERO, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(seconds) {
        let (_, each, machine_each) = rate_and_cpu(sandlot, callers);
        cpu += each;
        machine += machine_each;
        rounds += 1;
    }
    println!(
        "python (wasm), fresh interpreter, {callers} callers: {:.0} sandboxes/s, CPU per \
         sandbox {:.2} ms (this process), {:.2} ms (the machine)",
        f64::from(rounds * round_of(callers) as u32) / started.elapsed().as_secs_f64(),
        (cpu / rounds).as_secs_f64() * 1e3,
        (machine / rounds).as_secs_f64() * 1e3,
    );
}

/// A Sandlot whose wasm backend keeps its sandboxes in `workers` processes.
fn in_workers(workers: usize) -> sandlot::Sandlot {
    let mut config = sandlot::Config::discover(None).unwrap();
    config.wasm.workers = workers;
    sandlot::from_config(config, &Default::default()).unwrap()
}

fn main() {
    // The workers of `in_workers` are this program started again.
    sandlot::wasm::worker::serve_if_asked();
    let sandlot = match std::env::var("SANDLOT_BENCH_WORKERS") {
        Ok(workers) => in_workers(workers.parse().expect("SANDLOT_BENCH_WORKERS: a number")),
        Err(_) => sandlot::from_environment().unwrap(),
    };
    if let Ok(seconds) = std::env::var("SANDLOT_BENCH_PROFILE") {
        print_one(&sandlot);
        let callers = std::env::var("SANDLOT_BENCH_CALLERS").map_or(4, |callers| {
            callers
                .parse()
                .expect("SANDLOT_BENCH_CALLERS: a number of threads")
        });
        profile(
            &sandlot,
            seconds.parse().expect("SANDLOT_BENCH_PROFILE: seconds"),
            callers,
        );
        return;
    }
    let mut criterion = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(10));
    let languages = [("python", "print(1)"), ("javascript", "console.log(1)")];
    for (language, code) in languages {
        assert!(
            sandlot::wasm::WasmBackend::of(&sandlot).serves(language),
            "install the runtime first: sandlot runtimes install {language}"
        );
        let mut group = criterion.benchmark_group(format!("{language} (wasm)"));
        group.bench_function("open + print 1 + close", |b| {
            b.iter(|| {
                let mut session = sandlot.session(language).open().unwrap();
                assert_eq!(session.run(code).unwrap().stdout, b"1\n");
                session.close();
            })
        });
        let mut session = sandlot.session(language).open().unwrap();
        group.bench_function("run print 1 in an open session", |b| {
            b.iter(|| assert_eq!(session.run(code).unwrap().stdout, b"1\n"))
        });
        group.finish();
    }
    warm_starts(&mut criterion, &sandlot);
    criterion.final_summary();
    in_workers_scaling(2);

    // Memory per idle session: open many, touch each once, measure resident memory.
    for (language, code) in languages {
        let before = rss_kib();
        let sessions: Vec<_> = (0..20)
            .map(|_| {
                let mut session = sandlot.session(language).open().unwrap();
                session.run(code).unwrap();
                session
            })
            .collect();
        let per_session = (rss_kib() - before) / sessions.len() as u64;
        println!("{language} (wasm)/resident memory per idle session: {per_session} KiB");
    }
}
