//! Stopping a run from outside it: Ctrl-C in the REPL, a caller that gave up waiting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Asks a run to stop now, from another thread or a signal handler; clones share one
/// flag. Hand it to a run in [`RunOptions::interrupt`](crate::RunOptions::interrupt).
///
/// A backend interrupts as it does at the run's time limit, within a tenth of a
/// second: a container kernel interrupts the cell (Python raises `KeyboardInterrupt`)
/// and the session keeps its variables; the wasm backend stops its interpreter, which
/// starts afresh, and the run's [`SessionState`](crate::SessionState) says so. The
/// run ends with [`EndReason::Interrupted`](crate::EndReason::Interrupted), status
/// 130 as a shell gives after Ctrl-C. A flag already set when a run starts stops it at
/// once; [`Interrupt::reset`] clears it for the next run.
///
/// ```no_run
/// # fn main() -> Result<(), sandlot::Error> {
/// use sandlot::{EndReason, Interrupt, RunOptions};
/// use std::time::Duration;
///
/// let sandlot = sandlot::from_environment()?;
/// let mut session = sandlot.session("python").open()?;
/// let interrupt = Interrupt::new();
/// let later = interrupt.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_secs(1));
///     later.interrupt();
/// });
/// let options = RunOptions {
///     interrupt: Some(interrupt),
///     ..RunOptions::default()
/// };
/// let execution = session.run_with("while True: pass", options)?;
/// assert_eq!(execution.end, EndReason::Interrupted);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A handle that has not been used.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Stops the run that has this handle, or the next one to get it.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Interrupt::interrupt`] was called since the last reset.
    pub fn is_interrupted(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Clears the flag, so that the handle can stop another run.
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// The flag itself, for a signal handler that can only set one
    /// (`signal_hook::flag::register(SIGINT, interrupt.flag())`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_reset_clears_it() {
        let interrupt = Interrupt::new();
        let clone = interrupt.clone();
        assert!(!interrupt.is_interrupted());
        clone.interrupt();
        assert!(interrupt.is_interrupted());
        interrupt.flag().store(false, Ordering::SeqCst);
        assert!(!clone.is_interrupted());
        clone.flag().store(true, Ordering::SeqCst);
        interrupt.reset();
        assert!(!clone.is_interrupted());
    }
}
