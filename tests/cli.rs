//! The `sandlot` command line, run as a user would, isolated from the machine's own
//! configuration, plugins and cache.
//!
//! What runs code needs the machine's wasm runtimes installed, and Docker, Podman or
//! the native backend where a test names them (`tests/run.sh` provides all); without
//! them, those tests pass without running and the suite says so (`support::needs`);
//! CI fails them instead.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::needs::{needs, Need};
use support::plugin_dir;

/// `sandlot ARGS` with HOME, XDG dirs and the cache inside `home`.
fn sandlot(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandlot"));
    command
        .args(args)
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"));
    command
}

fn run(command: &mut Command) -> (Output, String, String) {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

/// Runs `command` with `input` on its standard input; returns its standard output.
fn with_stdin(command: &mut Command, input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap().stdout
}

fn ok(command: &mut Command) -> (String, String) {
    let (output, stdout, stderr) = run(command);
    assert!(output.status.success(), "failed: {stderr}\n{stdout}");
    (stdout, stderr)
}

#[test]
fn languages_lists_the_builtins_as_table_and_json() {
    let home = tempfile::tempdir().unwrap();
    let (table, _) = ok(&mut sandlot(home.path(), &["languages"]));
    assert!(table.starts_with("LANGUAGE"), "{table}");
    for id in [
        "python (Python 3)",
        "java (Java)",
        "cpp (C++)",
        "r (R)",
        "bash (Bash)",
    ] {
        assert!(table.contains(id), "{id} missing from\n{table}");
    }
    let (json, _) = ok(&mut sandlot(home.path(), &["languages", "--json"]));
    let languages: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ids: Vec<_> = languages
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["info"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "bash",
            "cpp",
            "go",
            "java",
            "javascript",
            "python",
            "r",
            "ruby",
            "typescript"
        ]
    );
    assert_eq!(
        languages[5]["info"]["aliases"],
        serde_json::json!(["py", "python3"])
    );
    assert_eq!(languages[5]["api_version"], "0.3.0");
    // The default cache directory was used.
    assert!(
        home.path()
            .join("cache/sandlot/components")
            .read_dir()
            .unwrap()
            .count()
            >= 9
    );
}

#[test]
fn every_plugin_directory_source_is_honoured() {
    let home = tempfile::tempdir().unwrap();

    // --plugin-dir
    let dir = plugin_dir(&[("examples/lua", "lua.wasm")]);
    let (table, _) = ok(&mut sandlot(
        home.path(),
        &["--plugin-dir", dir.path().to_str().unwrap(), "languages"],
    ));
    assert!(table.contains("lua (Lua 5.4)"), "{table}");
    let (without, _) = ok(&mut sandlot(home.path(), &["languages"]));
    assert!(!without.contains("lua"), "{without}");

    // SANDLOT_PLUGIN_DIR
    let (table, _) = ok(sandlot(home.path(), &["languages"]).env("SANDLOT_PLUGIN_DIR", dir.path()));
    assert!(table.contains("lua (Lua 5.4)"), "{table}");

    // plugin_dirs in ./sandlot.toml, relative to the file
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join("plugins")).unwrap();
    std::fs::copy(
        dir.path().join("lua.wasm"),
        project.path().join("plugins/lua.wasm"),
    )
    .unwrap();
    std::fs::write(
        project.path().join("sandlot.toml"),
        "plugin_dirs = [\"plugins\"]\n",
    )
    .unwrap();
    let (table, _) = ok(sandlot(home.path(), &["languages"]).current_dir(project.path()));
    assert!(table.contains("lua (Lua 5.4)"), "{table}");

    // $XDG_CONFIG_HOME/sandlot/plugins
    let xdg = home.path().join("config/sandlot/plugins");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::copy(dir.path().join("lua.wasm"), xdg.join("lua.wasm")).unwrap();
    let (table, _) = ok(&mut sandlot(home.path(), &["languages"]));
    assert!(table.contains("lua (Lua 5.4)"), "{table}");
}

#[test]
fn an_override_of_a_builtin_is_announced() {
    let home = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&[("builtin/ruby", "ruby.wasm")]);
    let path = dir.path().join("ruby.wasm");
    let (table, stderr) = ok(&mut sandlot(
        home.path(),
        &["--plugin-dir", dir.path().to_str().unwrap(), "languages"],
    ));
    assert!(
        stderr.contains(&format!(
            "note: plugin {} replaces built-in plugin `ruby` for language `ruby`",
            path.display()
        )),
        "{stderr}"
    );
    assert!(table.contains(&path.display().to_string()), "{table}");

    let (list, _) = ok(&mut sandlot(
        home.path(),
        &[
            "--plugin-dir",
            dir.path().to_str().unwrap(),
            "plugins",
            "list",
        ],
    ));
    assert!(
        list.contains(&format!("shadowed by plugin {}", path.display())),
        "{list}"
    );
    assert!(
        list.contains("active, replaces built-in plugin `ruby`"),
        "{list}"
    );
}

#[test]
fn plugins_list_shows_source_path_api_and_failures() {
    let home = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&[
        ("examples/lua", "lua.wasm"),
        ("fixtures/future-api", "future.wasm"),
    ]);
    let args = [
        "--plugin-dir",
        dir.path().to_str().unwrap(),
        "plugins",
        "list",
    ];
    let (table, _) = ok(&mut sandlot(home.path(), &args));
    let lua_line = table.lines().find(|l| l.contains("lua.wasm")).unwrap();
    for column in ["directory", "language-handler", "0.1.0", "lua", "active"] {
        assert!(lua_line.contains(column), "{column} missing: {lua_line}");
    }
    let future_line = table.lines().find(|l| l.contains("future.wasm")).unwrap();
    assert!(
        future_line.contains("failed:") && future_line.contains("API 9.0.0"),
        "{future_line}"
    );
    assert!(table.contains("builtin:python"), "{table}");

    let (json, _) = ok(&mut sandlot(
        home.path(),
        &[&args[..], &["--json"]].concat(),
    ));
    let reports: serde_json::Value = serde_json::from_str(&json).unwrap();
    let future = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("future.wasm"))
        })
        .unwrap();
    assert_eq!(future["status"], "failed");
    assert!(future["detail"]
        .as_str()
        .unwrap()
        .contains("upgrade sandlot"));

    // Other commands warn about the broken plugin and carry on.
    let (_, stderr) = ok(&mut sandlot(
        home.path(),
        &["--plugin-dir", dir.path().to_str().unwrap(), "languages"],
    ));
    assert!(
        stderr.contains("warning:") && stderr.contains("future.wasm"),
        "{stderr}"
    );
}

#[test]
fn plugins_inspect_shows_the_declaration_or_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let lua = support::component("examples/lua");
    let (text, _) = ok(&mut sandlot(
        home.path(),
        &["plugins", "inspect", lua.to_str().unwrap()],
    ));
    for line in [
        "kind:        language-handler",
        "api version: sandlot:plugin@0.1.0",
        "imports:     (none)",
        "exports:     sandlot:plugin/handler@0.1.0",
        "language:    lua (Lua 5.4)",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }

    let junk = home.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm at all").unwrap();
    let (output, _, stderr) = run(&mut sandlot(
        home.path(),
        &["plugins", "inspect", junk.to_str().unwrap()],
    ));
    assert_eq!(output.status.code(), Some(70));
    assert!(
        stderr.contains("junk.wasm is not a WebAssembly file"),
        "{stderr}"
    );
}

#[test]
fn plan_prints_files_commands_and_findings_without_running_anything() {
    let home = tempfile::tempdir().unwrap();
    let (text, _) = ok(&mut sandlot(
        home.path(),
        &[
            "plan",
            "-l",
            "py",
            "-c",
            "import os\nos.system('id')",
            "--lib",
            "numpy",
        ],
    ));
    assert!(
        text.contains("language: python (Python 3), built-in"),
        "{text}"
    );
    assert!(text.contains("main.py"), "{text}");
    assert!(text.contains("install python3 -m pip install"), "{text}");
    assert!(text.contains("[network]"), "{text}");
    assert!(text.contains("run     python3 -u main.py"), "{text}");
    assert!(
        text.contains("high     line 2   python.os-command"),
        "{text}"
    );

    // The language comes from the file's extension; `--` passes program arguments.
    let file = home.path().join("Solver.java");
    std::fs::write(
        &file,
        "public class Solver { public static void main(String[] a) {} }",
    )
    .unwrap();
    let (json, _) = ok(&mut sandlot(
        home.path(),
        &["plan", file.to_str().unwrap(), "--json", "--", "x"],
    ));
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["language"], "java");
    assert_eq!(plan["plan"]["files"][0]["path"], "Solver.java");
    assert_eq!(
        plan["plan"]["commands"][1]["argv"],
        serde_json::json!(["java", "-cp", ".", "Solver", "x"])
    );
    assert_eq!(plan["findings"], serde_json::json!([]));

    // Standard input.
    let stdout = with_stdin(
        &mut sandlot(home.path(), &["plan", "-l", "bash", "-", "--json"]),
        b"rm -rf /\n",
    );
    let plan: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(plan["findings"][0]["rule_id"], "bash.destructive");
}

/// The analysis `plan` shows looks for the restricted modules and calls of the
/// configuration's policy, or of `--policy`'s.
#[test]
fn plan_shows_what_the_policys_restrictions_find() {
    let home = tempfile::tempdir().unwrap();
    let code = "import socket as s\ns.create_connection(('x', 1))\n";
    let (json, _) = ok(&mut sandlot(
        home.path(),
        &["plan", "-l", "python", "-c", code, "--json"],
    ));
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        !json.contains("restricted"),
        "no restrictions configured: {plan}"
    );

    let policy = home.path().join("policy.toml");
    std::fs::write(&policy, "[restricted.python]\nmodules = [\"socket\"]\n").unwrap();
    let (json, _) = ok(&mut sandlot(
        home.path(),
        &[
            "plan",
            "-l",
            "python",
            "-c",
            code,
            "--json",
            "--policy",
            policy.to_str().unwrap(),
        ],
    ));
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    let restricted: Vec<(&str, u64, &str)> = plan["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule_id"] == "python.restricted-module.socket")
        .map(|f| {
            (
                f["severity"].as_str().unwrap(),
                f["line"].as_u64().unwrap(),
                f["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        restricted,
        [
            (
                "critical",
                1,
                "uses the module `socket`, which the policy restricts"
            ),
            (
                "critical",
                2,
                "uses the module `socket`, which the policy restricts"
            ),
        ]
    );

    // What `plan` says on stderr with `text` as its policy file.
    let refused = |text: &str| {
        std::fs::write(&policy, text).unwrap();
        let args = ["plan", "-l", "python", "-c", code, "--policy"];
        let mut command = sandlot(home.path(), &args);
        command.arg(&policy);
        let (output, _, stderr) = run(&mut command);
        assert_ne!(output.status.code(), Some(0), "{stderr}");
        stderr
    };
    let stderr = refused("[restricted.pyhton]\nmodules = [\"socket\"]\n");
    assert!(stderr.contains("[policy.restricted.pyhton]"), "{stderr}");
    let stderr = refused("[restricted.python]\nmodules = \"socket\"\n");
    assert!(
        stderr.contains("policy.toml") && stderr.contains("line 2"),
        "{stderr}"
    );
}

#[test]
fn plan_errors_say_what_was_wrong() {
    let home = tempfile::tempdir().unwrap();
    let (output, _, stderr) = run(&mut sandlot(
        home.path(),
        &["plan", "-l", "cobol", "-c", "x"],
    ));
    assert_eq!(output.status.code(), Some(66));
    assert!(
        stderr.contains("unknown language `cobol`; known languages:"),
        "{stderr}"
    );

    let (_, _, stderr) = run(&mut sandlot(
        home.path(),
        &["plan", "-l", "python", "-c", "x", "--lib=--evil"],
    ));
    assert!(
        stderr.contains("`--evil` is not a valid Python library name"),
        "{stderr}"
    );

    let (_, _, stderr) = run(&mut sandlot(home.path(), &["plan", "notes.unknownext"]));
    assert!(stderr.contains("cannot read"), "{stderr}");

    let (output, _, stderr) = run(&mut sandlot(
        home.path(),
        &["--config", "/nonexistent.toml", "languages"],
    ));
    assert_eq!(output.status.code(), Some(78));
    assert!(stderr.contains("/nonexistent.toml"), "{stderr}");
}

/// `command` with the machine's installed runtimes and compiled-runtime cache.
fn with_runtimes(mut command: Command) -> Command {
    let dirs = sandlot::dirs::Dirs::resolve(&sandlot::Config::default(), &Default::default());
    command
        .env("SANDLOT_RUNTIMES_DIR", dirs.runtimes_dir())
        .env("SANDLOT_CACHE_DIR", dirs.cache_dir().unwrap());
    command
}

/// `sandlot run` with the machine's installed runtimes and compiled-runtime cache.
fn sandlot_run(home: &Path, args: &[&str]) -> Command {
    with_runtimes(sandlot(home, &[&["run"], args].concat()))
}

#[test]
fn run_prints_the_programs_output() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (output, stdout, _) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "-c", "print('hi')"],
    ));
    assert_eq!((output.status.code(), stdout.as_str()), (Some(0), "hi\n"));
}

/// `sandlot run FILE -- ARGS` runs the file as `python3 FILE ARGS` or `node FILE ARGS`
/// would, on wasm and on Docker: the arguments are in its argv, and nothing is printed
/// but what it prints (not the value of its last line, as a notebook cell would show).
#[test]
fn run_hands_the_program_its_arguments_and_prints_only_what_it_prints() {
    if !needs(&[
        Need::Runtime("python"),
        Need::Runtime("javascript"),
        Need::Backend("docker"),
    ]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    // Both end on an expression a cell would show (write's count, push's new length).
    let programs = [
        (
            "args.py",
            "import sys\nprint(sys.argv[1:])\nsys.stdout.write('done\\n')\n",
            &["a", "b c", "-v"][..],
            "['a', 'b c', '-v']\ndone\n",
        ),
        (
            "args.js",
            "const a = [1, 2, 3];\nconsole.log(process.argv.slice(2).join('|'));\na.push(4)\n",
            &["x", "y z"][..],
            "x|y z\n",
        ),
    ];
    for (name, text, args, expected) in programs {
        let file = home.path().join(name);
        std::fs::write(&file, text).unwrap();
        for backend in ["wasm", "docker"] {
            let mut argv = vec!["--backend", backend, file.to_str().unwrap(), "--"];
            argv.extend_from_slice(args);
            let (output, stdout, stderr) = run(&mut sandlot_run(home.path(), &argv));
            assert_eq!(
                (output.status.code(), stdout.as_str()),
                (Some(0), expected),
                "{name} on {backend}: {stderr}"
            );
        }
    }
}

/// What is piped or redirected into `sandlot run` is the program's standard input, as
/// with `python3 FILE` (unless `--no-stdin`); `--max-output` moves the output cap.
#[test]
fn run_hands_piped_input_to_the_program_and_takes_an_output_cap() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("shout.py");
    std::fs::write(
        &script,
        "import sys\nprint(sys.stdin.read().upper(), end='')\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let piped = with_stdin(&mut sandlot_run(home.path(), &[script]), b"piped in\n");
    assert_eq!(String::from_utf8_lossy(&piped), "PIPED IN\n");
    let unread = with_stdin(
        &mut sandlot_run(home.path(), &["--no-stdin", script]),
        b"piped in\n",
    );
    assert_eq!(String::from_utf8_lossy(&unread), "");
    let (_, from_file, stderr) =
        run(sandlot_run(home.path(), &[script]).stdin(std::fs::File::open(script).unwrap()));
    assert!(from_file.starts_with("IMPORT SYS\n"), "{from_file}{stderr}");

    let flood = "import sys\n_ = sys.stdout.write('x' * (3 << 19))";
    let (_, cut, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "-c", flood],
    ));
    assert_eq!(cut.len(), 1 << 20, "{stderr}");
    assert!(stderr.contains("--max-output raises it"), "{stderr}");
    let (output, whole, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "--max-output", "2M", "-c", flood],
    ));
    assert_eq!(
        (output.status.code(), whole.len()),
        (Some(0), 3 << 19),
        "{stderr}"
    );
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "--max-output", "2G", "-c", flood],
    ));
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("at most 1G"), "{stderr}");
}

/// Every row of the README's exit status table, produced by the binary: the program's
/// own status, the limits', and sandlot's refusals, none sharing a number. (75, an
/// exhausted pool, cannot come from one `run`; its kind's row is checked by the unit
/// tests of the binary's `exit` module.)
#[test]
fn every_row_of_the_exit_status_table_is_what_the_binary_does() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let badplan = plugin_dir(&[("fixtures/badplan", "badplan.wasm")]);
    let config = home.path().join("broken.toml");
    std::fs::write(&config, "[policy\npreset = ").unwrap();
    let config = config.to_str().unwrap();
    let badplan = badplan.path().to_str().unwrap();
    let python = |code: &'static str| vec!["run", "-l", "python", "-c", code];
    let cases: Vec<(u8, &str, Vec<&str>)> = vec![
        (
            7,
            "",
            vec!["run", "-l", "py", "-c", "import sys\nsys.exit(7)"],
        ),
        (
            124,
            "time limit of 0.5 s",
            vec![
                "run",
                "-l",
                "python",
                "--timeout",
                "0.5",
                "-c",
                "while True: pass",
            ],
        ),
        (
            137,
            "memory cap",
            vec![
                "run",
                "-l",
                "python",
                "--memory",
                "128",
                "-c",
                "x = bytearray(400 << 20)",
            ],
        ),
        (141, "output cap", python("print('x' * 3_000_000)")),
        (
            64,
            "--timeout",
            vec!["run", "-l", "python", "--timeout", "0", "-c", "print(1)"],
        ),
        (
            64,
            "--memory",
            vec!["run", "-l", "python", "--memory", "0", "-c", "print(1)"],
        ),
        (64, "--nope", vec!["run", "--nope"]),
        (64, "give the code", vec!["run", "-l", "python"]),
        (66, "nothing.py", vec!["run", "nothing.py"]),
        (
            66,
            "unknown language `cobol`",
            vec!["run", "-l", "cobol", "-c", "x"],
        ),
        (
            66,
            "SANDLOT_TEST_UNSET",
            vec![
                "run",
                "-l",
                "python",
                "--secret",
                "SANDLOT_TEST_UNSET",
                "-c",
                "x",
            ],
        ),
        (
            69,
            "requests",
            vec![
                "run",
                "-l",
                "python",
                "--backend",
                "wasm",
                "--lib",
                "requests",
                "-c",
                "x",
            ],
        ),
        (
            69,
            "docker",
            vec!["run", "-l", "bash", "--backend", "docker", "-c", "echo 1"],
        ),
        (
            70,
            "badplan",
            vec!["--plugin-dir", badplan, "plan", "-l", "badplan", "-c", "x"],
        ),
        (
            77,
            "blocked by the security policy",
            vec![
                "run",
                "-l",
                "python",
                "--block-at",
                "high",
                "-c",
                "import os\nos.system('id')",
            ],
        ),
        (78, config, vec!["--config", config, "languages"]),
    ];
    let readme = include_str!("../README.md");
    let documented: std::collections::BTreeSet<u8> = readme
        .lines()
        .skip_while(|line| *line != "## Exit status")
        .take_while(|line| !line.starts_with("## Documentation"))
        .filter_map(|line| line.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    let produced: std::collections::BTreeSet<u8> = cases
        .iter()
        .map(|(code, ..)| *code)
        .filter(|c| *c != 7)
        .collect();
    let undocumented: Vec<_> = produced.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "not in the README's table: {undocumented:?}"
    );
    let unchecked: Vec<_> = documented
        .difference(&produced)
        // 75 needs a pool held by another process; 130 a Ctrl-C, which
        // `ctrl_c_interrupts_the_run_and_sandlot_exits_130` sends.
        .filter(|c| **c != 75 && **c != 130)
        .collect();
    assert!(unchecked.is_empty(), "rows no case produces: {unchecked:?}");
    for (code, says, args) in cases {
        let (output, _, stderr) = run(with_runtimes(sandlot(home.path(), &args))
            // An engine that is not there.
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .env_remove("SANDLOT_TEST_UNSET"));
        assert_eq!(
            output.status.code(),
            Some(code.into()),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(says),
            "{args:?} exits {code} but does not name {says:?}: {stderr}"
        );
    }
}

#[test]
fn run_takes_a_script_or_stdin_and_returns_plots() {
    if !needs(&[Need::Runtime("python"), Need::Runtime("javascript")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("analysis.py");
    std::fs::write(
        &script,
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('output/line.png')\nprint('saved')\n",
    )
    .unwrap();
    let (json, _) = ok(&mut sandlot_run(
        home.path(),
        &[script.to_str().unwrap(), "--json"],
    ));
    let result: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(result["language"], "python");
    assert_eq!(result["stdout"], "saved\n");
    assert_eq!(result["exit_code"], 0);
    let plot = &result["artifacts"][0];
    assert_eq!(plot["path"], "line.png");
    assert_eq!(plot["is_plot"], true);
    assert!(
        plot["base64"].as_str().unwrap().starts_with("iVBORw0KGgo"),
        "a PNG, base64"
    );

    let out = home.path().join("out");
    ok(&mut sandlot_run(
        home.path(),
        &[script.to_str().unwrap(), "--out", out.to_str().unwrap()],
    ));
    assert!(std::fs::read(out.join("line.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));

    let stdout = with_stdin(
        &mut sandlot_run(home.path(), &["-l", "javascript", "-"]),
        b"console.log([1, 2, 3].map(x => x * 2).join(','))",
    );
    assert_eq!(String::from_utf8_lossy(&stdout), "2,4,6\n");
}

#[test]
fn run_refuses_code_the_policy_blocks_and_runs_it_unread_without_analysis() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let code = "import os\nprint('ran')\nif False:\n    os.system('id')";
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "--block-at", "high", "-c", code],
    ));
    assert_eq!(output.status.code(), Some(77));
    assert!(
        stderr.contains("blocked by the security policy") && stderr.contains("python.os-command"),
        "{stderr}"
    );
    let findings = |args: &[&str]| {
        let mut all = vec!["-l", "python", "--json", "-c", code];
        all.extend_from_slice(args);
        let (json, _) = ok(&mut sandlot_run(home.path(), &all));
        let execution: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(execution["stdout"], "ran\n", "{json}");
        execution["findings"].as_array().unwrap().len()
    };
    // `never` still reads the code and reports; turning analysis off reads nothing.
    assert_eq!(findings(&["--block-at", "never"]), 1);
    assert_eq!(findings(&["--no-analysis"]), 0);
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--no-analysis",
            "--block-at",
            "high",
            "-c",
            code,
        ],
    ));
    assert_eq!(output.status.code(), Some(64), "{stderr}");
}

#[test]
fn run_passes_secrets_from_the_environment_and_masks_them() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let code = "import os\nprint(os.environ['SANDLOT_TEST_KEY'][::-1][::-1])";
    let (json, _) = ok(sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--secret",
            "SANDLOT_TEST_KEY",
            "--json",
            "-c",
            code,
        ],
    )
    .env("SANDLOT_TEST_KEY", "tok-5ec7e7-value"));
    let result: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(result["stdout"], "***\n");
    assert!(!json.contains("tok-5ec7e7-value"), "{json}");

    let (output, _, stderr) = run(sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--secret",
            "SANDLOT_TEST_UNSET",
            "-c",
            "print(1)",
        ],
    )
    .env_remove("SANDLOT_TEST_UNSET"));
    assert_eq!(output.status.code(), Some(66));
    assert!(stderr.contains("SANDLOT_TEST_UNSET is not set"), "{stderr}");

    // Bound to a host, the code holds a placeholder as long as the value instead.
    let value = "tok-5ec7e7-value-0123456789";
    let (json, _) = ok(sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--secret",
            "SANDLOT_TEST_KEY=api.example.com",
            "--json",
            "-c",
            "import os\nprint(os.environ['SANDLOT_TEST_KEY'])",
        ],
    )
    .env("SANDLOT_TEST_KEY", value));
    let result: serde_json::Value = serde_json::from_str(&json).unwrap();
    let held = result["stdout"].as_str().unwrap().trim_end();
    assert_eq!(held.len(), value.len(), "{json}");
    assert!(
        !json.contains("tok-5ec7e7") && !held.contains("***"),
        "{json}"
    );

    let (output, _, stderr) = run(sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--secret",
            "SANDLOT_TEST_KEY=@bearer",
            "-c",
            "print(1)",
        ],
    )
    .env("SANDLOT_TEST_KEY", value));
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("--secret SANDLOT_TEST_KEY=@bearer") && stderr.contains("host"),
        "{stderr}"
    );
}

#[test]
fn doctor_reports_engines_isolation_and_what_each_backend_cannot_enforce() {
    if !needs(&[
        Need::Runtime("python"),
        Need::Backend("docker"),
        Need::Backend("podman"),
    ]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let doctor = |args: &[&str]| {
        let mut command = with_runtimes(sandlot(home.path(), args));
        if let Some(kubeconfig) = std::env::var_os("KUBECONFIG") {
            command.env("KUBECONFIG", kubeconfig);
        }
        ok(&mut command).0
    };
    let json = doctor(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let backend = |name: &str| {
        report["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {report}"))
            .clone()
    };
    let check = |backend: &serde_json::Value, topic: &str| {
        backend["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["topic"] == topic)
            .unwrap_or_else(|| panic!("no {topic} in {backend}"))
            .clone()
    };
    // The wasm backend counts its workspace's writes: its quota holds.
    let wasm = backend("wasm");
    assert!(
        !wasm["unenforced"]
            .as_array()
            .unwrap()
            .contains(&"workdir_size".into()),
        "{wasm}"
    );
    assert_eq!(check(&wasm, "runtimes")["state"], "ok", "{wasm}");
    assert_eq!(check(&wasm, "cache")["state"], "ok", "{wasm}");
    // What a snapshot holds on each; whether CRIU could checkpoint containers here.
    assert_eq!(check(&wasm, "snapshots")["state"], "ok", "{wasm}");
    let in_docker = check(&backend("docker"), "snapshots");
    assert!(
        in_docker["detail"]
            .as_str()
            .unwrap()
            .contains("by serialisation"),
        "{in_docker}"
    );
    let checkpoints = report["host"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == "checkpoints")
        .unwrap_or_else(|| panic!("no checkpoints in {report}"))
        .clone();
    assert!(
        checkpoints["detail"].as_str().unwrap().contains("CRIU")
            || checkpoints["detail"].as_str().unwrap().contains("criu"),
        "{checkpoints}"
    );
    // Docker and Podman sandboxes are refused the same calls, probed in one: Podman's
    // own profile allows user namespaces, sandlot's agent does not.
    let probed = |name: &str| {
        let engine = backend(name);
        let calls = check(&engine, "system calls");
        assert_eq!(calls["state"], "ok", "{name}: {calls}");
        calls["detail"].as_str().unwrap().to_string()
    };
    let (on_docker, on_podman) = (probed("docker"), probed("podman"));
    assert!(on_docker.contains("unshare(CLONE_NEWUSER)"), "{on_docker}");
    assert_eq!(on_docker, on_podman, "Docker and Podman differ");
    // Docker here: the engine answers, with the default seccomp profile.
    let docker = backend("docker");
    assert!(
        check(&docker, "engine")["detail"]
            .as_str()
            .unwrap()
            .contains("API"),
        "{docker}"
    );
    assert_eq!(check(&docker, "seccomp")["state"], "ok", "{docker}");
    assert_eq!(docker["unenforced"], serde_json::json!([]), "{docker}");
    // The local cluster has no network plugin: NetworkPolicy is not enforced.
    if std::env::var_os("KUBECONFIG").is_some() {
        let cluster = backend("kubernetes");
        let network = check(&cluster, "network policy");
        assert_eq!(network["state"], "gap", "{cluster}");
        assert!(
            network["hint"].as_str().unwrap().contains("NetworkPolicy"),
            "{network}"
        );
        assert!(cluster["unenforced"]
            .as_array()
            .unwrap()
            .contains(&"network".into()));
    }
    // Root without CAP_SYS_RESOURCE (this machine) is a gap; the test reads the
    // capability itself.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let root = status
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if root {
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .unwrap();
        let has = u64::from_str_radix(caps.trim(), 16).unwrap() & (1 << 24) != 0;
        let host = report["host"].as_array().unwrap();
        let capability = host.iter().find(|c| c["topic"] == "capabilities").unwrap();
        assert_eq!(
            capability["state"],
            if has { "ok" } else { "gap" },
            "{capability}"
        );
    }
    let text = doctor(&["doctor"]);
    assert!(
        text.contains("docker\n") && text.contains("seccomp"),
        "{text}"
    );
}

/// A cache that cannot be written makes every run compile its runtime again: the run
/// says so (never "this happens once") with the fix, and so does `doctor`.
#[test]
fn an_unwritable_cache_is_reported_by_the_run_and_by_doctor() {
    if !needs(&[Need::Runtime("javascript")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("a-file"), b"").unwrap();
    let blocked = home.path().join("a-file/cache");
    let (output, stdout, stderr) = run(sandlot_run(
        home.path(),
        &["-l", "javascript", "-c", "console.log('still runs')"],
    )
    .env("SANDLOT_CACHE_DIR", &blocked));
    assert_eq!(
        (output.status.code(), stdout.as_str()),
        (Some(0), "still runs\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("compiling the javascript runtime, and again on every run")
            && stderr.contains("cannot be written")
            && stderr.contains("SANDLOT_CACHE_DIR"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("once") && !stderr.contains("CPython"),
        "{stderr}"
    );
    let (json, _) = ok(with_runtimes(sandlot(home.path(), &["doctor", "--json"]))
        .env("SANDLOT_CACHE_DIR", &blocked));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let wasm = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "wasm")
        .unwrap();
    let cache = wasm["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == "cache")
        .unwrap_or_else(|| panic!("no cache check in {wasm}"));
    assert_eq!(cache["state"], "gap", "{cache}");
    assert!(
        cache["hint"]
            .as_str()
            .unwrap()
            .contains("SANDLOT_CACHE_DIR"),
        "{cache}"
    );
}

#[test]
fn run_installs_a_missing_runtime_on_first_use() {
    let home = tempfile::tempdir().unwrap();
    let runtimes = home.path().join("runtimes");
    let mut command = sandlot_run(home.path(), &["-l", "js", "-c", "console.log('first use')"]);
    command.env("SANDLOT_RUNTIMES_DIR", &runtimes);
    let (output, stdout, stderr) = run(&mut command);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "first use\n");
    assert!(
        stderr.contains("no javascript runtime installed yet"),
        "{stderr}"
    );
    assert!(runtimes.join("quickjs.wasm").is_file());
    // The second run finds it.
    let (_, _, stderr) = run(&mut command);
    assert!(!stderr.contains("installing"), "{stderr}");
}

#[test]
fn one_cache_dir_holds_handlers_and_runtimes_from_the_environment_or_the_config() {
    for via_config in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let runtimes = home.path().join("runtimes");
        support::install_echo_runtime(&runtimes, "bash", &support::echo_module("!"), None);
        let cache = home.path().join("my-cache");
        let mut command = sandlot(
            home.path(),
            &["run", "--backend", "wasm", "-l", "bash", "-c", "echo hi"],
        );
        command.env("SANDLOT_RUNTIMES_DIR", &runtimes);
        if via_config {
            // Relative to the file, which `run` finds in its working directory.
            std::fs::write(
                home.path().join("sandlot.toml"),
                "cache_dir = \"my-cache\"\n",
            )
            .unwrap();
        } else {
            command.env("SANDLOT_CACHE_DIR", &cache);
        }
        let (output, stdout, stderr) = run(&mut command);
        assert_eq!(output.status.code(), Some(7), "{stderr}");
        assert!(stdout.ends_with('!'), "{stdout}");
        let artifacts = std::fs::read_dir(&cache)
            .unwrap_or_else(|e| panic!("no cache in {} ({via_config}): {e}", cache.display()))
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .count();
        assert_eq!(
            artifacts, 10,
            "9 built-in handlers and the runtime, in one cache"
        );
        assert!(
            !home.path().join("cache/sandlot/components").exists(),
            "nothing went to the default cache"
        );
    }
}

#[test]
fn run_stops_a_sleeping_or_flooding_program_on_time() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--backend",
            "wasm",
            "--timeout",
            "2",
            "-c",
            "import time; time.sleep(10)",
        ],
    ));
    assert_eq!(output.status.code(), Some(124), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    assert!(
        stderr.contains("time limit of 2 s (--timeout), after 2."),
        "{stderr}"
    );

    let started = std::time::Instant::now();
    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--backend",
            "wasm",
            "--timeout",
            "20",
            "-c",
            "while True: print('x' * 1000)",
        ],
    ));
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert!(
        stdout.len() <= 1 << 20,
        "{} bytes reached stdout",
        stdout.len()
    );
    assert!(stderr.contains("output cap"), "{stderr}");
    assert_ne!(output.status.code(), Some(0));
}

/// The same Python code meets another interpreter there, so the move is said without
/// `-v` too, with the interpreter it moved to. As root on a cgroup v1 host with
/// bubblewrap (CI), `auto` prefers the native backend to Docker.
#[test]
fn auto_runs_a_library_the_wasm_runtime_lacks_in_a_container_and_says_so() {
    if !needs(&[Need::Runtime("python"), Need::Backend("native")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--lib",
            "requests",
            "-c",
            "import sys\nprint(sys.version_info[:2])",
        ],
    ));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let said = stderr
        .lines()
        .find(|l| l.contains("running on"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let version = stdout.trim().trim_matches(['(', ')']).replace(", ", ".");
    assert!(
        said.starts_with(&format!(
            "sandlot: running on native with CPython {version}."
        )) && said.contains("not wasm: it cannot install requests"),
        "{said} ({stdout})"
    );
    // Where nothing moved, nothing is said.
    let (_, _, quiet) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "-c", "print(1)"],
    ));
    assert!(!quiet.contains("running on"), "{quiet}");

    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--lib",
            "requests",
            "-v",
            "--json",
            "-c",
            "import requests\nprint(requests.__name__)",
        ],
    ));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["backend"], "native");
    assert_eq!(json["stdout"], "requests\n");
    assert_eq!(json["schema"], "sandlot.execution/1");
    let runs_with = json["runs_with"].as_str().unwrap_or_default();
    assert!(runs_with.starts_with("CPython 3."), "{json}");
    assert!(
        stderr.contains("passed over wasm: it cannot install requests"),
        "{stderr}"
    );
    assert!(stderr.contains("running on native (sandlot-"), "{stderr}");
    assert!(
        stderr.contains("with CPython 3.") && stderr.contains("Debian packages of sandlot/python"),
        "{stderr}"
    );
}

/// Code promised the network must not land where it has none: wasm, named, refuses
/// the session and says why; `auto` passes it over for a container and says so.
#[test]
fn a_network_wasm_cannot_give_refuses_wasm_and_moves_auto_to_a_container() {
    if !needs(&[Need::Runtime("python"), Need::Backend("native")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--backend",
            "wasm",
            "--network",
            "on",
            "-c",
            "print(1)",
        ],
    ));
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("has no network") && stderr.contains("network is `on`"),
        "{stderr}"
    );
    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--network",
            "on",
            "-v",
            "--json",
            "-c",
            "import socket\nprint(callable(socket.getaddrinfo))",
        ],
    ));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&json["backend"], &json["stdout"]),
        (&"native".into(), &"True\n".into())
    );
    assert!(
        stderr.contains("passed over wasm: it has no network"),
        "{stderr}"
    );
}

/// `sandlot repl` reads one cell per line from a pipe: the cells share state, an error
/// ends only its cell, plots land in the output directory with their paths printed,
/// and the exit status is the last cell's.
#[test]
fn repl_runs_piped_cells_in_one_session() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let repl = |args: &[&str], input: &str| {
        let mut command = with_runtimes(sandlot(home.path(), &[&["repl"], args].concat()));
        use std::io::Write;
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };

    let (code, stdout, stderr) = repl(
        &["-l", "python", "--backend", "wasm"],
        "x = 41\nprint(x + 1)\nprint(1 / 0)\n\nimport matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()\nprint(x)\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "42\n41\n", "{stderr}");
    assert!(stderr.contains("ZeroDivisionError"), "{stderr}");
    let plot = Path::new("sandlot-output").join("plot-001.png");
    assert!(
        stderr.contains(&format!("sandlot: plot {}", plot.display())),
        "{stderr}"
    );
    assert!(std::fs::read(home.path().join(&plot))
        .unwrap()
        .starts_with(b"\x89PNG"));

    let (code, stdout, stderr) = repl(
        &["-l", "js", "--backend", "docker"],
        "let n = 2\nn * 21\nprocess.exit(4)\n",
    );
    assert_eq!(stdout, "42\n", "{stderr}");
    assert_eq!(code, Some(4), "the last cell's status: {stderr}");

    let (code, _, stderr) = repl(&["-l", "cobol"], "");
    assert_ne!(code, Some(0));
    assert!(stderr.contains("cobol"), "{stderr}");
}

/// A session saved by one `sandlot` command is picked up by the next, in another
/// process: `run --save` then `run --restore`, and the REPL's `:save` and `:load`. A
/// damaged file is refused with the reason; a container kernel's variables go by
/// serialisation, naming those that cannot.
#[test]
fn a_session_saved_by_one_command_is_restored_by_the_next() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let saved = "import json\nrows = [1, 2, 3]\nopen('kept.txt', 'w').write('kept')";
    let on = |backend: &str, args: &[&str]| {
        run(&mut sandlot_run(
            home.path(),
            &[&["-l", "python", "--backend", backend], args].concat(),
        ))
    };
    let (output, _, stderr) = on("wasm", &["--save", "s.snap", "-c", saved]);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("saved the session (its variables and files"),
        "{stderr}"
    );
    let check = "print(sum(rows), json.dumps(rows), open('kept.txt').read())";
    let (output, stdout, stderr) = on("auto", &["--restore", "s.snap", "-c", check]);
    assert_eq!(
        (output.status.code(), stdout.as_str()),
        (Some(0), "6 [1, 2, 3] kept\n"),
        "{stderr}"
    );

    let mut bytes = std::fs::read(home.path().join("s.snap")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(home.path().join("bad.snap"), &bytes).unwrap();
    let (output, _, stderr) = on("auto", &["--restore", "bad.snap", "-c", "print(1)"]);
    assert_eq!(output.status.code(), Some(64), "invalid input: {stderr}");
    assert!(stderr.contains("corrupted"), "{stderr}");

    let repl = |input: &str| {
        let mut command = with_runtimes(sandlot(
            home.path(),
            &["repl", "-l", "python", "--backend", "wasm"],
        ));
        let stdout = with_stdin(&mut command, input.as_bytes());
        String::from_utf8_lossy(&stdout).into_owned()
    };
    assert_eq!(repl("y = 5\n:save r.snap\ny = 6\nprint(y)\n"), "6\n");
    assert_eq!(
        repl(":load r.snap\nprint(y, rows if 'rows' in dir() else '-')\n"),
        "5 -\n"
    );

    // A container kernel's variables go by serialisation; what cannot is named.
    let unpicklable = format!("{saved}\nlines = (r for r in rows)");
    let (output, _, stderr) = on("docker", &["--save", "d.snap", "-c", &unpicklable]);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("could not be saved (a restored session lacks them): lines")
            && stderr.contains("saved the session (its variables and files"),
        "{stderr}"
    );
    let (output, stdout, stderr) = on("auto", &["--restore", "d.snap", "-c", check]);
    assert_eq!(
        (output.status.code(), stdout.as_str()),
        (Some(0), "6 [1, 2, 3] kept\n"),
        "{stderr}"
    );
}

/// Ctrl-C interrupts the running code at once, not at its time limit: `sandlot run`
/// then closes the session and exits 130, as does `sandlot repl` reading a pipe,
/// which runs no further cell.
#[test]
fn ctrl_c_interrupts_the_run_and_sandlot_exits_130() {
    use std::io::{BufRead, Read, Write};
    use std::process::Stdio;
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let sleeper = "import time; print('sleeping', flush=True); time.sleep(200)";
    for backend in ["wasm", "docker"] {
        let limits = ["--backend", backend, "--timeout", "300"];
        let repl = [&["repl", "-l", "python"][..], &limits].concat();
        let run = [&["run", "-l", "python", "-c", sleeper][..], &limits].concat();
        for (args, input) in [
            (repl, format!("{sleeper}\nprint('after')\n")),
            (run, String::new()),
        ] {
            let mut child = with_runtimes(sandlot(home.path(), &args))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // The REPL's pipe stays open: the cells after the interrupted one wait there.
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).unwrap();
            let stdin = (!input.is_empty()).then_some(stdin);
            let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            assert_eq!(line, "sleeping\n", "{args:?}");
            // What a terminal sends at Ctrl-C.
            let sent = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
            let mut rest = String::new();
            stdout.read_to_string(&mut rest).unwrap();
            let output = child.wait_with_output().unwrap();
            drop(stdin);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(130), "{args:?}: {stderr}");
            assert!(
                stderr.contains("sandlot: interrupted (Ctrl-C)"),
                "{args:?}: {stderr}"
            );
            assert_eq!(rest, "", "{args:?} went on after the interrupt");
        }
    }
}

/// At a terminal, Ctrl-C interrupts the running cell at once and the REPL goes on: a
/// container kernel keeps the session's variables and says so; wasm starts a fresh
/// interpreter and says that. Driven through a real pseudo-terminal
/// (tests/repl_terminal.py), where the terminal, not a test, turns Ctrl-C into SIGINT.
#[test]
fn ctrl_c_at_a_terminal_interrupts_the_cell_and_the_repl_goes_on() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let template = with_runtimes(sandlot(home.path(), &[]));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/repl_terminal.py");
    for (backend, says, kept) in [
        ("wasm", "earlier state is gone", "kept: gone"),
        ("docker", "the session keeps its state", "kept: yes"),
    ] {
        let mut command = Command::new("python3");
        command.env_clear().current_dir(home.path());
        for (name, value) in template.get_envs() {
            if let Some(value) = value {
                command.env(name, value);
            }
        }
        let output = command
            .args([script, env!("CARGO_BIN_EXE_sandlot"), backend])
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&output.stdout);
        let why = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{backend}: {why}");
        assert!(
            shown.contains("sandlot: interrupted (Ctrl-C)") && shown.contains(says),
            "{backend}: {shown}"
        );
        assert!(shown.contains(kept), "{backend}: {shown}");
        assert!(!shown.contains("kernel.py"), "{backend}: {shown}");
        assert!(shown.contains("exit status 0"), "{backend}: {shown}");
    }
}

#[test]
fn a_pool_from_the_config_serves_the_run_and_leaves_nothing_behind() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("sandlot.toml"),
        "[pool.wasm]\nmin_idle = 2\nmax_size = 3\n",
    )
    .unwrap();
    let tmp = home.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // Long enough for the pool to warm two more sandboxes while it runs.
    let mut command = sandlot_run(
        home.path(),
        &[
            "--backend",
            "wasm",
            "-l",
            "python",
            "-c",
            "import time\ntime.sleep(1)\nprint('pooled')",
        ],
    );
    command.env("TMPDIR", &tmp);
    let (output, stdout, stderr) = run(&mut command);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "pooled\n");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "the pool left {left:?}");

    std::fs::write(
        home.path().join("sandlot.toml"),
        "[pool.wasm]\nmax_size = 0\n",
    )
    .unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(home.path(), &["-l", "python", "-c", "1"]));
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr.contains("sandlot.toml") && stderr.contains("max_size"),
        "{stderr}"
    );
}

#[test]
fn a_killed_owner_of_a_wasm_pool_leaves_nothing_behind() {
    // `sandlot gc` cleans Docker too, which it must reach.
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("sandlot.toml"),
        "[pool.wasm]\nmin_idle = 2\nmax_size = 3\n",
    )
    .unwrap();
    let tmp = home.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let on_disk = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("sandlot-wasm-"))
            .count()
    };
    // A workspace is a tmpfs attached to no tree, which only its process's
    // descriptors hold: the mounts its descriptors of directories are on that its
    // mount table lacks.
    let held = |pid: u32| {
        let table = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        let listed: std::collections::HashSet<&str> =
            table.lines().filter_map(|l| l.split(' ').next()).collect();
        let mut detached = std::collections::HashSet::new();
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
        {
            let fd = entry.unwrap().file_name().to_string_lossy().to_string();
            let path = format!("/proc/{pid}/fd/{fd}");
            if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
            if let Some(id) = info.lines().find_map(|l| l.strip_prefix("mnt_id:")) {
                if !listed.contains(id.trim()) {
                    detached.insert(id.trim().to_string());
                }
            }
        }
        detached.len()
    };
    let mut command = with_runtimes(sandlot(
        home.path(),
        &["repl", "--backend", "wasm", "-l", "python"],
    ));
    let (mut host, stdin) = support::start_repl(command.env("TMPDIR", &tmp));
    // The session's workspace and two ready ones.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while held(host.id()) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pool never filled"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    host.kill().unwrap();
    host.wait().unwrap();
    drop(stdin);
    // The kernel frees a tmpfs with the last descriptor of it: nothing is left on
    // disk for `gc` to find.
    assert_eq!(on_disk(), 0, "a workspace was left on disk");
    let mut gc = sandlot(home.path(), &["gc"]);
    let (output, stdout, stderr) = run(gc.env("TMPDIR", &tmp));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stdout.contains("sandlot-wasm-"), "{stdout}");
}

#[test]
fn the_policy_comes_from_a_preset_a_file_or_the_config_and_flags_override_it() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let hostile = "import os\nos.system('id')";
    let blocked = |stderr: &str| stderr.contains("blocked by the security policy");
    // The standard policy only blocks critical findings; strict blocks high ones.
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "--policy", "strict", "-c", hostile],
    ));
    assert_eq!(output.status.code(), Some(77), "{stderr}");
    assert!(blocked(&stderr), "{stderr}");
    // A flag wins over the preset.
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--policy",
            "strict",
            "--block-at",
            "never",
            "-c",
            "print(1)",
        ],
    ));
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    // The configuration's [policy], when no flag names one.
    std::fs::write(
        home.path().join("sandlot.toml"),
        "[policy]\npreset = \"standard\"\nblock_at = \"high\"\n",
    )
    .unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &["-l", "python", "-c", hostile],
    ));
    assert_eq!(output.status.code(), Some(77), "{stderr}");
    assert!(blocked(&stderr), "{stderr}");
    std::fs::remove_file(home.path().join("sandlot.toml")).unwrap();

    // A policy file: errors name the file, the key and the line.
    let file = home.path().join("policy.toml");
    std::fs::write(&file, "preset = \"permissive\"\nblock_at = \"sever\"\n").unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--policy",
            file.to_str().unwrap(),
            "-c",
            "print(1)",
        ],
    ));
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr.contains("policy.toml") && stderr.contains("sever") && stderr.contains("line 2"),
        "{stderr}"
    );
    std::fs::write(&file, "preset = \"permissive\"\nblock_at = \"high\"\n").unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--policy",
            file.to_str().unwrap(),
            "-c",
            hostile,
        ],
    ));
    assert_eq!(output.status.code(), Some(77), "{stderr}");
}

#[test]
fn an_execution_says_which_policy_fields_its_backend_could_not_apply() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "--backend",
            "wasm",
            "--policy",
            "strict",
            "-v",
            "--json",
            "-l",
            "python",
            "-c",
            "1",
        ],
    ));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // The workspace quota holds; one thread is more than half a CPU.
    assert_eq!(json["unenforced"], serde_json::json!(["cpu_millis"]));
    assert!(
        stderr.contains("wasm cannot apply the policy's cpu_millis"),
        "{stderr}"
    );
}

/// Files named to become host paths (`..\..\x` is one name on Linux) land inside
/// `--out` and nowhere else; names that would forge sandlot's own notes on the
/// terminal are refused and counted, and nothing the code chose reaches stderr raw.
#[test]
fn run_writes_files_inside_out_whatever_their_names_and_notes_show_no_control_characters() {
    if !needs(&[Need::Runtime("python"), Need::Backend("docker")]) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("work/out");
    std::fs::create_dir_all(&out).unwrap();
    let code = "for name in ['..\\\\..\\\\evil.txt', '\\\\tmp\\\\x', 'a\\nsandlot: forged', 'b\\x1b[31m.png', 'ok.txt']:\n    open('output/' + name, 'w').write('x')\nprint('done')";
    for backend in ["wasm", "docker"] {
        let (output, stdout, stderr) = run(&mut sandlot_run(
            home.path(),
            &[
                "--backend",
                backend,
                "-l",
                "python",
                "-c",
                code,
                "--out",
                out.to_str().unwrap(),
            ],
        ));
        assert_eq!(output.status.code(), Some(0), "{backend}: {stderr}");
        assert_eq!(stdout, "done\n", "{backend}");
        let mut written: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        written.sort();
        assert_eq!(
            written,
            [r"..\..\evil.txt", r"\tmp\x", "ok.txt"],
            "{backend}"
        );
        let mut around: Vec<String> = std::fs::read_dir(home.path().join("work"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        around.sort();
        assert_eq!(
            around,
            ["out"],
            "{backend}: something was written beside --out"
        );
        assert!(
            !stderr.contains('\x1b'),
            "{backend}: a raw escape on the terminal: {stderr:?}"
        );
        assert!(
            !stderr.lines().any(|l| l.starts_with("sandlot: forged")),
            "{backend}: a forged note: {stderr}"
        );
        assert!(
            stderr.contains("2 files were left out"),
            "{backend}: {stderr}"
        );
        for entry in std::fs::read_dir(&out).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
}

#[test]
fn config_show_says_what_is_in_force_and_where_each_value_came_from() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("sandlot.toml"),
        "[policy]\npreset = \"strict\"\n\n[pool.docker]\nmax_size = 3\n",
    )
    .unwrap();
    let cache = home.path().join("elsewhere");
    let (json, _) =
        ok(sandlot(home.path(), &["config", "show", "--json"]).env("SANDLOT_CACHE_DIR", &cache));
    let shown: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        shown["file"]["value"]
            .as_str()
            .unwrap()
            .ends_with("sandlot.toml"),
        "{shown}"
    );
    assert_eq!(shown["cache_dir"]["value"], cache.to_str().unwrap());
    assert_eq!(shown["cache_dir"]["from"], "$SANDLOT_CACHE_DIR");
    assert_eq!(shown["runtimes_dir"]["from"], "default");
    assert_eq!(
        shown["policy"]["value"]["network"], "off",
        "the strict preset"
    );
    assert!(
        shown["policy"]["from"]
            .as_str()
            .unwrap()
            .ends_with("sandlot.toml"),
        "{shown}"
    );
    assert_eq!(shown["pools"]["value"]["docker"]["max_size"], 3);
    assert_eq!(shown["kubernetes"]["value"], serde_json::Value::Null);

    let (text, _) = ok(&mut sandlot(home.path(), &["config", "show"]));
    assert!(text.contains("cache_dir"), "{text}");
    assert!(
        text.contains("($SANDLOT_CACHE_DIR)") || text.contains("(default)"),
        "{text}"
    );
    assert!(text.contains("  network"), "{text}");

    let bare = tempfile::tempdir().unwrap();
    let (json, _) = ok(&mut sandlot(bare.path(), &["config", "show", "--json"]));
    let shown: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(shown["file"]["value"], serde_json::Value::Null);
    assert_eq!(shown["policy"]["from"], "default");
}

#[test]
fn completions_are_printed_for_each_shell() {
    let home = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "_sandlot()"),
        ("zsh", "#compdef sandlot"),
        ("fish", "complete -c sandlot"),
    ] {
        let (script, _) = ok(&mut sandlot(home.path(), &["completions", shell]));
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("serve"), "{shell} knows the subcommands");
    }
}

#[test]
fn runtimes_list_prints_json_too() {
    let home = tempfile::tempdir().unwrap();
    let (json, stderr) = ok(&mut sandlot(home.path(), &["runtimes", "list", "--json"]));
    let listed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        listed,
        serde_json::json!([]),
        "nothing installed in a fresh home"
    );
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn quiet_keeps_sandlots_own_notes_off_stderr_but_not_errors() {
    let home = tempfile::tempdir().unwrap();
    let (_, stderr) = ok(&mut sandlot(home.path(), &["runtimes", "list"]));
    assert!(stderr.contains("no runtimes"), "{stderr}");
    let (table, stderr) = ok(&mut sandlot(home.path(), &["-q", "runtimes", "list"]));
    assert!(stderr.is_empty(), "{stderr}");
    assert!(
        table.starts_with("RUNTIME"),
        "the data is still printed: {table}"
    );
    let (output, _, stderr) = run(&mut sandlot(
        home.path(),
        &["--quiet", "plan", "-l", "klingon", "-c", "x"],
    ));
    assert!(!output.status.success());
    assert!(
        stderr.contains("error:"),
        "errors are never silenced: {stderr}"
    );
}

/// `--request` confines a host to what its rules allow and lists the host as
/// `--allow` would; the refused request is answered 403 and printed as a denial. A
/// rule that does not read, or rules with a network that has no allow-list, exit 64
/// naming what is wrong.
#[test]
fn request_rules_from_the_command_line_confine_a_host() {
    let home = tempfile::tempdir().unwrap();
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--request",
            "GET localhost/a/../b",
            "-c",
            "1",
        ],
    ));
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("`GET localhost/a/../b`"), "{stderr}");
    let (output, _, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--network",
            "on",
            "--request",
            "GET x.test",
            "-c",
            "1",
        ],
    ));
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--network allow-list only"), "{stderr}");

    if !needs(&[Need::Backend("native")]) {
        return;
    }
    let servers = support::EgressServers::start();
    let code = servers.statuses_code(&["/ok/1", "/no"]);
    let (output, stdout, stderr) = run(&mut sandlot_run(
        home.path(),
        &[
            "-l",
            "python",
            "--backend",
            "native",
            "--request",
            "GET localhost/ok/**",
            "--allow",
            "127.0.0.1/32",
            "-c",
            &code,
        ],
    ));
    assert_eq!(
        (output.status.code(), stdout.as_str()),
        (Some(0), "200 403\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("no request rule of this host allows `GET /no`"),
        "{stderr}"
    );
    assert_eq!(servers.received().len(), 1);
}
