//! Plugin host benchmarks: loading the built-in handlers with an empty and a warm
//! cache, calling a handler through its reused `InstancePre`, and the analysis gate
//! over 1 KB to 10 MB of literal-heavy code in three language families (its cost per
//! MB should not grow with the size).
//!
//! Run with `cargo bench -p sandlot --bench plugins`; docs/performance.md has the figures.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
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

/// `bytes` (about) of code that inlines a table, as a model hands data to its program,
/// with a finding on the last line, in `language`.
fn inlined_table(language: &str, bytes: usize) -> String {
    let row = |i: usize| format!("    {{\"id\": {i}, \"name\": \"user{i}\", \"score\": 1.5}},\n");
    let mut table = String::with_capacity(bytes + 64);
    let mut i = 0;
    while table.len() < bytes {
        i += 1;
        table.push_str(&row(i));
    }
    match language {
        "python" => format!("rows = [\n{table}]\nimport os\nos.system('id')\n"),
        "javascript" => {
            format!("const rows = [\n{table}];\nrequire('child_process').execSync('id');\n")
        }
        "bash" => format!("rows='\n{table}'\nrm -rf /\n"),
        other => unreachable!("no table for {other}"),
    }
}

fn gate(c: &mut Criterion) {
    let host = PluginHost::builder().no_cache().load().unwrap();
    let mut group = c.benchmark_group("analyze an inlined table");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for language in ["python", "javascript", "bash"] {
        let handler = host.language(language).unwrap();
        for bytes in [1 << 10, 100 << 10, 1 << 20, 10 << 20] {
            let code = inlined_table(language, bytes);
            assert!(!handler.analyze(&code, &[]).unwrap().is_empty());
            group.throughput(Throughput::Bytes(code.len() as u64));
            let size = match bytes {
                b if b >= 1 << 20 => format!("{} MB", b >> 20),
                b => format!("{} KB", b >> 10),
            };
            group.bench_with_input(BenchmarkId::new(language, size), &code, |b, code| {
                b.iter(|| handler.analyze(code, &[]).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, load, call, gate);
criterion_main!(benches);
