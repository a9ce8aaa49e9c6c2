//! How long the backend waits on a worker before it takes it for stuck: the timings
//! of the parent's side, in one place so that they can be read against each other.

use std::time::Duration;

/// How long a worker may take to say it is ready.
pub(super) const STARTUP: Duration = Duration::from_secs(30);

/// How long past its time limit a run may go before its worker is taken for stuck
/// and killed (the worker enforces the limit itself; this is the backstop).
pub(super) const STUCK: Duration = Duration::from_secs(30);

/// How often a run waiting on its worker looks at its interrupt.
pub(super) const POLL: Duration = Duration::from_millis(20);

/// How long after a worker failed to start opens say so without trying again.
pub(super) const RETRY: Duration = Duration::from_secs(5);

/// How long any other call may go unanswered before its worker is taken for stuck
/// and killed: longer than anything a worker does (the first open of a runtime
/// compiles it, about 90 s for CPython here).
pub(super) const UNANSWERED: Duration = Duration::from_secs(600);

/// How long a write to a worker may block before the worker is taken for stuck.
pub(super) const WRITE_STALL: Duration = Duration::from_secs(30);
