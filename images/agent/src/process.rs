//! Processes of the sandbox: who is killed after a command, when the host hangs up,
//! and who is spared (the kernel's session, which keeps a session's state).
//!
//! As process 1 of the container's PID namespace the agent inherits every orphan, so
//! after each command it kills whatever the command left behind, including processes
//! that called `setsid` or daemonized.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The process group of the command running now, 0 if none.
pub static RUNNING: AtomicI32 = AtomicI32::new(0);

/// The session of the running kernel, 0 if none: cleanup after a command spares it.
static KERNEL_SESSION: AtomicI32 = AtomicI32::new(0);

/// How often a running command's wait checks whether the host interrupted it or hung
/// up.
pub const HANGUP_POLL: Duration = Duration::from_millis(50);

/// Spares the session `sid` from the cleanup after commands (0: spare nobody).
pub fn spare_session(sid: i32) {
    KERNEL_SESSION.store(sid, Ordering::SeqCst);
}

/// The host's end of the stream is gone: nobody will ever read what the sandbox does,
/// so nothing in it may go on running, the kernel included.
pub fn host_gone() -> ! {
    let pgid = RUNNING.load(Ordering::SeqCst);
    if pgid > 0 {
        kill_group(pgid);
    }
    if std::process::id() == 1 {
        // SAFETY: kill(2); process 1 itself is never signalled by kill(-1).
        unsafe {
            libc::kill(-1, libc::SIGKILL);
        }
    }
    std::process::exit(0)
}

/// Kills a process group.
pub fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Gives a child being started the default response to the signals an interrupt
/// uses: a process started in the background inherits them ignored, and an
/// interpreter then never turns SIGINT into its own interrupt (Python installs its
/// `KeyboardInterrupt` handler only over the default). Called between fork and exec:
/// signal(2) is async-signal-safe.
pub fn default_signals() {
    // SAFETY: signal(2) with a constant disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
    }
}

/// Makes the calling process, never the agent, the OOM killer's first choice. Called
/// between fork and exec: only open, write and close, on a static path.
pub fn prefer_for_oom_kill() {
    // SAFETY: async-signal-safe calls on a NUL-terminated static path.
    unsafe {
        let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
        if fd >= 0 {
            libc::write(fd, b"1000".as_ptr().cast(), 4);
            libc::close(fd);
        }
    }
}

/// How much lower than the agent's the CPU priority of what it runs is (a nice
/// value; the most a process may take back without privilege is none).
const CHILD_NICENESS: libc::c_int = 10;

/// Puts the calling process below the agent for the CPU. Code and agent share the
/// sandbox's CPU quota: a fork bomb's hundreds of spinning processes left the agent a
/// sliver of it, so it reported the cell's end, and cleaned up after it, past the
/// host's deadline, and the session was lost. At nice 10 the agent's weight is nine
/// times each child's, and the code cannot raise its own back (that needs
/// CAP_SYS_NICE). Nothing is lost to the code: it competes only with the agent, in
/// its own cgroup. Called between fork and exec: one system call.
pub fn below_the_agent() {
    // SAFETY: setpriority(2) on the calling process; no memory involved.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, CHILD_NICENESS);
    }
}

/// Every other process of the container outside the kernel's session. Without a
/// kernel `kill(-1)` reaches them all at once; with one, each is found in /proc.
fn kill_others() -> usize {
    let spared = KERNEL_SESSION.load(Ordering::SeqCst);
    if spared == 0 {
        // SAFETY: kill(2); process 1 itself is never signalled by kill(-1).
        unsafe {
            libc::kill(-1, libc::SIGKILL);
        }
        return 0;
    }
    // SAFETY: getsid(2) on a pid; no memory involved.
    kill_unless(|pid| unsafe { libc::getsid(pid) } == spared)
}

/// Kills every live process of the container but the agent and those `spare` keeps;
/// returns how many it signalled.
///
/// A process that forks while it is being looked for would outlive a walk of /proc
/// that kills one pid at a time: a fork bomb, under load, kept ahead of one and lived
/// on into the next cell. So everything is stopped first ([`stop_all`]: a stopped
/// process cannot fork), then the condemned are killed, then those spared go on.
fn kill_unless(spare: impl Fn(i32) -> bool) -> usize {
    stop_all();
    let mut found = 0;
    let pids = other_pids();
    for &pid in &pids {
        if !spare(pid) && !is_zombie(pid) {
            // SAFETY: kill(2) on a pid; no memory involved.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            found += 1;
        }
    }
    // Those spared stay stopped while the sandbox is frozen for an install.
    if !FROZEN.load(Ordering::SeqCst) {
        for &pid in pids.iter().filter(|&&pid| spare(pid)) {
            // SAFETY: kill(2) on a pid; no memory involved.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
            }
        }
    }
    found
}

/// How long [`stop_all`] keeps trying: past it, what still runs is killed regardless
/// by the caller's passes.
const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// Stops every process of the container but the agent, and returns once none runs:
/// `false` if some still ran at [`STOP_DEADLINE`]. `kill(-1)` reaches every process
/// of the PID namespace in one pass that no fork can slip through while it runs; a
/// child born just before it stops on the next pass, and a stopped process forks no
/// more, so the passes end.
fn stop_all() -> bool {
    let deadline = std::time::Instant::now() + STOP_DEADLINE;
    loop {
        // SAFETY: kill(2); process 1 itself is never signalled by kill(-1).
        unsafe {
            libc::kill(-1, libc::SIGSTOP);
        }
        // One the agent may not signal (a `docker exec` as another user) is not waited
        // for.
        // SAFETY: kill(2) with signal 0 only checks the permission.
        let running = other_pids()
            .into_iter()
            .any(|pid| !is_held(pid) && unsafe { libc::kill(pid, 0) } == 0);
        if !running {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        // SIGSTOP takes effect when a process is next scheduled.
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Whether [`freeze`] stopped the sandbox's processes and [`thaw`] has not yet let
/// them go on.
static FROZEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stops every process of the container but the agent, until [`thaw`], as
/// [`stop_all`] does (a walk of /proc that stops one pid at a time can be outrun by
/// a process that keeps forking). `false` if some process still ran when it gave
/// up, or if the agent is not the container's process 1 (outside a container's PID
/// namespace, in tests, it cannot reach them): then nothing may go online.
pub fn freeze() -> bool {
    if std::process::id() != 1 {
        return false;
    }
    FROZEN.store(true, Ordering::SeqCst);
    stop_all()
}

/// Lets every process [`freeze`] stopped go on.
pub fn thaw() {
    if std::process::id() != 1 {
        return;
    }
    FROZEN.store(false, Ordering::SeqCst);
    for pid in other_pids() {
        // SAFETY: kill(2) on a pid; no memory involved.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    }
}

/// Every process of the container but the agent.
fn other_pids() -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != 1)
        .collect()
}

/// Whether `pid` runs no code of its own and will not until it is continued: stopped
/// (or traced and stopped), a zombie, or in an uninterruptible wait in the kernel
/// (a `vfork` parent whose child is stopped, say) with a `SIGSTOP` pending, which
/// stops it as soon as it leaves the kernel.
fn is_held(pid: i32) -> bool {
    match state(pid) {
        // Gone.
        None => true,
        Some('T' | 'Z' | 't') => true,
        Some('D') => stop_pending(pid),
        Some(_) => false,
    }
}

/// The state letter of `pid` (`R`, `S`, `D`, `T`, `Z`, …); `None` once it is gone.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Whether a `SIGSTOP` waits for `pid`, sent to it or to its thread group.
fn stop_pending(pid: i32) -> bool {
    let bit = 1u64 << (libc::SIGSTOP - 1);
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status.lines().any(|line| {
            let pending = line
                .strip_prefix("SigPnd:")
                .or_else(|| line.strip_prefix("ShdPnd:"));
            pending.is_some_and(|mask| {
                u64::from_str_radix(mask.trim(), 16).is_ok_and(|mask| mask & bit != 0)
            })
        })
    })
}

/// After a cell that was interrupted: kills everything it started (background jobs,
/// daemons) but the kernel process `keep` itself, as a timed-out command's whole tree
/// is killed. Outside a container's PID namespace (tests) it does nothing.
pub fn clean_up_all_but(keep: i32) {
    // The kernel lives, so it is not among the exited children this collects.
    kill_and_reap(
        || {
            if keep == 0 {
                kill_everything()
            } else {
                kill_unless(|pid| pid == keep)
            }
        },
        |left| left == 0,
    );
}

/// Kills every process of the container but the agent, in one pass no fork slips
/// through (a fatal signal pending stops a fork in progress); returns how many are
/// still to die.
fn kill_everything() -> usize {
    // SAFETY: kill(2); process 1 itself is never signalled by kill(-1).
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    other_pids()
        .into_iter()
        // SAFETY: kill(2) with signal 0 only checks the permission.
        .filter(|&pid| !is_zombie(pid) && unsafe { libc::kill(pid, 0) } == 0)
        .count()
}

/// Kills with `kill` (which says how many it signalled) and collects the exit status of
/// every child that died, until no child is left or `settled(left)` says that the ones
/// left may stay; a few seconds at most. Outside a container's PID namespace (tests)
/// it does nothing.
///
/// Every exited child is collected before the next pass: a pass walks /proc, and
/// one pass per zombie made cleaning up after a fork bomb's thousand processes take
/// longer than the host waits for the cell's end.
fn kill_and_reap(kill: impl Fn() -> usize, settled: impl Fn(usize) -> bool) {
    if std::process::id() != 1 {
        return;
    }
    let deadline = std::time::Instant::now() + REAP_DEADLINE;
    while std::time::Instant::now() < deadline {
        let left = kill();
        let mut reaped = 0;
        let mut none_left = false;
        loop {
            let mut status = 0;
            // SAFETY: waitpid(2) writes only to `status`.
            match unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } {
                p if p > 0 => reaped += 1,
                0 => break,
                _ => {
                    none_left = true;
                    break;
                }
            }
        }
        if none_left || (reaped == 0 && settled(left)) {
            return;
        }
        if reaped == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// How long [`kill_and_reap`] keeps at it: well within the host's wait for a run's
/// end, past which the session would be lost.
const REAP_DEADLINE: Duration = Duration::from_secs(3);

fn is_zombie(pid: i32) -> bool {
    state(pid) == Some('Z')
}

/// After a command: kills what it left running (the command may have moved itself,
/// or a child, to another process group or session) and collects the exit status of
/// every orphan, waiting at most a second for the last ones to die: a process the
/// agent cannot kill (one started by `docker exec` as another user) must not stop it
/// from answering. Outside a container's PID namespace (tests) it does nothing.
pub fn clean_up() {
    // Only the kernel's processes (or none) remain.
    kill_and_reap(kill_others, |left| {
        KERNEL_SESSION.load(Ordering::SeqCst) != 0 && left == 0
    });
}

/// Kills every process outside the kernel's session at once, without waiting.
pub fn kill_leftovers() {
    if std::process::id() == 1 {
        kill_others();
    }
}
