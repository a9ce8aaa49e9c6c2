//! What both ends agree on outside the messages: how a worker is started and
//! recognised, and how large a frame or a piece may be. One place, so that the
//! parent and the worker cannot disagree.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Bumped whenever a message changes shape.
pub(crate) const VERSION: u32 = 1;

/// The first argument a worker is started with.
pub(crate) const FLAG: &str = "--sandlot-wasm-worker";
/// The variable that names the worker's end of the socket.
pub(crate) const FD_VARIABLE: &str = "SANDLOT_WASM_WORKER_FD";
/// The variable that names the core the worker keeps to, if any.
pub(crate) const CPU_VARIABLE: &str = "SANDLOT_WASM_WORKER_CPU";
/// The variable that holds the worker's [`WorkerConfig`], as JSON.
pub(crate) const CONFIG_VARIABLE: &str = "SANDLOT_WASM_WORKER_CONFIG";

/// What the worker's backend is made of: the parent's own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerConfig {
    pub runtimes_dir: PathBuf,
    pub components: Vec<PathBuf>,
    pub cache_dir: Option<PathBuf>,
}

/// This build, as a worker's handshake names it: parent and worker must match.
pub(crate) fn build() -> String {
    format!("sandlot-wasm {} wire {VERSION}", env!("CARGO_PKG_VERSION"))
}

/// The largest frame either side accepts: a file of the largest upload, with room.
pub(crate) const MAX_FRAME: usize = 256 << 20;

/// The most bytes of a file, an archive or captured state one message carries;
/// more go in pieces of this size.
pub(crate) const CHUNK: usize = 1 << 20;
