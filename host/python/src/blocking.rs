//! Waiting for sandlot without holding the GIL, and without going deaf to Ctrl-C.
//!
//! A call from any thread but the main one runs where it is, the GIL released. On the
//! main thread that would leave Python's SIGINT unanswered until the run ended:
//! CPython's handler only notes the signal, and the note is read by the main thread
//! when it next holds the GIL. So the main thread hands the work to one long-lived
//! runner thread (a thread per call would cost more than a warm wasm run) and waits
//! for it in short slices, checking for signals between them; a KeyboardInterrupt sets
//! the run's [`Interrupt`](sandlot::Interrupt), waits for the run to stop, and is
//! raised then, with the session still usable.

use pyo3::prelude::*;
use std::cell::Cell;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How often a waiting main thread looks for signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

type Job = Box<dyn FnOnce() + Send>;

/// The runner's queue: one thread, since only the main thread sends to it.
static RUNNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

fn runner() -> &'static Mutex<mpsc::Sender<Job>> {
    RUNNER.get_or_init(|| {
        let (send, receive) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandlot-runner".into())
            .spawn(move || {
                for job in receive {
                    job();
                }
            })
            .expect("spawning sandlot's runner thread");
        Mutex::new(send)
    })
}

thread_local! {
    /// Whether this is Python's main thread, asked of `threading` once per thread.
    static ON_MAIN: Cell<Option<bool>> = const { Cell::new(None) };
}

fn on_main_thread(py: Python<'_>) -> bool {
    ON_MAIN.with(|known| {
        if let Some(main) = known.get() {
            return main;
        }
        let main = (|| -> PyResult<bool> {
            let threading = py.import("threading")?;
            let current = threading.call_method0("current_thread")?;
            Ok(current.is(&threading.call_method0("main_thread")?))
        })()
        .unwrap_or(false);
        known.set(Some(main));
        main
    })
}

/// Runs `work` with the GIL released and returns what it gave. On the main thread a
/// signal's exception (KeyboardInterrupt) first calls `interrupt` — which must make
/// `work` return soon — then, once `work` has returned, is raised; a second signal
/// while waiting for that stops the wait.
pub(crate) fn detached<T: Send + 'static>(
    py: Python<'_>,
    interrupt: impl Fn(),
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if !on_main_thread(py) {
        return Ok(py.detach(work));
    }
    let (send, receive) = mpsc::sync_channel::<T>(1);
    let receive = Mutex::new(receive);
    let job: Job = Box::new(move || {
        // A panic must not take the runner with it: the waiter sees the channel
        // close. And the waiter may have stopped waiting after a second Ctrl-C;
        // then nobody wants the result.
        if let Ok(value) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            let _ = send.send(value);
        }
    });
    runner()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send(job)
        .map_err(|_| {
            pyo3::exceptions::PyRuntimeError::new_err("sandlot's runner thread is gone")
        })?;
    let mut signalled: Option<PyErr> = None;
    loop {
        // Behind a lock only to cross into `detach`, which wants `Sync`; uncontended.
        let waited = py.detach(|| {
            let receive = receive.lock().unwrap_or_else(|e| e.into_inner());
            receive.recv_timeout(SIGNAL_CHECK)
        });
        match waited {
            Ok(value) => {
                return match signalled {
                    Some(error) => Err(error),
                    None => Ok(value),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The work panicked on the runner thread.
                return Err(signalled.unwrap_or_else(|| {
                    pyo3::exceptions::PyRuntimeError::new_err(
                        "sandlot failed inside (a panic on its runner thread); this is a bug",
                    )
                }));
            }
        }
        if let Err(error) = py.check_signals() {
            if signalled.is_some() {
                return Err(error);
            }
            interrupt();
            signalled = Some(error);
        }
    }
}
