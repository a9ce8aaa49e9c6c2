//! Waiting for sandlot without holding the GIL, and without going deaf to Ctrl-C.
//!
//! A call from any thread but the main one runs where it is, the GIL released. On the
//! main thread that would leave Python's SIGINT unanswered until the run ended:
//! CPython's handler only notes the signal, and the note is read by the main thread
//! when it next holds the GIL. Two ways out, by what the caller can stop:
//!
//! - A run, which has an [`Interrupt`](sandlot::Interrupt), also runs where it is
//!   ([`interruptible`]): for its length, Python's signal wakeup descriptor is a
//!   socket that a watcher thread reads, and a SIGINT written there sets the run's
//!   interrupt; once the run has stopped, the KeyboardInterrupt CPython noted is
//!   raised, with the session still usable. Handing every run to another thread
//!   instead cost two cross-thread wake-ups, a third of a warm wasm run.
//! - Anything else ([`detached`]) is handed to one long-lived runner thread (a thread
//!   per call would cost more than the call) while the main thread waits in short
//!   slices, checking for signals between them.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use std::cell::Cell;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
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

/// The socket CPython's signal handler writes signal numbers to while a run is on the
/// main thread, and the interrupt of that run; a watcher thread connects the two.
struct Wakeup {
    /// The end handed to `signal.set_wakeup_fd` (non-blocking, as it requires).
    write_end: UnixStream,
    /// The run being waited for, if one is.
    current: Mutex<Option<sandlot::Interrupt>>,
}

static WAKEUP: OnceLock<Option<Wakeup>> = OnceLock::new();

/// The wakeup socket, made with its watcher on first use; `None` if the machine
/// refused a socket pair or a thread (runs then take the hand-off path).
fn wakeup() -> Option<&'static Wakeup> {
    WAKEUP
        .get_or_init(|| {
            let (write_end, mut read_end) = UnixStream::pair().ok()?;
            write_end.set_nonblocking(true).ok()?;
            std::thread::Builder::new()
                .name("sandlot-sigint".into())
                .spawn(move || {
                    let mut signals = [0u8; 64];
                    // Reads until the process ends: the write end lives in a static.
                    while let Ok(read) = read_end.read(&mut signals) {
                        if read == 0 {
                            break;
                        }
                        if signals[..read].contains(&(libc::SIGINT as u8)) {
                            if let Some(wakeup) = WAKEUP.get().and_then(Option::as_ref) {
                                let current = wakeup.current.lock();
                                let current = current.unwrap_or_else(|e| e.into_inner());
                                if let Some(interrupt) = current.as_ref() {
                                    interrupt.interrupt();
                                }
                            }
                        }
                    }
                })
                .ok()?;
            Some(Wakeup {
                write_end,
                current: Mutex::new(None),
            })
        })
        .as_ref()
}

/// `signal.set_wakeup_fd`, looked up once.
fn set_wakeup_fd(py: Python<'_>, fd: i32) -> PyResult<i32> {
    static SET_WAKEUP_FD: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let function = SET_WAKEUP_FD.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("signal")?.getattr("set_wakeup_fd")?.unbind())
    })?;
    let keywords = PyDict::new(py);
    keywords.set_item("warn_on_full_buffer", false)?;
    function.call(py, (fd,), Some(&keywords))?.extract(py)
}

/// Runs `work`, which `interrupt` stops, with the GIL released, and returns what it
/// gave. On the main thread a SIGINT meanwhile sets `interrupt`, and its
/// KeyboardInterrupt is raised once `work` has returned.
///
/// When something else holds Python's wakeup descriptor (an asyncio loop running on
/// the main thread), this takes [`detached`]'s hand-off rather than take it over.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    interrupt: &sandlot::Interrupt,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if !on_main_thread(py) {
        return Ok(py.detach(work));
    }
    let hand_off = |work| {
        let interrupt = interrupt.clone();
        detached(py, move || interrupt.interrupt(), work)
    };
    let Some(wakeup) = wakeup() else {
        return hand_off(work);
    };
    // The run is named before the descriptor is handed over, so a signal the watcher
    // reads always finds it.
    *wakeup.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(interrupt.clone());
    let forget = || *wakeup.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let previous = match set_wakeup_fd(py, wakeup.write_end.as_raw_fd()) {
        Ok(previous) => previous,
        Err(error) => {
            forget();
            return Err(error);
        }
    };
    if previous != -1 {
        // Someone else's descriptor: give it back and wait the slower way.
        forget();
        set_wakeup_fd(py, previous)?;
        return hand_off(work);
    }
    // Put back even if `work` panics; the panic then reaches Python as pyo3 reports it.
    let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| py.detach(work)));
    forget();
    set_wakeup_fd(py, -1)?;
    let value = value.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    // A Ctrl-C during the run stopped it; now it is the caller's KeyboardInterrupt.
    py.check_signals()?;
    Ok(value)
}
