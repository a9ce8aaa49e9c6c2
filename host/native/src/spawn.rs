//! Starting jails: every `bwrap` is started by one long-lived thread, because the
//! signal that kills a sandbox with its parent (`--die-with-parent`, a parent-death
//! signal) fires when the *thread* that started it ends; a short-lived worker thread
//! would take its sandboxes with it.
//!
//! As root, each sandbox runs as a host uid of its own (never root: bubblewrap
//! started by root would map the sandbox's user to host root) and joins its cgroups
//! before `bwrap` starts, so that every process of it is counted from its first page.
//!
//! The child is made with `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` makes
//! one, not with `fork`: a fork copies the page tables of the whole host process, a
//! server with wasmtime's reservations and many sessions, which cost up to 11 ms a
//! jail here; the child of a vfork borrows the parent's memory until it execs.
//! Between clone and exec it touches only what was prepared before, and makes only
//! system calls.
#![allow(unsafe_code)] // clone(2), execve(2), setresuid(2), waitpid(2), kill(2), geteuid(2)

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

/// The host uids sandboxes run as when sandlot runs as root: far above any uid a
/// system hands out (`/etc/login.defs` stops at 60000; systemd's dynamic users at
/// 65519; container engines' ranges at a few million).
const HOST_UIDS: std::ops::Range<u32> = 2_000_000_000..2_016_777_216;

/// Signals are 1 to 64 on Linux.
const NSIG: libc::c_int = 65;

/// The child's stack until it execs: the few frames of [`child`] and the libc
/// calls it makes.
const CHILD_STACK: usize = 64 << 10;

/// The user this process runs as.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    euid() == 0
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

/// What to start and how.
#[derive(Debug)]
pub(crate) struct Launch {
    /// The executable, by path.
    pub program: std::path::PathBuf,
    /// Its arguments, without the program's name.
    pub args: Vec<std::ffi::OsString>,
    /// Its standard input and output (the environment is empty).
    pub stdio: OwnedFd,
    /// `cgroup.procs` files to write itself into.
    pub cgroups: Vec<std::path::PathBuf>,
    /// The host uid (and gid) to become, as root.
    pub host_uid: Option<u32>,
    /// Descriptors the program inherits under their own numbers (each above 2), such
    /// as the system call filters `bwrap --add-seccomp-fd` reads.
    pub inherited: Vec<OwnedFd>,
}

/// A started jail: the `bwrap` process. Dropped, it is killed and reaped.
#[derive(Debug)]
pub(crate) struct Jailed {
    pid: libc::pid_t,
    reaped: bool,
    /// What it writes on its standard error.
    pub stderr: Option<File>,
}

impl Jailed {
    /// Kills it (and so, through `--die-with-parent`, the sandbox's process 1).
    pub(crate) fn kill(&self) {
        if !self.reaped {
            kill(self.pid);
        }
    }

    /// Waits until it has ended.
    pub(crate) fn wait(&mut self) {
        while !self.reaped {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid status pointer.
            let got = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if got == self.pid
                || (got < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
            {
                self.reaped = true;
            }
        }
    }

    /// Whether it has ended (reaping it if so).
    pub(crate) fn ended(&mut self) -> bool {
        if !self.reaped {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid status pointer.
            let got = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            self.reaped = got == self.pid || got < 0;
        }
        self.reaped
    }
}

impl Drop for Jailed {
    fn drop(&mut self) {
        self.kill();
        self.wait();
    }
}

/// Everything the child reads between clone and exec, made before the clone.
struct ChildPlan {
    program: CString,
    argv: Vec<*const libc::c_char>,
    envp: [*const libc::c_char; 1],
    stdio: RawFd,
    stderr: RawFd,
    /// Where the child writes its errno if it cannot exec (close-on-exec).
    report: RawFd,
    cgroups: Vec<CString>,
    host_uid: Option<u32>,
    /// Made inheritable (their close-on-exec flag cleared).
    inherited: Vec<RawFd>,
    /// The signal mask to exec with: the spawner thread's own.
    mask: libc::sigset_t,
}

/// The child: its stdio, its cgroups, its uid, then the program. It shares the
/// parent's memory until it execs, so it only reads the plan and makes system calls;
/// a failure writes the errno to the report pipe and exits.
extern "C" fn child(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` points at the ChildPlan the parent keeps alive until this child
    // execs or exits (CLONE_VFORK); everything below is a plain system call.
    unsafe {
        let plan = &*(plan as *const ChildPlan);
        let fail = |plan: &ChildPlan| -> libc::c_int {
            let errno = *libc::__errno_location();
            libc::write(plan.report, (&errno as *const i32).cast(), 4);
            libc::_exit(127)
        };
        // The parent's handlers must not run here: this is not the parent. Without
        // CLONE_SIGHAND the child has its own table, so this does not touch the
        // parent's.
        for signal in 1..NSIG {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        if libc::pthread_sigmask(libc::SIG_SETMASK, &plan.mask, std::ptr::null_mut()) != 0 {
            return fail(plan);
        }
        if libc::dup2(plan.stdio, 0) < 0
            || libc::dup2(plan.stdio, 1) < 0
            || libc::dup2(plan.stderr, 2) < 0
        {
            return fail(plan);
        }
        for fd in &plan.inherited {
            if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                return fail(plan);
            }
        }
        for file in &plan.cgroups {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return fail(plan);
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if written != 1 {
                return fail(plan);
            }
        }
        if let Some(uid) = plan.host_uid {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(uid, uid, uid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                return fail(plan);
            }
        }
        libc::execve(
            plan.program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
        );
        fail(plan)
    }
}

/// A pipe whose ends close on exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are open and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
}

/// Starts `launch` on the calling thread, which becomes the jail's parent.
fn start(launch: Launch) -> io::Result<Jailed> {
    let program = c_string(launch.program.as_os_str().as_bytes())?;
    let mut strings = vec![program.clone()];
    for arg in &launch.args {
        strings.push(c_string(arg.as_bytes())?);
    }
    let mut argv: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    argv.push(std::ptr::null());
    let cgroups = launch
        .cgroups
        .iter()
        .map(|f| c_string(f.as_os_str().as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    if let Some(low) = launch.inherited.iter().find(|fd| fd.as_raw_fd() <= 2) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {} would be replaced by stdio", low.as_raw_fd()),
        ));
    }
    let (stderr_read, stderr_write) = pipe()?;
    let (report_read, report_write) = pipe()?;
    // SAFETY: sigset_t is plain data; sigfillset and pthread_sigmask fill it.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        // Blocked until the child has reset its handlers: a signal must not run one
        // of the parent's handlers on the child's borrowed memory.
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut mask);
    }
    let plan = ChildPlan {
        program,
        argv,
        envp: [std::ptr::null()],
        stdio: launch.stdio.as_raw_fd(),
        stderr: stderr_write.as_raw_fd(),
        report: report_write.as_raw_fd(),
        cgroups,
        host_uid: launch.host_uid,
        inherited: launch.inherited.iter().map(AsRawFd::as_raw_fd).collect(),
        mask,
    };
    let mut stack = vec![0u128; CHILD_STACK / 16];
    // SAFETY: the stack is ours and 16-byte aligned, and grows down from its end;
    // with CLONE_VFORK this thread waits until the child has exec'd or exited, so
    // `plan` and `stack` outlive its use of them.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &plan as *const ChildPlan as *mut libc::c_void,
        )
    };
    let cloned = io::Error::last_os_error();
    // SAFETY: restoring the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.mask, std::ptr::null_mut());
    }
    drop(stack);
    if pid < 0 {
        return Err(cloned);
    }
    // The child's ends: the jail holds them now.
    drop((launch.stdio, launch.inherited, stderr_write, report_write));
    let mut jailed = Jailed {
        pid,
        reaped: false,
        stderr: Some(File::from(stderr_read)),
    };
    let mut errno = [0u8; 4];
    let mut report = File::from(report_read);
    match report.read(&mut errno) {
        Ok(4) => {
            jailed.wait();
            Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
        }
        _ => Ok(jailed),
    }
}

type Job = (Launch, mpsc::Sender<io::Result<Jailed>>);

/// The thread every jail is started from.
pub(crate) struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl Spawner {
    /// Starts the thread; it ends when the spawner is dropped.
    pub(crate) fn start() -> io::Result<Spawner> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandlot-native-spawner".into())
            .spawn(move || {
                for (launch, answer) in queue {
                    let _ = answer.send(start(launch));
                }
            })?;
        Ok(Spawner {
            jobs: Mutex::new(jobs),
        })
    }

    /// Starts `launch` from the spawner thread.
    pub(crate) fn spawn(&self, launch: Launch) -> io::Result<Jailed> {
        let (answer, answered) = mpsc::channel();
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((launch, answer))
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        answered
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_uids_are_distinct_and_in_range() {
        let a = host_uid();
        let b = host_uid();
        assert_ne!(a, b);
        for uid in [a, b] {
            assert!(HOST_UIDS.contains(&uid), "{uid}");
        }
    }

    fn launch(program: &str, args: &[&str]) -> (Launch, std::os::unix::net::UnixStream) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        (
            Launch {
                program: program.into(),
                args: args.iter().map(Into::into).collect(),
                stdio: OwnedFd::from(theirs),
                cgroups: Vec::new(),
                host_uid: None,
                inherited: Vec::new(),
            },
            ours,
        )
    }

    #[test]
    fn a_child_gets_the_socket_as_stdio_an_empty_environment_and_a_pipe_for_errors() {
        let spawner = Spawner::start().unwrap();
        let (launch, mut ours) = launch(
            "/bin/sh",
            &[
                "-c",
                "read line; echo \"got $line, env [$(env | tr -d '\\n')]\"; echo oops >&2",
            ],
        );
        let mut jailed = spawner.spawn(launch).unwrap();
        use std::io::Write;
        ours.write_all(b"hello\n").unwrap();
        let mut said = String::new();
        ours.read_to_string(&mut said).unwrap();
        assert!(said.starts_with("got hello, env ["), "{said}");
        assert!(
            !said.contains("HOME="),
            "the environment was not emptied: {said}"
        );
        let mut errors = String::new();
        jailed
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut errors)
            .unwrap();
        assert_eq!(errors, "oops\n");
        jailed.wait();
        assert!(jailed.ended());
    }

    #[test]
    fn inherited_descriptors_stay_open_under_their_numbers_and_no_others_leak() {
        let spawner = Spawner::start().unwrap();
        let (given, kept) = pipe().unwrap();
        let (other_read, other_write) = pipe().unwrap();
        let number = given.as_raw_fd();
        let others = [other_read.as_raw_fd(), other_write.as_raw_fd()];
        // The shell looks at its own descriptors with builtins: a listing by `ls`
        // would show `ls`'s handle on the directory too, under the lowest free number,
        // maybe one of `others`. `cat` opens the inherited one by path: dash's `<&N`
        // takes one digit only.
        let (mut launch, mut ours) = launch(
            "/bin/sh",
            &[
                "-c",
                "for fd in $0 $1 $2; do \
                 if [ -e /proc/self/fd/$fd ]; then printf 'open %s ' $fd; \
                 else printf 'closed %s ' $fd; fi; done; cat /proc/self/fd/$0",
                "",
                "",
                "",
            ],
        );
        launch.args[2] = number.to_string().into();
        launch.args[3] = others[0].to_string().into();
        launch.args[4] = others[1].to_string().into();
        launch.inherited.push(given);
        let mut jailed = spawner.spawn(launch).unwrap();
        use std::io::Write;
        File::from(kept).write_all(b"filter").unwrap();
        let mut said = String::new();
        ours.read_to_string(&mut said).unwrap();
        jailed.wait();
        assert_eq!(
            said,
            format!(
                "open {number} closed {} closed {} filter",
                others[0], others[1]
            )
        );
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error_not_a_child() {
        let spawner = Spawner::start().unwrap();
        let (launch, _ours) = launch("/nonexistent/bwrap", &[]);
        let error = spawner.spawn(launch).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
    }
}
