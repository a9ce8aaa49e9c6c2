//! Starting jails: every `bwrap` is forked by one long-lived thread, because the
//! signal that kills a sandbox with its parent (`--die-with-parent`, a parent-death
//! signal) fires when the *thread* that forked it ends; a short-lived worker thread
//! would take its sandboxes with it.
//!
//! As root, each sandbox runs as a host uid of its own (never root: bubblewrap
//! started by root would map the sandbox's user to host root) and joins its cgroups
//! before `bwrap` starts, so that every process of it is counted from its first page.
#![allow(unsafe_code)] // fork-time setup (cgroup join, setresuid), kill(2), geteuid(2)

use std::ffi::CString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

/// The host uids sandboxes run as when sandlot runs as root: far above any uid a
/// system hands out (`/etc/login.defs` stops at 60000; systemd's dynamic users at
/// 65519; container engines' ranges at a few million).
const HOST_UIDS: std::ops::Range<u32> = 2_000_000_000..2_016_777_216;

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Sends SIGKILL to `pid`.
pub(crate) fn kill(pid: i32) {
    if pid > 0 {
        // SAFETY: kill(2) with a positive pid and a constant signal.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// A host uid no other sandbox of this process has: each process starts at a random
/// place in [`HOST_UIDS`] and counts up from there, so two sandlot processes on one
/// machine are unlikely to meet (and a meeting costs little: each sandbox has its own
/// namespaces, and the uid owns no file outside them).
pub(crate) fn host_uid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static START: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        let id = sandlot_core::backend::owner::sandbox_id();
        u32::from_str_radix(&id[..8], 16).unwrap_or(0)
    });
    let span = HOST_UIDS.end - HOST_UIDS.start;
    HOST_UIDS.start + start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span
}

/// What a child does between fork and exec.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    /// `cgroup.procs` files to write itself into.
    pub cgroups: Vec<CString>,
    /// The host uid (and gid) to become, as root.
    pub host_uid: Option<u32>,
}

impl Setup {
    /// Installs the setup into `command`.
    pub(crate) fn apply(self, command: &mut Command) {
        let Setup { cgroups, host_uid } = self;
        // SAFETY: between fork and exec the closure calls only async-signal-safe
        // functions (open, write, close, setgroups, setresgid, setresuid) on memory
        // prepared before the fork.
        unsafe {
            command.pre_exec(move || {
                for file in &cgroups {
                    let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                    if written != 1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                if let Some(uid) = host_uid {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setresgid(uid, uid, uid) != 0
                        || libc::setresuid(uid, uid, uid) != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

type Job = (Command, mpsc::Sender<io::Result<Child>>);

/// The thread every jail is forked from.
pub(crate) struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl Spawner {
    /// Starts the thread; it lives as long as the process.
    pub(crate) fn start() -> io::Result<Spawner> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandlot-native-spawner".into())
            .spawn(move || {
                for (mut command, answer) in queue {
                    let _ = answer.send(command.spawn());
                }
                // The backend is gone; so is every sandbox it started (they hung up
                // on their agents first), and the thread may end.
            })?;
        Ok(Spawner {
            jobs: Mutex::new(jobs),
        })
    }

    /// Forks and runs `command` on the spawner thread.
    pub(crate) fn spawn(&self, command: Command) -> io::Result<Child> {
        let (answer, answered) = mpsc::channel();
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((command, answer))
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        answered
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))?
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_uids_are_distinct_and_in_range() {
        let a = super::host_uid();
        let b = super::host_uid();
        assert_ne!(a, b);
        for uid in [a, b] {
            assert!(super::HOST_UIDS.contains(&uid), "{uid}");
        }
    }
}
