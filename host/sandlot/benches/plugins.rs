//! Plugin host benchmarks: loading the built-in handlers with an empty and a warm
//! cache, and calling a handler through its reused `InstancePre`.
//!
//! Run with `cargo bench -p sandlot --bench plugins`; docs/performance.md has the figures.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use sandlot::{PlanOptions, PluginHost, Restriction, RestrictionKind, Severity};
use std::time::Duration;

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load built-ins");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("cold (empty cache)", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                let host = PluginHost::builder().cache_dir(dir.path()).load().unwrap();
                assert_eq!(host.languages().len(), 9);
                dir
            },
            BatchSize::PerIteration,
        )
    });
    let warm = tempfile::tempdir().unwrap();
    PluginHost::builder().cache_dir(warm.path()).load().unwrap();
    group.bench_function("warm cache", |b| {
        b.iter(|| {
            let host = PluginHost::builder().cache_dir(warm.path()).load().unwrap();
            assert_eq!(host.languages().len(), 9);
        })
    });
    group.finish();
}

fn call(c: &mut Criterion) {
    let host = PluginHost::builder().no_cache().load().unwrap();
    let python = host.language("python").unwrap();
    let code = "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).sum())\n";
    let libraries = vec!["pandas".to_string()];
    let options = PlanOptions::default();
    let mut group = c.benchmark_group("handler call");
    group.bench_function("python plan", |b| {
        b.iter(|| python.plan(code, &libraries, &options).unwrap())
    });
    group.bench_function("python analyze", |b| {
        b.iter(|| python.analyze(code, &[]).unwrap())
    });
    // A policy's restrictions travel with every call and are matched against every
    // name the analysis resolves.
    let restricted: Vec<Restriction> = ["socket", "ctypes", "pandas"]
        .map(|name| Restriction {
            kind: RestrictionKind::Module,
            name: name.parse().unwrap(),
            severity: Severity::High,
        })
        .into_iter()
        .chain(
            ["os.system", "eval", "subprocess.run*"].map(|name| Restriction {
                kind: RestrictionKind::Call,
                name: name.parse().unwrap(),
                severity: Severity::Critical,
            }),
        )
        .collect();
    group.bench_function("python analyze, 6 restrictions", |b| {
        b.iter(|| python.analyze(code, &restricted).unwrap())
    });
    group.finish();
}

criterion_group!(benches, load, call);
criterion_main!(benches);
