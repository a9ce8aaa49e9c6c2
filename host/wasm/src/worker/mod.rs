//! Sandboxes in worker processes: the wasm backend can run its interpreters in a few
//! processes of its own ([`WorkerOptions`]) instead of in the caller's.
//!
//! Why: every instance maps, protects and unmaps its memory, and a process's
//! address space takes those one at a time, so sandboxes that open and close on
//! several threads of one process wait for each other (measured on two cores: four
//! callers made 1.2–1.3× the fresh sandboxes of one in-process, 1.8–1.95× in two workers;
//! `docs/performance.md`). Each worker has an address space of its own, and is a
//! second wall around wasmtime: a fault in an interpreter ends its worker, not the
//! application.
//!
//! What stays in the caller's process: the session (policy, language handlers,
//! artifacts, masking) and the run's tools, whose calls the worker relays. A worker
//! is the application's own program started again with [`serve_if_asked`] first in
//! its `main` (the `sandlot` binary does), or any program given in
//! [`WorkerOptions::program`] that does the same. A worker that ends takes its
//! sandboxes with it: their runs end as lost and they refuse further calls; the next
//! open starts a new worker.

mod pinning;
mod serve;
mod wire;

pub use serve::serve_if_asked;

use crate::backend::{Remote, WasmBackend};
use crate::door;
use sandlot_core::artifact::FileScan;
use sandlot_core::backend::{
    DirEntry, FileInfo, LastValue, Outcome, RunRequest, Sandbox, SandboxFiles, SandboxSpec,
    Workload,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::{InterpreterState, StateReader};
use sandlot_core::sync::lock;
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::{Call, FileOp, FromWorker, Reply, ToWorker, WorkerConfig};

/// How long a worker may take to say it is ready.
const STARTUP: Duration = Duration::from_secs(30);

/// How long past its time limit a run may go before its worker is taken for stuck
/// and killed (the worker enforces the limit itself; this is the backstop).
const STUCK: Duration = Duration::from_secs(30);

/// How often a run waiting on its worker looks at its interrupt.
const POLL: Duration = Duration::from_millis(20);

/// How long after a worker failed to start opens say so without trying again.
const RETRY: Duration = Duration::from_secs(5);

/// How long any other call may go unanswered before its worker is taken for stuck
/// and killed: longer than anything a worker does (the first open of a runtime
/// compiles it, about 90 s for CPython here).
const UNANSWERED: Duration = Duration::from_secs(600);

/// How long a write to a worker may block before the worker is taken for stuck.
const WRITE_STALL: Duration = Duration::from_secs(30);

/// How the wasm backend runs its sandboxes in worker processes.
///
/// ```
/// use sandlot::wasm::WorkerOptions;
///
/// // Two workers, each this program started again.
/// let options = WorkerOptions::new(2);
/// assert_eq!(options.count, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// How many worker processes (at least one): one per core the sandboxes may use.
    pub count: usize,
    /// The program started as a worker, with the flag [`serve_if_asked`] looks for;
    /// `None`: this process's own executable.
    pub program: Option<PathBuf>,
    /// Whether each worker is kept to one core of those this process may use, in
    /// turn (default: yes). A worker's threads then share that core's TLB: the
    /// copy-on-write faults and unmaps of its sandboxes interrupt no other core.
    pub pin: bool,
}

impl WorkerOptions {
    /// `count` workers, each this process's own executable.
    pub fn new(count: usize) -> WorkerOptions {
        WorkerOptions {
            count: count.max(1),
            program: None,
            pin: true,
        }
    }

    /// The same, with `program` as the worker.
    pub fn program(mut self, program: impl Into<PathBuf>) -> WorkerOptions {
        self.program = Some(program.into());
        self
    }
}

/// Entry points for the fuzz targets.
#[doc(hidden)]
pub(crate) mod fuzzing {
    use super::wire;
    use std::io::Write;

    /// Reads `bytes` as a stream from a worker, every message to its end; converts
    /// what the backend would.
    pub(crate) fn frames(bytes: &[u8]) {
        let Ok((mut from, to)) = std::os::unix::net::UnixStream::pair() else {
            return;
        };
        // Larger inputs would need a writer thread; frames of the kinds that matter
        // fit.
        let bytes = &bytes[..bytes.len().min(64 << 10)];
        if from.write_all(bytes).is_err() {
            return;
        }
        drop(from);
        let mut receiver = wire::Receiver::new(to, 0);
        while let Ok(Some(message)) = receiver.next::<wire::FromWorker>() {
            if let wire::FromWorker::Done { reply, .. } = message {
                match reply {
                    Ok(wire::Reply::Ran(outcome)) => {
                        drop(sandlot_core::backend::Outcome::from(outcome))
                    }
                    Ok(wire::Reply::Entries(entries)) => entries
                        .into_iter()
                        .for_each(|e| drop(sandlot_core::backend::DirEntry::from(e))),
                    Ok(wire::Reply::Scan(stats)) => drop(wire::scan_from_wire(stats)),
                    Ok(wire::Reply::Info(info)) => {
                        let _ = sandlot_core::backend::FileInfo::from(info);
                    }
                    Ok(_) => {}
                    Err(error) => drop(sandlot_core::error::Error::from(error)),
                }
            }
        }
    }
}

/// The backend's workers: started on first use, each placed sandbox on the one with
/// the fewest, and started again when one has ended.
pub(crate) struct Workers {
    options: WorkerOptions,
    config: WorkerConfig,
    slots: Mutex<Vec<Option<Arc<Process>>>>,
    /// The last start that failed, and why: opens in the next [`RETRY`] say so at once
    /// rather than each waiting for a worker that will not come.
    failed: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl WasmBackend {
    /// The same backend with its sandboxes in worker processes (see
    /// [`crate::worker`]): sessions on several threads then scale with the cores
    /// instead of waiting for each other in this process's address space.
    pub fn in_workers(mut self, options: WorkerOptions) -> WasmBackend {
        let (runtimes_dir, components, cache_dir) = self.found_in.clone();
        self.remote = Some(Box::new(Workers::new(
            options,
            runtimes_dir,
            components,
            cache_dir,
        )));
        self
    }
}

impl Remote for Workers {
    fn open(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<Box<dyn Sandbox>> {
        Ok(Box::new(Workers::open(self, spec, restore)?))
    }

    fn pids(&self) -> Vec<u32> {
        Workers::pids(self)
    }

    fn check(&self) -> sandlot_core::backend::Check {
        Workers::check(self)
    }
}

impl Workers {
    fn new(
        options: WorkerOptions,
        runtimes_dir: PathBuf,
        components: Vec<PathBuf>,
        cache_dir: Option<PathBuf>,
    ) -> Workers {
        Workers {
            slots: Mutex::new(vec![None; options.count]),
            failed: Mutex::new(None),
            options,
            config: WorkerConfig {
                runtimes_dir,
                components,
                cache_dir,
            },
        }
    }

    /// A sandbox for `spec` in a worker: fresh, or restored from `restore`.
    pub(crate) fn open(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<RemoteSandbox> {
        let wire_spec = wire::Spec {
            language: spec.language.to_string(),
            memory: spec.memory as u64,
            workdir_size: spec.policy.workdir_size,
        };
        let restore = match restore {
            None => None,
            Some((state, bytes)) => {
                let state = serde_json::to_string(state).map_err(|e| Error::InvalidSnapshot {
                    reason: format!("its interpreter state does not encode: {e}"),
                })?;
                // The snapshot's file is read-write here; the worker gets a description
                // of it that cannot write, so no worker changes what other sandboxes
                // restore from it.
                let (file, offset) = bytes.file();
                let call = Call::Restore {
                    spec: wire_spec.clone(),
                    state,
                    offset: offset + bytes.position(),
                    len: bytes.len() - bytes.position(),
                    snapshot: bytes.snapshot().map(|id| id.raw()),
                };
                Some((call, read_only(file)?))
            }
        };
        let process = self.pick()?;
        let opened = match restore {
            None => process.call(Call::Open { spec: wire_spec }, None),
            Some((call, file)) => process.call(call, Some(&file)),
        };
        let reply = opened.and_then(|sent| process.finish(sent, |_| {}));
        let (sandbox, name) = match reply {
            Ok(Reply::Opened { sandbox, name }) => (sandbox, name),
            other => {
                process.load.fetch_sub(1, Ordering::SeqCst);
                return Err(match other {
                    Ok(other) => out_of_turn(&other),
                    Err(e) => e,
                });
            }
        };
        Ok(RemoteSandbox {
            process,
            sandbox,
            name,
            memory: spec.memory as u64,
        })
    }

    /// The process ids of the live workers.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let slots = lock(&self.slots);
        slots
            .iter()
            .flatten()
            .filter(|process| process.ended().is_none())
            .map(|process| process.pid)
            .collect()
    }

    /// What `sandlot doctor` says of the workers: whether one starts and answers.
    pub(crate) fn check(&self) -> sandlot_core::backend::Check {
        use sandlot_core::backend::Check;
        let program = self
            .options
            .program
            .clone()
            .or_else(|| std::env::current_exe().ok());
        let program = program.map_or_else(|| "this program".into(), |p| p.display().to_string());
        match self.pick() {
            Ok(process) => {
                process.load.fetch_sub(1, Ordering::SeqCst);
                Check::ok(
                    "workers",
                    format!(
                        "sandboxes run in {} worker processes of {program}{}",
                        self.options.count,
                        if self.options.pin {
                            ", each kept to one core"
                        } else {
                            ""
                        }
                    ),
                )
            }
            Err(e) => Check::gap(
                "workers",
                format!("no worker starts: {e}"),
                "set [wasm] worker_program in sandlot.toml to the sandlot binary, or \
                 [wasm] workers = 0 to keep sandboxes in this process",
            ),
        }
    }

    /// The live worker with the fewest sandboxes, started if a slot has none, with
    /// one more sandbox counted against it (the caller's to give back if its open
    /// fails).
    fn pick(&self) -> Result<Arc<Process>> {
        let least = {
            let mut slots = lock(&self.slots);
            for slot in slots.iter_mut() {
                if slot
                    .as_ref()
                    .is_some_and(|process| process.ended().is_some())
                {
                    *slot = None;
                }
            }
            let least = slots
                .iter()
                .enumerate()
                .min_by_key(|(_, slot)| {
                    slot.as_ref()
                        .map_or(0, |process| process.load.load(Ordering::SeqCst))
                })
                .map(|(at, _)| at)
                .unwrap_or(0);
            if let Some(process) = &slots[least] {
                // Counted from now, not once it has opened: opens under way at the
                // same time spread over the workers.
                process.load.fetch_add(1, Ordering::SeqCst);
                return Ok(process.clone());
            }
            least
        };
        // Started without the lock: a slow or failing start holds up no other open.
        {
            let failed = lock(&self.failed);
            if let Some((when, why)) = &*failed {
                if when.elapsed() < RETRY {
                    return Err(Error::Io {
                        context: why.clone(),
                        source: std::io::Error::other("no worker (tried again shortly)"),
                    });
                }
            }
        }
        let started = match Process::start(&self.options, &self.config, least) {
            Ok(process) => process,
            Err(e) => {
                *lock(&self.failed) = Some((Instant::now(), e.to_string()));
                return Err(e);
            }
        };
        let mut slots = lock(&self.slots);
        // Another open may have started one for the slot meanwhile: it is used, and
        // this one goes as it drops.
        let process = slots[least].get_or_insert(started).clone();
        process.load.fetch_add(1, Ordering::SeqCst);
        Ok(process)
    }
}

/// One worker process and the calls under way in it.
struct Process {
    pid: u32,
    /// Shared with the reader, which reaps the worker once it has gone.
    child: Arc<Mutex<Child>>,
    out: Mutex<UnixStream>,
    /// Where each call's messages go, by call.
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicU64,
    /// Its open sandboxes.
    load: AtomicUsize,
}

#[derive(Default)]
struct Pending {
    calls: HashMap<u64, mpsc::Sender<FromWorker>>,
    /// Why the worker ended, once it has: no call is taken after.
    ended: Option<String>,
}

impl Process {
    fn start(options: &WorkerOptions, config: &WorkerConfig, slot: usize) -> Result<Arc<Process>> {
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
            .arg(wire::FLAG)
            // Nothing of this process's environment (its keys, its secrets) but where
            // temporary files go and how to report a crash.
            .env_clear()
            .env(
                wire::FD_VARIABLE,
                std::os::fd::AsRawFd::as_raw_fd(&theirs).to_string(),
            )
            .env(wire::CONFIG_VARIABLE, config_json)
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
                command.env(wire::CPU_VARIABLE, cpu.to_string());
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
                    let why = read(wire::Receiver::new(stream, 0), &pending, hello);
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
            Ok((version, build)) if version == wire::VERSION && build == wire::build() => {
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
    fn ended(&self) -> Option<String> {
        self.lock().ended.clone()
    }

    /// The error of a call the worker did not finish because it ended.
    fn lost(&self) -> Error {
        Error::SessionEnded {
            reason: format!(
                "its wasm worker process ended ({})",
                self.ended().unwrap_or_else(|| "no reason given".into())
            ),
        }
    }

    /// Sends `call`, with `fd` beside it: its messages come to the receiver.
    fn call(
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
            } if data.len() > wire::CHUNK => std::mem::take(data),
            _ => Vec::new(),
        };
        let sent = ahead
            .chunks(wire::CHUNK)
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

    fn send(&self, message: &ToWorker, fd: Option<&std::fs::File>) -> std::io::Result<()> {
        let out = lock(&self.out);
        wire::send(&out, message, fd.map(AsFd::as_fd))
    }

    /// Waits for call `id`'s reply, handing what comes before it to `event`; a
    /// worker that leaves a call unanswered for [`UNANSWERED`] is killed.
    fn finish(
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
    fn kill(&self, why: &str) {
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

/// A new read-only description of the file `file` is open on (`/proc/self/fd`, which
/// reaches an unlinked file too).
fn read_only(file: &std::fs::File) -> Result<std::fs::File> {
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
    std::fs::File::open(&path).map_err(|e| Error::Io {
        context: format!("cannot open the snapshot read-only for a wasm worker ({path})"),
        source: e,
    })
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
    mut receiver: wire::Receiver,
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

/// `outcome` with its output held to `max` bytes of each stream, as the worker should
/// have held it.
fn capped(mut outcome: Outcome, max: usize) -> Outcome {
    if outcome.stdout.len() > max {
        outcome.stdout.truncate(max);
        outcome.stdout_truncated = true;
    }
    if outcome.stderr.len() > max {
        outcome.stderr.truncate(max);
        outcome.stderr_truncated = true;
    }
    outcome
}

/// The reply's name, for an error: a worker that answered out of turn.
fn out_of_turn(reply: &Reply) -> Error {
    let name = match reply {
        Reply::Opened { .. } => "opened",
        Reply::Ran(_) => "ran",
        Reply::Done => "done",
        Reply::Bytes(_) => "bytes",
        Reply::Entries(_) => "entries",
        Reply::Scan(_) => "scan",
        Reply::Info(_) => "info",
        Reply::Made(_) => "made",
        Reply::Captured(_) => "captured",
        Reply::Chunked => "chunked",
    };
    Error::Io {
        context: "the wasm worker answered out of turn".into(),
        source: std::io::Error::other(format!("a `{name}` reply")),
    }
}

/// A sandbox in a worker process.
pub(crate) struct RemoteSandbox {
    process: Arc<Process>,
    sandbox: u64,
    name: String,
    /// Its memory cap, in bytes: what its captured state is held to.
    memory: u64,
}

impl RemoteSandbox {
    /// Answers tool call `call` with the run's tools, on the backend's I/O runtime:
    /// the run goes on meanwhile (its output, its interrupt). Without tools (a
    /// worker asks only for runs that have them) the answer is an empty frame, which
    /// the guest reports as malformed.
    fn answer(
        &self,
        call: u64,
        tools: Option<Arc<sandlot_core::tool::ToolCalls>>,
        ask: impl FnOnce(
                Arc<sandlot_core::tool::ToolCalls>,
            )
                -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send>>
            + Send
            + 'static,
    ) {
        let process = self.process.clone();
        crate::interpreter::io_runtime().spawn(async move {
            let frame = match tools {
                Some(tools) => ask(tools).await,
                None => Vec::new(),
            };
            let _ = process.send(&ToWorker::ToolAnswer { call, frame }, None);
        });
    }

    fn call(&self, call: Call) -> Result<Reply> {
        let sent = self.process.call(call, None)?;
        self.process.finish(sent, |_| {})
    }

    fn file_op(&self, op: FileOp) -> Result<Reply> {
        self.call(Call::Files {
            sandbox: self.sandbox,
            op,
        })
    }

    fn done(&self, op: FileOp) -> Result<()> {
        match self.file_op(op)? {
            Reply::Done => Ok(()),
            other => Err(out_of_turn(&other)),
        }
    }

    /// The bytes of a read or a pack of at most `max`: whole, or in pieces before
    /// the reply. A worker that sends more is taken for broken, and killed.
    fn bytes(&self, op: FileOp, max: u64) -> Result<Vec<u8>> {
        let sent = self.process.call(
            Call::Files {
                sandbox: self.sandbox,
                op,
            },
            None,
        )?;
        let (mut pieces, mut over) = (Vec::new(), false);
        let reply = self.process.finish(sent, |message| {
            if let FromWorker::Chunk { bytes, .. } = message {
                over |= (pieces.len() + bytes.len()) as u64 > max;
                if !over {
                    pieces.extend_from_slice(&bytes);
                }
            }
        })?;
        let whole = match reply {
            Reply::Bytes(bytes) => bytes,
            Reply::Chunked => pieces,
            other => return Err(out_of_turn(&other)),
        };
        if over || whole.len() as u64 > max {
            self.process.kill("it sent more bytes than were asked for");
            return Err(self.process.lost());
        }
        Ok(whole)
    }

    fn capture_as(
        &mut self,
        out: &mut dyn std::io::Write,
        here: bool,
    ) -> Result<Option<InterpreterState>> {
        let sent = self.process.call(
            Call::Capture {
                sandbox: self.sandbox,
                here,
            },
            None,
        )?;
        // The state is at most the memory and a little more; a worker that sends more
        // is broken, not a sandbox with more state.
        let most = self.memory.saturating_add(256 << 20);
        let (mut written, mut total) = (Ok(()), 0u64);
        let reply = self.process.finish(sent, |message| {
            if let (FromWorker::Chunk { bytes, .. }, Ok(())) = (message, &written) {
                total += bytes.len() as u64;
                written = if total > most {
                    Err(std::io::Error::other("more state than its memory holds"))
                } else {
                    out.write_all(&bytes)
                };
            }
        })?;
        if total > most {
            self.process
                .kill("it sent more state than a sandbox's memory holds");
            return Err(self.process.lost());
        }
        written.map_err(|e| Error::Io {
            context: "cannot write the captured state".into(),
            source: e,
        })?;
        match reply {
            Reply::Captured(None) => Ok(None),
            Reply::Captured(Some(state)) => {
                serde_json::from_str(&state)
                    .map(Some)
                    .map_err(|e| Error::Io {
                        context: "the wasm worker described its state wrongly".into(),
                        source: std::io::Error::other(e),
                    })
            }
            other => Err(out_of_turn(&other)),
        }
    }
}

impl Sandbox for RemoteSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let Workload::Code(code) = request.workload else {
            return Err(request
                .workload
                .unsupported(sandlot_core::backend::BackendName::WASM.as_str()));
        };
        let tools = request.tools.clone();
        let run = wire::Run {
            code: code.to_string(),
            stdin: request.stdin.to_vec(),
            env: request.env.to_vec(),
            secret_names: request.secret_names.to_vec(),
            workdir: request.workdir.to_string(),
            timeout: request.timeout,
            max_output: request.max_output as u64,
            stream_stdout: request.on_stdout.is_some(),
            stream_stderr: request.on_stderr.is_some(),
            last_value_shown: request.last_value == LastValue::Shown,
            args: request.args.to_vec(),
            tools: tools
                .as_ref()
                .map(|tools| door::Answer::max_request(&**tools) as u64),
        };
        let (id, from) = match self.process.call(
            Call::Run {
                sandbox: self.sandbox,
                run,
            },
            None,
        ) {
            Ok(sent) => sent,
            Err(e) if self.process.ended().is_some() => return Ok(Outcome::lost(e.to_string())),
            Err(e) => return Err(e),
        };
        let (mut on_stdout, mut on_stderr) = (request.on_stdout, request.on_stderr);
        let stuck_at = Instant::now() + request.timeout.saturating_add(STUCK);
        // What a worker may stream of each stream: the cap (it stops streaming there).
        let budget = request.max_output.saturating_add(wire::CHUNK);
        let (mut streamed_out, mut streamed_err) = (0usize, 0usize);
        let mut interrupted = false;
        loop {
            // Looked at whatever comes, so a run that streams without pause is still
            // interrupted, and a worker that floods is still caught.
            if !interrupted && request.interrupt.is_some_and(|i| i.is_interrupted()) {
                interrupted = true;
                let _ = self.process.send(&ToWorker::Interrupt { id }, None);
            }
            if Instant::now() > stuck_at {
                self.process.kill(&format!(
                    "a run went {} s past its time limit",
                    STUCK.as_secs()
                ));
            }
            let message = match from.recv_timeout(POLL) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Ok(Outcome::lost(self.process.lost().to_string()))
                }
            };
            match message {
                FromWorker::Stdout { bytes, .. } | FromWorker::Stderr { bytes, .. }
                    if streamed_out.max(streamed_err) > budget =>
                {
                    let _ = bytes;
                    self.process
                        .kill("it streamed more output than the run's cap allows");
                }
                FromWorker::Stdout { bytes, .. } => {
                    streamed_out += bytes.len();
                    if let Some(sink) = on_stdout.as_mut() {
                        sink(&bytes);
                    }
                }
                FromWorker::Stderr { bytes, .. } => {
                    streamed_err += bytes.len();
                    if let Some(sink) = on_stderr.as_mut() {
                        sink(&bytes);
                    }
                }
                FromWorker::ToolCall { call, frame, .. } => {
                    self.answer(call, tools.clone(), move |tools| {
                        Box::pin(async move { tools.answer(&frame).await })
                    });
                }
                FromWorker::ToolCallTooLarge { call, size, .. } => {
                    let size = usize::try_from(size).unwrap_or(usize::MAX);
                    self.answer(call, tools.clone(), move |tools| {
                        Box::pin(async move { door::Answer::refuse(&*tools, size).await })
                    });
                }
                FromWorker::Done { reply, .. } => {
                    return match reply.map_err(Error::from)? {
                        Reply::Ran(outcome) => Ok(capped(outcome.into(), request.max_output)),
                        other => Err(out_of_turn(&other)),
                    }
                }
                FromWorker::Chunk { .. } | FromWorker::Hello { .. } => {}
            }
        }
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        self
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn reset(&mut self) -> Result<()> {
        match self.call(Call::Reset {
            sandbox: self.sandbox,
        })? {
            Reply::Done => Ok(()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn capture(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, false)
    }

    fn capture_here(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, true)
    }
}

impl SandboxFiles for RemoteSandbox {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.done(FileOp::Write {
            path: path.into(),
            data: data.to_vec(),
        })
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.bytes(
            FileOp::Read {
                path: path.into(),
                max,
            },
            max,
        )
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        match self.file_op(FileOp::List { path: path.into() })? {
            Reply::Entries(entries) => Ok(entries.into_iter().map(Into::into).collect()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn scan(&mut self, path: &str) -> Result<FileScan> {
        match self.file_op(FileOp::Scan { path: path.into() })? {
            Reply::Scan(stats) => Ok(wire::scan_from_wire(stats)),
            other => Err(out_of_turn(&other)),
        }
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.bytes(
            FileOp::Pack {
                path: path.into(),
                max,
            },
            max,
        )
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.done(FileOp::Unpack {
            path: path.into(),
            archive: archive.to_vec(),
        })
    }

    fn clear(&mut self, path: &str) -> Result<()> {
        self.done(FileOp::Clear { path: path.into() })
    }

    fn stat(&mut self, path: &str) -> Result<FileInfo> {
        match self.file_op(FileOp::Stat { path: path.into() })? {
            Reply::Info(info) => Ok(info.into()),
            other => Err(out_of_turn(&other)),
        }
    }

    fn make_dir(&mut self, path: &str) -> Result<bool> {
        match self.file_op(FileOp::MakeDir { path: path.into() })? {
            Reply::Made(made) => Ok(made),
            other => Err(out_of_turn(&other)),
        }
    }

    fn remove(&mut self, path: &str) -> Result<()> {
        self.done(FileOp::Remove { path: path.into() })
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.done(FileOp::Rename {
            from: from.into(),
            to: to.into(),
        })
    }
}

impl Drop for RemoteSandbox {
    fn drop(&mut self) {
        // Waited for, so that a closed sandbox's workspace is gone when close returns.
        let _ = self.call(Call::Close {
            sandbox: self.sandbox,
        });
        self.process.load.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    #[test]
    fn a_worker_gets_the_snapshot_read_only_even_unlinked() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"state").unwrap();
        let mut given = read_only(&file).unwrap();
        let mut read = String::new();
        given.read_to_string(&mut read).unwrap();
        assert_eq!(read, "state");
        assert!(given.write_all(b"forged").is_err());
        assert!(given.set_len(0).is_err());
        // Its own offset: reading there moved nothing here.
        assert_eq!(file.stream_position().unwrap(), 5);
    }
}
