//! Python on the embedded wasm backend: CPython for WASI under wasmtime, in-process.
//!
//! Needs the runtime installed (`sandlot runtimes install python`; tests/run.sh does
//! it); without it, the tests pass without running and the suite says so
//! (`support::needs`); CI fails them instead. It is compiled once per machine into the
//! component cache.

mod support;

use sandlot::{Error, Execution, RunOptions, Sandlot, Session};
use std::sync::OnceLock;
use std::time::Duration;
use support::needs::{needs, Need};

/// Whether the Python runtime is installed (see `support::needs`): every test here
/// needs it, and passes without running where it is not (and fails in CI).
fn installed() -> bool {
    needs(&[Need::Runtime("python")])
}

fn sandlot() -> &'static Sandlot {
    static SANDLOT: OnceLock<Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| {
        let sandlot = sandlot::from_environment().unwrap();
        assert!(
            sandlot::wasm::WasmBackend::of(&sandlot).serves("python"),
            "the Python runtime is not installed: run `sandlot runtimes install python`"
        );
        sandlot
    })
}

fn session() -> Session {
    sandlot().session("python").open().unwrap()
}

fn run(code: &str) -> Execution {
    session().run(code).unwrap()
}

#[test]
fn hello_world_and_exit_codes() {
    if !installed() {
        return;
    }
    let hello = run("print('hello, world')");
    assert_eq!(hello.stdout_text(), "hello, world\n");
    assert_eq!(hello.exit_code, 0);
    assert!(hello.success());
    assert_eq!(hello.backend, "wasm");

    assert_eq!(run("import sys\nsys.exit(3)").exit_code, 3);
    assert_eq!(run("raise SystemExit(0)").exit_code, 0);
}

#[test]
fn bundled_libraries_are_accepted_and_others_refused_by_name() {
    if !installed() {
        return;
    }
    let mut session = session();
    let options = RunOptions {
        libraries: vec!["numpy".into(), "Pandas>=2".into(), "scikit_learn".into()],
        ..RunOptions::default()
    };
    let ok = session
        .run_with("import sklearn, pandas\nprint('ok')", options)
        .unwrap();
    assert_eq!(ok.stdout_text(), "ok\n");
    let options = RunOptions {
        libraries: vec!["numpy".into(), "torch".into()],
        ..RunOptions::default()
    };
    let err = session.run_with("import torch", options).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("cannot install torch") && !text.contains("numpy"),
        "{text}"
    );
}

/// Every library the runtime says it bundles is there, at the version it says: what
/// `language_details` tells a model is what its code imports.
#[test]
fn the_bundled_libraries_are_there_at_the_versions_listed() {
    if !installed() {
        return;
    }
    let toolchain = sandlot()
        .backend("wasm")
        .unwrap()
        .toolchain("python", "")
        .unwrap()
        .expect("the wasm backend knows its Python");
    assert!(toolchain.libraries.len() > 50, "{toolchain:?}");
    let names: Vec<&String> = toolchain.libraries.keys().collect();
    let code =
        format!("import importlib.metadata as m\nfor n in {names:?}:\n    print(n, m.version(n))");
    let ran = run(&code);
    let found: std::collections::BTreeMap<String, String> = ran
        .stdout_text()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(found, toolchain.libraries, "{}", ran.stderr_text());
}

#[test]
fn exceptions_go_to_stderr_with_exit_code_1() {
    if !installed() {
        return;
    }
    let failed = run("def f():\n    return 1 / 0\nf()\n");
    assert_eq!(failed.exit_code, 1);
    assert!(failed.stdout.is_empty());
    let stderr = failed.stderr_text();
    assert!(
        stderr.contains("ZeroDivisionError: division by zero"),
        "{stderr}"
    );
    assert!(stderr.contains("Traceback"), "{stderr}");
}

#[test]
fn stdin_is_the_runs_own() {
    if !installed() {
        return;
    }
    let mut session = session();
    let options = RunOptions {
        stdin: b"first line\nsecond\n".to_vec(),
        ..RunOptions::default()
    };
    let read = session
        .run_with(
            "import sys\nprint(sys.stdin.read().upper(), end='')",
            options,
        )
        .unwrap();
    assert_eq!(read.stdout_text(), "FIRST LINE\nSECOND\n");
    // The next run's stdin is empty, not what is left of the last one.
    let empty = session
        .run("import sys\nprint(repr(sys.stdin.read()))")
        .unwrap();
    assert_eq!(empty.stdout_text(), "''\n");
}

#[test]
fn unicode_and_invalid_utf8_output_survive() {
    if !installed() {
        return;
    }
    let text = run("print('héllo wörld — 你好 🎉')");
    assert_eq!(text.stdout_text(), "héllo wörld — 你好 🎉\n");
    let bytes =
        run("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')\nsys.stdout.flush()");
    assert_eq!(bytes.stdout, b"ok \xff\xfe end\n");
    assert_eq!(bytes.stdout_text(), "ok \u{fffd}\u{fffd} end\n");
}

#[test]
fn numpy_and_pandas_compute_correctly() {
    if !installed() {
        return;
    }
    let result = run(
        "import numpy as np, pandas as pd\n\
         df = pd.DataFrame({'x': np.arange(1, 101)})\n\
         df['y'] = df.x ** 2\n\
         print(int(df.y.sum()), round(float(np.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))), 6))\n\
         print(df.groupby(df.x % 3).y.sum().to_dict())\n",
    );
    assert_eq!(result.exit_code, 0, "{}", result.stderr_text());
    assert_eq!(
        result.stdout_text(),
        "338350 5.0\n{0: 112761, 1: 116161, 2: 109428}\n"
    );
}

#[test]
fn matplotlib_figures_come_back_as_png_plots() {
    if !installed() {
        return;
    }
    let result = run("import matplotlib.pyplot as plt\n\
         plt.plot([1, 2, 3], [2, 4, 1])\n\
         plt.title('shown')\n\
         plt.show()\n\
         fig = plt.figure()\n\
         plt.bar(['a', 'b'], [3, 5])\n\
         plt.savefig('output/saved.png')\n");
    assert_eq!(result.exit_code, 0, "{}", result.stderr_text());
    let plots: Vec<_> = result.plots().map(|p| p.path.as_str()).collect();
    // The shown figure and the saved one, once each: the saved figure is not saved
    // again as left open.
    assert_eq!(plots, ["plot-001.png", "saved.png"]);
    for plot in result.plots() {
        assert!(
            plot.bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG",
            plot.path
        );
        assert!(
            plot.bytes.len() > 2000,
            "{} is suspiciously small",
            plot.path
        );
        assert_eq!(plot.mime, "image/png");
    }
}

#[test]
fn state_persists_within_a_session_and_never_across() {
    if !installed() {
        return;
    }
    let mut first = session();
    first.run("secret = 'only mine'\nimport json").unwrap();
    let again = first.run("print(secret, json.dumps([1]))").unwrap();
    assert_eq!(again.stdout_text(), "only mine [1]\n");

    let mut second = session();
    let other = second.run("print(secret)").unwrap();
    assert_eq!(other.exit_code, 1);
    assert!(
        other.stderr_text().contains("NameError"),
        "{}",
        other.stderr_text()
    );
}

#[test]
fn files_are_private_to_their_session() {
    if !installed() {
        return;
    }
    let mut writer = session();
    let wrote = writer
        .run("open('note.txt', 'w').write('mine')\nimport os\nprint(os.getcwd())")
        .unwrap();
    assert_eq!(wrote.stdout_text(), "/workspace\n");
    assert_eq!(writer.read_file("note.txt").unwrap(), b"mine");
    assert!(writer
        .list_files("")
        .unwrap()
        .names()
        .contains(&"note.txt".to_string()));

    let mut reader = session();
    let read = reader.run("open('note.txt').read()").unwrap();
    assert!(
        read.stderr_text().contains("FileNotFoundError"),
        "{}",
        read.stderr_text()
    );

    // The host side moves files in and out, inside the sandbox only.
    reader.write_file("data/in.csv", b"a,b\n1,2\n").unwrap();
    let csv = reader
        .run("import csv\nprint(list(csv.reader(open('data/in.csv'))))")
        .unwrap();
    assert_eq!(csv.stdout_text(), "[['a', 'b'], ['1', '2']]\n");
    for escape in ["../x", "/etc/passwd", "data/../../x"] {
        let err = reader.read_file(escape).unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{escape}: {err}");
    }
}

#[test]
fn the_host_file_system_is_out_of_reach() {
    if !installed() {
        return;
    }
    let mut session = session();
    session
        .run("import os\nos.symlink('/etc/passwd', 'link')")
        .unwrap();
    for code in [
        "print(open('/etc/passwd').read())",
        "print(open('../etc/passwd').read())",
        "print(open('/workspace/../etc/passwd').read())",
        "print(open('link').read())",
    ] {
        let result = session.run(code).unwrap();
        assert_ne!(
            result.exit_code,
            0,
            "{code} succeeded: {}",
            result.stdout_text()
        );
        assert!(
            !result.stdout_text().contains("root:"),
            "{code} leaked /etc/passwd"
        );
    }
    // Reading the link from the host side must not follow it out either.
    assert!(session.read_file("link").is_err());
    let env = session.run("import os\nprint(sorted(os.environ))").unwrap();
    assert_eq!(
        env.stdout_text(),
        "['HOME', 'MPLBACKEND', 'PWD', 'PYTHONTZPATH', 'TMPDIR']\n",
        "only the sandbox's own environment, nothing from the host"
    );
}

#[test]
fn a_stopped_interpreter_is_replaced_and_the_session_goes_on() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("python")
        .timeout(Duration::from_millis(500))
        .open()
        .unwrap();
    session
        .run("lost = 1\nopen('kept.txt', 'w').write('kept')")
        .unwrap();
    for code in ["while True:\n    pass\n", "import time\ntime.sleep(30)"] {
        let stopped = session.run(code).unwrap();
        assert!(stopped.timed_out(), "{code}");
        assert_eq!(stopped.exit_code, 124);
        assert!(
            stopped.duration < Duration::from_secs(2),
            "{code}: {:?}",
            stopped.duration
        );
        assert!(
            matches!(stopped.session, sandlot::SessionState::Restarted { .. }),
            "{:?}",
            stopped.session
        );
    }
    // A fresh interpreter in the same workspace: variables are gone, files are not.
    let after = session
        .run("print(open('kept.txt').read(), 'lost' in globals())")
        .unwrap();
    assert_eq!(
        after.stdout_text(),
        "kept False\n",
        "{}",
        after.stderr_text()
    );
    // quit() ends the interpreter too, and the next run gets a new one.
    let quit = session.run("quit(5)").unwrap();
    assert_eq!(quit.exit_code, 5);
    assert!(matches!(
        quit.session,
        sandlot::SessionState::Restarted { .. }
    ));
    assert_eq!(session.run("print(2)").unwrap().stdout_text(), "2\n");
}

#[test]
fn a_memory_bomb_is_stopped_at_the_cap() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("python")
        .memory(256 << 20)
        .open()
        .unwrap();
    let bomb = session
        .run("hoard = []\nwhile True:\n    hoard.append(bytearray(16 << 20))\n")
        .unwrap();
    assert!(bomb.memory_exceeded(), "{bomb:?}");
    assert_eq!(bomb.exit_code, 137);
    assert_eq!(run("print(3)").stdout_text(), "3\n");
}

#[test]
fn output_past_the_cap_is_dropped_and_a_flood_is_stopped() {
    if !installed() {
        return;
    }
    let mut session = sandlot()
        .session("python")
        .limits(sandlot::Limits {
            max_output: 64 << 10,
            ..sandlot::Limits::default()
        })
        .open()
        .unwrap();
    // A little past the cap: kept and streamed up to it, the program goes on.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let options = RunOptions {
        on_stdout: Some(Box::new(move |bytes: &[u8]| {
            counter.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
        })),
        ..RunOptions::default()
    };
    let over = session
        .run_with("print('y' * 100000)\nprint('end')", options)
        .unwrap();
    assert_eq!(over.exit_code, 0);
    assert!(over.stdout_truncated);
    assert_eq!(over.stdout.len(), 64 << 10);
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 64 << 10);
    // Far past it: stopped.
    let flood = session
        .run("for i in range(200000):\n    print('x' * 50)\nprint('end')")
        .unwrap();
    assert_eq!(flood.end, sandlot::EndReason::OutputLimit);
    assert_eq!(flood.stdout.len(), 64 << 10);
    assert_eq!(session.run("print(1)").unwrap().stdout_text(), "1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_sessions_run_side_by_side_and_keep_state() {
    if !installed() {
        return;
    }
    let builder = sandlot().session("python");
    let (a, b) = tokio::join!(builder.open_async(), builder.open_async());
    let (a, b) = (a.unwrap(), b.unwrap());
    let (set_a, set_b) = tokio::join!(a.run("who = 'a'"), b.run("who = 'b'"));
    assert!(set_a.unwrap().success() && set_b.unwrap().success());
    let (read_a, read_b) = tokio::join!(a.run("print(who)"), b.run("print(who)"));
    assert_eq!(read_a.unwrap().stdout_text(), "a\n");
    assert_eq!(read_b.unwrap().stdout_text(), "b\n");
}

#[test]
fn shell_commands_are_refused_with_a_pointer_to_containers() {
    if !installed() {
        return;
    }
    let mut session = session();
    let error = session.execute_command("ls").unwrap_err();
    assert!(
        matches!(
            error,
            Error::BackendCannot {
                capability: sandlot::Capability::Shell,
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("no shell"), "{message}");
    assert!(
        message.contains("a container backend (docker, podman or kubernetes)"),
        "{message}"
    );
    // The session is still usable.
    assert_eq!(session.run("print(2)").unwrap().stdout_text(), "2\n");
}

#[test]
fn trees_copy_in_and_out_without_links() {
    if !installed() {
        return;
    }
    let mut session = session();
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.path().join("data/nested")).unwrap();
    std::fs::write(host.path().join("data/nested/n.txt"), b"41").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", host.path().join("data/passwd")).unwrap();
    session.copy_in(&host.path().join("data"), "in").unwrap();
    let run = session
        .run("import os\nn = int(open('in/nested/n.txt').read())\nopen('output/n.txt', 'w').write(str(n + 1))\nprint(sorted(os.listdir('in')))")
        .unwrap();
    assert_eq!(run.stdout_text(), "['nested']\n", "{}", run.stderr_text());
    let out = tempfile::tempdir().unwrap();
    assert_eq!(
        session.copy_out("output", out.path()).unwrap().files,
        ["n.txt"]
    );
    assert_eq!(std::fs::read(out.path().join("n.txt")).unwrap(), b"42");
    assert!(session.copy_out("../etc", out.path()).is_err());
}

/// A data session (pandas imported, a frame loaded, a plot library set up) comes back
/// whole from its snapshot: the frame, its dtypes, methods that need pandas' compiled
/// code, and a file the session wrote.
#[test]
fn a_pandas_session_comes_back_from_its_snapshot() {
    if !installed() {
        return;
    }
    let mut session = session();
    let loaded = session
        .run(
            "import pandas as pd\nimport numpy as np\n\
             df = pd.DataFrame({'a': np.arange(100_000), 'b': ['x', 'y'] * 50_000})\n\
             df.to_csv('frame.csv', index=False)",
        )
        .unwrap();
    assert_eq!(loaded.exit_code, 0, "{}", loaded.stderr_text());
    let snapshot = session.snapshot().unwrap();
    let mut restored = sandlot().restore(&snapshot).unwrap();
    let seen = restored
        .run(
            "print(df.a.sum(), df.groupby('b').a.count().to_dict(), str(df.a.dtype), \
             len(pd.read_csv('frame.csv')))",
        )
        .unwrap();
    assert_eq!(
        seen.stdout_text(),
        // numpy's default integer is the platform's: 32 bits on wasm32.
        "4999950000 {'x': 50000, 'y': 50000} int32 100000\n",
        "{}",
        seen.stderr_text()
    );
}

/// A restored session runs with its own environment and secrets only: what the
/// snapshot's session set (a secret, a variable, one run's own) is gone, not kept
/// unmasked in the interpreter's memory; and one run's environment does not outlive
/// it.
#[test]
fn a_restored_session_has_its_own_environment_not_the_snapshots() {
    if !installed() {
        return;
    }
    let mut builder = sandlot().session("python");
    builder
        .secret("API_KEY", "sk-live-0123456789abcdef")
        .unwrap();
    builder.env("STALE", "1");
    let mut session = builder.open().unwrap();
    let options = sandlot::RunOptions {
        env: vec![("ONE_RUN".into(), "1".into())],
        ..Default::default()
    };
    let set = session.run_with("x = 1", options).unwrap();
    assert_eq!(set.exit_code, 0, "{}", set.stderr_text());
    let shown = "import os\n\
                 print([os.environ.get(k) or None for k in ('API_KEY', 'STALE', 'ONE_RUN')], x)";
    // The same session's next run: the run's own variable is gone, the session's stay.
    let next = session.run(shown).unwrap();
    assert_eq!(
        next.stdout_text(),
        "['***', '1', None] 1\n",
        "{}",
        next.stderr_text()
    );
    let snapshot = session.snapshot().unwrap();
    let mut restored = sandlot().restore(&snapshot).unwrap();
    let seen = restored.run(shown).unwrap();
    assert_eq!(
        seen.stdout_text(),
        "[None, None, None] 1\n",
        "{}",
        seen.stderr_text()
    );
}

/// A snapshot that was cut short, damaged, signed by another host or made with
/// another runtime is refused, saying which, before anything runs.
#[test]
fn a_damaged_foreign_or_mismatched_snapshot_is_refused() {
    use sandlot::{ErrorKind, SnapshotKey, SnapshotTrust};
    if !installed() {
        return;
    }
    let mut session = session();
    session.run("x = 1").unwrap();
    let bytes = session.snapshot().unwrap().to_bytes().unwrap();
    let refused = |bytes: &[u8]| {
        let error = sandlot().read_snapshot(&mut &bytes[..]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        error.to_string()
    };
    assert!(refused(&bytes[..bytes.len() / 2]).contains("truncated"));
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 3] ^= 1;
    assert!(refused(&flipped).contains("corrupted"));
    let mut newer = bytes.clone();
    newer[8] = 9;
    assert!(refused(&newer).contains("format version 9"));

    let elsewhere = |trust| {
        sandlot::SandlotBuilder::from_environment()
            .unwrap()
            .providers(sandlot::providers())
            .snapshot_key(SnapshotKey::from_bytes([3; 32]))
            .snapshot_trust(trust)
            .build()
            .unwrap()
    };
    let strict = elsewhere(SnapshotTrust::OwnKey);
    let error = strict.read_snapshot(&mut &bytes[..]).unwrap_err();
    assert!(
        error.to_string().contains("not signed with this host's"),
        "{error}"
    );
    let trusting = elsewhere(SnapshotTrust::AnyIntact);
    let snapshot = trusting.read_snapshot(&mut &bytes[..]).unwrap();
    assert!(!snapshot.signed_here());
    let mut restored = trusting.restore(&snapshot).unwrap();
    assert_eq!(restored.run("print(x)").unwrap().stdout_text(), "1\n");

    // Someone without the key rewrites the manifest and seals it again: a host that
    // accepts intact snapshots reads it, and the runtime's digest still refuses it.
    let forged = resealed(&bytes, |manifest| {
        manifest["interpreter"]["runtime"]["digest"] = "0".repeat(64).into();
    });
    let snapshot = trusting.read_snapshot(&mut &forged[..]).unwrap();
    assert!(!snapshot.signed_here());
    let error = trusting.restore(&snapshot).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(
        error
            .to_string()
            .contains("where that runtime is installed"),
        "{error}"
    );
    let error = sandlot().read_snapshot(&mut &forged[..]).unwrap_err();
    assert!(
        error.to_string().contains("not signed with this host's"),
        "{error}"
    );
}

/// `bytes` (a snapshot file) with its manifest changed by `edit`, its sections' hashes
/// and its checksum made again, and its signature left as it was: what someone who
/// has a snapshot but not the key can make.
fn resealed(bytes: &[u8], edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut out = bytes[..12].to_vec();
    let mut seal = Sha256::new();
    seal.update(&bytes[..12]);
    let mut at = 12;
    loop {
        let tag = &bytes[at..at + 4];
        let len = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap()) as usize;
        let mut payload = bytes[at + 12..at + 12 + len].to_vec();
        if tag == b"END." {
            out.extend_from_slice(&bytes[at..at + 12]);
            out.extend_from_slice(&seal.finalize());
            out.extend_from_slice(&payload[32..]);
            return out;
        }
        if tag == b"MANI" {
            let mut manifest: serde_json::Value = serde_json::from_slice(&payload).unwrap();
            edit(&mut manifest);
            payload = serde_json::to_vec(&manifest).unwrap();
        }
        out.extend_from_slice(tag);
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
        seal.update(tag);
        seal.update((payload.len() as u64).to_le_bytes());
        seal.update(Sha256::digest(&payload));
        at += 12 + len;
    }
}

/// The restoring side's limits hold: a session whose memory is larger than the
/// restoring one may use is refused, and names the limit.
#[test]
fn a_snapshot_larger_than_the_memory_limit_is_refused() {
    if !installed() {
        return;
    }
    let mut session = session();
    session.run("big = bytearray(300 << 20)").unwrap();
    let snapshot = session.snapshot().unwrap();
    let mut small = sandlot().session("python");
    small.memory(200 << 20);
    let error = small.restore(&snapshot).unwrap_err();
    assert!(error.to_string().contains("larger memory limit"), "{error}");
}

/// With warm starts, a session begins from a base with the data stack imported: its
/// namespace is a fresh one's, its environment its own, nothing of another session's
/// is in it; a session the base does not fit starts fresh.
#[test]
fn warm_sessions_start_with_the_data_stack_imported_and_nothing_else() {
    use sandlot::language::{Restriction, RestrictionKind, Severity};
    if !installed() {
        return;
    }
    let warm = sandlot::from_environment().unwrap();
    warm.set_warm_start(true);
    let probe = "import sys, os\n\
                 print('pandas' in sys.modules, os.environ.get('LEAK'), os.environ.get('MINE'), \
                 sorted(k for k in globals() if not k.startswith('_')))";
    let fresh = sandlot()
        .session("python")
        .env("MINE", "2")
        .open()
        .unwrap()
        .run(probe)
        .unwrap();
    assert!(
        fresh.stdout_text().starts_with("False None 2 "),
        "{}",
        fresh.stdout_text()
    );
    // The first session's own environment is not the base's.
    assert!(warm
        .session("python")
        .env("LEAK", "first")
        .warm_up()
        .unwrap());
    let mut session = warm.session("python").env("MINE", "2").open().unwrap();
    let seen = session.run(probe).unwrap();
    assert_eq!(
        seen.stdout_text(),
        fresh.stdout_text().replacen("False", "True", 1),
        "{}",
        seen.stderr_text()
    );
    let frame = session
        .run("import pandas as pd\nx = 1\nprint(pd.DataFrame({'a': [1, 2]}).a.sum())")
        .unwrap();
    assert_eq!(frame.stdout_text(), "3\n", "{}", frame.stderr_text());
    let plot = session
        .run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
        .unwrap();
    assert_eq!(plot.plots().count(), 1, "{}", plot.stderr_text());
    drop(session);
    let other = warm.session("python").open().unwrap().run(probe).unwrap();
    assert_eq!(other.stdout_text(), "True None None ['os', 'sys']\n");
    // Later sessions start from the same base (with, by now, the pages those two
    // both wrote copied in before anything runs): nothing of theirs shows, and the
    // data stack works.
    for _ in 0..2 {
        let mut later = warm.session("python").open().unwrap();
        assert_eq!(later.run(probe).unwrap().stdout_text(), other.stdout_text());
        let frame = later
            .run("import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).a.sum(), x)")
            .unwrap();
        assert!(
            frame.stderr_text().contains("NameError"),
            "{}",
            frame.stderr_text()
        );
        let frame = later
            .run("print(pd.DataFrame({'a': [1, 2]}).a.sum())")
            .unwrap();
        assert_eq!(frame.stdout_text(), "3\n", "{}", frame.stderr_text());
    }

    // Sessions the base does not fit start fresh.
    let starts_fresh = |session: &mut Session| {
        let seen = session.run(probe).unwrap();
        assert!(
            seen.stdout_text().starts_with("False"),
            "{}",
            seen.stdout_text()
        );
    };
    let base = warm.session("python").open().unwrap().snapshot().unwrap();
    let below = base.memory().unwrap().size as usize - 64 * 1024;
    starts_fresh(&mut warm.session("python").memory(below).open().unwrap());
    let mut policy = sandlot::Policy::default();
    policy.restricted.add(
        "python",
        Restriction {
            kind: RestrictionKind::Module,
            name: "pandas".parse().unwrap(),
            severity: Severity::Low,
        },
    );
    starts_fresh(&mut warm.session("python").policy(policy).open().unwrap());
    warm.set_warm_start(false);
    starts_fresh(&mut warm.session("python").open().unwrap());
}

/// A Sandlot whose wasm backend keeps its sandboxes in `workers` worker processes of
/// `program`.
fn in_workers(workers: usize, program: &str) -> Sandlot {
    let mut config = sandlot::Config::default();
    config.wasm.workers = workers;
    config.wasm.worker_program = Some(program.into());
    sandlot::from_config(config, &Default::default()).unwrap()
}

/// Whether process `pid` is still there (a zombie is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_killed_worker_loses_its_runs_and_the_next_session_gets_a_new_one() {
    if !installed() {
        return;
    }
    let sandlot = in_workers(1, env!("CARGO_BIN_EXE_sandlot"));
    let mut bystander = sandlot.session("python").open().unwrap();
    bystander.run("x = 41").unwrap();
    let pids = sandlot::wasm::WasmBackend::of(&sandlot).worker_pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let mut session = sandlot.session("python").open().unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        // SIGKILL: nothing of the worker's own runs at its end.
        std::process::Command::new("kill")
            .args(["-9", &pids[0].to_string()])
            .status()
            .unwrap();
        pids[0]
    });
    let run = session
        .run("import time\nprint('started', flush=True)\ntime.sleep(30)")
        .unwrap();
    let killed = killer.join().unwrap();
    let lost = |run: &Execution| match &run.end {
        sandlot::EndReason::SandboxLost { cause } => {
            cause.contains("worker") && cause.contains("signal: 9")
        }
        _ => false,
    };
    assert!(lost(&run), "{:?}", run.end);
    assert!(!alive(killed), "the killed worker is reaped");
    // Every sandbox of that worker is gone with it, and says so.
    let after = bystander.run("print(x + 1)").unwrap();
    assert!(lost(&after), "{:?}", after.end);
    assert!(
        bystander.run("print(1)").is_err(),
        "an ended session runs nothing"
    );
    // The next session starts a new worker.
    let mut next = sandlot.session("python").open().unwrap();
    assert_eq!(next.run("print(6 * 7)").unwrap().stdout_text(), "42\n");
    let pids = sandlot::wasm::WasmBackend::of(&sandlot).worker_pids();
    assert_eq!(pids.len(), 1);
    assert_ne!(pids[0], killed);
}

#[test]
fn large_files_cross_a_worker_in_pieces() {
    use sha2::Digest;
    if !installed() {
        return;
    }
    let sandlot = in_workers(1, env!("CARGO_BIN_EXE_sandlot"));
    let mut session = sandlot.session("python").open().unwrap();
    // Five messages' worth each way, bytes that differ from piece to piece.
    let data: Vec<u8> = (0u32..5 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    session.write_file("big.bin", &data).unwrap();
    let run = session
        .run("import hashlib\nprint(hashlib.sha256(open('big.bin', 'rb').read()).hexdigest())")
        .unwrap();
    assert_eq!(
        run.stdout_text().trim(),
        hex::encode(sha2::Sha256::digest(&data))
    );
    assert!(
        session.read_file("big.bin").unwrap() == data,
        "read back changed"
    );
}

#[test]
fn a_program_that_is_no_worker_is_refused_with_what_to_do() {
    if !installed() {
        return;
    }
    let sandlot = in_workers(1, "/bin/true");
    let error = sandlot.session("python").open().unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("/bin/true") && message.contains("serve_if_asked"),
        "{message}"
    );
    let sandlot = in_workers(1, "/nonexistent/sandlot");
    let message = sandlot.session("python").open().unwrap_err().to_string();
    assert!(message.contains("/nonexistent/sandlot"), "{message}");
}

#[test]
fn workers_exit_when_their_parent_is_killed() {
    if !installed() {
        return;
    }
    // A parent that opens a session in a worker and sleeps in a run; killed, its
    // worker must notice and go, taking the sandbox with it.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!(
            "[wasm]\nworkers = 1\nworker_program = \"{}\"\n",
            env!("CARGO_BIN_EXE_sandlot")
        ),
    )
    .unwrap();
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["run", "--config"])
        .arg(config.path())
        .args(["--backend", "wasm", "-l", "python", "--timeout", "60", "-q"])
        .args(["-c", "import time; time.sleep(60)"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|child| {
                std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                    stat.rsplit(')')
                        .next()
                        .and_then(|rest| rest.split_whitespace().nth(1))
                        == Some(&pid.to_string())
                })
            })
            .collect()
    };
    // The worker is the child started with the worker's flag: a short-lived helper
    // (the workspace's tmpfs, made in a child where it must be) may come first.
    let is_worker = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            String::from_utf8_lossy(&cmdline).contains("--sandlot-wasm-worker")
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let worker = loop {
        if let Some(worker) = children(parent.id()).into_iter().find(is_worker) {
            break worker;
        }
        assert!(std::time::Instant::now() < deadline, "no worker started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Long enough for the run to be under way in the worker.
    std::thread::sleep(Duration::from_millis(1500));
    parent.kill().unwrap();
    parent.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(worker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker outlived its parent by 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_limit_on_address_space_leaves_handlers_a_slower_engine_not_none() {
    if !installed() {
        return;
    }
    // 200 GB: room for the runtimes' reservations (some GiB each), not for the
    // language handlers' pool (about 4 TiB of address space reserved up front).
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v 200000000 && exec {} run -q -l python -c 'print(6 * 7)'",
            env!("CARGO_BIN_EXE_sandlot")
        ))
        .output()
        .unwrap();
    assert_eq!(
        (
            String::from_utf8_lossy(&output.stdout).as_ref(),
            output.status.code()
        ),
        ("42\n", Some(0)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
