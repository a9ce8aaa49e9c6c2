//! Snapshots of a data session, in one run: Python with pandas imported and a frame
//! of about 100 MB loaded.
//!
//! - wasm: `snapshot` (the interpreter's changed pages and the workspace, sealed),
//!   `restore` of it into a new session (+ close), and `fork(10)` per child; the
//!   snapshot's size beside the bytes of memory the session changed;
//! - Docker, the same session: its kernel's memory cannot be captured, so
//!   `snapshot` keeps its variables by serialisation (the frame pickled) and
//!   `restore` unpickles them; beside it, the frame saved as a file in the workspace
//!   and `snapshot_files` + `restore` of that.
//!
//! - wasm, JavaScript with 200,000 objects: `snapshot`, `restore` + close and
//!   `fork(10)` per child, through the state access of the runtime sandlot builds;
//! - wasm, a data assistant's first cell: open + `import pandas as pd; import
//!   matplotlib` + a small frame printed + close, from a fresh interpreter and with
//!   warm starts (from a base with the data stack imported).
//!
//! Needs the Python runtime installed and, for Docker, the engine with the images
//! (`tests/run.sh` sees to both). Run with `cargo bench --bench snapshot`;
//! `SANDLOT_BENCH_BACKENDS=wasm` picks backends.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use sandlot::{Limits, Sandlot, Session};
use std::time::{Duration, Instant};

/// A frame of 13,107,200 float64 values: 100 MiB of data.
const FRAME: &str = "import pandas as pd\nimport numpy as np\n\
                     df = pd.DataFrame({'x': np.random.default_rng(1).random(13_107_200)})\n\
                     print(round(df.x.mean(), 2))";
const CHECK: &str = "print(len(df), round(df.x.mean(), 2))";

fn sandlot() -> Sandlot {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    sandlot::builder(plugins)
        .runtimes_dir(dirs.runtimes_dir())
        .cache_dir(dirs.cache.value.clone())
        .build()
        .unwrap()
}

fn limits() -> Limits {
    Limits {
        memory: 2 << 30,
        timeout: Duration::from_secs(300),
        ..Limits::default()
    }
}

fn data_session(sandlot: &Sandlot, backend: &str) -> Session {
    let mut session = sandlot
        .session("python")
        .backend(backend)
        .limits(limits())
        .open()
        .unwrap();
    let loaded = session.run(FRAME).unwrap();
    assert_eq!(loaded.stdout_text(), "0.5\n", "{}", loaded.stderr_text());
    session
}

fn checked(session: &mut Session) {
    let seen = session.run(CHECK).unwrap();
    assert_eq!(
        seen.stdout_text(),
        "13107200 0.5\n",
        "{}",
        seen.stderr_text()
    );
}

/// `fork(10)` of `session`, the time per child.
fn fork_per_child(group: &mut BenchmarkGroup<'_, WallTime>, session: &mut Session) {
    group.bench_function("fork 10, per child", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let started = Instant::now();
                let forks = session.fork(10).unwrap();
                total += started.elapsed() / 10;
                drop(forks);
            }
            total
        })
    });
}

fn wasm(criterion: &mut Criterion, sandlot: &Sandlot) {
    let mut session = data_session(sandlot, "wasm");
    let snapshot = session.snapshot().unwrap();
    let memory = snapshot.memory().unwrap();
    println!(
        "python (wasm) snapshot: {} MiB file; the interpreter's memory {} MiB, of which \
         {} MiB differ from a fresh one: {:.3}x the changed pages",
        snapshot.len() >> 20,
        memory.size >> 20,
        memory.changed >> 20,
        snapshot.len() as f64 / memory.changed as f64
    );
    {
        let mut restored = sandlot.restore(&snapshot).unwrap();
        checked(&mut restored);
    }
    let mut group = criterion.benchmark_group("python + pandas + 100 MB frame (wasm)");
    group.bench_function("snapshot", |b| b.iter(|| session.snapshot().unwrap()));
    group.bench_function("restore + close", |b| {
        b.iter(|| sandlot.restore(&snapshot).unwrap().close())
    });
    fork_per_child(&mut group, &mut session);
    group.finish();
    let mut forks = session.fork(2).unwrap();
    for fork in &mut forks {
        checked(fork);
    }
}

/// 200,000 objects in a JavaScript session: some 20 MB of QuickJS heap.
const JS_ROWS: &str =
    "const rows = Array.from({ length: 200000 }, (_, i) => ({ i, s: 'row' + i }));\n\
                       console.log(rows.length)";
const JS_CHECK: &str = "console.log(rows.length, rows[199999].s)";

fn javascript(criterion: &mut Criterion, sandlot: &Sandlot) {
    let js_checked = |session: &mut Session| {
        let seen = session.run(JS_CHECK).unwrap();
        assert_eq!(
            seen.stdout_text(),
            "200000 row199999\n",
            "{}",
            seen.stderr_text()
        );
    };
    let mut session = sandlot
        .session("javascript")
        .backend("wasm")
        .limits(limits())
        .open()
        .unwrap();
    let loaded = session.run(JS_ROWS).unwrap();
    assert_eq!(loaded.stdout_text(), "200000\n", "{}", loaded.stderr_text());
    let snapshot = session.snapshot().unwrap();
    let memory = snapshot.memory().unwrap();
    println!(
        "javascript (wasm) snapshot: {} MiB file; the interpreter's memory {} MiB, of which \
         {} MiB differ from a fresh one: {:.3}x the changed pages",
        snapshot.len() >> 20,
        memory.size >> 20,
        memory.changed >> 20,
        snapshot.len() as f64 / memory.changed as f64
    );
    js_checked(&mut sandlot.restore(&snapshot).unwrap());
    let mut group = criterion.benchmark_group("javascript + 200,000 objects (wasm)");
    group.bench_function("snapshot", |b| b.iter(|| session.snapshot().unwrap()));
    group.bench_function("restore + close", |b| {
        b.iter(|| sandlot.restore(&snapshot).unwrap().close())
    });
    fork_per_child(&mut group, &mut session);
    group.finish();
    for fork in &mut session.fork(2).unwrap() {
        js_checked(fork);
    }
}

/// The first cell of a data assistant's session.
const FIRST_CELL: &str = "import pandas as pd\nimport matplotlib\n\
                          print(pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.5, 6.25]}))";

fn first_cell(criterion: &mut Criterion, sandlot: &Sandlot) {
    let cell = || {
        let mut session = sandlot.session("python").backend("wasm").open().unwrap();
        let ran = session.run(FIRST_CELL).unwrap();
        assert!(ran.stdout_text().contains("6.25"), "{}", ran.stderr_text());
        session.close();
    };
    let mut group = criterion.benchmark_group(
        "first cell: open + import pandas, matplotlib + a frame printed + close (wasm)",
    );
    sandlot.set_warm_start(false);
    group.bench_function("fresh interpreter", |b| b.iter(cell));
    sandlot.set_warm_start(true);
    assert!(sandlot.session("python").backend("wasm").warm_up().unwrap());
    group.bench_function("warm start", |b| b.iter(cell));
    group.finish();
    sandlot.set_warm_start(false);
}

fn docker(criterion: &mut Criterion, sandlot: &Sandlot) {
    let mut session = data_session(sandlot, "docker");
    let pickled = session.snapshot().unwrap();
    assert!(pickled.holds_namespace() && pickled.unsaved().is_empty());
    println!(
        "python (docker) snapshot of the variables, by serialisation: {} MiB",
        pickled.len() >> 20
    );
    {
        let mut restored = sandlot.restore(&pickled).unwrap();
        checked(&mut restored);
    }
    let saved = session
        .run("np.save('frame.npy', df.x.to_numpy())")
        .unwrap();
    assert_eq!(saved.exit_code, 0, "{}", saved.stderr_text());
    let snapshot = session.snapshot_files().unwrap();
    println!(
        "python (docker) snapshot of the files: {} MiB",
        snapshot.len() >> 20
    );
    let mut group = criterion.benchmark_group("python + pandas + 100 MB frame (docker)");
    group
        .sample_size(10)
        .sampling_mode(criterion::SamplingMode::Flat)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("snapshot, variables by serialisation", |b| {
        b.iter(|| session.snapshot().unwrap())
    });
    group.bench_function("restore, variables by serialisation + close", |b| {
        b.iter(|| sandlot.restore(&pickled).unwrap().close())
    });
    group.bench_function("snapshot of the files", |b| {
        b.iter(|| session.snapshot_files().unwrap())
    });
    group.bench_function("restore + load the frame + close", |b| {
        b.iter(|| {
            let mut restored = sandlot
                .session("python")
                .backend("docker")
                .limits(limits())
                .restore(&snapshot)
                .unwrap();
            let loaded = restored
                .run("import numpy as np, pandas as pd\ndf = pd.DataFrame({'x': np.load('frame.npy')})")
                .unwrap();
            assert_eq!(loaded.exit_code, 0, "{}", loaded.stderr_text());
            restored.close();
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let only = std::env::var("SANDLOT_BENCH_BACKENDS").unwrap_or_default();
    let wanted = |backend: &str| only.is_empty() || only.split(',').any(|b| b == backend);
    let sandlot = sandlot();
    if wanted("wasm") {
        first_cell(&mut criterion, &sandlot);
        wasm(&mut criterion, &sandlot);
    }
    if wanted("wasm") || wanted("javascript") {
        javascript(&mut criterion, &sandlot);
    }
    if wanted("docker") {
        docker(&mut criterion, &sandlot);
    }
}
