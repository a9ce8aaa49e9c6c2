//! Where code runs. A [`Backend`] opens sessions; a [`BackendSession`] runs code in
//! one sandbox. Only this module knows which engine is behind them.

pub mod wasm;

use crate::error::Result;
use std::path::Path;
use std::time::Duration;

pub use wasm::capture::Sink;

/// What a backend needs to open a session.
pub struct SessionSpec<'a> {
    /// Language id of the session.
    pub language: &'a str,
    /// Host directory that becomes the sandbox's working directory (`/workspace`).
    pub workdir: &'a Path,
    /// Most memory the sandbox may use, in bytes.
    pub memory: usize,
    /// Most bytes kept of each of stdout and stderr per run.
    pub max_output: usize,
    /// Environment of the sandbox; nothing is inherited from the host.
    pub env: &'a [(String, String)],
}

/// One run.
pub struct RunRequest<'a> {
    /// The code.
    pub code: &'a str,
    /// Standard input.
    pub stdin: &'a [u8],
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Sees stdout as it is written.
    pub on_stdout: Option<Sink>,
    /// Sees stderr as it is written.
    pub on_stderr: Option<Sink>,
}

/// What a run gave, before the session adds artifacts and timing.
#[derive(Debug, Default)]
pub struct RawOutput {
    /// Standard output, up to the cap.
    pub stdout: Vec<u8>,
    /// Standard error, up to the cap.
    pub stderr: Vec<u8>,
    /// Whether stdout went past the cap.
    pub stdout_truncated: bool,
    /// Whether stderr went past the cap.
    pub stderr_truncated: bool,
    /// Exit code.
    pub exit_code: i32,
    /// Whether the wall-clock limit stopped it.
    pub timed_out: bool,
    /// Whether the memory cap stopped it.
    pub memory_exceeded: bool,
    /// Set when the sandbox can run nothing more, and why.
    pub ended: Option<String>,
}

/// A sandbox that runs code.
pub trait BackendSession: Send {
    /// Runs one piece of code.
    fn run(&mut self, request: RunRequest<'_>) -> Result<RawOutput>;
    /// Which of `libraries` this sandbox cannot provide.
    fn missing_libraries(&self, libraries: &[String]) -> Vec<String>;
}

/// A place to run code.
pub trait Backend: Send + Sync {
    /// Short name, e.g. `wasm`.
    fn name(&self) -> &'static str;
    /// Whether this backend can run `language`.
    fn serves(&self, language: &str) -> bool;
    /// Opens a sandbox.
    fn open(&self, spec: &SessionSpec<'_>) -> Result<Box<dyn BackendSession>>;
}
