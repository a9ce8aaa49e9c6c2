//! The library's examples (`host/sandlot/examples/`), run as a user would run them: each
//! prints what it did and checks its own answers, so a broken example fails here.
//!
//! `cargo test --workspace` builds every example before the tests run; this finds
//! them beside the test binaries. Needs the Python and JavaScript runtimes of the wasm
//! backend and Docker with sandlot's images (`tests/run.sh` provides them); without
//! them, the examples that need them pass without running and the suite says so
//! (`support::needs`); CI fails them instead.

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::needs::{needs, Need};

/// The built example `name`: `target/<profile>/examples/<name>`.
fn example(name: &str) -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/examples-HASH → target/<profile>/examples/NAME
    let profile_dir = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary lives in target/<profile>/deps");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is not built: run the whole workspace's tests (`cargo test --workspace`), \
         which build the examples",
        path.display()
    );
    path
}

/// Runs the example and returns what it printed; fails with its output if it failed.
fn run(name: &str) -> String {
    let output = Command::new(example(name))
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "example {name} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_wasm_example_keeps_state_between_runs_and_writes_the_report() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let said = run("wasm");
    assert!(
        said.contains("population standard deviation: 2.0"),
        "{said}"
    );
}

#[test]
fn the_tools_example_calls_the_application_from_python_and_javascript() {
    if !needs(&[Need::Runtime("python"), Need::Runtime("javascript")]) {
        return;
    }
    let said = run("tools");
    for language in ["python", "javascript"] {
        assert!(said.contains(&format!("{language}:\n")), "{said}");
    }
    // Each call shown as it ended, the refused one too, before the program's answer.
    assert_eq!(said.matches("  tool call: search ok").count(), 4, "{said}");
    assert_eq!(
        said.matches("  tool call: search tool_error").count(),
        2,
        "{said}"
    );
    assert_eq!(
        said.matches("  the program said: cost of the 3 well rated: 3197")
            .count(),
        2,
        "{said}"
    );
}

#[test]
fn the_audited_backend_sees_one_open_and_one_run() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let said = run("audited_backend");
    assert!(said.contains("audit: open "), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("audit: run code (") && l.contains("exit 0")),
        "{said}"
    );
}

#[test]
fn the_axum_app_serves_the_api_beside_its_own_routes() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let said = run("axum_app");
    assert!(said.contains("the sandbox said \"42\\n\""), "{said}");
}

#[test]
fn the_docker_pool_example_opens_warm_sessions() {
    if !needs(&[Need::Backend("docker")]) {
        return;
    }
    let said = run("docker_pool");
    for round in 1..=3 {
        assert!(
            said.contains(&format!("session {round}: opened in")),
            "{said}"
        );
    }
    assert!(said.contains("pool: "), "{said}");
}
