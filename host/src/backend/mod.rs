//! Where code runs. A [`Backend`] opens sessions; a [`BackendSession`] runs code in
//! one sandbox. Only this module knows which engine is behind them.

pub mod docker;
pub mod wasm;

use crate::artifact::Snapshot;
use crate::error::Result;
use crate::plugin::LanguageHandler;
use crate::policy::Policy;
use std::path::Path;
use std::time::Duration;

pub use wasm::capture::Sink;

/// What a backend needs to open a session.
pub struct SessionSpec<'a> {
    /// Language id of the session.
    pub language: &'a str,
    /// Host directory that becomes the sandbox's working directory (`/workspace`);
    /// empty for backends that keep files inside the sandbox.
    pub workdir: &'a Path,
    /// Most memory the sandbox may use, in bytes.
    pub memory: usize,
    /// Most bytes kept of each of stdout and stderr per run.
    pub max_output: usize,
    /// Environment of the sandbox; nothing is inherited from the host.
    pub env: &'a [(String, String)],
    /// The language's handler, for backends that run its plans.
    pub handler: &'a LanguageHandler,
    /// What the sandbox is allowed.
    pub policy: &'a Policy,
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
    /// Libraries to install first (backends that run plans).
    pub libraries: &'a [String],
    /// Whether the plan should include the plot prelude (backends that run plans).
    pub capture_plots: bool,
}

/// Files that live inside the sandbox rather than in a host directory. Paths are
/// relative to the working directory and already checked to have normal components
/// only; the sandbox still refuses any symbolic link on the way.
pub trait SandboxFiles {
    /// Writes a file, creating its parent directories.
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()>;
    /// Reads a regular file of at most `max` bytes.
    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>>;
    /// Names in a directory (`""` for the working directory); directories end with `/`.
    fn list(&mut self, path: &str) -> Result<Vec<String>>;
    /// Every regular file under a directory, for artifact collection.
    fn scan(&mut self, path: &str) -> Result<Snapshot>;
    /// A tar of a file or of a directory's contents, links left out, at most `max` bytes.
    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>>;
    /// Unpacks a tar of regular files and directories into directory `path`.
    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()>;
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
    /// The sandbox's files, when they are not in the host directory given at open.
    fn files(&mut self) -> Option<&mut dyn SandboxFiles> {
        None
    }
    /// Whether each run executes the handler's whole plan (files, installs, plot
    /// prelude, commands) rather than feeding code to a long-lived interpreter.
    fn runs_plans(&self) -> bool {
        false
    }
    /// Runs `request.code` as a shell command line (`sh -c`).
    fn shell(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        let _ = request;
        Err(crate::Error::InvalidInput(
            "this backend has no shell to run commands in; open the session on a container \
             backend (docker or podman) to run shell commands"
                .into(),
        ))
    }
    /// The engine's name for the sandbox (a container name), if it has one.
    fn sandbox_name(&self) -> Option<&str> {
        None
    }
}

/// A place to run code.
pub trait Backend: Send + Sync {
    /// Short name, e.g. `wasm`.
    fn name(&self) -> &'static str;
    /// Whether this backend can run `language`.
    fn serves(&self, language: &str) -> bool;
    /// Opens a sandbox.
    fn open(&self, spec: &SessionSpec<'_>) -> Result<Box<dyn BackendSession>>;
    /// Whether the sandbox's working directory is a host directory the session must
    /// provide ([`SessionSpec::workdir`]); when not, that path is empty.
    fn uses_host_workdir(&self) -> bool {
        true
    }
}
