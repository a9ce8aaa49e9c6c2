//! Tool calls from sandboxed code: the round trip of one no-op call from Python (a run
//! of 1,000 calls against the same loop without them, per call), with a blocking and
//! with an async handler, and 1,000 calls made by one program against the same work
//! as 1,000 separate runs (the speed-up of calling tools from a program), on each
//! backend named in `SANDLOT_BENCH_BACKENDS` (default `wasm,docker`). Needs the Python
//! runtime installed (`sandlot runtimes install python`) and, for a container backend,
//! its engine and images. Run with `cargo bench --bench tools`; prints medians of its
//! own timed rounds.

use sandlot::tool::Tool;
use serde_json::json;
use std::time::{Duration, Instant};

/// Median of `rounds` timings of `work`, after one untimed warm-up.
fn median(rounds: usize, mut work: impl FnMut()) -> Duration {
    work();
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let sandlot = sandlot::from_environment().unwrap();
    let backends = std::env::var("SANDLOT_BENCH_BACKENDS").unwrap_or_else(|_| "wasm,docker".into());
    for backend in backends.split(',') {
        measure(&sandlot, backend);
    }
}

fn measure(sandlot: &sandlot::Sandlot, backend: &str) {
    if backend == "wasm" {
        assert!(
            sandlot::wasm::WasmBackend::of(sandlot).serves("python"),
            "install the runtime first: sandlot runtimes install python"
        );
    }
    let schema = json!({"type": "object"});
    let noop = Tool::new("noop", "Does nothing.", schema.clone(), |_| Ok(json!(null))).unwrap();
    let noop_async = Tool::new_async("noop_async", "Does nothing (async).", schema, |_| {
        Box::pin(async { Ok(json!(null)) })
    })
    .unwrap();
    let mut session = sandlot.session("python");
    session
        .backend(backend)
        .tool(noop)
        .unwrap()
        .tool(noop_async)
        .unwrap();
    let mut session = session.open().unwrap();
    session.run("import sandlot_tools as t").unwrap();

    let calls = 1_000;
    let run = |session: &mut sandlot::Session, code: &str, expect: usize| {
        let execution = session.run(code).unwrap();
        assert_eq!(execution.exit_code, 0, "{}", execution.stderr_text());
        assert_eq!(execution.tool_calls.len(), expect);
    };
    let baseline = median(15, || {
        run(&mut session, "for _ in range(1000): (lambda: None)()", 0)
    });
    for (tool, handler) in [
        ("noop", "blocking handler"),
        ("noop_async", "async handler"),
    ] {
        let code = format!("for _ in range(1000): t.{tool}()");
        let loop_time = median(15, || run(&mut session, &code, calls));
        let per_call = loop_time.saturating_sub(baseline) / calls as u32;
        println!(
            "python ({backend})/no-op tool call round trip, {handler}: {} (a run of {calls}: {:.2} ms; the loop without calls: {:.2} ms)",
            micros(per_call),
            loop_time.as_secs_f64() * 1e3,
            baseline.as_secs_f64() * 1e3
        );
    }

    // The same work, 1,000 calls, as one program and as 1,000 runs of one call each
    // (what one model turn per call costs the sandbox, before any model time).
    let program = median(15, || {
        run(
            &mut session,
            "total = sum(1 for _ in range(1000) if t.noop_async() is None)",
            calls,
        )
    });
    let separate = median(3, || {
        for _ in 0..calls {
            run(&mut session, "t.noop_async()", 1);
        }
    });
    println!(
        "python ({backend})/1000 calls in one program: {:.2} ms; as 1000 separate runs: {:.2} ms ({:.1}x)",
        program.as_secs_f64() * 1e3,
        separate.as_secs_f64() * 1e3,
        separate.as_secs_f64() / program.as_secs_f64()
    );
}
