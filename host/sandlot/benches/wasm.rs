//! The wasm backend, Python and JavaScript: a warm session open + print 1 + close, a
//! warm run in an open session, and memory per idle session. Needs both runtimes
//! installed (`sandlot runtimes install python|javascript`). Run with
//! `cargo bench --bench wasm`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::Criterion;
use std::time::Duration;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn main() {
    let sandlot = sandlot::from_environment().unwrap();
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
    criterion.final_summary();

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
