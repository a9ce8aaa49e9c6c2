//! JavaScript on the embedded wasm backend: QuickJS as a component of the runtime
//! world, one instance per session.
//!
//! Needs the runtime installed (`sandlot runtimes install javascript`; tests/run.sh
//! does it).

use sandlot::{Execution, Sandlot, Session};
use std::sync::OnceLock;
use std::time::Duration;

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
    assert_eq!(
        run("console.log('héllo 你好 🎉')").stdout_text(),
        "héllo 你好 🎉\n"
    );
    let long = run("console.log('z'.repeat(100000))");
    assert_eq!(long.stdout.len(), 100001);
}

#[test]
fn state_persists_within_a_session_and_never_across() {
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

/// The JavaScript runtime is a component, whose memory the host cannot reach: a
/// snapshot of its session is refused (its variables would be lost), and one of its
/// files alone restores them.
#[test]
fn a_snapshot_keeps_the_files_and_refuses_to_lose_the_variables() {
    let mut session = session();
    session.run("globalThis.kept = 42").unwrap();
    session.write_file("notes.txt", b"kept").unwrap();
    assert!(!session
        .capabilities()
        .has(sandlot::Capability::SnapshotMemory));
    let refused = session.snapshot().unwrap_err();
    assert_eq!(refused.kind(), sandlot::ErrorKind::Unsupported, "{refused}");
    assert!(refused.to_string().contains("snapshot_files"), "{refused}");
    let files = session.snapshot_files().unwrap();
    let mut restored = sandlot().restore(&files).unwrap();
    assert_eq!(restored.read_file("notes.txt").unwrap(), b"kept");
    let fresh = restored.run("console.log(typeof kept)").unwrap();
    assert_eq!(fresh.stdout_text(), "undefined\n");
}
