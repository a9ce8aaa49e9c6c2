//! Where code runs: the contract every backend implements, and the backends sandlot
//! ships.
//!
//! A [`Backend`] says what it can do ([`Capabilities`]) and opens [`Sandbox`]es; a
//! sandbox carries out [`RunRequest`]s and hands back an [`Outcome`]. The session
//! above it decides *what* runs (it asks the language handler for the plan and the
//! analysis, and applies the policy); a backend only decides *how*. Nothing here knows
//! about plugins, and only `docker` knows which client library speaks to its engines.
//!
//! A backend can live outside this crate: everything it needs is public. A minimal
//! one, which runs nothing but answers every run with what it was given:
//!
//! ```
//! use sandlot::backend::*;
//! use sandlot::{Outcome, Result};
//!
//! struct Echo;
//!
//! impl Backend for Echo {
//!     fn name(&self) -> BackendName {
//!         BackendName::new("echo").unwrap()
//!     }
//!     fn capabilities(&self, _language: &str) -> Capabilities {
//!         Capabilities::new([Capability::PersistentState])
//!     }
//!     fn supports(&self, _needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
//!         Ok(())
//!     }
//!     fn open(&self, _spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
//!         Ok(Box::new(EchoSandbox(MemoryFiles::default())))
//!     }
//! }
//!
//! struct EchoSandbox(MemoryFiles);
//!
//! impl Sandbox for EchoSandbox {
//!     fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
//!         let Workload::Code(code) = request.workload else {
//!             return Err(request.workload.unsupported(&self.name()));
//!         };
//!         Ok(Outcome { stdout: code.as_bytes().to_vec(), ..Outcome::default() })
//!     }
//!     fn files(&mut self) -> &mut dyn SandboxFiles {
//!         &mut self.0
//!     }
//!     fn name(&self) -> String {
//!         "echo".into()
//!     }
//! }
//! # fn main() -> Result<()> {
//! let plugins = sandlot::PluginHost::builder().no_cache().load()?;
//! let sandlot = sandlot::builder(plugins).backend(std::sync::Arc::new(Echo)).build()?;
//! let mut session = sandlot.session("python").backend("echo").open()?;
//! assert_eq!(session.run("print(1)")?.stdout_text(), "print(1)");
//! # Ok(())
//! # }
//! ```

mod files;
#[doc(hidden)]
pub mod owner;
pub mod pool;

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::language::{KernelSpec, Plan};
use crate::policy::{Network, Policy, PolicyField};
use crate::snapshot::{InterpreterState, StateReader};
use crate::tool::ToolCalls;
use crate::toolchain::Toolchain;
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

pub use crate::artifact::{FileScan, FileStat};
pub use crate::capability::{Capabilities, Capability};
pub use files::{DirEntry, FileInfo, FileKind, ListEntry, Listing, MemoryFiles, SandboxFiles};

/// Runs `future` on `runtime` and waits for it: how the container backends call their
/// async clients from the synchronous contract. Unlike `block_on`, this works from any
/// thread, including an async task's (as when a session is dropped). `None` if the
/// runtime shut down first.
#[doc(hidden)]
pub fn wait<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv().ok()
}

/// A callback that sees a run's output as it is written, up to the run's output cap.
pub type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// A backend's name as users type it (`wasm`, `docker`, `podman`, ...): lower-case
/// ASCII letters, digits and `-`, starting with a letter.
///
/// ```
/// use sandlot::backend::BackendName;
/// assert_eq!(BackendName::new("my-engine2").unwrap().as_str(), "my-engine2");
/// assert!(BackendName::new("My Engine").is_err());
/// assert_eq!(BackendName::DOCKER, "docker");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct BackendName(Cow<'static, str>);

impl BackendName {
    /// The embedded WebAssembly backend.
    pub const WASM: BackendName = BackendName(Cow::Borrowed("wasm"));
    /// Docker Engine.
    pub const DOCKER: BackendName = BackendName(Cow::Borrowed("docker"));
    /// Podman, through its Docker-compatible API.
    pub const PODMAN: BackendName = BackendName(Cow::Borrowed("podman"));
    /// A Kubernetes cluster.
    pub const KUBERNETES: BackendName = BackendName(Cow::Borrowed("kubernetes"));
    /// Linux namespaces on this machine, jailed by bubblewrap: no engine.
    pub const NATIVE: BackendName = BackendName(Cow::Borrowed("native"));

    /// Checks and wraps `name`.
    pub fn new(name: impl Into<String>) -> Result<BackendName> {
        let name = name.into();
        let valid = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(Error::InvalidBackendName { name });
        }
        Ok(BackendName(Cow::Owned(name)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl PartialEq<str> for BackendName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for BackendName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// What a session needs from a backend; `auto` picks the first backend that has it.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Needs<'a> {
    /// The language id.
    pub language: &'a str,
    /// Libraries the runs need.
    pub libraries: &'a [String],
    /// A container image the session names, if it names one.
    pub image: Option<&'a str>,
    /// Capabilities the caller requires.
    pub capabilities: &'a [Capability],
    /// Whether the session would start the language's kernel: a backend with
    /// [`Capability::Kernels`] then keeps state across runs
    /// ([`Capability::PersistentState`]).
    pub kernel: bool,
    /// What the policy lets the code reach: a backend that has no network to give
    /// cannot serve `on` or `allow-list`, whatever else it can do.
    pub network: Network,
    /// Whether the session has tools its code may call: the backend then needs
    /// [`Capability::Tools`].
    pub tools: bool,
}

impl<'a> Needs<'a> {
    /// Needs of a session for `language` and nothing more.
    pub fn language(language: &'a str) -> Needs<'a> {
        Needs {
            language,
            ..Needs::default()
        }
    }

    /// The same needs, with these libraries.
    pub fn with_libraries(self, libraries: &'a [String]) -> Needs<'a> {
        Needs { libraries, ..self }
    }

    /// The same needs, with this image.
    pub fn with_image(self, image: Option<&'a str>) -> Needs<'a> {
        Needs { image, ..self }
    }

    /// The same needs, with these capabilities.
    pub fn with_capabilities(self, capabilities: &'a [Capability]) -> Needs<'a> {
        Needs {
            capabilities,
            ..self
        }
    }

    /// The same needs, for a session that would (or would not) start the language's
    /// kernel.
    pub fn with_kernel(self, kernel: bool) -> Needs<'a> {
        Needs { kernel, ..self }
    }

    /// The same needs, under a policy whose network is `network`.
    pub fn with_network(self, network: Network) -> Needs<'a> {
        Needs { network, ..self }
    }

    /// The same needs, for a session with (or without) tools.
    pub fn with_tools(self, tools: bool) -> Needs<'a> {
        Needs { tools, ..self }
    }

    /// Whether the code itself may reach the network (`on`, `allow-list`); installs
    /// alone (`install-only`) are a backend's business, not the code's.
    pub fn code_reaches_network(&self) -> bool {
        matches!(self.network, Network::On | Network::AllowList)
    }
}

/// What a session on a backend with `capabilities` can do: with a kernel to start
/// and [`Capability::Kernels`], its state persists too, and a run past its limit is
/// interrupted without losing it.
pub fn effective(capabilities: &Capabilities, kernel: bool) -> Capabilities {
    let mut effective = capabilities.clone();
    if kernel && capabilities.has(Capability::Kernels) {
        effective.insert(Capability::PersistentState);
        effective.insert(Capability::Interrupts);
    }
    effective
}

/// Why a backend cannot serve some [`Needs`]: a sentence a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsuitable(pub String);

impl fmt::Display for Unsuitable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks `needs.capabilities` against `capabilities`: the part of
/// [`Backend::supports`] every backend does the same way.
pub fn check_capabilities(
    needs: &Needs<'_>,
    capabilities: &Capabilities,
) -> std::result::Result<(), Unsuitable> {
    let capabilities = effective(capabilities, needs.kernel);
    let tools = needs.tools.then_some(&Capability::Tools);
    let missing: Vec<String> = needs
        .capabilities
        .iter()
        .chain(tools)
        .filter(|c| !capabilities.has(**c))
        .map(|c| c.to_string())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Unsuitable(format!("it cannot do {}", missing.join(", "))))
    }
}

/// What a sandbox is, fixed when it is made: the identity a pool would key on. What
/// can change from one run to the next (environment, time limit, output cap) travels
/// with each [`RunRequest`] instead.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SandboxSpec<'a> {
    /// The language id.
    pub language: &'a str,
    /// The container image (backends without images ignore it).
    pub image: &'a str,
    /// What the sandbox is allowed.
    pub policy: &'a Policy,
    /// Most memory the sandbox may use, in bytes.
    pub memory: usize,
    /// The language's kernel, which runs [`Workload::Code`] on backends with
    /// [`Capability::Kernels`]; `None` for one-shot runs.
    pub kernel: Option<&'a KernelSpec>,
}

impl<'a> SandboxSpec<'a> {
    /// A spec for `language` in `image`, under `policy`, with `memory` bytes, and no
    /// kernel.
    pub fn new(language: &'a str, image: &'a str, policy: &'a Policy, memory: usize) -> Self {
        SandboxSpec {
            language,
            image,
            policy,
            memory,
            kernel: None,
        }
    }

    /// The same spec, with the language's kernel.
    pub fn with_kernel(self, kernel: Option<&'a KernelSpec>) -> Self {
        SandboxSpec { kernel, ..self }
    }
}

/// What one run carries out.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Workload<'a> {
    /// The language handler's plan for the code: files to write, then commands in
    /// order (for backends with [`Capability::RunsPlans`]).
    Plan(&'a Plan),
    /// Code for the sandbox's interpreter, or for the language's kernel (backends
    /// with [`Capability::PersistentState`], or [`Capability::Kernels`] and a kernel in
    /// their [`SandboxSpec`]).
    Code(&'a str),
    /// A shell command line, run with `sh -c` (for backends with [`Capability::Shell`]).
    Shell(&'a str),
}

impl Workload<'_> {
    /// The error a sandbox returns for a workload it does not take.
    pub fn unsupported(&self, backend: &str) -> Error {
        let (capability, what) = match self {
            Workload::Plan(_) => (Capability::RunsPlans, "plans"),
            Workload::Code(_) => (Capability::PersistentState, "interpreter code"),
            Workload::Shell(_) => (Capability::Shell, "shell command lines"),
        };
        Error::BackendCannot {
            backend: backend.to_string(),
            capability,
            hint: format!("it does not run {what}"),
        }
    }
}

/// One run: what to run, and the settings of this run alone.
#[non_exhaustive]
pub struct RunRequest<'a> {
    /// What to run.
    pub workload: Workload<'a>,
    /// Standard input of the program.
    pub stdin: &'a [u8],
    /// Environment of the program (nothing is inherited from the host).
    pub env: &'a [(String, String)],
    /// The names in `env` that are secrets ([`crate::secret`]): for the code, never
    /// for a plan's install or setup commands, which run packages' own code with the
    /// network on.
    pub secret_names: &'a [String],
    /// Working directory, relative to the workspace (`""`: the workspace itself);
    /// checked by the session to have plain components only. A plan's files are
    /// written there too.
    pub workdir: &'a str,
    /// Wall-clock limit; the run returns within about a second of it.
    pub timeout: Duration,
    /// Most bytes of each of stdout and stderr kept and streamed; see
    /// [`stop_threshold`] for when a program that keeps writing is stopped.
    pub max_output: usize,
    /// Sees stdout as it is written, up to the cap.
    pub on_stdout: Option<Sink>,
    /// Sees stderr as it is written, up to the cap.
    pub on_stderr: Option<Sink>,
    /// Whether the interpreter shows the value of the code's last expression
    /// ([`Workload::Code`] only): a session's runs are cells and show it, a one-shot
    /// run is a program and does not.
    pub last_value: LastValue,
    /// What the program is handed after its own name on its command line
    /// (`sys.argv[1:]`, `process.argv.slice(2)`), for [`Workload::Code`] that runs as
    /// a program; a plan carries its own. Empty: the interpreter's argv is left as it
    /// is.
    pub args: &'a [String],
    /// Stops the run when set, as its time limit would; it then ends with
    /// [`EndReason::Interrupted`].
    pub interrupt: Option<&'a Interrupt>,
    /// The tools the code may call during this run, on a backend with
    /// [`Capability::Tools`]: it hands every request frame that comes out of the
    /// sandbox to [`ToolCalls::answer`] and sends the answer back in. `None`: the
    /// session has no tools, and a call finds none.
    pub tools: Option<std::sync::Arc<ToolCalls>>,
}

/// Whether a run of [`Workload::Code`] shows the value of the code's last expression.
///
/// A notebook cell, Python's and Node's REPLs show it (`1 + 1` prints `2`); `python3
/// FILE` and `node FILE` do not (`f.write("hi")` prints nothing). A backend whose
/// interpreter shows values hides it for [`LastValue::Hidden`], so that a one-shot
/// run prints what the program prints and nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LastValue {
    /// Shown, as in a notebook cell: the runs of a session.
    #[default]
    Shown,
    /// Not shown, as when the code is a program file: one-shot runs.
    Hidden,
}

impl<'a> RunRequest<'a> {
    /// A request for `workload` with no input, no environment, in the workspace, with
    /// the default time limit (30 s) and output cap (1 MiB), no streaming, no
    /// arguments, no tools, and the last value shown.
    pub fn new(workload: Workload<'a>) -> RunRequest<'a> {
        RunRequest {
            workload,
            stdin: b"",
            env: &[],
            secret_names: &[],
            workdir: "",
            timeout: Duration::from_secs(30),
            max_output: 1 << 20,
            on_stdout: None,
            on_stderr: None,
            last_value: LastValue::Shown,
            args: &[],
            interrupt: None,
            tools: None,
        }
    }
}

/// How many bytes a program may write to one stream before it is stopped: twice the
/// cap, and at least a mebibyte past it. Up to the cap, output is kept and streamed;
/// between the cap and this, it is read and dropped (the run is marked truncated);
/// past this, the program is stopped and the run ends with
/// [`EndReason::OutputLimit`].
///
/// ```
/// assert_eq!(sandlot::backend::stop_threshold(1 << 20), 2 << 20);
/// assert_eq!(sandlot::backend::stop_threshold(10), 10 + (1 << 20));
/// ```
pub fn stop_threshold(max_output: usize) -> u64 {
    let cap = max_output as u64;
    cap.saturating_mul(2).max(cap.saturating_add(1 << 20))
}

/// A duration as milliseconds, in the JSON forms of runs.
#[doc(hidden)]
pub fn millis<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1e3)
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EndReason {
    /// The program finished by itself, whatever its exit code.
    #[default]
    Completed,
    /// It ran past its time limit and was stopped.
    TimedOut {
        /// The limit, in milliseconds in JSON.
        #[serde(rename = "limit_ms", serialize_with = "millis")]
        limit: Duration,
    },
    /// It used more memory than the sandbox allows and was stopped.
    MemoryLimit,
    /// It kept writing past the output cap and was stopped.
    OutputLimit,
    /// Its caller interrupted it ([`Interrupt`]: Ctrl-C in the REPL).
    Interrupted,
    /// A signal the host did not send ended it (a crash, or it killed itself).
    Killed {
        /// The signal number.
        signal: i32,
    },
    /// The sandbox itself failed (its agent went away, its interpreter crashed).
    SandboxLost {
        /// What happened.
        cause: String,
    },
}

impl EndReason {
    /// The exit code a shell would give for this end, if it overrides the program's:
    /// 124 after a timeout (as `timeout` gives), 137 at the memory cap (a SIGKILL),
    /// 141 at the output cap (a writer whose pipe was closed, SIGPIPE), 130 when
    /// interrupted (as after Ctrl-C), so that no two share a code.
    ///
    /// ```
    /// use sandlot::EndReason;
    /// assert_eq!(EndReason::OutputLimit.exit_code(), Some(141));
    /// assert_eq!(EndReason::Completed.exit_code(), None);
    /// ```
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            EndReason::TimedOut { .. } => Some(124),
            EndReason::MemoryLimit => Some(137),
            EndReason::OutputLimit => Some(141),
            EndReason::Interrupted => Some(130),
            _ => None,
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Completed => f.write_str("completed"),
            EndReason::TimedOut { limit } => {
                write!(
                    f,
                    "stopped at its time limit of {:.1} s",
                    limit.as_secs_f64()
                )
            }
            EndReason::MemoryLimit => f.write_str("stopped at the memory cap"),
            EndReason::OutputLimit => f.write_str("stopped for writing far past the output cap"),
            EndReason::Interrupted => f.write_str("interrupted"),
            EndReason::Killed { signal } => write!(f, "killed by signal {signal}"),
            EndReason::SandboxLost { cause } => write!(f, "the sandbox was lost: {cause}"),
        }
    }
}

/// What a session is after a run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SessionState {
    /// It goes on with everything it had.
    #[default]
    Open,
    /// Its interpreter had to be started again: variables and imports are gone, files
    /// are kept.
    Restarted {
        /// Why.
        reason: String,
    },
    /// It can run nothing more.
    Ended {
        /// Why.
        reason: String,
    },
}

/// What a run gave, before the session adds artifacts, findings and timing. Build one
/// with `..Outcome::default()` for the fields a backend does not set.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Standard output, up to the cap.
    pub stdout: Vec<u8>,
    /// Standard error, up to the cap.
    pub stderr: Vec<u8>,
    /// Whether stdout went past the cap.
    pub stdout_truncated: bool,
    /// Whether stderr went past the cap.
    pub stderr_truncated: bool,
    /// Exit code of the program (124 after a timeout, 137 at the memory cap).
    pub exit_code: i32,
    /// Why it ended.
    pub end: EndReason,
    /// What the session is now.
    pub session: SessionState,
    /// What an egress allow-list refused during the run.
    pub egress_denied: Vec<crate::egress::Denial>,
}

impl Outcome {
    /// An outcome for a run the sandbox could not carry out because it is gone.
    pub fn lost(cause: impl Into<String>) -> Outcome {
        let cause = cause.into();
        Outcome {
            exit_code: 137,
            end: EndReason::SandboxLost {
                cause: cause.clone(),
            },
            session: SessionState::Ended { reason: cause },
            ..Outcome::default()
        }
    }
}

/// One sandbox: runs code, holds files.
pub trait Sandbox: Send {
    /// Carries out one run. Errors are for runs that could not start (a bad request);
    /// a program that fails, hits a limit or loses the sandbox is an [`Outcome`].
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome>;
    /// The sandbox's files, below its workspace.
    fn files(&mut self) -> &mut dyn SandboxFiles;
    /// The engine's name for the sandbox (a container's name), for logs and `gc`.
    fn name(&self) -> String;
    /// Starts the sandbox's interpreter afresh, dropping the variables and imports
    /// earlier runs left while keeping their files, for a one-shot session on a
    /// backend with [`Capability::PersistentState`]. The default does nothing: a
    /// sandbox that runs each program as a process keeps no such state.
    fn reset(&mut self) -> Result<()> {
        Ok(())
    }
    /// Writes the interpreter's whole state to `out`, for a snapshot, and says what it
    /// is, for [`Backend::restore`]; called between runs only. `Ok(None)` (the default):
    /// this backend keeps no interpreter state in snapshots, and wrote nothing.
    fn capture(&mut self, _out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        Ok(None)
    }
    /// [`Sandbox::capture`] for a snapshot that never leaves the process (a fork's,
    /// a warm start's base), which [`Backend::restore`] reads back here only: a
    /// backend may write it in the form that restores fastest (the wasm backend writes
    /// the whole memory, to map it in one piece). The default is `capture`.
    fn capture_here(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture(out)
    }
    /// Hands the session's secrets bound to hosts to the sandbox's egress proxy, which
    /// puts each value into requests to its hosts where the placeholder is, from the
    /// next request on; replaces what an earlier session of a pooled sandbox bound.
    /// The default does nothing: a sandbox with no egress proxy has no request a
    /// value could be put into, and its code holds the placeholders only.
    fn bind_secrets(&mut self, _secrets: std::sync::Arc<crate::secret::Injector>) {}
    /// Lets the sandbox's egress proxy through, from the next request on, only the
    /// requests `rules` allow to the hosts they name ([`crate::egress::RequestRules`]),
    /// replacing the rules before. The default takes none: a sandbox without an
    /// egress proxy of sandlot's cannot read its requests (and refuses the allow-list
    /// rules go with).
    fn set_request_rules(&mut self, rules: &crate::egress::RequestRules) -> Result<()> {
        if rules.is_empty() {
            return Ok(());
        }
        Err(Error::BackendCannot {
            backend: self.name(),
            capability: Capability::NetworkControl,
            hint: "request rules are read by sandlot's egress proxy: use a backend that \
                   takes an allow-list (docker or podman on this machine, native)"
                .into(),
        })
    }
}

/// A place to run code.
pub trait Backend: Send + Sync {
    /// The name users choose it by.
    fn name(&self) -> BackendName;
    /// What it can do for `language`.
    fn capabilities(&self, language: &str) -> Capabilities;
    /// Whether it can serve `needs`, and if not, why (for `auto` and for errors).
    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable>;
    /// Makes a sandbox.
    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>>;
    /// The restrictions of `policy` this backend does not apply (each execution says
    /// so in [`crate::Execution::unenforced`]). Default: it applies them all.
    fn unenforced(&self, _policy: &Policy) -> Vec<PolicyField> {
        Vec::new()
    }
    /// Whether a sandbox's workspace is host memory that its memory limit does not
    /// count (the wasm backend's workspaces are each a tmpfs of the policy's
    /// `workdir_size`): what a sandbox may hold is then its memory limit and its
    /// workspace together, and a server counts both against its memory budget.
    /// Default: no (a container's tmpfs is charged to its own memory limit).
    fn workspace_in_memory(&self) -> bool {
        false
    }
    /// What `sandlot doctor` says about where this backend runs: the engine and its
    /// version, and whether the isolation it relies on is in force there. Default:
    /// nothing to check.
    fn checks(&self) -> Vec<Check> {
        Vec::new()
    }
    /// The interpreter or compiler it runs `language` with, and the libraries that come
    /// with it, for a sandbox of `image` where the backend runs images. `Ok(None)`: the
    /// backend cannot tell without running code (the default).
    fn toolchain(&self, _language: &str, _image: &str) -> Result<Option<Toolchain>> {
        Ok(None)
    }
    /// A sandbox like [`Backend::open`]'s whose interpreter is the one `state` describes,
    /// read from `bytes` (what [`Sandbox::capture`] wrote), under `spec`'s policy and
    /// limits. The workspace's files are put back afterwards. Default: this backend
    /// captures no interpreter state, so it restores none.
    fn restore(
        &self,
        _spec: &SandboxSpec<'_>,
        _state: &InterpreterState,
        _bytes: &mut StateReader<'_>,
    ) -> Result<Box<dyn Sandbox>> {
        Err(Error::BackendCannot {
            backend: self.name().to_string(),
            capability: Capability::SnapshotMemory,
            hint: "it keeps no interpreter state in snapshots; restore the files alone \
                   (`Session::snapshot_files`)"
                .into(),
        })
    }
}

/// One fact [`Backend::checks`] found about where a backend runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Check {
    /// What was checked (`engine`, `seccomp`, `user namespaces`, ...).
    pub topic: String,
    /// Whether it is as sandlot wants it.
    pub state: CheckState,
    /// What was found.
    pub detail: String,
    /// What to do about it, for a gap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Check {
    /// Something in order.
    pub fn ok(topic: &str, detail: impl Into<String>) -> Check {
        Check {
            topic: topic.to_string(),
            state: CheckState::Ok,
            detail: detail.into(),
            hint: None,
        }
    }

    /// A gap: what is missing, and what to do.
    pub fn gap(topic: &str, detail: impl Into<String>, hint: impl Into<String>) -> Check {
        Check {
            topic: topic.to_string(),
            state: CheckState::Gap,
            detail: detail.into(),
            hint: Some(hint.into()),
        }
    }
}

/// Whether a [`Check`] found things in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CheckState {
    /// As it should be.
    Ok,
    /// Something sandlot would use is missing; the sandbox still works, with less.
    Gap,
}
