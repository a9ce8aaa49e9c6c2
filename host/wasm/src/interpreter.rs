//! What drives an interpreter of the wasm backend, whatever it is (a component or a
//! WASI preview-1 module): the `Interpreter` a sandbox runs code in, its standard
//! streams, and the calls into wasmtime that hold a run to its limits (epoch deadlines,
//! an abandoned host call, a trap read as what ended the run).

use crate::capture::{Capture, Captured};
use crate::door;
use crate::input::Feed;
use sandlot_core::error::Result;
use sandlot_core::interrupt::Interrupt;
use sandlot_core::snapshot::MemoryFacts;
use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use wasmtime::UpdateDeadline;
use wasmtime_wasi::I32Exit;

/// How long opening an interpreter may take (instantiation, `_initialize`, setup).
pub(crate) const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long past its limit a run blocked in a host call is given before it is
/// abandoned. A computing guest is stopped at the limit itself.
const HOST_CALL_SLACK: Duration = Duration::from_millis(100);

/// How often a run with an [`Interrupt`] checks it, in epoch ticks (50 ms) while the
/// guest computes, and as a duration while it waits in a host call.
const INTERRUPT_TICKS: u64 = 10;
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// The I/O runtime the guests' WASI calls (timers, pollables) run on.
pub(crate) fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-wasm-io")
            .enable_all()
            .build()
            .expect("cannot start the wasm backend's I/O runtime")
    })
}

/// Runs `future` to completion on the calling thread. Called from inside an async
/// runtime (which must not be blocked from within), it runs on a thread of its own.
fn drive<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return io_runtime().block_on(future);
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| io_runtime().block_on(future))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Calls into a guest with a wall-clock limit: `None` when the guest was still waiting
/// in a host call `HOST_CALL_SLACK` past `timeout`, or when `interrupt` was set while
/// it waited there, and it was abandoned there. (A computing guest is stopped by the
/// epoch deadline [`arm`] sets.)
pub(crate) fn call<T: Send>(
    timeout: Duration,
    interrupt: Option<&Interrupt>,
    future: impl Future<Output = wasmtime::Result<T>> + Send,
) -> Option<wasmtime::Result<T>> {
    drive(async move {
        let interrupted = async {
            match interrupt {
                Some(interrupt) => {
                    while !interrupt.is_interrupted() {
                        tokio::time::sleep(INTERRUPT_POLL).await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = tokio::time::timeout(timeout.saturating_add(HOST_CALL_SLACK), future) => {
                done.ok()
            }
            () = interrupted => None,
        }
    })
}

/// Sets `store`'s epoch deadline for a run: `timeout` from now, and with an
/// `interrupt`, checked every [`INTERRUPT_TICKS`] as well. Either way the guest traps
/// with [`Trap::Interrupt`]. After the run, [`disarm`] puts back the plain deadline
/// every other call into the guest sets for itself.
pub(crate) fn arm<T: 'static>(
    store: &mut wasmtime::Store<T>,
    timeout: Duration,
    interrupt: Option<&Interrupt>,
) {
    use sandlot_core::wasmtime_engine as engine;
    match interrupt {
        None => {
            store.epoch_deadline_trap();
            store.set_epoch_deadline(engine::ticks(timeout));
        }
        Some(interrupt) => {
            let interrupt = interrupt.clone();
            let end = Instant::now() + timeout;
            store.epoch_deadline_callback(move |_| {
                Ok(if interrupt.is_interrupted() || Instant::now() >= end {
                    UpdateDeadline::Interrupt
                } else {
                    UpdateDeadline::Continue(INTERRUPT_TICKS)
                })
            });
            store.set_epoch_deadline(INTERRUPT_TICKS);
        }
    }
}

/// Undoes [`arm`]: the store traps at whatever deadline the next call sets.
pub(crate) fn disarm<T: 'static>(store: &mut wasmtime::Store<T>) {
    store.epoch_deadline_trap();
}

/// How a call into an interpreter ended.
pub(crate) enum Ran {
    /// The code ran to its end. `quit`: it also ended the interpreter (`quit()`,
    /// `process.exit`), so a new one is needed.
    Returned { exit_code: i32, quit: bool },
    /// It was still waiting in a host call past its limit, and was abandoned.
    Deadline,
    /// It trapped: a crash, the epoch deadline, the memory cap, an output flood.
    Trapped {
        error: wasmtime::Error,
        memory_hit: bool,
    },
    /// The interpreter is gone already.
    Gone,
    /// The run could not start.
    Refused(String),
}

/// A trap that is really the program exiting (`proc_exit`), or a real trap.
pub(crate) fn exited(error: wasmtime::Error, memory_hit: bool, ends_interpreter: bool) -> Ran {
    match error.downcast_ref::<I32Exit>() {
        Some(exit) => Ran::Returned {
            exit_code: exit.0,
            quit: ends_interpreter,
        },
        None => Ran::Trapped { error, memory_hit },
    }
}

/// One interpreter: a runtime instance (or, for commands, one per run).
pub(crate) trait Interpreter: Send {
    /// Runs `code` with a wall-clock limit, stopped early when `interrupt` is set;
    /// output goes to the sandbox's [`Stdio`].
    fn run(&mut self, code: &str, timeout: Duration, interrupt: Option<&Interrupt>) -> Ran;

    /// Sets environment variables through the runtime's own export; `None` when it has
    /// none (the host then uses the manifest's `set_env` code, if any).
    fn set_env(&mut self, _env: &[(String, String)]) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Changes the working directory through the runtime's own export; `None` when it
    /// has none (the host then uses the manifest's `set_cwd` code, if any).
    fn set_cwd(&mut self, _path: &str) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Hands the next runs' program `args` on its command line, where the runtime has
    /// one (a command module); `None` when it has none (the host then uses the
    /// runtime's [`program::ProgramForm`], if sandlot knows one).
    fn set_args(&mut self, _args: &[String]) -> Option<std::result::Result<(), String>> {
        None
    }

    /// Writes the interpreter's memory for a snapshot (see [`snapshot`]), `whole` for
    /// one that stays in this process. `None`: this kind of runtime cannot be captured.
    fn capture(
        &mut self,
        _out: &mut dyn std::io::Write,
        _whole: bool,
    ) -> Option<Result<CapturedState>> {
        None
    }
}

/// What [`Interpreter::capture`] wrote, and what it keeps beside the memory.
pub(crate) struct CapturedState {
    pub(crate) memory: MemoryFacts,
    /// The values of the mutable globals a component's state access reaches, in its
    /// order (none for a module: its state is its memory alone).
    pub(crate) globals: Vec<u64>,
}

/// A sandbox's standard streams, and the door its tool calls leave by: shared by
/// every interpreter it starts.
#[derive(Clone)]
pub(crate) struct Stdio {
    pub(crate) stdin: Feed,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) door: door::Door,
}

impl Stdio {
    pub(crate) fn new() -> Stdio {
        Stdio {
            stdin: Feed::default(),
            stdout: Capture::new(),
            stderr: Capture::new(),
            door: door::Door::default(),
        }
    }

    /// Starts a run that streams nothing, with empty input.
    pub(crate) fn start(&self, cap: usize) {
        self.stdin.set(b"");
        self.stdout.start(cap, None);
        self.stderr.start(cap, None);
    }

    pub(crate) fn finish(&self) -> (Captured, Captured) {
        (self.stdout.finish(), self.stderr.finish())
    }
}
