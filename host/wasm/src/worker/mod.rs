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

#[doc(hidden)]
pub(crate) mod fuzzing;
mod limits;
mod options;
mod pinning;
mod pool;
mod process;
mod remote;
mod serve;
mod wire;

pub use options::WorkerOptions;
pub use serve::serve_if_asked;

#[cfg(test)]
mod tests;
