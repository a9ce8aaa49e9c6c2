//! One worker process: starting it, sending it calls, reading what it sends back,
//! and ending it. Everything that touches the child and its socket stays here.

use super::limits::{STARTUP, UNANSWERED, WRITE_STALL};
use super::options::WorkerOptions;
use super::pinning;
use super::wire::frame;
use super::wire::messages::{Call, FileOp, FromWorker, Reply, ToWorker};
use super::wire::shared::{self, WorkerConfig};
use sandlot_core::error::{Error, Result};
use sandlot_core::sync::lock;
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One worker process and the calls under way in it.
pub(super) struct Process {
    pub(super) pid: u32,
    /// Shared with the reader, which reaps the worker once it has gone.
    child: Arc<Mutex<Child>>,
    out: Mutex<UnixStream>,
    /// Where each call's messages go, by call.
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicU64,
    /// Its open sandboxes.
    pub(super) load: AtomicUsize,
}

#[derive(Default)]
struct Pending {
    calls: HashMap<u64, mpsc::Sender<FromWorker>>,
    /// Why the worker ended, once it has: no call is taken after.
    ended: Option<String>,
}

impl Process {
    pub(super) fn start(
        options: &WorkerOptions,
        config: &WorkerConfig,
        slot: usize,
    ) -> Result<Arc<Process>> {
        let program = match &options.program {
            Some(program) => program.clone(),
            None => std::env::current_exe().map_err(|e| Error::Io {
                context: "cannot find this program to start it as a wasm worker".into(),
                source: e,
            })?,
        };
        let failed = |what: &str, e: std::io::Error| Error::Io {
            context: format!("cannot start the wasm worker {}: {what}", program.display()),
            source: e,
        };
        let (ours, theirs) = UnixStream::pair().map_err(|e| failed("no socket", e))?;
        // Above the standard streams, whatever this process left of them: the
        // child's are set after this descriptor is.
        let theirs = {
            let above = above_stdio(&theirs).map_err(|e| failed("no socket", e))?;
            // Only the child's copy may hold the socket open: once it is gone, the
            // reader sees the end.
            drop(theirs);
            above
        };
        ours.set_write_timeout(Some(WRITE_STALL))
            .map_err(|e| failed("no socket", e))?;
        let config_json = serde_json::to_string(config)
            .map_err(|e| failed("its configuration", std::io::Error::other(e)))?;
        let mut command = Command::new(&program);
        command
            .arg(shared::FLAG)
            // Nothing of this process's environment (its keys, its secrets) but where
            // temporary files go and how to report a crash.
            .env_clear()
            .env(
                shared::FD_VARIABLE,
                std::os::fd::AsRawFd::as_raw_fd(&theirs).to_string(),
            )
            .env(shared::CONFIG_VARIABLE, config_json)
            .stdin(Stdio::null())
            // A front end may speak a protocol on its own standard output.
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for kept in ["TMPDIR", "RUST_BACKTRACE"] {
            if let Some(value) = std::env::var_os(kept) {
                command.env(kept, value);
            }
        }
        if options.pin {
            if let Some(cpu) = pinning::cpu_for(slot) {
                command.env(shared::CPU_VARIABLE, cpu.to_string());
            }
        }
        inherit(&mut command, &theirs);
        let child = command.spawn().map_err(|e| failed("it did not run", e))?;
        drop(theirs);
        let pid = child.id();
        let child = Arc::new(Mutex::new(child));
        let pending = Arc::new(Mutex::new(Pending::default()));
        let (hello, greeted) = mpsc::channel();
        let reader = {
            let stream = ours.try_clone().map_err(|e| failed("no socket", e))?;
            let (pending, child) = (pending.clone(), child.clone());
            std::thread::Builder::new()
                .name("sandlot-wasm-worker".into())
                .spawn(move || {
                    // A worker takes no descriptors from the backend's side.
                    let why = read(frame::Receiver::new(stream, 0), &pending, hello);
                    // A worker whose messages end or cannot be read is of no more
                    // use: it goes (if it has not), is reaped, and how it ended said.
                    let why = match reap(&child, true) {
                        Some(status) => format!("{why}: {status}"),
                        None => why,
                    };
                    let mut pending = lock(&pending);
                    pending.ended.get_or_insert(why);
                    // Every call waiting on it learns it is lost.
                    pending.calls.clear();
                })
        };
        let process = Arc::new(Process {
            pid,
            child,
            out: Mutex::new(ours),
            pending,
            next_id: AtomicU64::new(1),
            load: AtomicUsize::new(0),
        });
        reader.map_err(|e| failed("no thread to read it", e))?;
        let refused = |why: String| Error::Io {
            context: format!(
                "the wasm worker {} did not start: {why}; a worker program must call \
                 sandlot::wasm::worker::serve_if_asked() first in main (the sandlot \
                 binary does), or set the worker program to the sandlot binary",
                program.display()
            ),
            source: std::io::Error::other("no handshake"),
        };
        match greeted.recv_timeout(STARTUP) {
            Ok((version, build)) if version == shared::VERSION && build == shared::build() => {
                Ok(process)
            }
            Ok((_, build)) => Err(refused(format!("it is another build ({build})"))),
            Err(_) => {
                Err(refused(process.ended().unwrap_or_else(|| {
                    format!("no answer in {} s", STARTUP.as_secs())
                })))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// Why the worker ended, if it has.
    pub(super) fn ended(&self) -> Option<String> {
        self.lock().ended.clone()
    }

    /// The error of a call the worker did not finish because it ended.
    pub(super) fn lost(&self) -> Error {
        Error::SessionEnded {
            reason: format!(
                "its wasm worker process ended ({})",
                self.ended().unwrap_or_else(|| "no reason given".into())
            ),
        }
    }

    /// Sends `call`, with `fd` beside it: its messages come to the receiver.
    pub(super) fn call(
        &self,
        mut call: Call,
        fd: Option<&std::fs::File>,
    ) -> Result<(u64, mpsc::Receiver<FromWorker>)> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (to, from) = mpsc::channel();
        {
            let mut pending = self.lock();
            if pending.ended.is_some() {
                drop(pending);
                return Err(self.lost());
            }
            pending.calls.insert(id, to);
        }
        // Data larger than a message carries goes ahead in pieces.
        let ahead = match &mut call {
            Call::Files {
                op: FileOp::Write { data, .. } | FileOp::Unpack { archive: data, .. },
                ..
            } if data.len() > shared::CHUNK => std::mem::take(data),
            _ => Vec::new(),
        };
        let sent = ahead
            .chunks(shared::CHUNK)
            .try_for_each(|piece| {
                let bytes = piece.to_vec();
                self.send(&ToWorker::Chunk { id, bytes }, None)
            })
            .and_then(|()| self.send(&ToWorker::Call { id, call }, fd));
        if let Err(e) = sent {
            self.lock().calls.remove(&id);
            // Refused whole before anything was written: the worker is as it was.
            if e.kind() == std::io::ErrorKind::InvalidInput {
                return Err(Error::InvalidRequest {
                    reason: format!("too large for a wasm worker: {e}"),
                });
            }
            self.kill(&format!("a call could not be sent: {e}"));
            return Err(self.lost());
        }
        Ok((id, from))
    }

    pub(super) fn send(
        &self,
        message: &ToWorker,
        fd: Option<&std::fs::File>,
    ) -> std::io::Result<()> {
        let out = lock(&self.out);
        frame::send(&out, message, fd.map(AsFd::as_fd))
    }

    /// Waits for call `id`'s reply, handing what comes before it to `event`; a
    /// worker that leaves a call unanswered for [`UNANSWERED`] is killed.
    pub(super) fn finish(
        &self,
        (_, from): (u64, mpsc::Receiver<FromWorker>),
        mut event: impl FnMut(FromWorker),
    ) -> Result<Reply> {
        let deadline = Instant::now() + UNANSWERED;
        loop {
            match from.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(FromWorker::Done { reply, .. }) => return reply.map_err(Error::from),
                Ok(other) => event(other),
                Err(RecvTimeoutError::Timeout) => {
                    self.kill(&format!(
                        "a call went unanswered for {} s",
                        UNANSWERED.as_secs()
                    ));
                    return Err(self.lost());
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.lost()),
            }
        }
    }

    /// Ends the worker now: every sandbox in it is lost.
    pub(super) fn kill(&self, why: &str) {
        {
            let mut pending = self.lock();
            pending.ended.get_or_insert_with(|| why.to_string());
        }
        let mut child = lock(&self.child);
        let _ = child.kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // The worker closes its sandboxes and exits when its socket ends.
        let out = lock(&self.out);
        let _ = out.shutdown(std::net::Shutdown::Both);
        drop(out);
        reap(&self.child, false);
    }
}

/// Waits for the worker to exit, five seconds at most, then kills it (at once with
/// `kill_first`); its status, once reaped. The lock is held for moments only, so a
/// kill from elsewhere is never held up.
fn reap(child: &Mutex<Child>, kill_first: bool) -> Option<std::process::ExitStatus> {
    if kill_first {
        let _ = lock(child).kill();
    }
    let started = Instant::now();
    loop {
        match lock(child).try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        if started.elapsed() > Duration::from_secs(5) {
            let _ = lock(child).kill();
        }
        if started.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A copy of `socket`'s descriptor numbered 3 or above, closed on exec.
fn above_stdio(socket: &UnixStream) -> std::io::Result<std::os::fd::OwnedFd> {
    #![allow(unsafe_code)] // fcntl(2) F_DUPFD_CLOEXEC
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: duplicates a descriptor this process holds open; the new one is owned
    // by the result alone.
    let fd = unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Makes `socket` the child's to keep across `exec`.
fn inherit(command: &mut Command, socket: &std::os::fd::OwnedFd) {
    #![allow(unsafe_code)] // fcntl(2) between fork and exec
    use std::os::unix::process::CommandExt;
    let fd = std::os::fd::AsRawFd::as_raw_fd(socket);
    // SAFETY: runs in the child between fork and exec, and calls only fcntl(2),
    // which is async-signal-safe, on a descriptor the parent holds open.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The reader of one worker: hands each message to its call, the handshake to
/// `hello`, until the worker's messages end; says why they did.
fn read(
    mut receiver: frame::Receiver,
    pending: &Mutex<Pending>,
    hello: mpsc::Sender<(u32, String)>,
) -> String {
    let why = loop {
        match receiver.next::<FromWorker>() {
            Ok(Some(FromWorker::Hello { version, build })) => {
                let _ = hello.send((version, build));
            }
            Ok(Some(message)) => {
                let id = match &message {
                    FromWorker::Stdout { id, .. }
                    | FromWorker::Stderr { id, .. }
                    | FromWorker::Chunk { id, .. }
                    | FromWorker::ToolCall { id, .. }
                    | FromWorker::ToolCallTooLarge { id, .. }
                    | FromWorker::Done { id, .. } => *id,
                    FromWorker::Hello { .. } => unreachable!("matched above"),
                };
                let mut pending = lock(pending);
                let to = if matches!(message, FromWorker::Done { .. }) {
                    pending.calls.remove(&id)
                } else {
                    pending.calls.get(&id).cloned()
                };
                drop(pending);
                if let Some(to) = to {
                    let _ = to.send(message);
                }
            }
            Ok(None) => break "it exited".to_string(),
            Err(e) => break format!("its messages could not be read: {e}"),
        }
    };
    why
}
