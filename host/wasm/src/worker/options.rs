//! What an application chooses of its workers: the one public face of this module
//! that a caller builds, apart from the machinery that honours it.

use std::path::PathBuf;

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
    /// The program started as a worker, with the flag
    /// [`serve_if_asked`](super::serve::serve_if_asked) looks for;
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
