//! The embedded backend: code runs in an interpreter that is itself WebAssembly,
//! under wasmtime, inside this process. No daemon, no container.
//!
//! Isolation the host applies to every sandbox: one preopened, writable workspace of
//! its own, the runtime's files read-only, no sockets, no inherited environment, a
//! memory cap, a wall-clock limit and capped output.
//!
//! **Time limits hold even when the guest waits in the host** (`time.sleep`, a poll):
//! guests run asynchronously, so a run that reaches its limit inside a host call is
//! abandoned there, and one that computes is stopped by epoch interruption. Either
//! way the interpreter cannot be trusted afterwards: the sandbox starts a fresh one in
//! the same workspace and the run says so ([`SessionState::Restarted`]): variables
//! are gone, files stay.

mod capture;
mod catalog;
mod component;
mod door;
mod input;
pub mod module;
mod prefault;
mod preview1;
mod program;
mod quota;
mod snapshot;
mod state_access;
mod workspace;

pub mod provider;
pub mod runtimes;
pub mod worker;

pub use provider::WasmProvider;
pub use worker::WorkerOptions;

/// Entry points for the fuzz targets in `host/fuzz`; not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    /// A runtime's manifest.
    pub fn runtime_manifest(text: &str) {
        let _ = crate::module::RuntimeManifest::parse(text, std::path::Path::new("/fuzz"));
    }

    /// What a worker process sends its backend: framing and messages.
    pub fn worker_frames(bytes: &[u8]) {
        crate::worker::fuzzing::frames(bytes);
    }
}

mod backend;
mod interpreter;
mod sandbox;

pub use backend::WasmBackend;
pub use catalog::{FoundRuntime, RuntimeDescription, RuntimeKind};
