//! The worker's side: a wasm backend of its own, in a process of its own, whose
//! sandboxes the backend in the parent process drives through [`super::wire`].
//!
//! Each sandbox lives on a thread of its own, which takes the calls for it in order;
//! one thread reads the socket and hands calls to them, so an interrupt or a tool's
//! answer reaches a run while it goes on. When the parent goes (the socket ends),
//! every run is interrupted, every sandbox closed, and the process exits.

use super::wire::{
    self, Call, FileOp, FromWorker, Reply, Run, Spec, ToWorker, WireError, WorkerConfig,
    CONFIG_VARIABLE, CPU_VARIABLE, FD_VARIABLE, FLAG,
};
use crate::backend::WasmBackend;
use crate::door::{Answer, Pending};
use crate::sandbox::WasmSandbox;
use sandlot_core::backend::{LastValue, RunRequest, Sandbox, SandboxFiles, SandboxSpec, Workload};
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::policy::Policy;
use sandlot_core::snapshot::{InterpreterState, SnapshotId, StateReader};
use sandlot_core::sync::lock;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the sandboxes get to close once the parent is gone.
const CLOSING: Duration = Duration::from_secs(5);

/// Serves as a wasm worker if this process was started as one, then exits; returns
/// at once otherwise. A program that a [`crate::WasmBackend`] starts as its worker
/// ([`crate::WorkerOptions::program`]) calls this first thing in `main`; the
/// `sandlot` binary does.
///
/// ```no_run
/// // First in `main`:
/// sandlot::wasm::worker::serve_if_asked();
/// // The application's own work follows.
/// ```
pub fn serve_if_asked() {
    if std::env::args_os().nth(1).as_deref() != Some(std::ffi::OsStr::new(FLAG)) {
        return;
    }
    let code = match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandlot wasm worker: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn serve() -> io::Result<()> {
    // Before any thread starts, so that every thread keeps to the core.
    if let Some(cpu) = std::env::var(CPU_VARIABLE)
        .ok()
        .and_then(|cpu| cpu.parse().ok())
    {
        super::pinning::keep_to(cpu);
    }
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
    let fd: RawFd = std::env::var(FD_VARIABLE)
        .ok()
        .and_then(|fd| fd.parse().ok())
        .filter(|fd| *fd > 2)
        .ok_or_else(|| invalid("started without its socket (SANDLOT_WASM_WORKER_FD)"))?;
    let config: WorkerConfig = std::env::var(CONFIG_VARIABLE)
        .ok()
        .and_then(|config| serde_json::from_str(&config).ok())
        .ok_or_else(|| invalid("started without its configuration"))?;
    let stream = UnixStream::from(socket(fd));
    let backend = WasmBackend::discover(
        &config.runtimes_dir,
        &config.components,
        config.cache_dir.clone(),
    );
    let worker = Arc::new(Worker {
        backend,
        out: Mutex::new(stream.try_clone()?),
        sandboxes: Mutex::new(HashMap::new()),
        runs: Mutex::new(HashMap::new()),
        answers: Mutex::new(HashMap::new()),
        next_sandbox: AtomicU64::new(1),
        next_call: AtomicU64::new(1),
        open: AtomicUsize::new(0),
        idle: Mutex::new(Vec::new()),
        next_thread: AtomicU64::new(1),
        incoming: Mutex::new(HashMap::new()),
    });
    worker.send(&FromWorker::Hello {
        version: wire::VERSION,
        build: wire::build(),
    })?;
    // A restore's snapshot comes with its call; the parent sends no more than that.
    let mut receiver = wire::Receiver::new(stream, 8);
    let ended = loop {
        match receiver.next::<ToWorker>() {
            Ok(Some(message)) => worker.take(message, &mut receiver),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    worker.close_all();
    ended
}

/// The socket the parent left open as `fd`.
#[allow(unsafe_code)] // taking ownership of an inherited descriptor
fn socket(fd: RawFd) -> OwnedFd {
    // SAFETY: the parent left this descriptor open for this process alone, `serve`
    // takes it once, and nothing else here names it. Closed on exec again: nothing
    // this process might start inherits it.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        OwnedFd::from_raw_fd(fd)
    }
}

/// How long a sandbox thread waits for another sandbox before it ends.
const IDLE_THREAD: Duration = Duration::from_secs(10);

/// What starts a sandbox on a thread: the opening call, its number, and the
/// descriptor of a restore's snapshot.
type Job = (u64, Call, Option<OwnedFd>);

/// Where a sandbox's thread takes its calls: each with its number, and a run's
/// interrupt.
type Queue = mpsc::Sender<(u64, Call, Option<Interrupt>)>;

/// The worker's state, shared by the reading thread and the sandboxes' threads.
struct Worker {
    backend: WasmBackend,
    out: Mutex<UnixStream>,
    /// Each open sandbox's queue of calls.
    sandboxes: Mutex<HashMap<u64, Queue>>,
    /// The interrupt of each run under way, by its call.
    runs: Mutex<HashMap<u64, Interrupt>>,
    /// Tool calls waiting for their answers, by number.
    answers: Mutex<HashMap<u64, tokio::sync::oneshot::Sender<Vec<u8>>>>,
    next_sandbox: AtomicU64,
    next_call: AtomicU64,
    /// Sandboxes still open (or opening) on their threads.
    open: AtomicUsize,
    /// Sandbox threads waiting for another sandbox, each by its number.
    idle: Mutex<Vec<(u64, mpsc::Sender<Job>)>>,
    next_thread: AtomicU64,
    /// The data of calls still arriving in pieces, by call.
    incoming: Mutex<HashMap<u64, Vec<u8>>>,
}

impl Worker {
    /// Sends a message to the parent. A parent that is gone is noticed by the reader.
    fn send(&self, message: &FromWorker) -> io::Result<()> {
        wire::send(&lock(&self.out), message, None)
    }

    /// Answers call `id`: bytes larger than a message carries go first in pieces; an
    /// answer that cannot be sent whole is an error the caller gets instead.
    fn reply(&self, id: u64, result: Result<Reply>) {
        let reply = match result {
            Ok(Reply::Bytes(bytes)) if bytes.len() > wire::CHUNK => {
                for piece in bytes.chunks(wire::CHUNK) {
                    let bytes = piece.to_vec();
                    if self.send(&FromWorker::Chunk { id, bytes }).is_err() {
                        return;
                    }
                }
                Ok(Reply::Chunked)
            }
            Ok(reply) => Ok(reply),
            Err(e) => Err(WireError::from(&e)),
        };
        match self.send(&FromWorker::Done { id, reply }) {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                let error = Error::InvalidRequest {
                    reason: format!("the answer is too large for the worker to send: {e}"),
                };
                let reply = Err(WireError::from(&error));
                let _ = self.send(&FromWorker::Done { id, reply });
            }
            _ => {}
        }
    }

    /// Acts on one message from the parent.
    fn take(self: &Arc<Self>, message: ToWorker, receiver: &mut wire::Receiver) {
        match message {
            ToWorker::Call { id, mut call } => match call {
                Call::Open { .. } | Call::Restore { .. } => {
                    let fd = matches!(call, Call::Restore { .. })
                        .then(|| receiver.take_fd())
                        .flatten();
                    self.start(id, call, fd);
                }
                Call::Run { sandbox, .. }
                | Call::Files { sandbox, .. }
                | Call::Reset { sandbox }
                | Call::Capture { sandbox, .. }
                | Call::Close { sandbox } => {
                    // Data that came ahead in pieces is the call's own.
                    if let Some(data) = lock(&self.incoming).remove(&id) {
                        if let Call::Files {
                            op:
                                FileOp::Write { data: into, .. } | FileOp::Unpack { archive: into, .. },
                            ..
                        } = &mut call
                        {
                            *into = data;
                        }
                    }
                    // A run's interrupt exists from the moment its call arrives, so
                    // an interrupt right behind it is not lost.
                    let interrupt = matches!(call, Call::Run { .. }).then(|| {
                        let interrupt = Interrupt::new();
                        lock(&self.runs).insert(id, interrupt.clone());
                        interrupt
                    });
                    let queue = lock(&self.sandboxes).get(&sandbox).cloned();
                    let sent = queue.is_some_and(|queue| queue.send((id, call, interrupt)).is_ok());
                    if !sent {
                        lock(&self.runs).remove(&id);
                        self.reply(
                            id,
                            Err(Error::SessionEnded {
                                reason: "its sandbox is closed".into(),
                            }),
                        );
                    }
                }
            },
            ToWorker::Interrupt { id } => {
                if let Some(interrupt) = lock(&self.runs).get(&id) {
                    interrupt.interrupt();
                }
            }
            ToWorker::Chunk { id, bytes } => {
                lock(&self.incoming)
                    .entry(id)
                    .or_default()
                    .extend_from_slice(&bytes);
            }
            ToWorker::ToolAnswer { call, frame } => {
                if let Some(waiting) = lock(&self.answers).remove(&call) {
                    let _ = waiting.send(frame);
                }
            }
        }
    }

    /// Opens a sandbox on a thread of its own, which then takes its calls: an idle
    /// thread a closed sandbox left, or a new one.
    fn start(self: &Arc<Self>, id: u64, call: Call, fd: Option<OwnedFd>) {
        self.open.fetch_add(1, Ordering::SeqCst);
        let job = (id, call, fd);
        // Handed over under the lock, which a thread that stops waiting takes too:
        // a job never goes to a thread that is leaving.
        let job = {
            let mut idle = lock(&self.idle);
            match idle.pop() {
                Some((_, thread)) => match thread.send(job) {
                    Ok(()) => return,
                    Err(mpsc::SendError(job)) => job,
                },
                None => job,
            }
        };
        let worker = self.clone();
        let spawned = std::thread::Builder::new()
            .name("sandlot-wasm-sandbox".into())
            // Interpreters recurse deeply; the engine's wasm stack is 1 MiB of it.
            .stack_size(8 << 20)
            .spawn(move || worker.serve_sandboxes(job));
        if let Err(e) = spawned {
            self.open.fetch_sub(1, Ordering::SeqCst);
            self.reply(
                id,
                Err(Error::Io {
                    context: "cannot start a thread for the sandbox".into(),
                    source: e,
                }),
            );
        }
    }

    /// A sandbox thread: serves `job`'s sandbox, then waits a while for another
    /// (making a thread maps its stack, which every thread of the process waits
    /// for, and sandboxes come and go by the hundred a second).
    fn serve_sandboxes(self: Arc<Self>, mut job: Job) {
        let number = self.next_thread.fetch_add(1, Ordering::Relaxed);
        loop {
            let (id, call, fd) = job;
            self.sandbox(id, call, fd);
            self.open.fetch_sub(1, Ordering::SeqCst);
            let (give, take) = mpsc::channel();
            lock(&self.idle).push((number, give));
            job = match take.recv_timeout(IDLE_THREAD) {
                Ok(next) => next,
                Err(_) => {
                    let mut idle = lock(&self.idle);
                    // A job handed over just as the wait ended is served.
                    match take.try_recv() {
                        Ok(next) => next,
                        Err(_) => {
                            idle.retain(|(thread, _)| *thread != number);
                            return;
                        }
                    }
                }
            };
        }
    }

    /// One sandbox's life: opened, its calls in order, closed.
    fn sandbox(self: &Arc<Self>, id: u64, call: Call, fd: Option<OwnedFd>) {
        let opened = match call {
            Call::Open { spec } => self.open(&spec, None),
            Call::Restore {
                spec,
                state,
                offset,
                len,
                snapshot,
            } => match fd {
                Some(fd) => {
                    let file = File::from(fd);
                    self.open(&spec, Some((&state, &file, offset, len, snapshot)))
                }
                None => Err(Error::InvalidSnapshot {
                    reason: "the restore came without its snapshot's file".into(),
                }),
            },
            _ => unreachable!("only opens start a sandbox"),
        };
        let mut sandbox = match opened {
            Ok(sandbox) => sandbox,
            Err(e) => return self.reply(id, Err(e)),
        };
        let number = self.next_sandbox.fetch_add(1, Ordering::Relaxed);
        let (queue, calls) = mpsc::channel();
        lock(&self.sandboxes).insert(number, queue);
        self.reply(
            id,
            Ok(Reply::Opened {
                sandbox: number,
                name: sandbox.name(),
            }),
        );
        while let Ok((id, call, interrupt)) = calls.recv() {
            let result = match call {
                Call::Close { .. } => {
                    lock(&self.sandboxes).remove(&number);
                    // A tmpfs workspace is out of everyone's reach once the sandbox
                    // leaves the table, so the caller goes on while it is torn down
                    // (unmounting waits for an RCU grace period); a directory on disk
                    // is there until the drop, so that caller waits for it.
                    if sandbox.workspace.on_disk() {
                        drop(sandbox);
                        self.reply(id, Ok(Reply::Done));
                    } else {
                        self.reply(id, Ok(Reply::Done));
                        drop(sandbox);
                    }
                    return;
                }
                Call::Run { run, .. } => {
                    let interrupt = interrupt.unwrap_or_default();
                    let ran = self.run(&mut sandbox, id, run, &interrupt);
                    lock(&self.runs).remove(&id);
                    ran.map(|outcome| Reply::Ran(outcome.into()))
                }
                Call::Files { op, .. } => files(sandbox.files(), op),
                Call::Reset { .. } => sandbox.reset().map(|()| Reply::Done),
                Call::Capture { here, .. } => self.capture(&mut sandbox, id, here),
                Call::Open { .. } | Call::Restore { .. } => {
                    unreachable!("opens are not queued to a sandbox")
                }
            };
            self.reply(id, result);
        }
        // The parent is gone: the sandbox closes as it drops.
        lock(&self.sandboxes).remove(&number);
    }

    fn open(
        &self,
        spec: &Spec,
        restore: Option<(&str, &File, u64, u64, Option<u64>)>,
    ) -> Result<WasmSandbox> {
        let policy = Policy {
            workdir_size: spec.workdir_size,
            ..Policy::default()
        };
        let memory = usize::try_from(spec.memory).unwrap_or(usize::MAX);
        let sandbox_spec = SandboxSpec::new(&spec.language, "", &policy, memory);
        match restore {
            None => self.backend.sandbox(&sandbox_spec, None),
            Some((state, file, offset, len, snapshot)) => {
                let state: InterpreterState =
                    serde_json::from_str(state).map_err(|e| Error::InvalidSnapshot {
                        reason: format!("its interpreter state does not read: {e}"),
                    })?;
                let mut bytes =
                    StateReader::in_file(file, offset, len, snapshot.map(SnapshotId::from_raw));
                self.backend
                    .sandbox(&sandbox_spec, Some((&state, &mut bytes)))
            }
        }
    }

    fn run(
        self: &Arc<Self>,
        sandbox: &mut WasmSandbox,
        id: u64,
        run: Run,
        interrupt: &Interrupt,
    ) -> Result<sandlot_core::backend::Outcome> {
        let door = run.tools.map(|max| {
            Arc::new(Relay {
                worker: self.clone(),
                id,
                max: usize::try_from(max).unwrap_or(usize::MAX),
            }) as Arc<dyn Answer>
        });
        let mut request = RunRequest::new(Workload::Code(&run.code));
        request.stdin = &run.stdin;
        request.env = &run.env;
        request.secret_names = &run.secret_names;
        request.workdir = &run.workdir;
        request.timeout = run.timeout;
        request.max_output = usize::try_from(run.max_output).unwrap_or(usize::MAX);
        request.args = &run.args;
        request.interrupt = Some(interrupt);
        request.last_value = if run.last_value_shown {
            LastValue::Shown
        } else {
            LastValue::Hidden
        };
        if run.stream_stdout {
            let worker = self.clone();
            request.on_stdout = Some(Box::new(move |bytes: &[u8]| {
                let _ = worker.send(&FromWorker::Stdout {
                    id,
                    bytes: bytes.to_vec(),
                });
            }));
        }
        if run.stream_stderr {
            let worker = self.clone();
            request.on_stderr = Some(Box::new(move |bytes: &[u8]| {
                let _ = worker.send(&FromWorker::Stderr {
                    id,
                    bytes: bytes.to_vec(),
                });
            }));
        }
        sandbox.run_through(request, door)
    }

    fn capture(&self, sandbox: &mut WasmSandbox, id: u64, here: bool) -> Result<Reply> {
        let mut out = Chunks {
            worker: self,
            id,
            buffer: Vec::with_capacity(CHUNK),
        };
        let captured = if here {
            sandbox.capture_here(&mut out)
        } else {
            sandbox.capture(&mut out)
        }?;
        io::Write::flush(&mut out).map_err(|e| Error::Io {
            context: "cannot send the captured state".into(),
            source: e,
        })?;
        let state = captured
            .map(|state| serde_json::to_string(&state))
            .transpose()
            .map_err(|e| Error::Io {
                context: "cannot describe the captured state".into(),
                source: io::Error::other(e),
            })?;
        Ok(Reply::Captured(state))
    }

    /// Once the parent is gone: interrupts every run and closes every sandbox,
    /// waiting a little for them.
    fn close_all(&self) {
        for interrupt in lock(&self.runs).values() {
            interrupt.interrupt();
        }
        lock(&self.sandboxes).clear();
        for waiting in lock(&self.answers).drain() {
            drop(waiting);
        }
        let started = Instant::now();
        while self.open.load(Ordering::SeqCst) > 0 && started.elapsed() < CLOSING {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How much captured state goes in one message.
const CHUNK: usize = 1 << 20;

/// Sends what is written to it as [`FromWorker::Chunk`]s of call `id`.
struct Chunks<'a> {
    worker: &'a Worker,
    id: u64,
    buffer: Vec<u8>,
}

impl io::Write for Chunks<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buffer.len();
        let taken = bytes.len().min(room);
        self.buffer.extend_from_slice(&bytes[..taken]);
        if self.buffer.len() == CHUNK {
            self.flush()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK));
        self.worker.send(&FromWorker::Chunk { id: self.id, bytes })
    }
}

/// The door of a run in a worker: each call goes to the parent, which holds the
/// run's tools, and its answer comes back.
struct Relay {
    worker: Arc<Worker>,
    id: u64,
    max: usize,
}

impl Relay {
    fn ask(&self, message: impl FnOnce(u64) -> FromWorker) -> Pending<'_> {
        let call = self.worker.next_call.fetch_add(1, Ordering::Relaxed);
        let (answered, answer) = tokio::sync::oneshot::channel();
        lock(&self.worker.answers).insert(call, answered);
        let sent = self.worker.send(&message(call));
        Box::pin(async move {
            if sent.is_err() {
                lock(&self.worker.answers).remove(&call);
                return Vec::new();
            }
            // An empty frame is a malformed answer the guest's bindings report; the
            // parent answers every call, so this is a parent that went away.
            answer.await.unwrap_or_default()
        })
    }
}

impl Answer for Relay {
    fn max_request(&self) -> usize {
        self.max
    }

    fn refuse(&self, len: usize) -> Pending<'_> {
        let id = self.id;
        self.ask(|call| FromWorker::ToolCallTooLarge {
            id,
            call,
            size: len as u64,
        })
    }

    fn answer<'a>(&'a self, frame: &'a [u8]) -> Pending<'a> {
        let id = self.id;
        self.ask(|call| FromWorker::ToolCall {
            id,
            call,
            frame: frame.to_vec(),
        })
    }
}

/// Carries out one [`FileOp`].
fn files(files: &mut dyn SandboxFiles, op: FileOp) -> Result<Reply> {
    Ok(match op {
        FileOp::Write { path, data } => {
            files.write(&path, &data)?;
            Reply::Done
        }
        FileOp::Read { path, max } => Reply::Bytes(files.read(&path, max)?),
        FileOp::List { path } => {
            Reply::Entries(files.list(&path)?.into_iter().map(Into::into).collect())
        }
        FileOp::Scan { path } => Reply::Scan(wire::scan_to_wire(&files.scan(&path)?)),
        FileOp::Pack { path, max } => Reply::Bytes(files.pack(&path, max)?),
        FileOp::Unpack { path, archive } => {
            files.unpack(&path, &archive)?;
            Reply::Done
        }
        FileOp::Clear { path } => {
            files.clear(&path)?;
            Reply::Done
        }
        FileOp::Stat { path } => Reply::Info(files.stat(&path)?.into()),
        FileOp::MakeDir { path } => Reply::Made(files.make_dir(&path)?),
        FileOp::Remove { path } => {
            files.remove(&path)?;
            Reply::Done
        }
        FileOp::Rename { from, to } => {
            files.rename(&from, &to)?;
            Reply::Done
        }
    })
}
