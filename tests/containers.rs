//! The Docker and Podman backends end to end, against the real engines, and the native
//! backend over the same images: every language, every hardening default, files in and
//! out, and cleanup. The same tests run once per backend (`docker::…`, `podman::…`,
//! `native::…`); what only an engine has (its containers, `gc`) runs on the engines.
//! They need both engines running and the images built and unpacked;
//! `tests/services.sh` does both (a backend that does not answer is skipped, and said
//! so: `support::needs`). `tests/run.sh` runs `native::…` again with no engine
//! reachable.

mod support;

use sandlot::docker::Engine;
use sandlot::{EndReason, Error, Execution, Network, Policy, RunOptions, Sandlot, Session};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::needs::{self, needs, Need};

/// Opening a session reaps the containers of dead owners: the test of `sandlot gc`
/// holds this exclusively, so that no session opened meanwhile takes its orphan first.
static OPENING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Opens the session `builder` describes while no `gc` test runs.
fn open_session(builder: &sandlot::SessionBuilder) -> sandlot::Result<Session> {
    let _opening = OPENING.read().unwrap_or_else(|e| e.into_inner());
    builder.open()
}

fn sandlot() -> Sandlot {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dir = tempfile::tempdir().unwrap();
    sandlot::builder(plugins)
        .runtimes_dir(dir.path())
        .cache_dir(None)
        .build()
        .unwrap()
}

/// A backend this suite runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Docker,
    Podman,
    Native,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Docker => "docker",
            Target::Podman => "podman",
            Target::Native => "native",
        }
    }

    /// Whether it runs here (see `support::needs`): its tests pass without running
    /// on a machine without it, and fail in CI.
    fn here(self) -> bool {
        needs(&[Need::Backend(self.name())])
    }

    /// The engine, for the tests of what only an engine has.
    fn engine(self) -> Engine {
        match self {
            Target::Docker => Engine::Docker,
            Target::Podman => Engine::Podman,
            Target::Native => unreachable!("engine-only tests do not run on native"),
        }
    }
}

fn choice(engine: Target) -> &'static str {
    engine.name()
}

fn open(engine: Target, language: &str) -> Session {
    open_with(engine, language, Policy::default())
}

fn open_with(engine: Target, language: &str, policy: Policy) -> Session {
    let sandlot = sandlot();
    let mut builder = sandlot.session(language);
    builder
        .backend(choice(engine))
        .policy(policy)
        .timeout(Duration::from_secs(120));
    open_session(&builder)
        .unwrap_or_else(|e| panic!("cannot open a {language} session on {}: {e}", engine.name()))
}

/// Runs with streaming on; checks that what streamed is what came back.
fn run_streamed(session: &mut Session, code: &str) -> Execution {
    let streamed = Arc::new(Mutex::new(Vec::new()));
    let sink = streamed.clone();
    let execution = session
        .run_with(
            code,
            RunOptions {
                on_stdout: Some(Box::new(move |bytes: &[u8]| {
                    sink.lock().unwrap().extend_from_slice(bytes)
                })),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(*streamed.lock().unwrap(), execution.stdout);
    execution
}

/// Code per language: hello world, exit code 3 after printing, a compile or syntax
/// error, and bytes that are not UTF-8.
struct Programs {
    language: &'static str,
    hello: &'static str,
    exit3: &'static str,
    broken: &'static str,
    not_utf8: &'static str,
}

const PROGRAMS: &[Programs] = &[
    Programs {
        language: "python",
        hello: "print('hello from python')",
        exit3: "import sys\nprint('out')\nsys.exit(3)",
        broken: "def f(:\n    pass",
        // Assigned: in the kernel, a final expression's value is shown.
        not_utf8: "import sys\n_ = sys.stdout.buffer.write(b'\\xff\\xfe ok\\n')",
    },
    Programs {
        language: "javascript",
        hello: "console.log('hello from javascript')",
        exit3: "console.log('out'); process.exit(3)",
        broken: "function (",
        // `void`: in the kernel, a final expression's value is shown.
        not_utf8: "void process.stdout.write(Buffer.from([0xff, 0xfe, 0x20, 0x6f, 0x6b, 0x0a]))",
    },
    Programs {
        language: "typescript",
        hello: "const greeting: string = 'hello from typescript';\nconsole.log(greeting);",
        exit3: "declare const process: any;\nconsole.log('out');\nprocess.exit(3);",
        broken: "const x: number = 'not a number';",
        not_utf8: "declare const process: any; declare const Buffer: any;\nprocess.stdout.write(Buffer.from([0xff, 0xfe, 0x20, 0x6f, 0x6b, 0x0a]));",
    },
    Programs {
        language: "java",
        hello: "public class Main { public static void main(String[] a) { System.out.println(\"hello from java\"); } }",
        exit3: "public class Main { public static void main(String[] a) { System.out.println(\"out\"); System.exit(3); } }",
        broken: "public class Main { public static void main(String[] a) { int x = } }",
        not_utf8: "public class Main { public static void main(String[] a) { System.out.write(new byte[]{(byte)0xff, (byte)0xfe, 0x20, 0x6f, 0x6b, 0x0a}, 0, 6); System.out.flush(); } }",
    },
    Programs {
        language: "cpp",
        hello: "#include <cstdio>\nint main() { std::puts(\"hello from cpp\"); }",
        exit3: "#include <cstdio>\nint main() { std::puts(\"out\"); return 3; }",
        broken: "int main() { return undefined_name; }",
        not_utf8: "#include <cstdio>\nint main() { std::fwrite(\"\\xff\\xfe ok\\n\", 1, 6, stdout); }",
    },
    Programs {
        language: "go",
        hello: "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello from go\") }",
        exit3: "package main\nimport (\"fmt\"; \"os\")\nfunc main() { fmt.Println(\"out\"); os.Exit(3) }",
        broken: "package main\nfunc main() { undefinedName() }",
        not_utf8: "package main\nimport \"os\"\nfunc main() { os.Stdout.Write([]byte{0xff, 0xfe, ' ', 'o', 'k', '\\n'}) }",
    },
    Programs {
        language: "r",
        hello: "cat('hello from r\\n')",
        exit3: "cat('out\\n')\nquit(status = 3)",
        broken: "f <- function(",
        not_utf8: "out <- file('/dev/stdout', 'wb')\nwriteBin(as.raw(c(0xff, 0xfe, 0x20, 0x6f, 0x6b, 0x0a)), out)\nclose(out)",
    },
    Programs {
        language: "ruby",
        hello: "puts 'hello from ruby'",
        exit3: "puts 'out'\nexit 3",
        broken: "def f(\n",
        not_utf8: "$stdout.write(\"\\xff\\xfe ok\\n\".b)",
    },
    Programs {
        language: "bash",
        hello: "echo hello from bash",
        exit3: "echo out\nexit 3",
        broken: "if then fi",
        not_utf8: "printf '\\377\\376 ok\\n'",
    },
];

fn every_program_of(engine: Target, language: &str) {
    let programs = PROGRAMS.iter().find(|p| p.language == language).unwrap();
    let mut session = open(engine, language);
    let hello = run_streamed(&mut session, programs.hello);
    assert!(hello.success(), "{language}: {}", hello.stderr_text());
    assert_eq!(hello.stdout_text(), format!("hello from {language}\n"));
    assert_eq!(hello.backend, engine.name());

    let exit3 = run_streamed(&mut session, programs.exit3);
    assert_eq!(exit3.exit_code, 3, "{language}: {}", exit3.stderr_text());
    assert_eq!(exit3.stdout_text(), "out\n");

    let broken = session.run(programs.broken).unwrap();
    assert_ne!(broken.exit_code, 0, "{language}: broken code succeeded");
    assert!(
        !broken.stderr.is_empty(),
        "{language}: the error was not reported on stderr"
    );
    assert!(broken.stdout.is_empty() && !broken.timed_out());

    let bytes = session.run(programs.not_utf8).unwrap();
    assert!(bytes.success(), "{language}: {}", bytes.stderr_text());
    assert_eq!(bytes.stdout, b"\xff\xfe ok\n");
    assert_eq!(bytes.stdout_text(), "\u{fffd}\u{fffd} ok\n");
    session.close();
}

/// Host-side: is any process with this exact argument list alive?
fn host_has_process(argv: &[&str]) -> bool {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted)
    })
}

fn run_for_two_seconds(session: &mut Session, code: &str) -> Execution {
    session
        .run_with(
            code,
            RunOptions {
                timeout: Some(Duration::from_secs(2)),
                ..RunOptions::default()
            },
        )
        .unwrap()
}

fn timeout_kills_the_whole_tree(engine: Target) {
    let mut session = open(engine, "bash");
    let marker = match engine {
        Target::Docker => "987651",
        Target::Podman => "987652",
        Target::Native => "987653",
    };
    // A background job, a new session (setsid) and a double-forked daemon: none may
    // survive the time limit.
    let code = format!(
        "sleep {marker} &\nsetsid sleep {marker} &\n( ( sleep {marker} & ) & )\necho started\nwait"
    );
    let execution = run_for_two_seconds(&mut session, &code);
    assert!(execution.timed_out());
    assert_eq!(execution.exit_code, 124);
    assert_eq!(execution.stdout_text(), "started\n");
    assert!(
        !host_has_process(&["sleep", marker]),
        "a process of the timed-out run is still alive on the host"
    );
    // The session goes on working after a timeout.
    assert_eq!(session.run("echo again").unwrap().stdout_text(), "again\n");
}

fn changing_process_group_does_not_escape_the_time_limit(engine: Target) {
    // A program of its own (one-shot): in a kernel, the interpreter leads its own
    // session and cannot join another group at all; that case follows below.
    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder.backend(choice(engine)).one_shot(true);
    let mut session = open_session(&builder).unwrap();
    let marker = match engine {
        Target::Docker => "876541",
        Target::Podman => "876542",
        Target::Native => "876545",
    };
    // The parent moves itself into its child's new process group, so killing the
    // command's own group reaches nobody; output every half second keeps the host's
    // connection busy.
    let code = format!(
        "import os, time, sys\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   os.setpgid(0, 0)\n\
         \x20   os.execvp('sleep', ['sleep', '{marker}'])\n\
         time.sleep(0.2)\n\
         os.setpgid(0, pid)\n\
         while True:\n\
         \x20   print('.', flush=True)\n\
         \x20   time.sleep(0.5)\n"
    );
    let started = std::time::Instant::now();
    let execution = run_for_two_seconds(&mut session, &code);
    assert!(execution.timed_out(), "{}", execution.stderr_text());
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!host_has_process(&["sleep", marker]));
    assert_eq!(session.run("print(3)").unwrap().stdout_text(), "3\n");

    // In the kernel, a child that moved to a group of its own is killed with the
    // interrupted cell, and the kernel keeps its state.
    let mut session = open(engine, "python");
    let marker = match engine {
        Target::Docker => "876543",
        Target::Podman => "876544",
        Target::Native => "876546",
    };
    session.run("kept = 'yes'").unwrap();
    let code = format!(
        "import os, time\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   os.setpgid(0, 0)\n\
         \x20   os.execvp('sleep', ['sleep', '{marker}'])\n\
         while True:\n\
         \x20   time.sleep(0.5)\n"
    );
    let execution = run_for_two_seconds(&mut session, &code);
    assert!(execution.timed_out(), "{}", execution.stderr_text());
    assert_eq!(execution.session, sandlot::SessionState::Open);
    assert!(!host_has_process(&["sleep", marker]));
    assert_eq!(session.run("print(kept)").unwrap().stdout_text(), "yes\n");
}

fn a_fifo_cannot_wedge_the_sandbox(engine: Target) {
    let mut session = open(engine, "bash");
    assert!(session
        .run("mkfifo data.csv output/plot.png")
        .unwrap()
        .success());
    let started = std::time::Instant::now();
    assert!(session.read_file("data.csv").is_err());
    assert!(session.write_file("data.csv", b"x").is_err());
    assert!(started.elapsed() < Duration::from_secs(5));
    let later = session.run("echo still here").unwrap();
    assert_eq!(later.stdout_text(), "still here\n");
    // The FIFO in the output directory is not an artifact, and does not block one.
    assert!(later.artifacts.is_empty());
}

/// Forks sleepers (3 s) until the process limit refuses one; prints `refused 11`
/// and how many started.
const FORK_TO_THE_LIMIT: &str = "import os, time\n\
    started = 0\n\
    try:\n\
    \x20   for _ in range(200):\n\
    \x20       if os.fork() == 0:\n\
    \x20           time.sleep(3)\n\
    \x20           os._exit(0)\n\
    \x20       started += 1\n\
    except OSError as e:\n\
    \x20   print('refused', e.errno)\n\
    print('started', started)";

/// Forking stops at the policy's process limit (a pids cgroup, or on native without
/// cgroups `RLIMIT_NPROC`, counted per sandbox), and a session left at its limit by
/// the processes of a run goes on: the next cell runs in the kernel, which needs no
/// new process.
fn processes_stop_at_the_limit(engine: Target) {
    let mut session = open_with(
        engine,
        "python",
        Policy {
            pids_limit: 48,
            ..Policy::default()
        },
    );
    let execution = session.run(FORK_TO_THE_LIMIT).unwrap();
    let text = execution.stdout_text();
    assert!(text.starts_with("refused 11\n"), "{text}");
    let started: u32 = text
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("started "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((10..48).contains(&started), "{started} processes started");
    let next = session.run("print('next')").unwrap();
    assert_eq!(next.stdout_text(), "next\n", "{next:?}");
}

/// A run that calls tools needs threads for its tool endpoint and each connection to
/// it: in a session left at its process limit the call fails in the code with the
/// reason, or the run is refused with it (or, given room, the call works); once the
/// processes are gone (waited for) the same session calls tools again.
fn a_run_with_tools_at_the_process_limit_fails_alone(engine: Target) {
    use sandlot::tool::Tool;
    let numbers = serde_json::json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]});
    let mut tools = sandlot::ToolSet::new();
    let add = Tool::new("add", "The sum of a and b.", numbers, |args| {
        Ok(serde_json::json!(
            args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
        ))
    });
    tools.add(add.unwrap()).unwrap();
    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder
        .backend(choice(engine))
        .policy(Policy {
            pids_limit: 48,
            ..Policy::default()
        })
        .tools(&tools)
        .unwrap();
    let mut session = open_session(&builder).unwrap();
    let forked = session.run(FORK_TO_THE_LIMIT).unwrap();
    assert!(
        forked.stdout_text().starts_with("refused 11\n"),
        "{forked:?}"
    );
    let call = "from sandlot_tools import add\nprint(add(a=1, b=2))";
    match session.run(call) {
        Ok(run) => assert!(
            run.stdout_text() == "3\n" || run.stderr_text().contains("at its process limit"),
            "{}",
            run.stderr_text()
        ),
        Err(e) => assert!(e.to_string().contains("tool endpoint"), "{e}"),
    }
    // The sleepers end within 3 s; the kernel is their parent, and they hold their
    // places until it waits for them.
    let waited = session
        .run("import os\ntry:\n    while True:\n        os.wait()\nexcept ChildProcessError:\n    print('none left')")
        .unwrap();
    assert_eq!(
        waited.stdout_text(),
        "none left\n",
        "{}",
        waited.stderr_text()
    );
    let later = session.run(call).unwrap();
    assert_eq!(later.stdout_text(), "3\n", "{}", later.stderr_text());
}

fn memory_cap_is_reported(engine: Target) {
    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder.backend(choice(engine)).memory(128 << 20);
    let mut session = open_session(&builder).unwrap();
    let execution = session
        .run("x = bytearray(1 << 30)\nprint('survived')")
        .unwrap();
    assert!(execution.memory_exceeded(), "{execution:?}");
    assert_eq!(execution.exit_code, 137);
    assert!(!execution.stdout_text().contains("survived"));
    // The agent survives the OOM kill; the session keeps working.
    assert_eq!(session.run("print(1)").unwrap().stdout_text(), "1\n");
    // A child killed for memory does not turn the program's own exit into one.
    let survived = session
        .run(
            "import subprocess, sys\n\
             r = subprocess.run([sys.executable, '-c', 'x = bytearray(1 << 30)'])\n\
             print('child', r.returncode)",
        )
        .unwrap();
    assert_eq!(survived.stdout_text(), "child -9\n");
    assert!(
        !survived.memory_exceeded() && survived.exit_code == 0,
        "{survived:?}"
    );
}

/// Without cgroups (an ordinary user root delegated none: tests/native_user.sh runs
/// it so), no memory cap is offered for the sandbox as a whole, but each process is
/// held to the session's memory limit by `RLIMIT_DATA`: an allocation past it fails
/// and the session goes on. With cgroups, the cgroup caps the sandbox, and no process
/// has an rlimit that would keep a runtime from sizing itself by the cgroup.
fn memory_is_capped_per_process_without_cgroups() {
    let sandlot = sandlot();
    let capped = sandlot
        .backend("native")
        .unwrap()
        .capabilities("python")
        .has(sandlot::backend::Capability::MemoryLimit);
    let mut builder = sandlot.session("python");
    builder.backend("native").memory(256 << 20);
    let mut session = open_session(&builder).unwrap();
    let limit = session
        .run(
            "import resource
print(resource.getrlimit(resource.RLIMIT_DATA))",
        )
        .unwrap();
    if capped {
        assert_eq!(limit.stdout_text(), "(-1, -1)\n", "{}", limit.stderr_text());
        return;
    }
    assert_eq!(
        limit.stdout_text(),
        "(268435456, 268435456)\n",
        "{}",
        limit.stderr_text()
    );
    let refused = session
        .run("try:\n    x = bytearray(1 << 30)\nexcept MemoryError:\n    print('refused')")
        .unwrap();
    assert_eq!(refused.stdout_text(), "refused\n", "{refused:?}");
    let within = session
        .run("y = bytearray(64 << 20)\nprint(len(y))")
        .unwrap();
    assert_eq!(within.stdout_text(), "67108864\n", "{within:?}");
}

const FETCH: &str = "import urllib.request\ntry:\n    urllib.request.urlopen('http://deb.debian.org/debian/', timeout=10)\n    print('reachable')\nexcept Exception as e:\n    print('unreachable', type(e).__name__)";

fn network_only_when_the_policy_allows_it(engine: Target) {
    let mut session = open(engine, "python");
    let closed = session.run(FETCH).unwrap();
    assert!(
        closed.stdout_text().starts_with("unreachable"),
        "{}",
        closed.stdout_text()
    );
    assert_eq!(closed.policy.network, Network::InstallOnly);

    let mut session = open_with(
        engine,
        "python",
        Policy {
            network: Network::On,
            ..Policy::default()
        },
    );
    let open = session.run(FETCH).unwrap();
    assert_eq!(open.stdout_text(), "reachable\n", "{}", open.stderr_text());
}

/// Installs `six` for a run in `session`, which must then import it.
fn install_six(session: &mut Session) {
    let installed = session
        .run_with(
            "import six\nprint('installed')",
            RunOptions {
                libraries: vec!["six".into()],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        installed.stdout_text(),
        "installed\n",
        "{}",
        installed.stderr_text()
    );
}

/// With the network only for installs, code must not get it while libraries install:
/// a thread an earlier cell left running in the kernel keeps trying to connect, and
/// another keeps requests waiting in the egress relay (where there is one), so that
/// some are queued there when the sandbox freezes for the install.
fn code_is_offline_while_libraries_install(engine: Target) {
    let mut session = open(engine, "python");
    session
        .run(
            "import socket, threading, time\n\
             reached = []\n\
             def probe():\n\
             \x20   while True:\n\
             \x20       try:\n\
             \x20           socket.create_connection(('deb.debian.org', 80), timeout=1).close()\n\
             \x20           reached.append('a name resolved')\n\
             \x20       except OSError:\n\
             \x20           pass\n\
             \x20       time.sleep(0.05)\n\
             def queue():\n\
             \x20   while True:\n\
             \x20       held = []\n\
             \x20       for _ in range(8):\n\
             \x20           try:\n\
             \x20               s = socket.create_connection(('127.0.0.1', 3128), timeout=1)\n\
             \x20               s.sendall(b'CONNECT pypi.org:443 HTTP/1.1\\r\\nHost: pypi.org\\r\\n\\r\\n')\n\
             \x20               held.append(s)\n\
             \x20           except OSError:\n\
             \x20               pass\n\
             \x20       for s in held:\n\
             \x20           try:\n\
             \x20               s.settimeout(5)\n\
             \x20               if s.recv(12).startswith(b'HTTP/1.1 200'):\n\
             \x20                   reached.append('a tunnel opened')\n\
             \x20           except OSError:\n\
             \x20               pass\n\
             \x20           s.close()\n\
             \x20       time.sleep(0.02)\n\
             threading.Thread(target=probe, daemon=True).start()\n\
             threading.Thread(target=queue, daemon=True).start()",
        )
        .unwrap();
    install_six(&mut session);
    let probed = session
        .run("time.sleep(0.5)\nprint(sorted(set(reached)))")
        .unwrap();
    assert_eq!(
        probed.stdout_text(),
        "[]\n",
        "the kernel's threads were online"
    );
}

/// Configuration that earlier code plants where installers look for it (here pip's
/// user configuration, in what is the code's home) does not steer a later install.
fn planted_configuration_does_not_steer_an_install(engine: Target) {
    let mut session = open(engine, "python");
    session
        .run(
            "import os\n\
             os.makedirs(os.path.expanduser('~/.config/pip'), exist_ok=True)\n\
             open(os.path.expanduser('~/.config/pip/pip.conf'), 'w').write(\n\
             \x20   '[global]\\nindex-url = http://127.0.0.1:9/planted/\\n')\n\
             os.makedirs(os.path.expanduser('~/.pip'), exist_ok=True)\n\
             open(os.path.expanduser('~/.pip/pip.conf'), 'w').write(\n\
             \x20   '[global]\\nindex-url = http://127.0.0.1:9/planted/\\n')",
        )
        .unwrap();
    install_six(&mut session);
    // The install's own home is gone again.
    let left = session.list_files(".sandlot/install").unwrap();
    assert!(left.entries.is_empty(), "{left:?}");

    // npm reads the `.npmrc` of the directory it installs into.
    let mut session = open(engine, "javascript");
    for path in [".npmrc", "node_modules/.npmrc"] {
        session
            .write_file(path, b"registry=http://127.0.0.1:9/planted/\n")
            .unwrap();
    }
    let installed = session
        .run_with(
            "console.log(require('is-number')(5))",
            RunOptions {
                libraries: vec!["is-number".into()],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        installed.stdout_text(),
        "true\n",
        "{}",
        installed.stderr_text()
    );

    // RubyGems runs Ruby from the gem directory it installs into as it starts (its
    // plugins, every gemspec): what earlier code planted in the session's does not
    // run in an install. Each logs the home it ran with; an install's is its own.
    let mut session = open(engine, "ruby");
    let log = "File.open(File.join(Dir.pwd, 'planted.log'), 'a') { |f| f.puts ENV['HOME'] }\n";
    for path in [
        ".sandlot/gems/plugins/planted_plugin.rb",
        ".sandlot/gems/specifications/planted-1.0.gemspec",
    ] {
        session.write_file(path, log.as_bytes()).unwrap();
    }
    nothing_planted_runs_in_an_install(
        &mut session,
        "colorize:1.1.0",
        "puts File.exist?('planted.log') ? File.read('planted.log') : ''",
    );

    // R loads what it installs, and its dependencies, from its libraries: a package
    // earlier code installed into the session's library under a name the install
    // then asks for does not load (its `.onLoad` does not run) in the install.
    let mut session = open(engine, "r");
    let planted = session
        .run(
            "src <- file.path(tempdir(), 'plantedpkg')\n\
             dir.create(file.path(src, 'R'), recursive = TRUE)\n\
             writeLines(c('Package: plantedpkg', 'Version: 1.0', 'Title: x', \
             'Description: x.', 'License: MIT', 'Author: x', 'Maintainer: x <x@x.x>'), \
             file.path(src, 'DESCRIPTION'))\n\
             writeLines('export(f)', file.path(src, 'NAMESPACE'))\n\
             writeLines(c('f <- function() 1', \
             '.onLoad <- function(...) cat(Sys.getenv(\"HOME\"), \"\\\\n\", \
             file = file.path(getwd(), \"planted.log\"), append = TRUE)'), \
             file.path(src, 'R', 'f.R'))\n\
             lib <- '.sandlot/R'\n\
             dir.create(lib, recursive = TRUE, showWarnings = FALSE)\n\
             install.packages(src, lib = lib, repos = NULL, type = 'source', quiet = TRUE)\n\
             cat(dir.exists(file.path(lib, 'plantedpkg')), '\\n')",
        )
        .unwrap();
    assert_eq!(
        planted.stdout_text(),
        "TRUE \n",
        "{}",
        planted.stderr_text()
    );
    nothing_planted_runs_in_an_install(
        &mut session,
        "plantedpkg",
        "if (file.exists('planted.log')) cat(readLines('planted.log'), sep = '\\n')",
    );
}

/// Installs `library` in `session` (the install need not succeed: its registry may be
/// out of reach here, and what counts is what ran), then checks that what `show_log`
/// prints (the homes planted code ran with) holds no install's home.
fn nothing_planted_runs_in_an_install(session: &mut Session, library: &str, show_log: &str) {
    let _ = session.run_with(
        "",
        RunOptions {
            libraries: vec![library.into()],
            ..RunOptions::default()
        },
    );
    let log = session.run(show_log).unwrap().stdout_text().into_owned();
    assert!(
        !log.contains(".sandlot/install"),
        "planted code ran in the install of {library}: {log}"
    );
}

fn hardening_is_in_force(engine: Target) {
    let mut session = open(engine, "bash");
    let execution = session
        .run(
            "id -u\n\
             touch /usr/sandlot-was-here 2>&1 | grep -o 'Read-only file system'\n\
             grep -E '^(CapEff|NoNewPrivs)' /proc/self/status\n\
             ip link 2>/dev/null | grep -c 'state UP' || true",
        )
        .unwrap();
    let text = execution.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "1000", "{text}");
    assert_eq!(lines[1], "Read-only file system", "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    let policy = execution.policy;
    assert!(policy.read_only_root && policy.drop_capabilities && policy.no_new_privileges);
    assert_eq!(policy.uid, 1000);
}

fn files_round_trip_and_escapes_are_refused(engine: Target) {
    let mut session = open(engine, "python");
    let data: Vec<u8> = (0..=255u8).chain([0xff, 0x00]).collect();
    session.write_file("input/data.bin", &data).unwrap();
    let execution = session
        .run(
            "import os\n\
             data = open('input/data.bin', 'rb').read()\n\
             open('output/copy.bin', 'wb').write(data[::-1])\n\
             os.symlink('/etc/passwd', 'output/passwd')\n\
             os.symlink('/', 'root')\n\
             print(len(data))",
        )
        .unwrap();
    assert!(execution.success(), "{}", execution.stderr_text());
    assert_eq!(execution.stdout_text(), "258\n");
    // The new file comes back as an artifact; the link does not.
    let names: Vec<&str> = execution
        .artifacts
        .iter()
        .map(|a| a.path.as_str())
        .collect();
    assert_eq!(names, ["copy.bin"]);
    let reversed: Vec<u8> = data.iter().rev().copied().collect();
    assert_eq!(execution.artifacts[0].bytes, reversed);
    assert_eq!(session.read_file("output/copy.bin").unwrap(), reversed);
    assert!(session
        .list_files("")
        .unwrap()
        .names()
        .contains(&"input/".to_string()));

    for path in ["output/passwd", "root/etc/passwd"] {
        match session.read_file(path) {
            Err(Error::InvalidPath { reason, .. }) => {
                assert!(reason.contains("symbolic link"), "{path}: {reason}")
            }
            other => panic!("{path}: read through a link: {other:?}"),
        }
    }
    assert!(matches!(
        session.read_file("../etc/passwd"),
        Err(Error::InvalidPath { .. })
    ));
    assert!(session.write_file("root/tmp/evil", b"x").is_err());

    // Whole trees, as tar: in from the host (its link left out), out again.
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.path().join("tree/sub")).unwrap();
    std::fs::write(host.path().join("tree/sub/a.txt"), b"alpha").unwrap();
    std::os::unix::fs::symlink("/etc/shadow", host.path().join("tree/shadow")).unwrap();
    session
        .copy_in(&host.path().join("tree"), "copied")
        .unwrap();
    let listed = session
        .execute_command("find copied | sort")
        .unwrap()
        .stdout_text()
        .into_owned();
    assert_eq!(listed, "copied\ncopied/sub\ncopied/sub/a.txt\n");
    let out = tempfile::tempdir().unwrap();
    let written = session.copy_out("", out.path()).unwrap().files;
    assert!(
        written.iter().any(|f| f == "copied/sub/a.txt"),
        "{written:?}"
    );
    assert!(
        written.iter().any(|f| f == "output/copy.bin"),
        "{written:?}"
    );
    assert_eq!(
        std::fs::read(out.path().join("copied/sub/a.txt")).unwrap(),
        b"alpha"
    );
    // The links the code made stay in the sandbox.
    assert!(std::fs::symlink_metadata(out.path().join("root")).is_err());
    assert!(std::fs::symlink_metadata(out.path().join("output/passwd")).is_err());
    assert!(matches!(
        session.copy_out("root/etc", out.path()),
        Err(Error::InvalidPath { .. })
    ));
    assert!(matches!(
        session.copy_out("../", out.path()),
        Err(Error::InvalidPath { .. })
    ));
}

/// A Python session in a container runs in the language's kernel: like a notebook,
/// a final expression shows its value, input is per run, and a kernel that dies is
/// replaced with the next run, which says its state is gone. One-shot sessions run a
/// fresh program each time.
fn python_sessions_are_interactive(engine: Target) {
    let mut session = open(engine, "python");
    assert!(session
        .capabilities()
        .has(sandlot::Capability::PersistentState));
    assert_eq!(session.run("x = 6 * 7").unwrap().stdout_text(), "");
    assert_eq!(session.run("x").unwrap().stdout_text(), "42\n");
    assert_eq!(session.run("print(x)\nNone").unwrap().stdout_text(), "42\n");
    let typed = session
        .run_with(
            "print(input().upper())",
            RunOptions {
                stdin: b"typed\n".to_vec(),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(typed.stdout_text(), "TYPED\n", "{}", typed.stderr_text());
    let died = session
        .run("print('bye', flush=True)\nimport os\nos._exit(3)")
        .unwrap();
    assert_eq!((died.exit_code, &*died.stdout_text()), (3, "bye\n"));
    assert!(
        matches!(died.session, sandlot::SessionState::Restarted { .. }),
        "{:?}",
        died.session
    );
    let fresh = session.run("print('x' in globals())").unwrap();
    assert_eq!(fresh.stdout_text(), "False\n", "{}", fresh.stderr_text());

    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder.backend(choice(engine)).one_shot(true);
    let mut one_shot = open_session(&builder).unwrap();
    assert!(!one_shot
        .capabilities()
        .has(sandlot::Capability::PersistentState));
    one_shot.run("y = 1").unwrap();
    let forgot = one_shot.run("print(y)").unwrap();
    assert!(
        forgot.stderr_text().contains("NameError"),
        "{}",
        forgot.stderr_text()
    );
    // A program, not a cell: a bare expression shows nothing.
    assert_eq!(one_shot.run("1 + 1").unwrap().stdout_text(), "");
}

/// What a notebook user does in one language, turn by turn.
struct Turns {
    language: &'static str,
    /// Runs that build state: a variable, a function, a module.
    build: &'static [&'static str],
    /// A run that uses all of it, and what it prints.
    uses: (&'static str, &'static str),
    /// A bare final expression, and how the language shows its value (Python,
    /// JavaScript and R do, as a notebook does).
    value: Option<(&'static str, &'static str)>,
    /// A run that fails, and a word of its error.
    fails: (&'static str, &'static str),
    /// A run that never ends by itself.
    hangs: &'static str,
    /// A run that prints the variable of the first run, and what it prints.
    kept: (&'static str, &'static str),
    /// A run that prints its standard input upper-cased (R's kernel cannot give a
    /// cell its own input).
    upper: Option<&'static str>,
    /// A run that defines names a driver might use itself: the kernel must not care.
    shadows: &'static str,
    /// A run that ends itself with status 0 before it prints `after`.
    leaves: &'static str,
}

const TURNS: &[Turns] = &[
    Turns {
        language: "javascript",
        build: &[
            "let base = 40",
            "function twice(n) { return 2 * n }",
            "const path = require('path')",
        ],
        uses: (
            "console.log(twice(base) + 2, path.basename('/a/b'))",
            "82 b\n",
        ),
        value: Some(("await Promise.resolve(base + 2)", "42\n")),
        fails: ("null.boom", "TypeError"),
        hangs: "while (true) {}",
        kept: ("console.log(base)", "40\n"),
        upper: Some("console.log(require('fs').readFileSync(0, 'utf8').trim().toUpperCase())"),
        shadows: "var status = 2, count = 3, done = 4, cells = 5",
        leaves: "process.exit(0); console.log('after')",
    },
    Turns {
        language: "r",
        build: &["base <- 40", "twice <- function(n) 2 * n", "library(stats)"],
        uses: ("cat(twice(base) + 2, median(c(1, 3, 5)), '\\n')", "82 3 \n"),
        value: Some(("base + 2", "[1] 42\n")),
        fails: ("stop('boom')", "boom"),
        hangs: "repeat {}",
        kept: ("cat(base, '\\n')", "40 \n"),
        upper: None,
        shadows: "status <- 'x'; code <- 1; cells <- 2; done <- 3; report <- 4",
        leaves: "quit()\ncat('after\\n')",
    },
    Turns {
        language: "ruby",
        build: &["base = 40", "def twice(n) = 2 * n", "require 'set'"],
        uses: ("puts [twice(base) + 2, Set[1, 2].size].join(' ')", "82 2\n"),
        value: None,
        fails: ("nil.boom", "NoMethodError"),
        hangs: "loop {}",
        kept: ("puts base", "40\n"),
        upper: Some("puts $stdin.read.upcase"),
        shadows: "status = 'ok'; done = true; count = 'x'; cells = nil; saved = 1",
        leaves: "exit 0\nputs 'after'",
    },
    Turns {
        language: "perl",
        build: &[
            "$base = 40",
            "sub twice { 2 * shift }",
            "use List::Util qw(sum)",
        ],
        uses: ("print twice($base) + 2, ' ', sum(1, 2), \"\\n\"", "82 3\n"),
        value: None,
        fails: ("die \"boom\\n\"", "boom"),
        hangs: "sleep 30",
        kept: ("print \"$base\\n\"", "40\n"),
        upper: Some("print uc <STDIN>"),
        shadows: "$done = 1; $cells = 2; $count = 'x'; %saved = ()",
        leaves: "exit 0; print \"after\\n\"",
    },
    Turns {
        language: "bash",
        build: &[
            "base=40",
            "twice() { echo $((2 * $1)); }",
            "export LEVEL=debug",
        ],
        uses: ("echo $(( $(twice $base) + 2 )) $LEVEL", "82 debug\n"),
        value: None,
        fails: ("cat /nonexistent", "No such file"),
        // Inside a function: the interrupt leaves the whole cell, not just `f`.
        hangs: "f() { sleep 30; }; f; echo after",
        kept: ("echo $base", "40\n"),
        upper: Some("tr a-z A-Z"),
        shadows:
            "head() { echo no; }; read() { :; }; printf() { :; }; true() { echo no; }; cd() { :; }",
        leaves: "return 0\necho after",
    },
];

/// JavaScript, R, Ruby and Bash sessions in a container keep their state in the
/// language's kernel, as Python's do: what earlier runs defined is there, a final expression
/// shows its value, an error ends only its run, and a run past its time limit is
/// interrupted without losing the state.
fn sessions_keep_state_in(engine: Target, language: &str) {
    keeps_state(&sandlot(), engine, language);
}

/// The Perl example is a plugin on contract 0.2 with a kernel: dropped into a plugin
/// directory, it is as interactive as a built-in language.
fn an_out_of_tree_language_keeps_state_too(engine: Target) {
    let dir = support::plugin_dir(&[("examples/perl", "perl.wasm")]);
    let plugins = sandlot::PluginHost::builder()
        .plugin_dir(dir.path())
        .load()
        .unwrap();
    let runtimes = tempfile::tempdir().unwrap();
    let sandlot = sandlot::builder(plugins)
        .runtimes_dir(runtimes.path())
        .cache_dir(None)
        .build()
        .unwrap();
    keeps_state(&sandlot, engine, "perl");
}

fn keeps_state(sandlot: &Sandlot, engine: Target, language: &str) {
    let turns = TURNS.iter().find(|t| t.language == language).unwrap();
    let mut builder = sandlot.session(language);
    builder
        .backend(choice(engine))
        .timeout(Duration::from_secs(3));
    let mut session = open_session(&builder).unwrap();
    assert!(session
        .capabilities()
        .has(sandlot::Capability::PersistentState));
    for code in turns.build {
        let run = session.run(code).unwrap();
        assert_eq!(
            run.exit_code,
            0,
            "{language}: {code}: {}",
            run.stderr_text()
        );
    }
    let uses = session.run(turns.uses.0).unwrap();
    assert_eq!(uses.stdout_text(), turns.uses.1, "{}", uses.stderr_text());
    if let Some((code, shown)) = turns.value {
        let value = session.run(code).unwrap();
        assert_eq!(value.stdout_text(), shown, "{}", value.stderr_text());
    }
    let fails = session.run(turns.fails.0).unwrap();
    // As the language's own program would exit: Perl's `die` gives 255.
    let failed = if language == "perl" { 255 } else { 1 };
    assert_eq!(
        fails.exit_code,
        failed,
        "{language}: {}",
        fails.stderr_text()
    );
    assert!(
        fails.stderr_text().contains(turns.fails.1),
        "{}",
        fails.stderr_text()
    );
    let hangs = session.run(turns.hangs).unwrap();
    assert!(hangs.timed_out(), "{language}: {:?}", hangs.end);
    assert_eq!(hangs.session, sandlot::SessionState::Open);
    assert!(hangs.stdout.is_empty(), "{}", hangs.stdout_text());
    let shadows = session.run(turns.shadows).unwrap();
    assert_eq!(
        shadows.exit_code,
        0,
        "{language}: {}",
        shadows.stderr_text()
    );
    let leaves = session.run(turns.leaves).unwrap();
    assert_eq!(
        (leaves.exit_code, &*leaves.stdout_text()),
        (0, ""),
        "{language}: {}",
        leaves.stderr_text()
    );
    assert_eq!(leaves.session, sandlot::SessionState::Open);
    let kept = session.run(turns.kept.0).unwrap();
    assert_eq!(kept.stdout_text(), turns.kept.1, "{}", kept.stderr_text());
    if let Some(code) = turns.upper {
        let options = RunOptions {
            stdin: b"typed\n".to_vec(),
            ..RunOptions::default()
        };
        let upper = session.run_with(code, options).unwrap();
        assert_eq!(upper.stdout_text(), "TYPED\n", "{}", upper.stderr_text());
    }
}

/// The images plot offline: seaborn, pandas and scipy figures come back as PNG plots,
/// once each and in the run that made them; a plotly figure as its HTML page; R's
/// ggplot2 and base graphics as PNG plots. Nothing may be installed: the network is
/// off.
fn the_data_stack_plots_offline(engine: Target) {
    let mut python = open(engine, "python");
    let count = |run: &Execution| run.plots().count();
    let shown = python
        .run("import seaborn as sns\nimport matplotlib.pyplot as plt\nsns.histplot([1, 2, 2, 3])\nplt.show()")
        .unwrap();
    assert_eq!(count(&shown), 1, "{}", shown.stderr_text());
    let saved = python
        .run("import pandas as pd\nfig, ax = plt.subplots()\npd.Series([3, 1, 2]).plot(ax=ax)\nfig.savefig('output/series.png')")
        .unwrap();
    let paths: Vec<_> = saved.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["series.png"], "{}", saved.stderr_text());
    let open_figure = python
        .run("import scipy.stats\nplt.figure()\nplt.plot(scipy.stats.norm.pdf([0, 1, 2]))")
        .unwrap();
    assert_eq!(count(&open_figure), 1, "{}", open_figure.stderr_text());
    let plotly = python
        .run("import plotly.express as px\npx.bar(x=['a', 'b'], y=[1, 2]).show()")
        .unwrap();
    assert_eq!(plotly.artifacts.len(), 1, "{}", plotly.stderr_text());
    let page = &plotly.artifacts[0];
    assert!(page.path.as_str().ends_with(".html"), "{}", page.path);
    assert!(String::from_utf8_lossy(&page.bytes).contains("plotly"));
    let none = python.run("print('no plot')").unwrap();
    assert!(none.artifacts.is_empty(), "{:?}", none.artifacts);

    let mut r = open(engine, "r");
    let ggplot = r
        .run("library(ggplot2)\nggplot(data.frame(x = 1:3, y = c(2, 1, 3)), aes(x, y)) + geom_point()")
        .unwrap();
    assert_eq!(count(&ggplot), 1, "{}", ggplot.stderr_text());
    let plot = ggplot.plots().next().unwrap();
    assert!(plot.bytes.starts_with(b"\x89PNG\r\n\x1a\n") && plot.size > 2000);
    let base = r.run("plot(1:3)\nhist(c(1, 2, 2))").unwrap();
    assert_eq!(count(&base), 2, "{}", base.stderr_text());
    let none = r.run("cat('no plot\\n')").unwrap();
    assert!(none.artifacts.is_empty(), "{:?}", none.artifacts);
}

/// An image without the language's interpreter cannot start its kernel: the run says
/// so, with what the kernel wrote, instead of hanging or pretending.
fn a_kernel_that_cannot_start_is_a_clear_error(engine: Target) {
    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder.backend(choice(engine)).image("sandlot/go:latest");
    let mut session = open_session(&builder).unwrap();
    let error = session.run("print(1)").unwrap_err();
    assert!(matches!(error, Error::KernelStart { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("python3"), "{message}");
    assert!(message.contains("one_shot"), "{message}");
}

fn code_cannot_hijack_a_later_install(engine: Target) {
    let mut session = open(engine, "python");
    // A module named like the installer, left by untrusted code for a later install
    // (which has the network) to import.
    let planted = session
        .run("open('pip.py', 'w').write('print(\"hijacked\")')")
        .unwrap();
    assert!(planted.success());
    let install = session
        .run_with(
            "import six\nprint(six.__name__)",
            RunOptions {
                libraries: vec!["six".to_string()],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert!(install.success(), "{}", install.stderr_text());
    assert_eq!(install.stdout_text(), "six\n");
}

fn libraries_are_installed_then_the_network_is_cut(engine: Target, language: &str) {
    let (library, code) = match language {
        "python" => (
            "numpy",
            "import numpy, urllib.request\nprint(numpy.arange(4).sum())\ntry:\n    urllib.request.urlopen('http://deb.debian.org/debian/', timeout=5)\n    print('online')\nexcept Exception:\n    print('offline')",
        ),
        "javascript" => (
            "is-number",
            "const isNumber = require('is-number');\nconsole.log(isNumber(5), isNumber('x'));",
        ),
        _ => unreachable!(),
    };
    let mut session = open(engine, language);
    let execution = session
        .run_with(
            code,
            RunOptions {
                libraries: vec![library.to_string()],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert!(
        execution.success(),
        "{language}: {}",
        execution.stderr_text()
    );
    let expected = match language {
        "python" => "6\noffline\n",
        _ => "true false\n",
    };
    assert_eq!(execution.stdout_text(), expected);
}

/// proxy.golang.org is not reachable from the machines this runs on, so the module
/// comes from a module proxy in the workspace (`GOPROXY=file://…`): `go get` still
/// resolves, downloads, verifies and builds it the way it would from the internet.
fn go_module_is_installed(engine: Target) {
    let sandlot = sandlot();
    let mut builder = sandlot.session("go");
    builder
        .backend(choice(engine))
        .timeout(Duration::from_secs(300))
        .env("GOPROXY", "file:///workspace/goproxy")
        .env("GOSUMDB", "off");
    let mut session = open_session(&builder).unwrap();
    let module = "example.com/greet";
    let version = "v1.2.3";
    let dir = format!("goproxy/{module}/@v");
    session
        .write_file(&format!("{dir}/list"), format!("{version}\n").as_bytes())
        .unwrap();
    session
        .write_file(
            &format!("{dir}/{version}.info"),
            format!("{{\"Version\":\"{version}\",\"Time\":\"2026-01-01T00:00:00Z\"}}").as_bytes(),
        )
        .unwrap();
    let go_mod = format!("module {module}\n\ngo 1.19\n");
    session
        .write_file(&format!("{dir}/{version}.mod"), go_mod.as_bytes())
        .unwrap();
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, body) in [
        ("go.mod", go_mod.as_str()),
        (
            "greet.go",
            "package greet\n\nfunc Hello() string { return \"hello from a module\" }\n",
        ),
    ] {
        zip.start_file(format!("{module}@{version}/{name}"), options)
            .unwrap();
        std::io::Write::write_all(&mut zip, body.as_bytes()).unwrap();
    }
    let archive = zip.finish().unwrap().into_inner();
    session
        .write_file(&format!("{dir}/{version}.zip"), &archive)
        .unwrap();
    let execution = session
        .run_with(
            "package main\nimport (\"fmt\"; \"example.com/greet\")\nfunc main() { fmt.Println(greet.Hello()) }",
            RunOptions {
                libraries: vec![format!("{module}@{version}")],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert!(execution.success(), "{}", execution.stderr_text());
    assert_eq!(execution.stdout_text(), "hello from a module\n");
}

fn nothing_is_left_after_close(engine: Target) {
    let sandlot = sandlot();
    let backend = sandlot::docker::ContainerBackend::of(&sandlot, engine.engine()).unwrap();
    let mut builder = sandlot.session("bash");
    builder.backend(choice(engine));
    let session = open_session(&builder).unwrap();
    let name = session.sandbox_name().unwrap();
    let ipc = backend
        .sandboxes()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .expect("the open session's container is listed")
        .ipc_dir
        .expect("bind-mount delivery uses a socket directory");
    assert!(
        !std::path::Path::new(&ipc).exists(),
        "the socket directory is removed once the agent is connected"
    );
    session.close();
    assert!(
        !backend.sandboxes().unwrap().iter().any(|s| s.name == name),
        "{name} is still there after close"
    );
}

/// Temporary directories of sandlot's in the temp dir.
fn scratch_dirs() -> std::collections::BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sandlot-"))
        .collect()
}

/// A `sandlot run` killed with -9 while its container runs leaves nothing: the agent
/// sees the host's end of its stream close, stops everything and exits, and the
/// container removes itself, without `sandlot gc`. `env` points the host at the engine.
fn a_killed_host_leaves_nothing(engine: Target, env: &[(&str, &str)]) {
    let sandlot = sandlot();
    let backend = sandlot::docker::ContainerBackend::of(&sandlot, engine.engine()).unwrap();
    let dirs_before = scratch_dirs();
    // The host opens a session, and with it reaps orphans: not while `gc` is tested.
    let opening = OPENING.read().unwrap_or_else(|e| e.into_inner());
    // Wait until the program runs, then kill the host without warning.
    let mut host = support::start_sleeping_host(engine.name(), env);
    drop(opening);
    let name = backend
        .sandboxes()
        .unwrap()
        .into_iter()
        .find(|s| s.owner_pid == Some(host.id()))
        .expect("the host process made a container")
        .name;
    let host_pid = host.id();
    host.kill().unwrap();
    host.wait().unwrap();
    let killed = std::time::Instant::now();
    while backend.sandboxes().unwrap().iter().any(|s| s.name == name) {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "{name} outlived its host by 10 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Other tests make and remove such folders meanwhile: only the host's own count.
    let own = format!("sandlot-ipc-{host_pid}.");
    let leaked: Vec<_> = scratch_dirs()
        .difference(&dirs_before)
        .filter(|d| d.starts_with(&own))
        .cloned()
        .collect();
    assert!(leaked.is_empty(), "left behind in the temp dir: {leaked:?}");
}

/// A `sandlot run` killed with -9 while its jail runs: every process of the jail dies
/// with it (bubblewrap's die-with-parent and the jail's PID namespace), and what it
/// left on the host's disk is removed by `gc`.
fn a_killed_native_host_leaves_nothing() {
    let sandlot = sandlot();
    let backend = sandlot::native::NativeBackend::of(&sandlot).unwrap();
    let before: std::collections::BTreeSet<String> =
        backend.sandboxes().into_iter().map(|s| s.name).collect();
    let opening = OPENING.read().unwrap_or_else(|e| e.into_inner());
    let mut host = support::start_host("native", &[], "echo started; sleep 600417");
    drop(opening);
    // Its own: other tests open jails meanwhile. The host directory's name starts
    // with its owner's stamp, `<pid>.<start time>`.
    let own = format!("sandlot-native-{}.", host.id());
    let jail = backend
        .sandboxes()
        .into_iter()
        .find(|s| {
            !before.contains(&s.name)
                && s.dir
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&own))
        })
        .expect("the host process made a jail");
    // `started` comes just before the shell starts the program.
    let started = std::time::Instant::now();
    while !host_has_process(&["sleep", "600417"]) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the program never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    host.kill().unwrap();
    host.wait().unwrap();
    let killed = std::time::Instant::now();
    while host_has_process(&["sleep", "600417"]) {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the jail's program outlived its host by 10 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _gc = OPENING.write().unwrap_or_else(|e| e.into_inner());
    backend.gc();
    assert!(
        !backend.sandboxes().iter().any(|s| s.name == jail.name),
        "{} is still on disk after gc",
        jail.name
    );
}

/// `images build --engine native` into a directory this user cannot write stops before
/// it builds anything, and says what to do: as root, a read-only mount (in a mount
/// namespace of its own); as another user (tests/native_user.sh), one in root's home.
fn a_native_directory_it_cannot_write_says_what_to_do() {
    let bin = env!("CARGO_BIN_EXE_sandlot");
    let scratch = tempfile::tempdir().unwrap();
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    let output = if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        std::process::Command::new("unshare")
            .args(["--mount", "sh", "-c"])
            .arg("mount -t tmpfs -o ro tmpfs \"$1\" && exec \"$2\" images build --engine native python")
            .arg("sh")
            .arg(scratch.path())
            .arg(bin)
            .env("SANDLOT_NATIVE_DIR", scratch.path().join("native"))
            .output()
            .unwrap()
    } else {
        std::process::Command::new(bin)
            .args(["images", "build", "--engine", "native", "python"])
            .env("SANDLOT_NATIVE_DIR", "/root/sandlot-native")
            .output()
            .unwrap()
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("this user cannot write there; set SANDLOT_NATIVE_DIR"),
        "{stderr}"
    );
    assert!(!stderr.contains("mmdebstrap"), "it built first: {stderr}");
}

/// A pooled sandbox whose agent was killed while it waited is found out before it is
/// handed out, destroyed and counted; the session gets a healthy one.
fn an_unhealthy_pooled_sandbox_is_replaced(engine: Target) {
    use sandlot::backend::pool::PoolOptions;
    // The pool opens in the background: not while `gc` is tested.
    let _opening = OPENING.read().unwrap_or_else(|e| e.into_inner());
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let sandlot = sandlot::builder(plugins)
        .pool(
            engine.name(),
            PoolOptions {
                min_idle: 1,
                max_size: 2,
                ..PoolOptions::default()
            },
        )
        .build()
        .unwrap();
    sandlot
        .session("python")
        .backend(choice(engine))
        .warm()
        .unwrap();
    let pool = sandlot.pool(engine.name()).unwrap();
    let ready = pool.stats().ready_sandboxes[0].clone();
    let killed = std::process::Command::new(engine.name())
        .env("CONTAINERS_CONF", "/etc/sandlot/containers.conf")
        .args(["kill", &ready])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let mut session = sandlot
        .session("python")
        .backend(choice(engine))
        .open()
        .unwrap();
    assert_ne!(session.sandbox_name().unwrap(), ready);
    assert_eq!(session.run("print(1)").unwrap().stdout_text(), "1\n");
    let stats = pool.stats();
    assert_eq!(stats.failed_health_checks, 1, "{stats:?}");
    drop(session);
    pool.close(Duration::from_secs(10));
}

/// A process with a pool (`[pool.ENGINE]` in its sandlot.toml), killed with -9 while
/// one pooled session runs and more sandboxes wait ready, then `sandlot gc`: nothing
/// of it is left.
fn a_killed_pool_owner_leaves_nothing_after_gc(engine: Target) {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("sandlot.toml");
    std::fs::write(
        &config,
        format!("[pool.{}]\nmin_idle = 2\nmax_size = 4\n", engine.name()),
    )
    .unwrap();
    let backend = sandlot::docker::ContainerBackend::of(&sandlot(), engine.engine()).unwrap();
    // The host opens sandboxes (and reaps orphans) until it dies, and this test runs
    // `gc`: neither while the `gc` test runs.
    let opening = OPENING.read().unwrap_or_else(|e| e.into_inner());
    let (mut host, stdin) = support::start_repl(
        std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
            .args(["repl", "--backend", engine.name(), "-l", "python"])
            .env("SANDLOT_CONFIG", &config),
    );
    let pid = host.id();
    let owned = || {
        backend
            .sandboxes()
            .unwrap()
            .into_iter()
            .filter(|s| s.owner_pid == Some(pid))
            .count()
    };
    // One in use, two ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while owned() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pool never filled"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    host.kill().unwrap();
    host.wait().unwrap();
    drop(stdin);
    // Still held: this `gc` must not take the orphan of the `gc` test.
    let gc = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["gc", "--engine", engine.name()])
        .output()
        .unwrap();
    assert!(gc.status.success(), "{gc:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while owned() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} sandboxes of the killed pool are left",
            owned()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(opening);
}

/// What `gc` is still for: a container whose agent never learnt that its host is
/// gone (here: made by hand, owned by a process that has exited, never started).
fn gc_reaps_containers_whose_owner_is_gone(engine: Target) {
    let sandlot = sandlot();
    let backend = sandlot::docker::ContainerBackend::of(&sandlot, engine.engine()).unwrap();
    let _alone = OPENING.write().unwrap_or_else(|e| e.into_inner());
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let name = format!("sandlot-gc-test-{}-{}", engine.name(), std::process::id());
    let output = std::process::Command::new(engine.name())
        // Podman's CLI with the settings of the API service tests/services.sh starts.
        .env("CONTAINERS_CONF", "/etc/sandlot/containers.conf")
        .args([
            "create",
            "--label",
            "sandlot=1",
            "--label",
            &format!("sandlot.owner=no-such-boot:{pid}:1"),
            "--name",
            &name,
            "sandlot/python:latest",
            "true",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed = backend.sandboxes().unwrap();
    let orphan = listed.iter().find(|s| s.name == name).expect("listed");
    assert!(!orphan.owner_alive);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["gc", "--engine", engine.name(), "--json"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let removed: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(
        removed["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == name.as_str()),
        "{removed}"
    );
    assert!(!backend.sandboxes().unwrap().iter().any(|s| s.name == name));
}

#[test]
fn images_list_says_each_recipe_and_its_state_as_json() {
    if !needs(&[Need::Backend("docker")]) {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["images", "list", "--engine", "docker", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let images: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let images = images.as_array().unwrap();
    let python = images
        .iter()
        .find(|i| i["image"] == "sandlot/python:latest")
        .unwrap_or_else(|| panic!("{images:?}"));
    assert_eq!(python["recipe"], "python");
    assert_eq!(python["status"], "current");
    assert!(python["size"].as_u64().unwrap() > 1 << 20);
    // The agent variants are part of their images, not listed apart.
    assert!(
        !images
            .iter()
            .any(|i| i["image"].as_str().unwrap().contains("-agent-")),
        "{images:?}"
    );
}

fn shell_commands_run_through_sh(engine: Target) {
    // A Python session: the command line needs a shell even where the language has none.
    let mut session = open(engine, "python");
    let execution = session
        .execute_command("echo one two | wc -w > output/count.txt && cat output/count.txt; exit 4")
        .unwrap();
    assert_eq!(execution.exit_code, 4);
    assert_eq!(execution.stdout_text().trim(), "2");
    assert_eq!(execution.artifacts[0].path, "count.txt");
    // Standard input reaches the command; the agent's socket is out of the code's reach.
    let fed = session
        .execute_command_with(
            "cat; ls -l /proc/1/fd/ 2>&1 | grep -c socket",
            RunOptions {
                stdin: b"fed through stdin\n".to_vec(),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        fed.stdout_text(),
        "fed through stdin\n0\n",
        "{}",
        fed.stderr_text()
    );
}

fn output_is_capped(engine: Target) {
    let sandlot = sandlot();
    let mut builder = sandlot.session("python");
    builder.backend(choice(engine)).limits(sandlot::Limits {
        max_output: 1000,
        ..sandlot::Limits::default()
    });
    let mut session = open_session(&builder).unwrap();
    // Past the cap, output is dropped; the program goes on.
    let execution = session
        .run("import sys\nprint('x' * 500_000)\nsys.stderr.write('done')")
        .unwrap();
    assert!(execution.success(), "{}", execution.stderr_text());
    assert_eq!(execution.stdout.len(), 1000);
    assert!(execution.stdout_truncated && !execution.stderr_truncated);
    assert_eq!(execution.stderr_text(), "done");
    // Far past it, the program is stopped.
    let flood = session
        .run("import sys\nprint('x' * 5_000_000)\nsys.stderr.write('done')")
        .unwrap();
    assert_eq!(flood.end, EndReason::OutputLimit);
    assert_eq!(flood.stdout.len(), 1000);
    // Stopped before its next line: in the kernel, an interrupted cell's traceback is
    // all that follows.
    assert!(
        !flood.stderr_text().contains("done"),
        "it never got to write more"
    );
}

fn a_missing_image_says_how_to_get_it(engine: Target) {
    let plugins = sandlot::PluginHost::builder().load().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = sandlot::Config::parse(
        "[images]\nruby = \"sandlot/does-not-exist:1\"\n",
        std::path::Path::new("sandlot.toml"),
    )
    .unwrap();
    let sandlot = sandlot::builder(plugins)
        .runtimes_dir(dir.path())
        .cache_dir(None)
        .config(config)
        .build()
        .unwrap();
    let mut builder = sandlot.session("ruby");
    builder.backend(choice(engine));
    let error = open_session(&builder).unwrap_err();
    assert!(matches!(error, Error::ImageMissing { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("sandlot/does-not-exist:1"), "{message}");
    let build = match engine {
        Target::Docker => "`sandlot images build ruby`",
        Target::Podman => "`sandlot images build --engine podman ruby`",
        Target::Native => "`sandlot images build --engine native ruby`",
    };
    assert!(message.contains(build), "{message}");
}

#[test]
fn an_unreachable_engine_says_how_to_start_one() {
    for engine in [Engine::Docker, Engine::Podman] {
        let error = sandlot::docker::ContainerBackend::connect(
            engine,
            Some("unix:///nonexistent/engine.sock"),
        )
        .unwrap_err();
        assert!(matches!(error, Error::EngineUnavailable { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains("/nonexistent/engine.sock"), "{message}");
        assert!(
            message.contains(match engine {
                Engine::Podman => "podman system service",
                _ => "dockerd",
            }),
            "{message}"
        );
    }
}

/// The tests every backend of this suite runs, in a module of its own; `$extra` names
/// a macro of more tests for that module.
macro_rules! engine_tests {
    ($module:ident, $target:expr $(, $extra:ident)?) => {
        mod $module {
            use super::*;
            const ENGINE: Target = $target;

            #[test]
            fn python() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "python");
            }
            #[test]
            fn javascript() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "javascript");
            }
            #[test]
            fn typescript() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "typescript");
            }
            #[test]
            fn java() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "java");
            }
            #[test]
            fn cpp() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "cpp");
            }
            #[test]
            fn go() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "go");
            }
            #[test]
            fn r() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "r");
            }
            #[test]
            fn ruby() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "ruby");
            }
            #[test]
            fn bash() {
                if !ENGINE.here() {
                    return;
                }
                every_program_of(ENGINE, "bash");
            }
            #[test]
            fn timeout_leaves_no_process_behind() {
                if !ENGINE.here() {
                    return;
                }
                timeout_kills_the_whole_tree(ENGINE);
            }
            #[test]
            fn timeout_survives_a_change_of_process_group() {
                if !ENGINE.here() {
                    return;
                }
                changing_process_group_does_not_escape_the_time_limit(ENGINE);
            }
            #[test]
            fn fifo_does_not_wedge_the_agent() {
                if !ENGINE.here() {
                    return;
                }
                a_fifo_cannot_wedge_the_sandbox(ENGINE);
            }
            #[test]
            fn processes_stop_at_the_limit() {
                if !ENGINE.here() {
                    return;
                }
                super::processes_stop_at_the_limit(ENGINE);
            }
            #[test]
            fn a_run_with_tools_at_the_process_limit_fails_alone() {
                if !ENGINE.here() {
                    return;
                }
                super::a_run_with_tools_at_the_process_limit_fails_alone(ENGINE);
            }
            #[test]
            fn out_of_memory_is_reported() {
                if !ENGINE.here() {
                    return;
                }
                memory_cap_is_reported(ENGINE);
            }
            #[test]
            fn network_is_off_unless_allowed() {
                if !ENGINE.here() {
                    return;
                }
                network_only_when_the_policy_allows_it(ENGINE);
            }
            #[test]
            fn code_is_offline_while_libraries_install() {
                if !ENGINE.here() {
                    return;
                }
                super::code_is_offline_while_libraries_install(ENGINE);
            }
            #[test]
            fn planted_configuration_does_not_steer_an_install() {
                if !ENGINE.here() {
                    return;
                }
                super::planted_configuration_does_not_steer_an_install(ENGINE);
            }
            #[test]
            fn read_only_root_no_root_user_no_capabilities() {
                if !ENGINE.here() {
                    return;
                }
                hardening_is_in_force(ENGINE);
            }
            #[test]
            fn file_round_trip_and_escape_refused() {
                if !ENGINE.here() {
                    return;
                }
                files_round_trip_and_escapes_are_refused(ENGINE);
            }
            #[test]
            fn numpy_installs_for_python() {
                if !ENGINE.here() {
                    return;
                }
                libraries_are_installed_then_the_network_is_cut(ENGINE, "python");
            }
            #[test]
            fn python_sessions_are_interactive() {
                if !ENGINE.here() {
                    return;
                }
                super::python_sessions_are_interactive(ENGINE);
            }
            #[test]
            fn javascript_sessions_keep_state() {
                if !ENGINE.here() {
                    return;
                }
                sessions_keep_state_in(ENGINE, "javascript");
            }
            #[test]
            fn r_sessions_keep_state() {
                if !ENGINE.here() {
                    return;
                }
                sessions_keep_state_in(ENGINE, "r");
            }
            #[test]
            fn ruby_sessions_keep_state() {
                if !ENGINE.here() {
                    return;
                }
                sessions_keep_state_in(ENGINE, "ruby");
            }
            #[test]
            fn bash_sessions_keep_state() {
                if !ENGINE.here() {
                    return;
                }
                sessions_keep_state_in(ENGINE, "bash");
            }
            #[test]
            fn an_out_of_tree_language_keeps_state_too() {
                if !ENGINE.here() {
                    return;
                }
                super::an_out_of_tree_language_keeps_state_too(ENGINE);
            }
            #[test]
            fn the_data_stack_plots_offline() {
                if !ENGINE.here() {
                    return;
                }
                super::the_data_stack_plots_offline(ENGINE);
            }
            #[test]
            fn a_kernel_that_cannot_start_is_a_clear_error() {
                if !ENGINE.here() {
                    return;
                }
                super::a_kernel_that_cannot_start_is_a_clear_error(ENGINE);
            }
            #[test]
            fn planted_module_does_not_hijack_pip() {
                if !ENGINE.here() {
                    return;
                }
                code_cannot_hijack_a_later_install(ENGINE);
            }
            #[test]
            fn npm_package_installs_for_node() {
                if !ENGINE.here() {
                    return;
                }
                libraries_are_installed_then_the_network_is_cut(ENGINE, "javascript");
            }
            #[test]
            fn go_module_installs() {
                if !ENGINE.here() {
                    return;
                }
                go_module_is_installed(ENGINE);
            }
            #[test]
            fn shell_commands_use_sh() {
                if !ENGINE.here() {
                    return;
                }
                shell_commands_run_through_sh(ENGINE);
            }
            #[test]
            fn output_is_capped_and_the_rest_drained() {
                if !ENGINE.here() {
                    return;
                }
                output_is_capped(ENGINE);
            }
            #[test]
            fn missing_image_is_a_clear_error() {
                if !ENGINE.here() {
                    return;
                }
                a_missing_image_says_how_to_get_it(ENGINE);
            }
            $($extra!();)?
        }
    };
}

/// What only an engine has: its containers, their socket directories, `sandlot gc`, a
/// container killed with the engine's own command.
macro_rules! engine_only_tests {
    () => {
        #[test]
        fn no_container_after_close() {
            if !ENGINE.here() {
                return;
            }
            nothing_is_left_after_close(ENGINE);
        }
        #[test]
        fn a_killed_host_leaves_nothing() {
            if !ENGINE.here() {
                return;
            }
            super::a_killed_host_leaves_nothing(ENGINE, &[]);
        }
        #[test]
        fn gc_reaps_containers_whose_owner_is_gone() {
            if !ENGINE.here() {
                return;
            }
            super::gc_reaps_containers_whose_owner_is_gone(ENGINE);
        }
        #[test]
        fn an_unhealthy_pooled_sandbox_is_replaced() {
            if !ENGINE.here() {
                return;
            }
            super::an_unhealthy_pooled_sandbox_is_replaced(ENGINE);
        }
        #[test]
        fn a_killed_pool_owner_leaves_nothing_after_gc() {
            if !ENGINE.here() {
                return;
            }
            super::a_killed_pool_owner_leaves_nothing_after_gc(ENGINE);
        }
    };
}

/// What the native backend promises where an engine's containers would remove
/// themselves.
macro_rules! native_only_tests {
    () => {
        #[test]
        fn a_killed_host_takes_its_jail_along_and_gc_the_rest() {
            if !ENGINE.here() {
                return;
            }
            super::a_killed_native_host_leaves_nothing();
        }
        #[test]
        fn a_directory_it_cannot_write_says_what_to_do() {
            if !ENGINE.here() {
                return;
            }
            super::a_native_directory_it_cannot_write_says_what_to_do();
        }
        #[test]
        fn memory_is_capped_per_process_without_cgroups() {
            if !ENGINE.here() {
                return;
            }
            super::memory_is_capped_per_process_without_cgroups();
        }
    };
}

engine_tests!(docker, Target::Docker, engine_only_tests);
engine_tests!(podman, Target::Podman, engine_only_tests);
engine_tests!(native, Target::Native, native_only_tests);

/// The same for an engine reached over TCP with TLS, as one on another machine is:
/// the agent is copied in and talks over the container's attached streams.
#[test]
fn a_killed_host_of_a_remote_engine_leaves_nothing() {
    if !needs(&[Need::DockerTls]) {
        return;
    }
    let (endpoint, certs) = needs::docker_tls();
    let certs = certs.to_string_lossy().into_owned();
    a_killed_host_leaves_nothing(
        Target::Docker,
        &[
            ("DOCKER_HOST", endpoint.as_str()),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", certs.as_str()),
        ],
    );
}

#[test]
fn a_pull_that_cannot_reach_its_registry_says_why() {
    if !needs(&[Need::Backend("docker"), Need::Backend("podman")]) {
        return;
    }
    for engine in ["docker", "podman"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
            .args([
                "images",
                "pull",
                "registry.invalid/nothing:1",
                "--engine",
                engine,
            ])
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{engine}: pulling registry.invalid/nothing:1"))
                && stderr.contains("registry.invalid"),
            "{stderr}"
        );
    }
}
