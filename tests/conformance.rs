//! One list of behaviours, run against every backend this machine has: the embedded
//! wasm backend (in this process, and in worker processes), Docker, Podman, Docker reached over TCP with TLS (the path for an
//! engine on another machine: the agent is copied in and reached over an attach
//! stream), the local Kubernetes cluster (pods reached over the attach websocket), and
//! the native backend (bubblewrap jails, no engine). A backend joins by adding its name
//! to `conformance!` at the bottom.
//!
//! Every behaviour runs Python, which every backend runs. A behaviour a backend lacks
//! is declared through its capabilities, and the test then checks that the backend
//! refuses it with a typed error: nothing is skipped.
//!
//! Needs the engines running, the images built, the TLS proxy up and the Python
//! runtime installed: `tests/services.sh` and `sandlot runtimes install python` (both
//! in `tests/run.sh`). On a machine without one of them, that backend's tests pass
//! without running and the suite says so (`support::needs`); CI fails them instead.

#[path = "conformance/pooled.rs"]
mod pooled;
#[path = "conformance/rules.rs"]
mod rules;
#[path = "conformance/secrets.rs"]
mod secrets;
mod support;

use pooled::a_pooled_sandbox_serves_its_session_whole;
use rules::{
    request_rules_change_on_a_live_session, request_rules_let_through_only_what_they_allow,
};
use sandlot::backend::pool::{Exhausted, PoolOptions};
use sandlot::{
    Capability, EndReason, Error, ErrorKind, Execution, Interrupt, Limits, Network, Policy,
    PolicyField, RunOptions, Sandlot, Session, SessionState,
};
use secrets::{
    bound_secrets_go_through_tls_to_their_host_alone,
    bound_secrets_reach_their_host_and_nothing_else,
};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use support::needs::{self, needs, Need};

/// The built-in backends plus `docker-tls`, with a pool for `pooled` if given.
fn build(pooled: Option<(&str, PoolOptions)>) -> Sandlot {
    let mut builder = support::default_builder(true);
    // Without the TLS proxy, `docker_tls::…` skips or fails (see `here`), and the
    // rest runs: tests/run.sh runs the engine-free backends again with every engine
    // out of reach.
    if let Ok(remote) = needs::docker_tls_backend() {
        builder = builder.backend(Arc::new(remote));
    }
    if let Some((backend, options)) = pooled {
        builder = builder.pool(backend, options);
    }
    builder.build().unwrap()
}

/// Whether `backend` runs here (see `support::needs`): a test of one that does not
/// passes without running on a machine without it, and fails in CI.
fn here(backend: &'static str) -> bool {
    let need = match backend {
        "wasm" | "wasm-workers" => Need::Runtime("python"),
        "docker-tls" => Need::DockerTls,
        other => Need::Backend(other),
    };
    needs(&[need])
}

/// Whether a test of `backend` can use `language`: on the wasm backend, its runtime
/// must be installed too.
fn speaks(backend: &str, language: &'static str) -> bool {
    !backend.starts_with("wasm") || needs(&[Need::Runtime(language)])
}

/// One Sandlot for every test without a pool.
fn sandlot() -> &'static Sandlot {
    static SANDLOT: OnceLock<Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| build(None))
}

fn open_with(backend: &str, limits: Limits) -> Session {
    let mut builder = sandlot().session("python");
    builder.backend(backend).limits(limits);
    builder
        .open()
        .unwrap_or_else(|e| panic!("cannot open a python session on {backend}: {e}"))
}

fn open(backend: &str) -> Session {
    open_with(backend, Limits::default())
}

/// Runs with streaming on; checks that what streamed is exactly what came back.
fn run_streamed(session: &mut Session, code: &str, options: RunOptions) -> Execution {
    let streamed = Arc::new((Mutex::new(Vec::new()), Mutex::new(Vec::new())));
    let (out, err) = (streamed.clone(), streamed.clone());
    let execution = session
        .run_with(
            code,
            RunOptions {
                on_stdout: Some(Box::new(move |b: &[u8]| {
                    out.0.lock().unwrap().extend_from_slice(b)
                })),
                on_stderr: Some(Box::new(move |b: &[u8]| {
                    err.1.lock().unwrap().extend_from_slice(b)
                })),
                ..options
            },
        )
        .unwrap();
    assert_eq!(
        *streamed.0.lock().unwrap(),
        execution.stdout,
        "streamed stdout"
    );
    assert_eq!(
        *streamed.1.lock().unwrap(),
        execution.stderr,
        "streamed stderr"
    );
    execution
}

fn hello(backend: &str) {
    let mut session = open(backend);
    let run = run_streamed(
        &mut session,
        "print('hello')\nprint('world')",
        RunOptions::default(),
    );
    assert_eq!(run.stdout_text(), "hello\nworld\n");
    assert_eq!((run.exit_code, &run.end), (0, &EndReason::Completed));
    assert!(run.success());
    assert_eq!(run.backend, backend);
    assert_eq!(run.session, SessionState::Open);
    // What of the default policy the backend cannot apply, said with every run: the
    // wasm workspace is a tmpfs of workdir_size where the machine allows one (this one
    // does: tests/run.sh runs as root).
    let unenforced: Vec<PolicyField> = match backend {
        "wasm" | "wasm-workers" => vec![],
        // No per-pod process limit; a memory volume without a size before 1.22; a
        // network cut only where a plugin enforces NetworkPolicy.
        "kubernetes" => {
            let cluster = sandlot::kubernetes::KubernetesBackend::of(sandlot()).unwrap();
            let mut fields = Vec::new();
            if !cluster.enforces_network_policy() {
                fields.push(PolicyField::Network);
            }
            fields.push(PolicyField::PidsLimit);
            let minor: u32 = cluster
                .server_version()
                .split('.')
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            if minor < 22 {
                fields.push(PolicyField::WorkdirSize);
            }
            fields
        }
        _ => vec![],
    };
    assert_eq!(run.unenforced, unenforced);
}

fn exit_codes(backend: &str) {
    let mut session = open(backend);
    for (code, expected) in [
        ("import sys\nsys.exit(0)", 0),
        ("raise ValueError('boom')", 1),
        ("import sys\nprint('out')\nsys.exit(7)", 7),
    ] {
        let run = session.run(code).unwrap();
        assert_eq!(run.exit_code, expected, "{code}: {}", run.stderr_text());
        assert_eq!(run.end, EndReason::Completed, "{code}");
    }
    let failed = session.run("raise ValueError('boom')").unwrap();
    assert!(
        failed.stderr_text().contains("ValueError: boom"),
        "{}",
        failed.stderr_text()
    );
}

fn bytes_survive_exactly(backend: &str) {
    let mut session = open(backend);
    let run = run_streamed(
        &mut session,
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe\\x00 end\\n')\nsys.stdout.flush()\n\
         sys.stderr.buffer.write(b'\\xc3\\x28\\n')\nsys.stderr.flush()",
        RunOptions::default(),
    );
    assert_eq!(run.stdout, b"ok \xff\xfe\x00 end\n");
    assert_eq!(run.stderr, b"\xc3\x28\n");
    assert_eq!(run.to_json()["stdout_base64"], "b2sg//4AIGVuZAo=");
}

/// A run stuck for 30 s (in a host call, or computing) under a 2 s limit returns in
/// under 5 s, says it timed out, and leaves a session that runs the next code.
fn time_limits_hold(backend: &str, code: &str) {
    let mut session = open_with(
        backend,
        Limits {
            timeout: Duration::from_secs(2),
            ..Limits::default()
        },
    );
    let started = Instant::now();
    let run = session.run(code).unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "{code}: took {elapsed:?}");
    assert!(
        run.timed_out(),
        "{code}: {:?} {}",
        run.end,
        run.stderr_text()
    );
    assert_eq!(run.exit_code, 124);
    assert!(
        run.duration >= Duration::from_millis(1900),
        "the true time: {:?}",
        run.duration
    );
    assert!(!run.session_ended(), "{:?}", run.session);
    let next = session.run("print('still here')").unwrap();
    assert_eq!(next.stdout_text(), "still here\n");
}

fn sleep_stops_at_the_limit(backend: &str) {
    time_limits_hold(backend, "import time\ntime.sleep(30)");
}

fn busy_loop_stops_at_the_limit(backend: &str) {
    time_limits_hold(backend, "while True:\n    pass");
}

/// A program that floods its output is capped on the stream too, and stopped.
fn output_flood_is_capped_on_the_stream(backend: &str) {
    let cap = 64 << 10;
    let mut session = open_with(
        backend,
        Limits {
            timeout: Duration::from_secs(30),
            max_output: cap,
            ..Limits::default()
        },
    );
    let started = Instant::now();
    let run = run_streamed(
        &mut session,
        "while True:\n    print('x' * 1000)",
        RunOptions::default(),
    );
    assert!(run.stdout.len() <= cap, "{} bytes kept", run.stdout.len());
    assert!(
        run.stdout.len() > cap / 2,
        "the output up to the cap is kept"
    );
    assert!(run.stdout_truncated);
    assert_eq!(run.end, EndReason::OutputLimit, "{}", run.stderr_text());
    // Its own code, not the memory cap's 137.
    assert_eq!(run.exit_code, 141);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped, not timed out"
    );
    let next = session.run("print('after')").unwrap();
    assert_eq!(next.stdout_text(), "after\n");
}

fn memory_cap_holds(backend: &str) {
    let capabilities = sandlot().backend(backend).unwrap().capabilities("python");
    assert!(
        capabilities.has(Capability::MemoryLimit),
        "every backend here caps memory"
    );
    let mut session = open_with(
        backend,
        Limits {
            memory: 128 << 20,
            ..Limits::default()
        },
    );
    let run = session
        .run("x = bytearray(600 * 1024 * 1024)\nprint(len(x))")
        .unwrap();
    assert!(
        run.memory_exceeded(),
        "{:?}: {}",
        run.end,
        run.stderr_text()
    );
    assert_eq!(run.exit_code, 137);
    assert!(run.stdout.is_empty());
}

fn files_and_trees_go_in_and_out(backend: &str) {
    let mut session = open(backend);
    session.write_file("data/in.csv", b"a,b\n1,2\n").unwrap();
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.path().join("tree/sub")).unwrap();
    std::fs::write(host.path().join("tree/sub/x.txt"), b"x").unwrap();
    session
        .copy_in(&host.path().join("tree"), "copied")
        .unwrap();
    let run = session
        .run(
            "import csv, os\nrows = list(csv.reader(open('data/in.csv')))\n\
             open('output/result.txt', 'w').write(str(len(rows)))\n\
             os.makedirs('output/deep', exist_ok=True)\n\
             open('output/deep/y.bin', 'wb').write(open('copied/sub/x.txt', 'rb').read() * 3)\n\
             print(os.getcwd())",
        )
        .unwrap();
    assert_eq!(run.stdout_text(), "/workspace\n", "{}", run.stderr_text());
    let artifacts: Vec<_> = run
        .artifacts
        .iter()
        .map(|a| (a.path.as_str(), a.bytes.as_slice()))
        .collect();
    assert_eq!(
        artifacts,
        [("deep/y.bin", &b"xxx"[..]), ("result.txt", &b"2"[..])]
    );
    assert_eq!(session.read_file("output/result.txt").unwrap(), b"2");
    let listed = session.list_files("").unwrap().names();
    for name in ["copied/", "data/", "output/"] {
        assert!(listed.contains(&name.to_string()), "{listed:?}");
    }
    let out = tempfile::tempdir().unwrap();
    let mut copied = session.copy_out("output", out.path()).unwrap().files;
    copied.sort();
    assert_eq!(copied, ["deep/y.bin", "result.txt"]);
    for escape in ["../x", "/etc/passwd", "data/../../x"] {
        assert!(session.read_file(escape).is_err(), "{escape}");
        assert!(session.write_file(escape, b"x").is_err(), "{escape}");
    }
    // What is not there is said to be not there, the same on every backend (an HTTP
    // client gets 404), not a failure of the backend.
    let missing = [
        session.read_file("output/none.txt").unwrap_err(),
        session.list_files("no/such/dir").unwrap_err(),
        session.copy_out("none", out.path()).unwrap_err(),
    ];
    for error in missing {
        assert!(
            matches!(&error, Error::NoSuchFile { .. }) && error.kind() == ErrorKind::NotFound,
            "{error:?}"
        );
    }
    // A link the program makes is never followed by the host.
    session.run("import os\nos.symlink('/etc', 'etc')").unwrap();
    assert!(session.read_file("etc/passwd").is_err());
}

fn files_are_described_made_moved_and_removed(backend: &str) {
    use sandlot::backend::FileKind;
    let mut session = open(backend);
    session.write_file("notes/a.txt", b"hello").unwrap();
    let info = session.file_info("notes/a.txt").unwrap();
    assert_eq!((info.kind, info.size), (FileKind::File, 5));
    assert_eq!(info.mode & 0o600, 0o600, "{:o}", info.mode);
    assert!(info.modified.is_some());
    assert!(session.file_info("").unwrap().is_dir());
    assert!(session.make_dir("made/deeper").unwrap());
    assert!(!session.make_dir("made").unwrap());
    assert!(session.make_dir("notes/a.txt").is_err());
    session.rename("notes/a.txt", "made/deeper/b.txt").unwrap();
    assert_eq!(session.read_file("made/deeper/b.txt").unwrap(), b"hello");
    // The code sees what the host did, and the host what the code did.
    let run = session
        .run(
            "import os\n\
             print(sorted(os.listdir('made/deeper')), os.path.exists('notes/a.txt'))\n\
             os.symlink('deeper', 'made/link')\n\
             print(os.readlink('made/link'))",
        )
        .unwrap();
    assert_eq!(
        run.stdout_text(),
        "['b.txt'] False\ndeeper\n",
        "{}",
        run.stderr_text()
    );
    let listing = session.list_files("made").unwrap();
    let kinds: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.info.kind))
        .collect();
    assert_eq!(
        kinds,
        [("deeper", FileKind::Directory), ("link", FileKind::Link)]
    );
    // A link is described and removed as itself: the host goes through none.
    assert_eq!(session.file_info("made/link").unwrap().kind, FileKind::Link);
    assert!(session.file_info("made/link/b.txt").is_err());
    assert!(session.make_dir("made/link/new").is_err());
    assert!(session
        .rename("made/deeper/b.txt", "made/link/b.txt")
        .is_err());
    session.remove_path("made/link").unwrap();
    assert_eq!(session.read_file("made/deeper/b.txt").unwrap(), b"hello");
    session.remove_path("made").unwrap();
    for error in [
        session.file_info("made").unwrap_err(),
        session.remove_path("made").unwrap_err(),
        session.rename("made", "elsewhere").unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error:?}");
    }
    for escape in ["../x", "/etc", "a/../../x"] {
        assert!(session.remove_path(escape).is_err(), "{escape}");
        assert!(session.make_dir(escape).is_err(), "{escape}");
        assert!(session.rename("notes", escape).is_err(), "{escape}");
    }
    assert!(session.remove_path("").is_err());
    assert!(session.file_info("").unwrap().is_dir());
}

fn environment_travels_with_the_run(backend: &str) {
    let mut session = open(backend);
    let code = "import os\nprint(os.environ.get('SANDLOT_TEST', 'unset'))";
    let run = session
        .run_with(
            code,
            RunOptions {
                env: vec![("SANDLOT_TEST".into(), "per-run".into())],
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(run.stdout_text(), "per-run\n", "{}", run.stderr_text());
}

fn secrets_reach_the_code_and_come_back_masked(backend: &str) {
    let secret = "sk-test-4f1c9e77d2";
    let mut builder = sandlot().session("python");
    builder.backend(backend).secret("API_KEY", secret).unwrap();
    let mut session = builder.open().unwrap();
    // Streamed in pieces that split the value, on both streams, and into a file.
    let code = "import os, sys\nkey = os.environ['API_KEY']\nprint(len(key))\n\
                for part in (key[:5], key[5:], '\\n'):\n    sys.stdout.write(part); sys.stdout.flush()\n\
                print('err', key, file=sys.stderr)\n\
                _ = open('output/key.txt', 'w').write(key)\n_ = open('kept.txt', 'w').write('k=' + key)";
    let run = run_streamed(&mut session, code, RunOptions::default());
    assert_eq!(run.stdout_text(), "18\n***\n", "{}", run.stderr_text());
    assert_eq!(run.stderr_text(), "err ***\n");
    let file = run.artifacts.iter().find(|a| a.path == "key.txt").unwrap();
    assert_eq!(file.bytes, b"***");
    assert_eq!(session.read_file("kept.txt").unwrap(), b"k=***");
    let out = tempfile::tempdir().unwrap();
    session.copy_out("kept.txt", out.path()).unwrap();
    assert_eq!(
        std::fs::read(out.path().join("kept.txt")).unwrap(),
        b"k=***"
    );
    // Where a snapshot keeps a kernel's variables by pickling them, the session's own
    // code runs (`__reduce__`), and what it prints breaks the save: the error that
    // quotes it is masked like a run's output.
    let loud = "import os\nclass Loud:\n    key = os.environ['API_KEY']\n    \
                def __reduce__(self):\n        print(self.key)\n        return (Loud, ())\n\
                loud = Loud()";
    assert_eq!(session.run(loud).unwrap().exit_code, 0);
    let capabilities = session.capabilities().clone();
    match session.snapshot() {
        Ok(_) => assert!(capabilities.has(Capability::SnapshotMemory)),
        Err(error) => {
            let said = error.to_string();
            assert!(said.contains("***") && !said.contains(secret), "{said}");
        }
    }
}

/// Under an allow-list, code reaches the listed local servers over HTTP and HTTPS
/// (through the proxy its environment names) and nothing else: not another server,
/// not an unlisted name, not a listed front asked for another server, not the host
/// directly, and DNS answers listed names only. What was refused comes back with the
/// run, a secret in a refused name masked. Docker and Podman on this machine enforce
/// it; the wasm backend has no network to give, so it refuses the session instead of
/// letting the code fail at its first socket; a remote engine and Kubernetes refuse
/// the policy.
fn egress_goes_only_where_the_allow_list_says(backend: &str) {
    let servers = support::EgressServers::start();
    let secret = "sk-egress-7f3a";
    let mut builder = sandlot().session("python");
    builder
        .backend(backend)
        .policy(Policy {
            network: Network::AllowList,
            allow: "localhost 127.0.0.1/32 allowed.test".parse().unwrap(),
            ..Policy::default()
        })
        .secret("TOKEN", secret)
        .unwrap();
    let mut session = match builder.open() {
        Ok(session) => session,
        Err(Error::BackendUnsuitable { reason, .. }) if backend.starts_with("wasm") => {
            assert!(
                reason.contains("no network") && reason.contains("`allow-list`"),
                "{reason}"
            );
            return;
        }
        Err(error) => {
            assert!(
                matches!(backend, "docker-tls" | "kubernetes"),
                "{backend}: {error}"
            );
            assert!(
                matches!(
                    error,
                    Error::BackendCannot {
                        capability: Capability::NetworkControl,
                        ..
                    }
                ),
                "{error}"
            );
            return;
        }
    };
    let code = format!(
        r#"import os, socket, ssl, urllib.request
# The test's servers are on the host's loopback, which is `localhost` to the sandbox
# too: send it through the proxy.
os.environ['no_proxy'] = os.environ['NO_PROXY'] = ''
def get(url, **kw):
    try:
        return urllib.request.urlopen(url, timeout=20, **kw).read().decode()
    except Exception as e:
        return 'refused ' + str(getattr(e, 'code', type(e).__name__))
unverified = ssl._create_unverified_context()
print('http', get('http://localhost:{http}/'))
print('https', get('https://localhost:{https}/', context=unverified))
print('other', get('http://127.0.0.2:{other}/'))
print('other-name', get('http://unlisted.test:{http}/'))
print('leak', get('http://%s.leak.test/' % os.environ['TOKEN']))
def resolves(name):
    try:
        return socket.gethostbyname(name)
    except OSError:
        return 'no'
print('dns', resolves('allowed.test'), resolves('denied.test'))
def direct(host):
    try:
        socket.create_connection((host, {http}), timeout=5)
        return 'connected'
    except OSError:
        return 'no'
print('direct', direct('172.17.0.1'), direct('10.88.0.1'))
def fronted():
    try:
        s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
        s.sendall(b'CONNECT localhost:{https} HTTP/1.1\r\n\r\n')
        s.recv(1024)
        unverified.wrap_socket(s, server_hostname='evil.test').recv(1)
        return 'through'
    except OSError:
        return 'cut'
print('front', fronted())
"#,
        http = servers.http,
        https = servers.https,
        other = servers.other,
    );
    assert!(
        !backend.starts_with("wasm"),
        "a session with no network to give was opened"
    );
    let run = session.run(&code).unwrap();
    assert_eq!(
        run.stdout_text(),
        "http allowed-http\nhttps allowed-https\nother refused 403\nother-name refused 403\n\
         leak refused 403\ndns 127.0.0.1 no\ndirect no no\nfront cut\n",
        "{}",
        run.stderr_text()
    );
    let mut denied: Vec<(String, Option<u16>, String)> = run
        .egress_denied
        .iter()
        .map(|d| (d.host.clone(), d.port, d.via.to_string()))
        .collect();
    denied.sort();
    let mut expected = vec![
        (
            "127.0.0.2".to_string(),
            Some(servers.other),
            "http".to_string(),
        ),
        ("unlisted.test".into(), Some(servers.http), "http".into()),
        ("***.leak.test".into(), Some(80), "http".into()),
        ("denied.test".into(), None, "dns".into()),
        ("localhost".into(), Some(servers.https), "tls".into()),
    ];
    expected.sort();
    assert_eq!(denied, expected, "{:#?}", run.egress_denied);
    // The next run starts with nothing refused.
    let quiet = session.run("print(1)").unwrap();
    assert!(quiet.egress_denied.is_empty(), "{:?}", quiet.egress_denied);
}

fn working_directory_travels_with_the_run(backend: &str) {
    let mut session = open(backend);
    session.write_file("sub/data.txt", b"in sub").unwrap();
    let code = "import os\nprint(os.getcwd())\nprint(open('data.txt').read())\n\
                _ = open('../output/from-sub.txt', 'w').write('x')";
    let run = session
        .run_with(
            code,
            RunOptions {
                workdir: Some("sub".into()),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        run.stdout_text(),
        "/workspace/sub\nin sub\n",
        "{}",
        run.stderr_text()
    );
    let names: Vec<_> = run.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(names, ["from-sub.txt"], "artifacts still come from output/");
    let back = session.run("import os\nprint(os.getcwd())").unwrap();
    assert_eq!(back.stdout_text(), "/workspace\n");
    // A directory that is not there yet is made.
    let fresh = session
        .run_with(
            "import os\nprint(os.getcwd())",
            RunOptions {
                workdir: Some("new/dir".into()),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        fresh.stdout_text(),
        "/workspace/new/dir\n",
        "{}",
        fresh.stderr_text()
    );
    assert!(session
        .run_with(
            "pass",
            RunOptions {
                workdir: Some("../x".into()),
                ..RunOptions::default()
            }
        )
        .is_err());
}

/// Runs of one session share an interpreter where the session keeps state (the wasm
/// backend's, or the language's kernel in a container): variables, functions, classes
/// and imports of earlier runs are there in later ones, and an error ends only its
/// own run.
fn state_lives_across_runs(backend: &str) {
    let mut session = open(backend);
    let keeps = session.capabilities().has(Capability::PersistentState);
    let runs = [
        "import math\nx = 40",
        "def twice(n):\n    return 2 * n",
        "class Box:\n    def __init__(self, v):\n        self.v = v",
        "b = Box(twice(x) + 2)",
        "print(b.v, math.floor(x / 3))",
    ];
    let mut last = None;
    for code in runs {
        last = Some(session.run(code).unwrap());
    }
    let last = last.unwrap();
    if !keeps {
        assert!(
            last.stderr_text().contains("NameError"),
            "{}",
            last.stderr_text()
        );
        return;
    }
    assert_eq!(last.stdout_text(), "82 13\n", "{}", last.stderr_text());
    // A traceback the code prints itself quotes the lines of this run and of earlier
    // ones, as one the session prints does.
    let printed = session
        .run(
            "import traceback\ntry:\n    twice(None)\nexcept TypeError:\n    traceback.print_exc()",
        )
        .unwrap();
    let stderr = printed.stderr_text();
    assert_eq!(printed.exit_code, 0, "{stderr}");
    assert!(
        stderr.contains("    twice(None)\n") && stderr.contains("    return 2 * n\n"),
        "{stderr}"
    );
    let failed = session.run("b.v / (x - 40)").unwrap();
    assert!(
        failed.stderr_text().contains("b.v / (x - 40)"),
        "{}",
        failed.stderr_text()
    );
    let failed = session.run("1/0").unwrap();
    assert_eq!(failed.exit_code, 1);
    assert!(
        failed.stderr_text().contains("ZeroDivisionError"),
        "{}",
        failed.stderr_text()
    );
    assert_eq!(failed.session, SessionState::Open);
    let after = session.run("print(x, b.v)").unwrap();
    assert_eq!(after.stdout_text(), "40 82\n", "{}", after.stderr_text());
}

/// A one-shot run is a program: it prints what `python3 main.py ARGS` prints, not the
/// value of its last line, and finds its arguments in `sys.argv`. A session's runs are
/// cells, which show that value where the session keeps state; a kernel's cell has no
/// command line, so arguments there are refused, with the way out named.
fn a_one_shot_run_is_a_program(backend: &str) {
    let mut builder = sandlot().session("python");
    builder.backend(backend).one_shot(true);
    let mut program = builder
        .open()
        .unwrap_or_else(|e| panic!("cannot open a one-shot python session on {backend}: {e}"));
    let with_args = |args: &[&str]| RunOptions {
        args: args.iter().map(|a| a.to_string()).collect(),
        ..RunOptions::default()
    };
    let code = "import sys\nprint(sys.argv)\nsys.stdout.write('done\\n')";
    let ran = program
        .run_with(code, with_args(&["a", "b c", "--flag", "ü"]))
        .unwrap();
    assert_eq!(
        ran.stdout_text(),
        "['main.py', 'a', 'b c', '--flag', 'ü']\ndone\n",
        "{}",
        ran.stderr_text()
    );
    // The next run without arguments has none; its last value is not shown either.
    let ran = program.run("import sys\nlen(sys.argv)").unwrap();
    assert_eq!((ran.stdout_text(), ran.exit_code), ("".into(), 0));
    let ran = program.run("import sys\nprint(sys.argv[1:])").unwrap();
    assert_eq!(ran.stdout_text(), "[]\n", "{}", ran.stderr_text());
    // Tracebacks keep the program's own line numbers.
    let failed = program.run("x = 1\n\nraise ValueError('no')").unwrap();
    assert_eq!(failed.exit_code, 1);
    assert!(
        failed.stderr_text().contains("line 3"),
        "{}",
        failed.stderr_text()
    );
    // Each program starts with nothing from the last one but the files it left.
    let ran = program
        .run("import os\nopen('kept.txt', 'w').write('k')\nprint('x' in globals(), 'os' in globals())")
        .unwrap();
    assert_eq!(ran.stdout_text(), "False True\n", "{}", ran.stderr_text());
    let ran = program
        .run("print('x' in globals(), 'os' in globals(), open('kept.txt').read())")
        .unwrap();
    assert_eq!(
        ran.stdout_text(),
        "False False k\n",
        "{}",
        ran.stderr_text()
    );
    drop(program);

    let mut session = open(backend);
    if !session.capabilities().has(Capability::PersistentState) {
        return;
    }
    let cell = session.run("x = 40\nx + 2").unwrap();
    assert_eq!(cell.stdout_text(), "42\n", "{}", cell.stderr_text());
    let asked = session.run_with("print(1)", with_args(&["a"]));
    if session.capabilities().has(Capability::Kernels) {
        let error = asked.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        assert!(error.to_string().contains("one_shot(true)"), "{error}");
    } else {
        assert_eq!(asked.unwrap().stdout_text(), "1\n");
    }
}

/// A run past its limit is interrupted where the backend can interrupt it, and the
/// session keeps its state; where it cannot, the session says it restarted.
fn a_timeout_keeps_the_state_where_it_can(backend: &str) {
    let mut session = open_with(
        backend,
        Limits {
            timeout: Duration::from_secs(2),
            ..Limits::default()
        },
    );
    session.run("kept = 'yes'").unwrap();
    let stuck = session.run("import time\ntime.sleep(30)").unwrap();
    assert!(stuck.timed_out(), "{:?}", stuck.end);
    let next = session.run("print(kept)").unwrap();
    if session.capabilities().has(Capability::Interrupts) {
        assert_eq!(stuck.session, SessionState::Open);
        assert_eq!(next.stdout_text(), "yes\n", "{}", next.stderr_text());
    } else {
        assert!(
            matches!(stuck.session, SessionState::Restarted { .. }),
            "{:?}",
            stuck.session
        );
        assert!(
            next.stderr_text().contains("NameError"),
            "{}",
            next.stderr_text()
        );
    }
    // Code that ignores the interrupt is stopped all the same, and the session goes on
    // with a fresh interpreter.
    let started = Instant::now();
    let deaf = session
        .run(
            "import time\ntry:\n    import signal\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n\
             except Exception:\n    pass\ntime.sleep(30)",
        )
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(deaf.timed_out(), "{:?}", deaf.end);
    assert!(
        matches!(deaf.session, SessionState::Restarted { .. }),
        "{:?}",
        deaf.session
    );
    let fresh = session.run("print('fresh')").unwrap();
    assert_eq!(fresh.stdout_text(), "fresh\n", "{}", fresh.stderr_text());
}

/// Run options whose interrupt is set as soon as the code prints: it has begun.
fn interrupted_once_it_prints() -> RunOptions {
    let interrupt = Interrupt::new();
    let by_output = interrupt.clone();
    RunOptions {
        interrupt: Some(interrupt),
        on_stdout: Some(Box::new(move |_: &[u8]| by_output.interrupt())),
        ..RunOptions::default()
    }
}

/// An [`Interrupt`] stops a run at once, as its time limit would, whether the code
/// sleeps or computes: in a session, where the backend interrupts without losing
/// state the session goes on with it, and where it cannot it says it restarted; and
/// in a one-shot run, which runs as a program.
fn an_interrupt_stops_the_run_and_keeps_the_state_where_it_can(backend: &str) {
    // Far past what any check here takes: a run that ends at its limit failed.
    let limits = Limits {
        timeout: Duration::from_secs(120),
        ..Limits::default()
    };
    let mut session = open_with(backend, limits);
    let keeps = session.capabilities().has(Capability::Interrupts);
    for waits in ["import time\ntime.sleep(100)", "while True:\n    pass"] {
        session.run("kept = 'yes'").unwrap();
        let code = format!("print('started', flush=True)\n{waits}");
        let ran = session
            .run_with(&code, interrupted_once_it_prints())
            .unwrap();
        assert_eq!(
            (&ran.end, ran.exit_code),
            (&EndReason::Interrupted, 130),
            "{waits:?} on {backend}: {}",
            ran.stderr_text()
        );
        assert_eq!(ran.stdout_text(), "started\n");
        let next = session.run("print(kept)").unwrap();
        if keeps {
            assert_eq!(ran.session, SessionState::Open, "{waits:?}");
            // The traceback is the cell's, as Python's own REPL shows it: not the
            // kernel's frame that raised it.
            let stderr = ran.stderr_text();
            assert!(
                stderr.contains("KeyboardInterrupt") && stderr.contains("<cell"),
                "{stderr}"
            );
            assert!(!stderr.contains("kernel.py"), "{stderr}");
            assert_eq!(next.stdout_text(), "yes\n", "{}", next.stderr_text());
        } else {
            assert!(
                matches!(ran.session, SessionState::Restarted { .. }),
                "{waits:?}: {:?}",
                ran.session
            );
            assert!(next.stderr_text().contains("NameError"), "{waits:?}");
        }
    }
    drop(session);

    let mut builder = sandlot().session("python");
    builder.backend(backend).one_shot(true).limits(limits);
    let mut program = builder.open().unwrap();
    let code = "import time\nprint('started', flush=True)\ntime.sleep(100)";
    let ran = program
        .run_with(code, interrupted_once_it_prints())
        .unwrap();
    assert_eq!(ran.end, EndReason::Interrupted, "{}", ran.stderr_text());
    assert_eq!(
        program.run("print('next')").unwrap().stdout_text(),
        "next\n"
    );
}

/// What the backend says it runs Python with is what the code meets: the interpreter
/// and its version, and the versions of the libraries that come with it (the wasm
/// runtime and the container images carry different ones). A backend that cannot
/// tell without running code says nothing rather than a guess.
fn the_toolchain_is_what_the_code_meets(backend: &str) {
    let python = sandlot()
        .plugins()
        .language("python")
        .unwrap()
        .info()
        .clone();
    let image = sandlot().image_for(&python);
    let said = sandlot()
        .backend(backend)
        .unwrap()
        .toolchain("python", image)
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
    let Some(said) = said else {
        // Kubernetes runs images it cannot look into from here.
        assert_eq!(
            backend, "kubernetes",
            "{backend} says nothing of its Python"
        );
        assert_eq!(open(backend).run("1").unwrap().runs_with, None);
        return;
    };
    assert_eq!(said.name, "CPython", "{said:?}");
    let mut session = open(backend);
    let ran = session
        .run(
            "import platform, importlib.metadata as m\n\
             print(platform.python_version())\n\
             for name in ['numpy', 'pandas']:\n    print(name, m.version(name))",
        )
        .unwrap();
    assert_eq!(session.toolchain(), Some(&said));
    assert_eq!(ran.runs_with, Some(said.to_string()));
    let mut lines = ran
        .stdout_text()
        .lines()
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(!lines.is_empty(), "{}", ran.stderr_text());
    assert_eq!(lines.remove(0), said.version, "{said:?}");
    for line in lines {
        let (name, version) = line.split_once(' ').unwrap();
        assert_eq!(
            said.libraries.get(name).map(String::as_str),
            Some(version),
            "{name} on {backend}: {said:?}"
        );
    }
}

/// A library installed for one run is there for the runs after it, also in an
/// interpreter that was running before it was installed.
fn libraries_stay_installed(backend: &str) {
    let mut session = open(backend);
    session.run("before = 1").unwrap();
    // Not among the wasm runtime's bundled libraries.
    let options = RunOptions {
        libraries: vec!["requests".into()],
        ..RunOptions::default()
    };
    match session.run_with("import requests\nprint(requests.__name__)", options) {
        Ok(first) => {
            assert!(session.capabilities().has(Capability::InstallLibraries));
            assert_eq!(first.stdout_text(), "requests\n", "{}", first.stderr_text());
            session.run("unrelated = 1").unwrap();
            let third = session
                .run("import requests\nprint(requests.__name__)")
                .unwrap();
            assert_eq!(third.stdout_text(), "requests\n", "{}", third.stderr_text());
        }
        Err(error) => {
            assert!(!session.capabilities().has(Capability::InstallLibraries));
            assert!(
                matches!(error, Error::LibrariesUnavailable { .. }),
                "{error}"
            );
        }
    }
}

/// matplotlib figures come back as PNG plots exactly once, in the run that drew them:
/// shown, saved into the output directory (not again as left open), several in one
/// run, and left open at the end of a run. A run that draws nothing returns nothing.
fn plots_come_back_once(backend: &str) {
    let mut session = open(backend);
    let mut plots = |code: &str| {
        let run = session
            .run(&format!("import matplotlib.pyplot as plt\n{code}"))
            .unwrap();
        assert_eq!(run.exit_code, 0, "{}", run.stderr_text());
        for plot in run.plots() {
            assert!(
                plot.bytes.starts_with(b"\x89PNG\r\n\x1a\n") && plot.size > 1000,
                "{} is not a PNG figure",
                plot.path
            );
        }
        run.artifacts
            .iter()
            .map(|a| a.path.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(plots("plt.plot([1, 2])\nplt.show()").len(), 1);
    // 3D axes live in mpl_toolkits, a package of its own beside matplotlib.
    assert_eq!(
        plots("ax = plt.figure().add_subplot(projection='3d')\nax.plot([1, 2], [2, 1], [0, 1])")
            .len(),
        1
    );
    assert_eq!(
        plots("fig = plt.figure()\nplt.bar(['a', 'b'], [1, 2])\nfig.savefig('output/saved.png')"),
        ["saved.png"]
    );
    let two = plots("plt.figure()\nplt.plot([1])\nplt.figure()\nplt.plot([2])\nplt.show()");
    assert_eq!(two.len(), 2, "{two:?}");
    assert!(two[0] < two[1], "in the order they were drawn: {two:?}");
    assert!(plots("print('nothing drawn')").is_empty());
    let left_open = plots("plt.figure()\nplt.plot([3, 1])");
    assert_eq!(left_open.len(), 1, "{left_open:?}");
    // Saved beside the output directory (whose name merely starts the same), not into
    // it: the figure still comes back.
    let beside = plots(
        "import os\nos.makedirs('outputs', exist_ok=True)\nplt.figure()\nplt.plot([5])\n\
         plt.savefig('outputs/beside.png')",
    );
    assert_eq!(beside.len(), 1, "{beside:?}");
    assert!(
        !two.contains(&left_open[0]),
        "an earlier plot was overwritten"
    );
}

/// Files earlier runs left in the output directory stay by default and are never
/// returned again; with `EarlierOutput::Clear` each run starts with it empty, and
/// clearing follows no link the code made.
fn earlier_output_is_kept_or_cleared(backend: &str) {
    let listing = "import os\nprint(sorted(os.listdir('output')))";
    let mut kept = open(backend);
    let first = kept.run("open('output/a.txt', 'w').write('a')").unwrap();
    assert_eq!(first.artifacts.len(), 1);
    let again = kept.run(listing).unwrap();
    assert_eq!(
        again.stdout_text(),
        "['a.txt']\n",
        "{}",
        again.stderr_text()
    );
    assert!(again.artifacts.is_empty(), "a.txt came back twice");

    let mut builder = sandlot().session("python");
    builder
        .backend(backend)
        .earlier_output(sandlot::EarlierOutput::Clear);
    let mut cleared = builder.open().unwrap();
    cleared.write_file("kept/data.txt", b"mine").unwrap();
    let made = cleared
        .run(
            "import os\nos.makedirs('output/d/e')\nopen('output/d/e/f.txt', 'w').write('f')\n\
             try:\n    os.symlink('../kept', 'output/link')\nexcept OSError:\n    pass",
        )
        .unwrap();
    assert_eq!(made.exit_code, 0, "{}", made.stderr_text());
    assert_eq!(made.artifacts.len(), 1, "{:?}", made.artifacts);
    let empty = cleared.run(listing).unwrap();
    assert_eq!(empty.stdout_text(), "[]\n", "{}", empty.stderr_text());
    assert_eq!(cleared.read_file("kept/data.txt").unwrap(), b"mine");
}

/// State across runs, shell commands and library installs: what the session
/// declares is what it does.
fn capabilities_are_what_they_say(backend: &str) {
    let mut session = open(backend);
    let capabilities = session.capabilities().clone();
    session.run("kept = 6 * 7").unwrap();
    let state = session.run("print(kept)").unwrap();
    if capabilities.has(Capability::PersistentState) {
        assert_eq!(state.stdout_text(), "42\n");
    } else {
        assert!(
            state.stderr_text().contains("NameError"),
            "{}",
            state.stderr_text()
        );
    }
    match session.execute_command("echo $((6 * 7)) && pwd") {
        Ok(run) => {
            assert!(capabilities.has(Capability::Shell));
            assert_eq!(run.stdout_text(), "42\n/workspace\n");
            let elsewhere = session
                .execute_command_with(
                    "pwd",
                    RunOptions {
                        workdir: Some("shell/dir".into()),
                        ..RunOptions::default()
                    },
                )
                .unwrap();
            assert_eq!(elsewhere.stdout_text(), "/workspace/shell/dir\n");
        }
        Err(error) => {
            assert!(!capabilities.has(Capability::Shell), "{error}");
            assert!(
                matches!(
                    error,
                    Error::BackendCannot {
                        capability: Capability::Shell,
                        ..
                    }
                ),
                "{error}"
            );
        }
    }
    let options = RunOptions {
        libraries: vec!["sandlot-no-such-package".into()],
        ..RunOptions::default()
    };
    match session.run_with("pass", options) {
        Ok(run) => {
            assert!(capabilities.has(Capability::InstallLibraries));
            assert_ne!(run.exit_code, 0, "an unknown package fails to install");
        }
        Err(error) => {
            assert!(!capabilities.has(Capability::InstallLibraries), "{error}");
            assert!(
                matches!(error, Error::LibrariesUnavailable { .. }),
                "{error}"
            );
        }
    }
}

/// What a snapshot must bring back: a module imported, a variable, a function and an
/// instance of a class defined in the session.
const STATEFUL: &str = "import json\nx = 40\ndef twice(n):\n    return 2 * n\n\
                        class Box:\n    def __init__(self, v):\n        self.v = v\n\
                        b = Box(twice(x) + 2)";
const STATE_CHECK: &str =
    "print(b.v, twice(x), type(b).__name__, json.dumps([x]), open('data/notes.txt').read())";
const STATE_SEEN: &str = "82 80 Box [40] kept\n";

/// The child process [`snapshots_restore_the_session`] starts: restores the snapshot
/// its parent saved and checks it (run only by that test, which passes the file).
#[test]
#[ignore = "run by snapshots_restore_the_session in a process of its own"]
fn restore_in_another_process() {
    let (Some(path), Some(backend)) = (
        std::env::var_os("SANDLOT_TEST_SNAPSHOT"),
        std::env::var("SANDLOT_TEST_SNAPSHOT_BACKEND").ok(),
    ) else {
        return;
    };
    let snapshot = sandlot().open_snapshot(path.as_ref()).unwrap();
    assert_eq!(snapshot.backend(), backend);
    let mut restored = sandlot().restore(&snapshot).unwrap();
    let seen = restored.run(STATE_CHECK).unwrap();
    assert_eq!(seen.stdout_text(), STATE_SEEN, "{}", seen.stderr_text());
    println!("restored in process {}", std::process::id());
}

/// A snapshot holds the workspace's files and, where the backend captures it, the
/// interpreter: a session restored from its file in another process has both. A
/// backend that cannot capture the interpreter refuses `snapshot` with a typed error,
/// rather than lose the variables, and restores the files alone.
fn snapshots_restore_the_session(backend: &str) {
    let mut session = open(backend);
    let capabilities = session.capabilities().clone();
    session.write_file("data/notes.txt", b"kept").unwrap();
    let setup = session.run(STATEFUL).unwrap();
    assert_eq!(setup.exit_code, 0, "{}", setup.stderr_text());
    let memory = capabilities.has(Capability::SnapshotMemory);
    // Elsewhere a Python kernel's namespace is kept by serialisation.
    let namespace = !memory && capabilities.has(Capability::PersistentState);
    if !memory {
        // Installed libraries live in the workspace, and come back with its files.
        let installs = capabilities.has(Capability::InstallLibraries);
        if installs {
            let options = RunOptions {
                libraries: vec!["requests".into()],
                ..RunOptions::default()
            };
            let installed = session.run_with("import requests", options).unwrap();
            assert_eq!(installed.exit_code, 0, "{}", installed.stderr_text());
        }
        let files = session.snapshot_files().unwrap();
        assert!(!files.holds_memory() && !files.holds_namespace());
        let mut restored = sandlot()
            .session("python")
            .backend(backend)
            .restore(&files)
            .unwrap();
        assert_eq!(restored.read_file("data/notes.txt").unwrap(), b"kept");
        if installs {
            let again = restored
                .run("import requests\nprint(requests.__file__)")
                .unwrap();
            assert!(
                again.stdout_text().contains(".sandlot/python/requests/"),
                "{}{}",
                again.stdout_text(),
                again.stderr_text()
            );
        }
        let fresh = restored.run("print(x)").unwrap();
        assert!(
            fresh.stderr_text().contains("NameError"),
            "{}",
            fresh.stderr_text()
        );
        if !namespace {
            return;
        }
        // A generator cannot be pickled: named, not silently dropped.
        session.run("g = (i for i in range(3))").unwrap();
    }
    let snapshot = session.snapshot().unwrap();
    assert!(snapshot.signed_here());
    assert_eq!(
        (snapshot.holds_memory(), snapshot.holds_namespace()),
        (memory, namespace)
    );
    if namespace {
        assert_eq!(snapshot.unsaved(), ["g"]);
        // The pickle went into the snapshot, not into the session's files.
        assert!(session.read_file(".sandlot/namespace.pickle").is_err());
    }
    assert_eq!(
        (snapshot.backend(), snapshot.language()),
        (backend, "python")
    );
    // What the session does afterwards is not in the snapshot.
    session
        .run("x = 'later'\nimport os\nos.remove('data/notes.txt')")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.snap");
    snapshot.save(&path).unwrap();
    support::pass_in_another_process(
        "restore_in_another_process",
        &[
            ("SANDLOT_TEST_SNAPSHOT", &path),
            (
                "SANDLOT_TEST_SNAPSHOT_BACKEND",
                std::path::Path::new(backend),
            ),
        ],
    );
    // And here, twice from the same snapshot, from its bytes.
    let again = sandlot()
        .read_snapshot(&mut &snapshot.to_bytes().unwrap()[..])
        .unwrap();
    for _ in 0..2 {
        let mut restored = sandlot().restore(&again).unwrap();
        let seen = restored.run(STATE_CHECK).unwrap();
        assert_eq!(seen.stdout_text(), STATE_SEEN, "{}", seen.stderr_text());
    }
}

/// A snapshot leaves the session, so its secrets are nowhere in it: not in the
/// interpreter's memory, not in a kernel's pickled variables, not in the files, in any
/// form an interpreter keeps text in. Restored with its secret, the session has it in
/// its environment again; a file, and a variable, that held it hold stars.
fn snapshots_hold_no_secret(backend: &str) {
    let secret = "sk-é\"snap\"-4f1c9e77d2";
    let open = || {
        let mut builder = sandlot().session("python");
        builder.backend(backend).secret("API_KEY", secret).unwrap();
        builder
    };
    let mut session = open().open().unwrap();
    let setup = session
        .run("import os\nheld = os.environ['API_KEY']\nwritten = open('key.txt', 'w').write(held)")
        .unwrap();
    assert_eq!(setup.exit_code, 0, "{}", setup.stderr_text());
    let capabilities = session.capabilities().clone();
    let keeps_variables = capabilities.has(Capability::SnapshotMemory)
        || capabilities.has(Capability::PersistentState);
    let snapshot = match keeps_variables {
        true => session.snapshot().unwrap(),
        false => session.snapshot_files().unwrap(),
    };
    let bytes = snapshot.to_bytes().unwrap();
    let latin1: Vec<u8> = secret.chars().map(|c| c as u8).collect();
    let utf16: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
    for (form, needle) in [
        ("UTF-8", secret.as_bytes()),
        ("Latin-1", &latin1),
        ("UTF-16", &utf16),
    ] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the snapshot holds the secret in {form}"
        );
    }
    let mut restored = open().restore(&snapshot).unwrap();
    let check = "import os\nkept = open('key.txt', encoding='utf-8').read()\n\
                 print(set(kept) == {'*'}, '*' in os.environ['API_KEY'])";
    let seen = restored.run(check).unwrap();
    assert_eq!(seen.stdout_text(), "True False\n", "{}", seen.stderr_text());
    if keeps_variables {
        let seen = restored.run("print(set(held) == {'*'})").unwrap();
        assert_eq!(seen.stdout_text(), "True\n", "{}", seen.stderr_text());
    }
}

/// Forks start from their parent's state and go their own ways: what one changes,
/// in its variables or its files, no other sees.
fn forks_go_their_own_ways(backend: &str) {
    let mut session = open(backend);
    session.run("seen = []").unwrap();
    if !session.capabilities().has(Capability::SnapshotMemory) {
        let refused = session.fork(2).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Unsupported, "{refused}");
        return;
    }
    let mut forks = session.fork(10).unwrap();
    assert_eq!(forks.len(), 10);
    for (i, fork) in forks.iter_mut().enumerate() {
        let ran = fork
            .run(&format!(
                "seen.append({i})\nopen('mine.txt', 'w').write('{i}')"
            ))
            .unwrap();
        assert_eq!(ran.exit_code, 0, "{}", ran.stderr_text());
    }
    for (i, fork) in forks.iter_mut().enumerate() {
        let seen = fork.run("print(seen)").unwrap();
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
    let parent = session.run("print(seen)").unwrap();
    assert_eq!(parent.stdout_text(), "[]\n");
    assert!(session.read_file("mine.txt").is_err());
}

/// The tools the conformance cases call: sync and async handlers, one that fails, one
/// that is slow, one with a large result.
fn tools() -> sandlot::ToolSet {
    use sandlot::tool::Tool;
    use serde_json::json;
    let numbers = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]});
    let mut tools = sandlot::ToolSet::new();
    let add = Tool::new("add", "The sum of a and b.", numbers.clone(), |args| {
        Ok(json!(
            args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
        ))
    });
    let twice = Tool::new_async("twice", "Twice a (async).", numbers, |args| {
        Box::pin(async move { Ok(json!(args["a"].as_i64().unwrap() * 2)) })
    });
    let why = json!({"type": "object", "properties": {"why": {"type": "string"}}});
    let fails = Tool::new("fails", "Always fails.", why.clone(), |args| {
        Err(sandlot::ToolError::new(format!(
            "no {}",
            args["why"].as_str().unwrap_or("?")
        )))
    });
    let slow = Tool::new("slow", "Takes ten seconds.", why.clone(), |_| {
        std::thread::sleep(Duration::from_secs(10));
        Ok(json!("late"))
    });
    let big = Tool::new("big", "A long string.", why, |_| {
        Ok(json!("x".repeat(50_000)))
    });
    for tool in [add, twice, fails, slow, big] {
        tools.add(tool.unwrap()).unwrap();
    }
    tools
}

fn open_language_with_tools(
    backend: &str,
    language: &str,
    limits: Limits,
) -> Result<Session, Error> {
    let mut builder = sandlot().session(language);
    builder
        .backend(backend)
        .limits(limits)
        .tools(&tools())
        .unwrap();
    builder.policy(Policy {
        network: Network::Off,
        ..Policy::default()
    });
    builder.open()
}

/// How each tool call of `run` ended, in order.
fn outcomes(run: &Execution) -> Vec<&'static str> {
    run.tool_calls.iter().map(|c| c.outcome.as_str()).collect()
}

/// A session of `language` with the tools and a budget of two calls a run.
fn open_with_two_calls(backend: &str, language: &str) -> Session {
    let limits = Limits {
        tools: sandlot::tool::ToolLimits {
            max_calls: 2,
            ..Default::default()
        },
        ..Limits::default()
    };
    open_language_with_tools(backend, language, limits).unwrap()
}

/// The tool limits the tool cases run under: room for a thousand calls, a small
/// result, a short call timeout.
fn tool_case_limits() -> Limits {
    Limits {
        tools: sandlot::tool::ToolLimits {
            max_calls: 1_010,
            max_result_bytes: 10_000,
            call_timeout: Duration::from_millis(500),
            ..Default::default()
        },
        ..Limits::default()
    }
}

/// A session of `language` with the tools, or `None` where the backend offers no tools
/// for it, which it must say with a typed error.
fn open_tool_case(backend: &str, language: &str, limits: Limits) -> Option<Session> {
    match open_language_with_tools(backend, language, limits) {
        Ok(session) => {
            assert!(session.capabilities().has(Capability::Tools));
            Some(session)
        }
        Err(error) => {
            assert!(
                !sandlot()
                    .backend(backend)
                    .unwrap()
                    .capabilities(language)
                    .has(Capability::Tools),
                "{error}"
            );
            assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
            assert!(error.to_string().contains("tools"), "{error}");
            None
        }
    }
}

/// `code` calls the tool that hangs (for ten seconds), under a run timeout of 2 s: the
/// run ends well before the handler would, and records the call as timed out. The
/// timeout leaves a busy machine time to start an interpreter and make the call (a
/// one-shot `node` took over 300 ms under load), which is not what is tested.
fn a_hanging_handler_is_held_to_the_run(session: &mut Session, code: &str) {
    let started = Instant::now();
    let hung = session
        .run_with(
            code,
            RunOptions {
                timeout: Some(Duration::from_secs(2)),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(hung.tool_calls.len(), 1);
    assert_eq!(
        hung.tool_calls[0].outcome,
        sandlot::tool::ToolOutcome::Timeout
    );
}

/// Code calls the session's tools: a thousand calls aggregated in one run, the
/// handler's error as an exception, an unlisted tool refused, each limit ending its
/// call with an exception of its own while the run goes on, a hanging handler held to
/// the run's time, all with the network off. A backend without tools refuses the
/// session with a typed error.
fn tools_are_called_from_the_code(backend: &str) {
    let Some(mut session) = open_tool_case(backend, "python", tool_case_limits()) else {
        return;
    };
    let many = session
        .run("from sandlot_tools import add, twice\nprint(sum(add(a=i, b=1) for i in range(999)), twice(a=21, b=0))")
        .unwrap();
    assert_eq!(many.stdout_text(), "499500 42\n", "{}", many.stderr_text());
    assert_eq!(many.tool_calls.len(), 1000);
    assert!(many
        .tool_calls
        .iter()
        .all(|c| c.outcome == sandlot::tool::ToolOutcome::Ok));

    let code = r#"
import sandlot_tools as t
def attempt(what, call):
    try:
        print(what, "gave", call())
    except t.ToolError as e:
        print(what, type(e).__name__, e)
attempt("fails", lambda: t.fails(why="fruit"))
attempt("bad arguments", lambda: t.add(a="one", b=2))
attempt("big", lambda: t.big())
attempt("slow", lambda: t.slow())
try:
    t.no_such_tool
except AttributeError:
    print("no_such_tool refused")
print("still running", t.add(a=1, b=1))
print(sorted(d["name"] for d in t.tools()))
attempt("missing", lambda: t.add(a=1))
attempt("unexpected", lambda: t.add(a=1, b=2, c=3))
"#;
    let limited = session.run(code).unwrap();
    let out = limited.stdout_text();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "fails ToolError no fruit",
        "{out}\n{}",
        limited.stderr_text()
    );
    assert!(
        lines[1].starts_with("bad arguments ToolArgumentError add: the arguments"),
        "{out}"
    );
    assert!(lines[2].starts_with("big ToolTooLarge"), "{out}");
    assert!(lines[3].starts_with("slow ToolTimeout"), "{out}");
    assert_eq!(
        lines[4..7],
        [
            "no_such_tool refused",
            "still running 2",
            "['add', 'big', 'fails', 'slow', 'twice']",
        ],
        "{out}"
    );
    // Arguments the signature refuses: refused in the sandbox, or by the host.
    assert!(lines[7].starts_with("missing ToolArgumentError"), "{out}");
    assert!(
        lines[8].starts_with("unexpected ToolArgumentError"),
        "{out}"
    );
    let outcomes = outcomes(&limited);
    assert_eq!(
        outcomes[..5],
        [
            "tool_error",
            "invalid_arguments",
            "too_large",
            "timeout",
            "ok"
        ]
    );
    assert!(
        outcomes[5..].iter().all(|o| *o == "invalid_arguments"),
        "{outcomes:?}"
    );
    assert_eq!(limited.tool_calls[0].message.as_deref(), Some("no fruit"));

    // The coroutines, side by side where the backend has threads. CPython for WASI
    // makes no event loop (it has no socketpair): there they are driven by hand.
    let gathered = session
        .run(
            "import asyncio
from sandlot_tools import aio
async def main():
    return await asyncio.gather(*(aio.add(a=i, b=0) for i in range(20)))
try:
    total = sum(asyncio.run(main()))
except OSError:
    total = 0
    for i in range(20):
        try:
            aio.add(a=i, b=0).send(None)
        except StopIteration as done:
            total += done.value
print(total)
help(aio.add)",
        )
        .unwrap();
    let out = gathered.stdout_text();
    assert!(out.starts_with("190\n"), "{out}{}", gathered.stderr_text());
    assert!(out.contains("The sum of a and b."), "{out}");
    assert_eq!(gathered.tool_calls.len(), 20);

    // A handler that hangs past the run's own limit does not hold the run.
    a_hanging_handler_is_held_to_the_run(&mut session, "import sandlot_tools as t\nt.slow()");

    let mut few = open_with_two_calls(backend, "python");
    let over = few
        .run("import sandlot_tools as t\nfor i in range(3):\n    try:\n        t.add(a=i, b=0)\n    except t.ToolBudgetExceeded as e:\n        print('budget', i)\n")
        .unwrap();
    assert_eq!(over.stdout_text(), "budget 2\n", "{}", over.stderr_text());
    // The next run has a budget of its own.
    let again = few
        .run(
            "import sandlot_tools as t
print(t.add(a=2, b=2))",
        )
        .unwrap();
    assert_eq!(again.stdout_text(), "4\n", "{}", again.stderr_text());
}

/// JavaScript calls tools as Python does, through `require("sandlot_tools")`: a
/// thousand calls aggregated in one run, each failure a `ToolError` whose `kind` names
/// it while the run goes on, an unlisted tool refused, the budget, a hanging handler
/// held to the run's time, with the network off. A backend without tools for
/// JavaScript refuses the session with a typed error.
fn javascript_calls_tools(backend: &str) {
    if !speaks(backend, "javascript") {
        return;
    }
    let Some(mut session) = open_tool_case(backend, "javascript", tool_case_limits()) else {
        return;
    };
    let many = session
        .run(
            "const tools = require(\"sandlot_tools\");
let total = 0;
for (let i = 0; i < 999; i++) total += await tools.add({a: i, b: 1});
console.log(total, await tools.twice({a: 21, b: 0}));",
        )
        .unwrap();
    assert_eq!(many.stdout_text(), "499500 42\n", "{}", many.stderr_text());
    assert_eq!(many.tool_calls.len(), 1000);
    assert!(many
        .tool_calls
        .iter()
        .all(|c| c.outcome == sandlot::tool::ToolOutcome::Ok));

    let limited = session
        .run(
            r#"const t = require("sandlot_tools");
async function attempt(what, call) {
  try {
    console.log(what, "gave", await call());
  } catch (e) {
    console.log(what, e.name, e.kind, e instanceof t.ToolError, e.message);
  }
}
await attempt("fails", () => t.fails({why: "fruit"}));
await attempt("bad arguments", () => t.add({a: "one", b: 2}));
await attempt("big", () => t.big({}));
await attempt("slow", () => t.slow({}));
await attempt("unlisted", () => t.no_such_tool({}));
console.log("still running", await t.add({a: 1, b: 1}));
console.log((await t.tools()).map((d) => d.name).sort().join(","));"#,
        )
        .unwrap();
    let out = limited.stdout_text();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("fails ToolError tool_error true no fruit"),
        "{out}\n{}",
        limited.stderr_text()
    );
    let starts = [
        "bad arguments ToolError invalid_arguments true add: the arguments",
        "big ToolError too_large true",
        "slow ToolError timeout true",
        "unlisted ToolError unknown_tool true",
    ];
    for (line, start) in lines[1..].iter().zip(starts) {
        assert!(line.starts_with(start), "{line:?} is not {start:?}…\n{out}");
    }
    assert_eq!(
        lines[5..],
        ["still running 2", "add,big,fails,slow,twice"],
        "{out}"
    );
    let outcomes = outcomes(&limited);
    assert_eq!(
        outcomes,
        [
            "tool_error",
            "invalid_arguments",
            "too_large",
            "timeout",
            "unknown_tool",
            "ok"
        ]
    );

    // A handler that hangs past the run's own limit does not hold the run.
    a_hanging_handler_is_held_to_the_run(
        &mut session,
        "await require(\"sandlot_tools\").slow({});",
    );

    let mut few = open_with_two_calls(backend, "javascript");
    let over = few
        .run(
            "const t = require(\"sandlot_tools\");
for (let i = 0; i < 3; i++) {
  try { await t.add({a: i, b: 0}); } catch (e) { console.log(e.kind, i); }
}",
        )
        .unwrap();
    assert_eq!(
        over.stdout_text(),
        "budget_exceeded 2\n",
        "{}",
        over.stderr_text()
    );
}

/// Code in any language calls tools, where the backend offers tools for that
/// language: JavaScript through `require("sandlot_tools")`, the rest through the
/// `sandlot-tool` command (the value on stdout; a failed call's kind and message on
/// stderr, with exit status 1).
fn every_language_calls_tools(backend: &str) {
    if !speaks(backend, "javascript") {
        return;
    }
    let programs = [
        (
            "bash",
            "sandlot-tool add '{\"a\": 2, \"b\": 3}'\nsandlot-tool fails '{\"why\": \"sh\"}'\necho \"status $?\"",
        ),
        (
            "ruby",
            "puts `sandlot-tool add '{\"a\": 2, \"b\": 3}'`\nsystem(\"sandlot-tool\", \"fails\", '{\"why\": \"sh\"}')\nputs \"status #{$?.exitstatus}\"",
        ),
        (
            "go",
            "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"os/exec\"\n)\n\nfunc main() {\n\tout, _ := exec.Command(\"sandlot-tool\", \"add\", `{\"a\": 2, \"b\": 3}`).Output()\n\tfmt.Print(string(out))\n\tfailed := exec.Command(\"sandlot-tool\", \"fails\", `{\"why\": \"sh\"}`)\n\tfailed.Stderr = os.Stderr\n\terr := failed.Run()\n\tfmt.Println(\"status\", failed.ProcessState.ExitCode(), err != nil)\n}\n",
        ),
        (
            "javascript",
            // A session's cells await at the top level; the run ends when they do.
            "const tools = require(\"sandlot_tools\");\nconst [sum, twice] = await Promise.all([tools.add({a: 2, b: 3}), tools.twice({a: 1, b: 0})]);\nconsole.log(sum);\ntry {\n  await tools.fails({why: \"sh\"});\n} catch (e) {\n  console.error(`sandlot-tool: ${e.kind}: ${e.message}`);\n  console.log(\"status 1\", e instanceof tools.ToolError, twice);\n}\n",
        ),
    ];
    for (language, code) in programs {
        let offered = sandlot()
            .backend(backend)
            .unwrap()
            .capabilities(language)
            .has(Capability::Tools);
        let mut session = match open_language_with_tools(backend, language, Limits::default()) {
            Ok(session) => session,
            Err(error) => {
                assert!(!offered, "{language}: {error}");
                assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
                continue;
            }
        };
        let run = session.run(code).unwrap();
        let out = run.stdout_text();
        assert!(
            out.starts_with("5\n"),
            "{language}: {out}\n{}",
            run.stderr_text()
        );
        assert!(out.contains("status 1"), "{language}: {out}");
        assert!(
            run.stderr_text()
                .contains("sandlot-tool: tool_error: no sh"),
            "{language}: {}",
            run.stderr_text()
        );
        let mut outcomes = outcomes(&run);
        outcomes.sort();
        let expected: &[&str] = match language {
            "javascript" => &["ok", "ok", "tool_error"],
            _ => &["ok", "tool_error"],
        };
        assert_eq!(outcomes, expected, "{language}");
    }
}

/// After close, nothing of the sandbox is left: no container, no workspace.
fn nothing_is_left_after_close(backend: &str) {
    let mut session = open(backend);
    session.run("open('output/x', 'w').write('x')").unwrap();
    let name = session.sandbox_name().unwrap();
    session.close();
    assert!(
        !support::sandbox_exists(sandlot(), backend, &name),
        "{name} is still there"
    );
}

/// Waits (a minute at most) until `pool` has `ready` sandboxes to hand out.
fn wait_until_ready(pool: &sandlot::backend::pool::Pool, ready: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while pool.stats().idle < ready {
        assert!(Instant::now() < deadline, "{:?}", pool.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pool_options(min_idle: usize, max_size: usize, when_exhausted: Exhausted) -> PoolOptions {
    PoolOptions {
        min_idle,
        max_size,
        when_exhausted,
        acquire_timeout: Duration::from_secs(120),
        ..PoolOptions::default()
    }
}

/// A pooled session starts from a pre-warmed sandbox, and the next session never sees
/// what the one before it left: not its files, not its variables.
fn pooled_sessions_share_nothing(backend: &str) {
    let sandlot = build(Some((backend, pool_options(1, 2, Exhausted::Wait))));
    sandlot.session("python").backend(backend).warm().unwrap();
    let pool = sandlot.pool(backend).unwrap();
    assert_eq!(pool.stats().idle, 1, "{:?}", pool.stats());
    let mut first = sandlot.session("python").backend(backend).open().unwrap();
    assert_eq!(pool.stats().hits, 1, "served from the warm sandbox");
    let run = first
        .run("secret = 42\nopen('secret.txt', 'w').write('42')\nprint(secret)")
        .unwrap();
    assert_eq!(run.stdout_text(), "42\n", "{}", run.stderr_text());
    assert_eq!(run.backend, backend);
    let first_name = first.sandbox_name().unwrap();
    first.close();

    let mut next = sandlot.session("python").backend(backend).open().unwrap();
    assert_ne!(
        next.sandbox_name().unwrap(),
        first_name,
        "never handed out twice"
    );
    let run = next.run("print(secret)").unwrap();
    assert_eq!(run.exit_code, 1);
    assert!(
        run.stderr_text().contains("NameError"),
        "{}",
        run.stderr_text()
    );
    assert!(
        next.read_file("secret.txt").is_err(),
        "the file stayed behind"
    );
    drop(next);

    // Each session's sandbox is destroyed off the caller's time, and replaced.
    let deadline = Instant::now() + Duration::from_secs(60);
    while support::sandbox_exists(&sandlot, backend, &first_name) || pool.stats().idle < 1 {
        assert!(Instant::now() < deadline, "{:?}", pool.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
    pool.close(Duration::from_secs(5));
    let stats = pool.stats();
    assert_eq!(
        (stats.size, stats.in_use, stats.idle),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.created, stats.destroyed, "{stats:?}");
}

/// 20 tasks at once over a pool of at most 4: waiting, they all run, never more than 4
/// at a time; failing fast, the 16 that find it full get the typed error; with
/// extras, all 20 run at once and the extras are not kept.
fn twenty_tasks_over_a_pool_of_four(backend: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    for strategy in [Exhausted::Wait, Exhausted::FailFast, Exhausted::Overflow] {
        let sandlot = build(Some((backend, pool_options(4, 4, strategy))));
        sandlot.session("python").backend(backend).warm().unwrap();
        let pool = sandlot.pool(backend).unwrap();
        // All four ready, so that exactly four are handed out when it fails fast.
        wait_until_ready(&pool, 4);
        let attempted = Arc::new(std::sync::Barrier::new(20));
        let held = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (sandlot, attempted) = (sandlot.clone(), attempted.clone());
                let (held, most) = (held.clone(), most.clone());
                let backend = backend.to_string();
                std::thread::spawn(move || {
                    let opened = sandlot.session("python").backend(backend.as_str()).open();
                    if opened.is_ok() {
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                    }
                    if strategy != Exhausted::Wait {
                        // Everyone has tried before anyone lets go.
                        attempted.wait();
                    }
                    let mut session = opened?;
                    let run = session.run(&format!("print({i})"));
                    held.fetch_sub(1, Ordering::SeqCst);
                    let run = run?;
                    assert_eq!(run.stdout_text(), format!("{i}\n"), "{}", run.stderr_text());
                    Ok::<(), Error>(())
                })
            })
            .collect();
        let results: Vec<_> = tasks.into_iter().map(|t| t.join().unwrap()).collect();
        let ran = results.iter().filter(|r| r.is_ok()).count();
        let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        match strategy {
            Exhausted::Wait => {
                assert_eq!(ran, 20, "{refused:?}");
                assert!(most.load(Ordering::SeqCst) <= 4, "more than 4 at once");
            }
            Exhausted::FailFast => {
                assert_eq!(ran, 4, "{refused:?}");
                assert!(
                    refused
                        .iter()
                        .all(|e| matches!(e, Error::PoolExhausted { max_size: 4, .. })),
                    "{refused:?}"
                );
            }
            _ => {
                assert_eq!(ran, 20, "{refused:?}");
                assert_eq!(most.load(Ordering::SeqCst), 20, "all at once");
            }
        }
        let stats = pool.stats();
        assert!(stats.size <= 4, "{stats:?}");
        assert_eq!(stats.in_use, 0, "{stats:?}");
        pool.close(Duration::from_secs(10));
        let stats = pool.stats();
        assert_eq!(stats.created, stats.destroyed, "{strategy:?}: {stats:?}");
    }
}

/// Closing a pool while a session runs: the run ends as it would, then the session's
/// sandbox is taken and destroyed, and nothing more is handed out.
fn a_pool_closed_while_sessions_run(backend: &str) {
    let sandlot = build(Some((backend, pool_options(1, 2, Exhausted::Wait))));
    sandlot.session("python").backend(backend).warm().unwrap();
    let pool = sandlot.pool(backend).unwrap();
    let mut session = sandlot.session("python").backend(backend).open().unwrap();
    let name = session.sandbox_name().unwrap();
    let running = std::thread::spawn(move || {
        let run = session
            .run("import time\ntime.sleep(2)\nprint('done')")
            .unwrap();
        (session, run)
    });
    std::thread::sleep(Duration::from_millis(300));
    pool.close(Duration::from_millis(200));
    let (mut session, run) = running.join().unwrap();
    assert_eq!(
        run.stdout_text(),
        "done\n",
        "the run in progress ends as it would"
    );
    let after = session.run("print(1)").unwrap();
    assert!(after.session_ended(), "{:?}", after.session);
    assert!(
        !support::sandbox_exists(&sandlot, backend, &name),
        "{name} outlived the pool"
    );
    let refused = sandlot
        .session("python")
        .backend(backend)
        .open()
        .unwrap_err();
    assert!(matches!(refused, Error::PoolClosed { .. }), "{refused}");
    let refused = sandlot
        .session("python")
        .backend(backend)
        .warm()
        .unwrap_err();
    assert!(matches!(refused, Error::PoolClosed { .. }), "{refused}");
    let stats = pool.stats();
    assert_eq!((stats.size, stats.idle), (0, 0), "{stats:?}");
    assert_eq!(stats.created, stats.destroyed, "{stats:?}");
}

/// A pool warms sandboxes with the session's libraries already installed (where the
/// backend installs at all), and never hands one to a session that did not ask for
/// them, nor one without them to a session that did.
fn a_pooled_session_has_its_libraries_before_its_first_run(backend: &str) {
    let sandlot = build(Some((backend, pool_options(1, 3, Exhausted::Wait))));
    // Not in the sandlot/python image; bundled in the wasm runtime.
    let libraries = vec!["tabulate".to_string()];
    let mut with = sandlot.session("python");
    with.backend(backend).libraries(&libraries);
    with.warm().unwrap();
    let pool = sandlot.pool(backend).unwrap();
    let mut session = with.open().unwrap();
    assert_eq!(pool.stats().hits, 1, "{:?}", pool.stats());
    let installs = session.capabilities().has(Capability::InstallLibraries);
    let shell = session.capabilities().has(Capability::Shell);
    if installs && shell {
        // Installed before any run of the session (where the Python handler has pip
        // put libraries).
        let check = session
            .execute_command("PYTHONPATH=.sandlot/python python3 -c 'import tabulate'")
            .unwrap();
        assert_eq!(check.exit_code, 0, "{}", check.stderr_text());
    }
    let run = session
        .run("import tabulate\nprint(tabulate.__name__)")
        .unwrap();
    assert_eq!(run.stdout_text(), "tabulate\n", "{}", run.stderr_text());
    drop(session);

    if installs {
        let mut without = sandlot.session("python").backend(backend).open().unwrap();
        let run = without.run("import tabulate").unwrap();
        assert_eq!(
            run.exit_code,
            1,
            "a sandbox of another key: {}",
            run.stdout_text()
        );
    }
    pool.close(Duration::from_secs(10));
}

/// A pool full of ready sandboxes of one kind makes room for a session of another
/// kind (it destroys the oldest ready one) instead of refusing it or making it wait.
fn a_full_pool_makes_room_for_another_kind(backend: &str) {
    let sandlot = build(Some((backend, pool_options(2, 2, Exhausted::FailFast))));
    sandlot.session("python").backend(backend).warm().unwrap();
    let pool = sandlot.pool(backend).unwrap();
    wait_until_ready(&pool, 2);
    // Another memory cap is another kind of sandbox.
    let mut other = sandlot
        .session("python")
        .backend(backend)
        .memory(512 << 20)
        .open()
        .unwrap();
    assert_eq!(other.run("print(2)").unwrap().stdout_text(), "2\n");
    let stats = pool.stats();
    assert!(stats.size <= 2, "{stats:?}");
    drop(other);
    pool.close(Duration::from_secs(10));
}

/// A pool of two serves two sessions opened back to back, even while the sandbox
/// replacing the first one is still being warmed, and fails fast only on the third,
/// when both slots are in use.
fn a_pool_of_two_serves_two_sessions_back_to_back(backend: &str) {
    let sandlot = build(Some((backend, pool_options(1, 2, Exhausted::FailFast))));
    sandlot.session("python").backend(backend).warm().unwrap();
    let pool = sandlot.pool(backend).unwrap();
    wait_until_ready(&pool, 1);
    let open = || sandlot.session("python").backend(backend).open();
    let mut first = open().unwrap();
    // The pool replaces the sandbox it handed out: the second session asks while that
    // replacement is warming (or, on a backend that warms in a blink, once it is ready).
    let deadline = Instant::now() + Duration::from_secs(60);
    while pool.stats().warming == 0 && pool.stats().idle == 0 {
        assert!(Instant::now() < deadline, "{:?}", pool.stats());
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut second = open().unwrap_or_else(|e| panic!("second session refused: {e}"));
    assert_eq!(first.run("print(1)").unwrap().stdout_text(), "1\n");
    assert_eq!(second.run("print(2)").unwrap().stdout_text(), "2\n");
    let third = open().unwrap_err();
    assert!(
        matches!(third, Error::PoolExhausted { max_size: 2, .. }),
        "{third}"
    );
    let stats = pool.stats();
    assert_eq!((stats.size, stats.in_use), (2, 2), "{stats:?}");
    drop((first, second));
    pool.close(Duration::from_secs(10));
}

macro_rules! conformance {
    ($($module:ident => $backend:literal),* $(,)?) => {$(
        mod $module {
            #[test] fn hello() { if super::here($backend) { super::hello($backend) } }
            #[test] fn exit_codes() { if super::here($backend) { super::exit_codes($backend) } }
            #[test] fn bytes_survive_exactly() { if super::here($backend) { super::bytes_survive_exactly($backend) } }
            #[test] fn sleep_stops_at_the_limit() { if super::here($backend) { super::sleep_stops_at_the_limit($backend) } }
            #[test] fn busy_loop_stops_at_the_limit() { if super::here($backend) { super::busy_loop_stops_at_the_limit($backend) } }
            #[test] fn output_flood_is_capped_on_the_stream() { if super::here($backend) { super::output_flood_is_capped_on_the_stream($backend) } }
            #[test] fn memory_cap_holds() { if super::here($backend) { super::memory_cap_holds($backend) } }
            #[test] fn files_and_trees_go_in_and_out() { if super::here($backend) { super::files_and_trees_go_in_and_out($backend) } }
            #[test] fn files_are_described_made_moved_and_removed() { if super::here($backend) { super::files_are_described_made_moved_and_removed($backend) } }
            #[test] fn environment_travels_with_the_run() { if super::here($backend) { super::environment_travels_with_the_run($backend) } }
            #[test] fn secrets_reach_the_code_and_come_back_masked() { if super::here($backend) { super::secrets_reach_the_code_and_come_back_masked($backend) } }
            #[test] fn egress_goes_only_where_the_allow_list_says() { if super::here($backend) { super::egress_goes_only_where_the_allow_list_says($backend) } }
            #[test] fn bound_secrets_reach_their_host_and_nothing_else() { if super::here($backend) { super::bound_secrets_reach_their_host_and_nothing_else($backend) } }
            #[test] fn bound_secrets_go_through_tls_to_their_host_alone() { if super::here($backend) { super::bound_secrets_go_through_tls_to_their_host_alone($backend) } }
            #[test] fn request_rules_let_through_only_what_they_allow() { if super::here($backend) { super::request_rules_let_through_only_what_they_allow($backend) } }
            #[test] fn request_rules_change_on_a_live_session() { if super::here($backend) { super::request_rules_change_on_a_live_session($backend) } }
            #[test] fn working_directory_travels_with_the_run() { if super::here($backend) { super::working_directory_travels_with_the_run($backend) } }
            #[test] fn capabilities_are_what_they_say() { if super::here($backend) { super::capabilities_are_what_they_say($backend) } }
            #[test] fn state_lives_across_runs() { if super::here($backend) { super::state_lives_across_runs($backend) } }
            #[test] fn snapshots_restore_the_session() { if super::here($backend) { super::snapshots_restore_the_session($backend) } }
            #[test] fn snapshots_hold_no_secret() { if super::here($backend) { super::snapshots_hold_no_secret($backend) } }
            #[test] fn forks_go_their_own_ways() { if super::here($backend) { super::forks_go_their_own_ways($backend) } }
            #[test] fn a_one_shot_run_is_a_program() { if super::here($backend) { super::a_one_shot_run_is_a_program($backend) } }
            #[test] fn a_timeout_keeps_the_state_where_it_can() { if super::here($backend) { super::a_timeout_keeps_the_state_where_it_can($backend) } }
            #[test] fn an_interrupt_stops_the_run_and_keeps_the_state_where_it_can() { if super::here($backend) { super::an_interrupt_stops_the_run_and_keeps_the_state_where_it_can($backend) } }
            #[test] fn the_toolchain_is_what_the_code_meets() { if super::here($backend) { super::the_toolchain_is_what_the_code_meets($backend) } }
            #[test] fn libraries_stay_installed() { if super::here($backend) { super::libraries_stay_installed($backend) } }
            #[test] fn plots_come_back_once() { if super::here($backend) { super::plots_come_back_once($backend) } }
            #[test] fn earlier_output_is_kept_or_cleared() { if super::here($backend) { super::earlier_output_is_kept_or_cleared($backend) } }
            #[test] fn nothing_is_left_after_close() { if super::here($backend) { super::nothing_is_left_after_close($backend) } }
            #[test] fn tools_are_called_from_the_code() { if super::here($backend) { super::tools_are_called_from_the_code($backend) } }
            #[test] fn every_language_calls_tools() { if super::here($backend) { super::every_language_calls_tools($backend) } }
            #[test] fn javascript_calls_tools() { if super::here($backend) { super::javascript_calls_tools($backend) } }
            #[test] fn pooled_sessions_share_nothing() { if super::here($backend) { super::pooled_sessions_share_nothing($backend) } }
            #[test] fn a_pooled_sandbox_serves_its_session_whole() { if super::here($backend) { super::a_pooled_sandbox_serves_its_session_whole($backend) } }
            #[test] fn twenty_tasks_over_a_pool_of_four() { if super::here($backend) { super::twenty_tasks_over_a_pool_of_four($backend) } }
            #[test] fn a_pool_closed_while_sessions_run() { if super::here($backend) { super::a_pool_closed_while_sessions_run($backend) } }
            #[test] fn a_full_pool_makes_room_for_another_kind() { if super::here($backend) { super::a_full_pool_makes_room_for_another_kind($backend) } }
            #[test] fn a_pool_of_two_serves_two_sessions_back_to_back() { if super::here($backend) { super::a_pool_of_two_serves_two_sessions_back_to_back($backend) } }
            #[test] fn a_pooled_session_has_its_libraries_before_its_first_run() { if super::here($backend) { super::a_pooled_session_has_its_libraries_before_its_first_run($backend) } }
        }
    )*};
}

conformance! {
    wasm => "wasm",
    wasm_workers => "wasm-workers",
    docker => "docker",
    podman => "podman",
    docker_tls => "docker-tls",
    kubernetes => "kubernetes",
    native => "native",
}
