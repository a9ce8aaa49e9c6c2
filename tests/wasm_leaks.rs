//! Opening and closing many wasm sessions leaves nothing behind: no memory growth, no
//! open files, no scratch directories. Its own test binary, so nothing else runs in
//! the process while it measures.
//!
//! Needs the Python runtime installed (`sandlot runtimes install python`; tests/run.sh
//! does it); without it, the test passes without running and the suite says so
//! (`support::needs`); CI fails it instead.

mod support;

use sandlot::{Sandlot, Session};
use support::needs::{needs, Need};

fn session(sandlot: &Sandlot) -> Session {
    sandlot.session("python").open().unwrap()
}

#[test]
fn many_sessions_leave_no_growth_behind() {
    if !needs(&[Need::Runtime("python")]) {
        return;
    }
    let sandlot = sandlot::from_environment().unwrap();
    assert!(
        sandlot::wasm::WasmBackend::of(&sandlot).serves("python"),
        "run `sandlot runtimes install python`"
    );
    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    let cycle = || {
        let mut session = session(&sandlot);
        assert_eq!(session.run("print(1)").unwrap().stdout_text(), "1\n");
        session.close();
    };
    // Warm up: the runtime is loaded and caches are filled.
    for _ in 0..10 {
        cycle();
    }
    let (fds, rss) = (open_fds(), rss_kib());
    let scratch_before = scratch_dirs();
    for _ in 0..100 {
        cycle();
    }
    assert!(
        open_fds() <= fds + 2,
        "open files grew from {fds} to {}",
        open_fds()
    );
    let grown = rss_kib().saturating_sub(rss);
    assert!(
        grown < 64 << 10,
        "resident memory grew by {grown} KiB over 100 sessions"
    );
    assert_eq!(
        scratch_dirs(),
        scratch_before,
        "scratch directories were left behind"
    );
}

fn scratch_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("sandlot-"))
        .count()
}
