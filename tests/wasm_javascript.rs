//! JavaScript on the embedded wasm backend: QuickJS as a component of the runtime
//! world, one instance per session.
//!
//! Needs the runtime installed (`sandlot runtimes install javascript`; tests/run.sh
//! does it); without it, the tests pass without running and the suite says so
//! (`support::needs`); CI fails them instead.

mod support;

use sandlot::{Execution, Sandlot, Session};
use std::sync::OnceLock;
use std::time::Duration;
use support::needs::{needs, Need};

/// Whether the JavaScript runtime is installed (see `support::needs`): every test
/// here needs it, and passes without running where it is not (and fails in CI).
fn installed() -> bool {
    needs(&[Need::Runtime("javascript")])
}

fn sandlot() -> &'static Sandlot {
    static SANDLOT: OnceLock<Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| {
        let sandlot = sandlot::from_environment().unwrap();
        assert!(
            sandlot::wasm::WasmBackend::of(&sandlot).serves("javascript"),
            "the JavaScript runtime is not installed: run `sandlot runtimes install javascript`"
        );
        sandlot
    })
}

fn session() -> Session {
    sandlot().session("js").open().unwrap()
}

fn run(code: &str) -> Execution {
    session().run(code).unwrap()
}

#[test]
fn console_log_formats_like_node() {
    if !installed() {
        return;
    }
    let out = run("console.log(1 + 1, 'a', {b: 2}, [1, 2], null, undefined, true)");
    assert_eq!(
        out.stdout_text(),
        "2 a {\"b\":2} [1,2] null undefined true\n"
    );
    assert_eq!(out.exit_code, 0);
    let err = run("console.error('to stderr')");
    assert_eq!(err.stderr_text(), "to stderr\n");
    assert!(err.stdout.is_empty());
}

#[test]
fn exceptions_and_exit_codes() {
    if !installed() {
        return;
    }
    let thrown = run("function f() { throw new TypeError('boom'); }\nf();");
    assert_eq!(thrown.exit_code, 1);
    assert!(
        thrown.stderr_text().contains("Uncaught TypeError: boom"),
        "{}",
        thrown.stderr_text()
    );
    assert_eq!(run("process.exit(3)").exit_code, 3);
    assert_eq!(run("process.exit(0)").exit_code, 0);
    let syntax = run("let = ;");
    assert_eq!(syntax.exit_code, 1);
    assert!(
        syntax.stderr_text().contains("SyntaxError"),
        "{}",
        syntax.stderr_text()
    );
}

#[test]
fn unicode_round_trips_and_long_output_is_whole() {
    if !installed() {
        return;
    }
    assert_eq!(
        run("console.log('héllo 你好 🎉')").stdout_text(),
        "héllo 你好 🎉\n"
    );
    let long = run("console.log('z'.repeat(100000))");
    assert_eq!(long.stdout.len(), 100001);
}

#[test]
fn state_persists_within_a_session_and_never_across() {
    if !installed() {
        return;
    }
    let mut first = session();
    first
        .run("const secret = 'mine'; let n = 41; function bump() { return ++n; }")
        .unwrap();
    let again = first.run("console.log(secret, bump())").unwrap();
    assert_eq!(again.stdout_text(), "mine 42\n");

    let other = session()
        .run("console.log(typeof secret, typeof bump)")
        .unwrap();
    assert_eq!(other.stdout_text(), "undefined undefined\n");
}

/// A run shows its completion value, as a notebook cell, Node's REPL and the container
/// kernel do: nothing for a declaration or a call that returns nothing.
#[test]
fn a_final_expression_shows_its_value() {
    if !installed() {
        return;
    }
    let mut session = session();
    assert_eq!(session.run("let n = 40").unwrap().stdout_text(), "");
    assert_eq!(session.run("n + 2").unwrap().stdout_text(), "42\n");
    assert_eq!(
        session.run("'it' + \"'s\"").unwrap().stdout_text(),
        "'it\\'s'\n"
    );
    assert_eq!(session.run("console.log(n)").unwrap().stdout_text(), "40\n");
    assert_eq!(
        session
            .run("function f() {}\nclass C {}")
            .unwrap()
            .stdout_text(),
        ""
    );
}

#[test]
fn an_endless_loop_is_stopped_at_the_timeout() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("javascript")
        .timeout(Duration::from_millis(300))
        .open()
        .unwrap();
    session.run("let lost = 1").unwrap();
    let stopped = session.run("for (;;) {}").unwrap();
    assert!(stopped.timed_out());
    assert_eq!(stopped.exit_code, 124);
    assert!(matches!(
        stopped.session,
        sandlot::SessionState::Restarted { .. }
    ));
    // A fresh interpreter: the session goes on, without its old variables.
    let after = session.run("console.log(typeof lost)").unwrap();
    assert_eq!(after.stdout_text(), "undefined\n");
    assert_eq!(run("console.log('fine')").stdout_text(), "fine\n");
}

#[test]
fn a_memory_bomb_is_stopped_at_the_cap() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("javascript")
        .memory(64 << 20)
        .open()
        .unwrap();
    let bomb = session
        .run("const hoard = []; for (;;) hoard.push(new Array(1 << 16).fill(1.5));")
        .unwrap();
    assert!(bomb.memory_exceeded(), "{bomb:?}");
    assert_eq!(bomb.exit_code, 137);
}

#[test]
fn an_output_flood_is_truncated_and_flagged() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("javascript")
        .limits(sandlot::Limits {
            max_output: 10_000,
            ..sandlot::Limits::default()
        })
        .open()
        .unwrap();
    let flood = session
        .run("for (let i = 0; i < 5000; i++) console.log('line ' + i)")
        .unwrap();
    assert!(flood.stdout_truncated);
    assert_eq!(flood.stdout.len(), 10_000);
    assert_eq!(flood.exit_code, 0);
}

#[test]
fn no_host_access() {
    if !installed() {
        return;
    }
    let probe = run("console.log(typeof fetch, JSON.stringify(process.env))");
    assert_eq!(probe.stdout_text(), "undefined {}\n");
    // `require` knows the session's tools and nothing else: no fs, no child_process.
    for module in ["fs", "child_process", "net"] {
        let required = run(&format!(
            "try {{ require('{module}') }} catch (e) {{ console.log(e.code) }}"
        ));
        assert_eq!(required.stdout_text(), "MODULE_NOT_FOUND\n", "{module}");
    }
    // A run's own environment reaches process.env, and only that.
    let mut session = sandlot().session("javascript").open().unwrap();
    let with_env = session
        .run_with(
            "console.log(JSON.stringify(process.env))",
            sandlot::RunOptions {
                env: vec![("GREETING".into(), "hi".into())],
                ..sandlot::RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(with_env.stdout_text(), "{\"GREETING\":\"hi\"}\n");
}

/// What a snapshot must bring back: a variable, a function, an instance of a class
/// and a closure's private state, all defined in the session.
const STATEFUL: &str = "const x = 40;\nfunction twice(n) { return 2 * n; }\n\
                        class Box { constructor(v) { this.v = v; } }\n\
                        const b = new Box(twice(x) + 2);\n\
                        const counter = (() => { let n = 0; return () => ++n; })();\n\
                        counter();";
const STATE_CHECK: &str = "console.log(b.v, twice(x), b.constructor.name, b instanceof Box, \
                           JSON.stringify([x]), counter())";
const STATE_SEEN: &str = "82 80 Box true [40] 2\n";

/// The child process [`a_session_comes_back_whole_in_another_process`] starts:
/// restores the snapshot its parent saved and checks it.
#[test]
#[ignore = "run by a_session_comes_back_whole_in_another_process in a process of its own"]
fn restore_in_another_process() {
    let Some(path) = std::env::var_os("SANDLOT_TEST_JS_SNAPSHOT") else {
        return;
    };
    let snapshot = sandlot().open_snapshot(path.as_ref()).unwrap();
    let mut restored = sandlot().restore(&snapshot).unwrap();
    let seen = restored.run(STATE_CHECK).unwrap();
    assert_eq!(seen.stdout_text(), STATE_SEEN, "{}", seen.stderr_text());
    assert_eq!(restored.read_file("notes.txt").unwrap(), b"kept");
    println!("restored in process {}", std::process::id());
}

/// The runtime sandlot builds has state access: a snapshot holds the interpreter's
/// memory and globals, and a session restored from its file in another process has
/// its variables, functions, objects and files, and goes on from there.
#[test]
fn a_session_comes_back_whole_in_another_process() {
    if !installed() {
        return;
    }
    let mut session = session();
    assert!(session
        .capabilities()
        .has(sandlot::Capability::SnapshotMemory));
    session.write_file("notes.txt", b"kept").unwrap();
    let setup = session.run(STATEFUL).unwrap();
    assert_eq!(setup.exit_code, 0, "{}", setup.stderr_text());
    let snapshot = session.snapshot().unwrap();
    assert!(snapshot.holds_memory());
    // What the session does afterwards is not in the snapshot.
    session.run("b.v = 'later'").unwrap();
    session.write_file("notes.txt", b"later").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.snap");
    snapshot.save(&path).unwrap();
    support::pass_in_another_process(
        "restore_in_another_process",
        &[("SANDLOT_TEST_JS_SNAPSHOT", &path)],
    );
    // Here too, twice from the same snapshot: each restored session is its own.
    for _ in 0..2 {
        let mut restored = sandlot().restore(&snapshot).unwrap();
        let seen = restored.run(STATE_CHECK).unwrap();
        assert_eq!(seen.stdout_text(), STATE_SEEN, "{}", seen.stderr_text());
        // Output, randomness and the session's own bindings still work.
        let more = restored
            .run("console.error('err'); console.log(typeof Math.random(), twice(b.v))")
            .unwrap();
        assert_eq!(
            (&*more.stdout_text(), &*more.stderr_text()),
            ("number 164\n", "err\n")
        );
    }
    let parent = session.run("console.log(b.v)").unwrap();
    assert_eq!(parent.stdout_text(), "later\n");
}

/// Ten forks start from their parent's state and go their own ways: what one
/// changes, in its variables or its files, no other sees.
#[test]
fn forks_go_their_own_ways() {
    if !installed() {
        return;
    }
    let mut session = session();
    session.run("const seen = [];").unwrap();
    let mut forks = session.fork(10).unwrap();
    assert_eq!(forks.len(), 10);
    for (i, fork) in forks.iter_mut().enumerate() {
        let ran = fork.run(&format!("seen.push({i})")).unwrap();
        assert_eq!(ran.exit_code, 0, "{}", ran.stderr_text());
        fork.write_file("mine.txt", i.to_string().as_bytes())
            .unwrap();
    }
    for (i, fork) in forks.iter_mut().enumerate() {
        let seen = fork.run("console.log(JSON.stringify(seen))").unwrap();
        assert_eq!(
            seen.stdout_text(),
            format!("[{i}]\n"),
            "{}",
            seen.stderr_text()
        );
        assert_eq!(
            fork.read_file("mine.txt").unwrap(),
            i.to_string().as_bytes()
        );
    }
    let parent = session.run("console.log(JSON.stringify(seen))").unwrap();
    assert_eq!(parent.stdout_text(), "[]\n");
    assert!(session.read_file("mine.txt").is_err());
}
