//! Sessions: a sandbox for one language, to run code in as often as you like, getting
//! back what it printed, how it ended and the files it made.
//!
//! A session does the same on every backend: it asks the language handler for the
//! analysis and applies the policy's gate, asks for the plan (for backends that run
//! plans) or installs the plot prelude (for interpreters), hands the run to the
//! backend's sandbox, and collects the artifacts.
//!
//! ```no_run
//! # fn main() -> Result<(), sandlot::Error> {
//! let sandlot = sandlot::from_environment()?;
//! let mut session = sandlot.session("python").open()?;
//! let first = session.run("x = 6 * 7")?;
//! assert!(first.success());
//! let second = session.run("print(x)")?;
//! assert_eq!(second.stdout_text(), "42\n");
//! session.close();
//! # Ok(())
//! # }
//! ```

use crate::artifact::{Artifact, ArtifactLimits, Collected, EarlierOutput, FileScan};
use crate::backend::{
    Backend, BackendName, Capabilities, Capability, FileInfo, LastValue, Needs, Outcome,
    RunRequest, Sandbox, SessionState, Sink, Workload,
};
use crate::backend::{ListEntry, Listing};
use crate::error::{Error, Result};
use crate::execution::Execution;
use crate::language::{Finding, PlanOptions, Restriction};
use crate::layout::Layout;
use crate::plugin::LanguageHandler;
use crate::policy::Policy;
use crate::sandbox_path::SandboxPath;
use crate::secret::Secrets;
use crate::tool::{ToolCall, ToolCalls, ToolLimits, ToolSet};
use crate::toolchain::Toolchain;
use crate::transfer::Copied;
use std::path::Path;

pub(crate) mod gate;
mod namespace;
mod snapshot;
pub(crate) mod warm;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Resource limits of a session. The defaults suit model-written data analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit of one run.
    pub timeout: Duration,
    /// Most memory the sandbox may use.
    pub memory: usize,
    /// Most bytes kept (and streamed) of each of stdout and stderr per run; the rest is
    /// dropped and the execution says so. A program that writes twice as much is
    /// stopped (see [`crate::backend::stop_threshold`]).
    pub max_output: usize,
    /// Bounds on the files handed back per run.
    pub artifacts: ArtifactLimits,
    /// Bounds on the tool calls of a run.
    pub tools: ToolLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory: 1 << 30,
            max_output: 1 << 20,
            artifacts: ArtifactLimits::default(),
            tools: ToolLimits::default(),
        }
    }
}

impl Limits {
    /// The limits in which these allow more than `base`, named as `timeout`,
    /// `memory`, `max_output`, `artifacts.max_files`, `artifacts.max_bytes`,
    /// `tools.max_calls` and the other fields of `tools`: empty when
    /// they are as tight or tighter everywhere. A memory limit of 0 is none at all, the
    /// loosest.
    ///
    /// ```
    /// use sandlot::Limits;
    /// let server = Limits::default();
    /// let shorter = Limits { timeout: server.timeout / 2, ..server };
    /// assert!(shorter.looser_than(&server).is_empty());
    /// let unlimited = Limits { memory: 0, ..server };
    /// assert_eq!(unlimited.looser_than(&server), ["memory"]);
    /// let chatty = Limits {
    ///     tools: sandlot::tool::ToolLimits { max_calls: 1_000_000, ..server.tools },
    ///     ..server
    /// };
    /// assert_eq!(chatty.looser_than(&server), ["tools.max_calls"]);
    /// ```
    pub fn looser_than(&self, base: &Limits) -> Vec<&'static str> {
        let more_memory = base.memory != 0 && (self.memory == 0 || self.memory > base.memory);
        [
            ("timeout", self.timeout > base.timeout),
            ("memory", more_memory),
            ("max_output", self.max_output > base.max_output),
            (
                "artifacts.max_files",
                self.artifacts.max_files > base.artifacts.max_files,
            ),
            (
                "artifacts.max_bytes",
                self.artifacts.max_bytes > base.artifacts.max_bytes,
            ),
            (
                "tools.max_calls",
                self.tools.max_calls > base.tools.max_calls,
            ),
            (
                "tools.max_concurrent",
                self.tools.max_concurrent > base.tools.max_concurrent,
            ),
            (
                "tools.max_argument_bytes",
                self.tools.max_argument_bytes > base.tools.max_argument_bytes,
            ),
            (
                "tools.max_result_bytes",
                self.tools.max_result_bytes > base.tools.max_result_bytes,
            ),
            (
                "tools.call_timeout",
                self.tools.call_timeout > base.tools.call_timeout,
            ),
        ]
        .into_iter()
        .filter_map(|(name, looser)| looser.then_some(name))
        .collect()
    }
}

/// Options of one run.
#[derive(Default)]
pub struct RunOptions {
    /// Libraries the code needs, besides the session's. The wasm backend's runtimes
    /// cannot install any, but have many built in (Python: numpy, pandas, scipy,
    /// scikit-learn, matplotlib, ...); asking for one they lack is an error that says so.
    pub libraries: Vec<String>,
    /// Wall-clock limit, instead of the session's.
    pub timeout: Option<Duration>,
    /// Output cap, instead of the session's.
    pub max_output: Option<usize>,
    /// Environment variables for this run, on top of the session's.
    pub env: Vec<(String, String)>,
    /// Working directory of this run, relative to the workspace (default: the
    /// workspace). Artifacts still come from the workspace's `output/`.
    pub workdir: Option<String>,
    /// Standard input.
    pub stdin: Vec<u8>,
    /// The program's arguments, after its own name (`sys.argv[1:]`,
    /// `process.argv.slice(2)`), as `python3 main.py ARGS` would get them. Only a
    /// one-shot session ([`SessionBuilder::one_shot`](crate::SessionBuilder::one_shot))
    /// runs its code as a program; a kernel's cell has no command line, and asking
    /// for arguments there is [`Error::InvalidRequest`].
    pub args: Vec<String>,
    /// Sees stdout as it is written, up to the output cap.
    pub on_stdout: Option<Sink>,
    /// Sees stderr as it is written, up to the output cap.
    pub on_stderr: Option<Sink>,
    /// Stops the run when set from elsewhere (Ctrl-C, a caller that gave up): see
    /// [`Interrupt`](crate::Interrupt) for what each backend keeps.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// Sees each tool call as it ends, while the run goes on, as
    /// [`Execution::tool_calls`] will hold it (secrets masked).
    pub on_tool_call: Option<crate::tool::ToolCallSink>,
}

/// What a session keeps for all its runs, as its builder set it.
pub(crate) struct Settings {
    pub(crate) limits: Limits,
    pub(crate) policy: Policy,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) secrets: Secrets,
    pub(crate) libraries: Vec<String>,
    /// The language's kernel, if the sandbox was opened with it.
    pub(crate) kernel: Option<crate::language::KernelSpec>,
    /// Whether each run is a program on its own rather than a cell.
    pub(crate) one_shot: bool,
    /// What happens to the output directory's files before each run.
    pub(crate) earlier_output: EarlierOutput,
    /// Libraries the sandbox came with (a pool installed them while warming).
    pub(crate) preinstalled: Vec<String>,
    /// The image the sandbox was made from, where the backend runs images.
    pub(crate) image: String,
    /// The tools the code may call.
    pub(crate) tools: ToolSet,
    /// The key its snapshots are sealed with.
    pub(crate) snapshots: Arc<crate::snapshot::Keeper>,
    /// The handlers command lines are read with.
    pub(crate) readers: Arc<gate::Readers>,
}

/// A sandbox for one language. State (files, and variables where the backend keeps
/// them) persists from one run to the next and is never shared with another session.
/// Dropping it removes the sandbox.
pub struct Session {
    sandbox: Option<Box<dyn Sandbox>>,
    backend: Arc<dyn Backend>,
    /// The image the sandbox was made from, where the backend runs images.
    image: String,
    /// What the backend runs the language with, asked once.
    toolchain: OnceLock<Option<Toolchain>>,
    backend_name: BackendName,
    /// The policy's restrictions the backend cannot apply.
    unenforced: Vec<crate::policy::PolicyField>,
    passed_over: Vec<(BackendName, String)>,
    capabilities: Capabilities,
    handler: LanguageHandler,
    limits: Limits,
    /// The tools the code may call; each run gets its own [`ToolCalls`].
    tools: ToolSet,
    policy: Policy,
    /// The policy's restricted modules and calls of the session's language, handed
    /// to every analysis.
    restricted: Vec<Restriction>,
    env: Vec<(String, String)>,
    /// Given to every run as variables, masked in everything returned.
    secrets: Secrets,
    libraries: Vec<String>,
    /// The language's kernel, if the sandbox runs code in it.
    kernel: Option<crate::language::KernelSpec>,
    /// Whether each run is a program on its own (its last value not shown), rather
    /// than a cell.
    one_shot: bool,
    /// What happens to the output directory's files before each run.
    earlier_output: EarlierOutput,
    /// Whether the handler's plot prelude runs in the sandbox's interpreter now.
    plot_capture: bool,
    /// The key its snapshots are sealed with.
    snapshots: Arc<crate::snapshot::Keeper>,
    /// The handlers command lines are read with.
    readers: Arc<gate::Readers>,
    /// Whether code ran in the sandbox's interpreter since it started: a one-shot
    /// session's next run then starts a fresh one.
    used: bool,
    /// The handler's code that saves figures left open, once asked for.
    plot_flush: Option<Option<String>>,
    /// Libraries installed into the running interpreter's reach so far.
    installed: Vec<String>,
    /// Why the session can run nothing more, once it cannot.
    ended: Option<String>,
    /// The output directory as the last run left it, while nothing else has touched
    /// the sandbox since: the next run's "before" then needs no scan of its own.
    output: Option<FileScan>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("language", &self.handler.info().id)
            .field("backend", &self.backend_name)
            .field("sandbox", &self.sandbox_name())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        sandbox: Box<dyn Sandbox>,
        backend: Arc<dyn Backend>,
        passed_over: Vec<(BackendName, String)>,
        handler: LanguageHandler,
        settings: Settings,
    ) -> Session {
        let Settings {
            limits,
            policy,
            env,
            secrets,
            libraries,
            kernel,
            one_shot,
            earlier_output,
            preinstalled,
            image,
            tools,
            snapshots,
            readers,
        } = settings;
        let capabilities =
            crate::backend::effective(&backend.capabilities(&handler.info().id), kernel.is_some());
        Session {
            sandbox: Some(sandbox),
            backend_name: backend.name(),
            unenforced: backend.unenforced(&policy),
            restricted: policy.restricted.for_language(handler.info()),
            passed_over,
            backend,
            capabilities,
            handler,
            limits,
            policy,
            env,
            secrets,
            libraries,
            kernel,
            one_shot,
            earlier_output,
            plot_capture: false,
            used: false,
            plot_flush: None,
            installed: preinstalled,
            image,
            tools,
            snapshots,
            readers,
            toolchain: OnceLock::new(),
            ended: None,
            // Every backend opens a sandbox with an empty output directory.
            output: Some(FileScan::default()),
        }
    }

    /// The language id.
    pub fn language(&self) -> &str {
        &self.handler.info().id
    }

    /// The backend the session runs on.
    pub fn backend(&self) -> &BackendName {
        &self.backend_name
    }

    /// What masks the session's secrets in what a caller builds from its results
    /// and hands on (events, JSON it decoded from the output): the session masks
    /// what it returns itself, but not what is made of it afterwards.
    pub fn masker(&self) -> crate::secret::Masker {
        crate::secret::Masker::of(&self.secrets)
    }

    /// The most of the host's memory the session's sandbox may hold, in bytes: its
    /// memory limit, and its workspace's size where the workspace is memory that
    /// limit does not count ([`Backend::workspace_in_memory`], the wasm backend).
    /// `u64::MAX` without a memory limit. What a server counts against its memory
    /// budget.
    pub fn memory_bound(&self) -> u64 {
        if self.limits.memory == 0 {
            return u64::MAX;
        }
        let workspace = match self.backend.workspace_in_memory() {
            true => self.policy.workdir_size,
            false => 0,
        };
        (self.limits.memory as u64).saturating_add(workspace)
    }

    /// The restrictions of the session's policy its backend cannot apply.
    pub fn unenforced(&self) -> &[crate::policy::PolicyField] {
        &self.unenforced
    }

    /// What the backend runs the session's code with: the interpreter, its version and
    /// the libraries that come with it ([`Backend::toolchain`]); `None` where the
    /// backend cannot tell. Asked of the backend once per session.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// let sandlot = sandlot::from_environment()?;
    /// let session = sandlot.session("python").open()?;
    /// if let Some(python) = session.toolchain() {
    ///     println!("{python} on {}", session.backend()); // CPython 3.15.0 on wasm
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn toolchain(&self) -> Option<&Toolchain> {
        self.toolchain
            .get_or_init(|| {
                let language = &self.handler.info().id;
                self.backend.toolchain(language, &self.image).ok().flatten()
            })
            .as_ref()
    }

    /// The backends `auto` tried before this one, and why each could not serve the
    /// session (empty when the backend was named).
    pub fn passed_over(&self) -> &[(BackendName, String)] {
        &self.passed_over
    }

    /// What the session can do on its backend: the backend's capabilities, and
    /// [`Capability::PersistentState`] where the backend runs the language's kernel.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The backend's name for the sandbox: the container's name on Docker and Podman
    /// (`sandlot-<id>`); `None` once the session has ended.
    pub fn sandbox_name(&self) -> Option<String> {
        self.sandbox.as_ref().map(|s| s.name())
    }

    fn sandbox(&mut self) -> Result<&mut Box<dyn Sandbox>> {
        let ended = &self.ended;
        self.sandbox.as_mut().ok_or_else(|| Error::SessionEnded {
            reason: ended
                .clone()
                .unwrap_or_else(|| "the session is closed".into()),
        })
    }

    /// Runs `code` with the session's limits.
    pub fn run(&mut self, code: &str) -> Result<Execution> {
        self.run_with(code, RunOptions::default())
    }

    /// Runs `code` with `options`.
    pub fn run_with(&mut self, code: &str, options: RunOptions) -> Result<Execution> {
        let result = self.run_unmasked(code, options);
        self.masked(result)
    }

    /// `result` with the session's secrets masked in its error: a message can quote
    /// what the sandbox wrote (a hook's error output, what an agent answered).
    fn masked<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|error| self.secrets.mask_error(error))
    }

    fn run_unmasked(&mut self, code: &str, options: RunOptions) -> Result<Execution> {
        self.sandbox()?;
        if self.kernel.is_some() && !options.args.is_empty() {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "program arguments ({}) need a one-shot session: this session runs \
                     cells in the {} kernel, which have no command line; open it with \
                     one_shot(true) (`sandlot run`, `/v1/run` and `execute_code` do)",
                    options.args.join(" "),
                    self.language()
                ),
            });
        }
        let findings = self.check(code)?;
        let mut libraries = self.libraries.clone();
        libraries.extend(
            options
                .libraries
                .iter()
                .filter(|l| !self.libraries.contains(l))
                .cloned(),
        );
        if !libraries.is_empty() {
            self.handler.check_libraries(&libraries)?;
            let needs = Needs::language(self.language()).with_libraries(&libraries);
            self.backend
                .supports(&needs)
                .map_err(|why| Error::LibrariesUnavailable {
                    backend: self.backend_name.to_string(),
                    language: self.language().to_string(),
                    reason: why.0,
                })?;
        }
        let env = self.run_env(&options);
        // The language's kernel, or a backend that runs no plans (an interpreter in
        // process), runs the code itself; otherwise the handler plans a program.
        let interpreted = self.kernel.is_some() || !self.capabilities.has(Capability::RunsPlans);
        // Once the prelude runs in the interpreter, every run's figures are flushed:
        // the handler need not be asked (a call costs about 0.1 ms).
        let may_plot = (interpreted && self.plot_capture) || self.handler.may_plot(code)?;
        let workdir = match options.workdir.as_deref().map(dir_path).transpose()? {
            Some(dir) if !dir.is_empty() => format!("{}/{dir}", Layout::WORKSPACE),
            _ => Layout::WORKSPACE.to_string(),
        };
        let plan = if !interpreted {
            Some(self.handler.plan(
                code,
                &libraries,
                &PlanOptions {
                    workdir,
                    output_dir: Layout.output_dir(),
                    capture_plots: may_plot,
                    args: options.args.clone(),
                },
            )?)
        } else {
            // A one-shot run is a program of its own: where the interpreter keeps
            // state (wasm), it starts afresh, and the prelude goes in again.
            if self.one_shot && self.used {
                self.sandbox()?.reset()?;
                self.plot_capture = false;
            }
            self.used = true;
            if let Some(failed) = self.install_libraries(&libraries, &env, &options)? {
                return Ok(failed);
            }
            // The prelude costs milliseconds in an interpreter that has just started,
            // so it runs before the first code that may plot, not when the session
            // opens.
            if may_plot && !self.plot_capture {
                self.install_plot_capture(&env)?;
            }
            None
        };
        let workload = match &plan {
            Some(plan) => Workload::Plan(plan),
            None => Workload::Code(code),
        };
        self.execute(workload, &env, options, findings)
    }

    /// Installs the libraries a run needs that the session's interpreter does not have
    /// yet (a kernel keeps what earlier runs installed). A failed install is the run's
    /// [`Execution`], with the installer's output.
    fn install_libraries(
        &mut self,
        libraries: &[String],
        env: &[(String, String)],
        options: &RunOptions,
    ) -> Result<Option<Execution>> {
        let pending: Vec<String> = libraries
            .iter()
            .filter(|l| !self.installed.contains(l))
            .cloned()
            .collect();
        if pending.is_empty() || !self.capabilities.has(Capability::InstallLibraries) {
            return Ok(None);
        }
        let commands = self.handler.install(&pending, Layout::WORKSPACE)?;
        let plan = crate::language::Plan {
            files: Vec::new(),
            commands,
        };
        let before = self.output_before_run()?;
        let timeout = options.timeout.unwrap_or(self.limits.timeout);
        let max_output = options.max_output.unwrap_or(self.limits.max_output);
        let started = Instant::now();
        let secret_names = self.secrets.names();
        let outcome = self.sandbox()?.run(RunRequest {
            env,
            secret_names: &secret_names,
            timeout,
            max_output,
            ..RunRequest::new(Workload::Plan(&plan))
        })?;
        if outcome.exit_code == 0 && outcome.end == crate::backend::EndReason::Completed {
            self.installed.extend(pending);
            return Ok(None);
        }
        self.finish(outcome, &before, started.elapsed(), Vec::new(), Vec::new())
            .map(Some)
    }

    /// Runs a shell command line with `sh -c` in the sandbox's workspace, as a
    /// terminal would, with the session's limits; pipes, redirections and globs work.
    /// Only backends with [`Capability::Shell`] have a shell (the container backends);
    /// on others this is [`Error::BackendCannot`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// # let sandlot = sandlot::from_environment()?;
    /// let mut session = sandlot.session("python").backend("docker").open()?;
    /// let listing = session.execute_command("python3 --version && ls / | wc -l")?;
    /// assert!(listing.success());
    /// # Ok(())
    /// # }
    /// ```
    pub fn execute_command(&mut self, command_line: &str) -> Result<Execution> {
        self.execute_command_with(command_line, RunOptions::default())
    }

    /// [`Session::execute_command`] with options (`libraries` is not used).
    pub fn execute_command_with(
        &mut self,
        command_line: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let result = self.command_unmasked(command_line, options);
        self.masked(result)
    }

    fn command_unmasked(&mut self, command_line: &str, options: RunOptions) -> Result<Execution> {
        self.sandbox()?;
        if !self.capabilities.has(Capability::Shell) {
            return Err(Error::BackendCannot {
                backend: self.backend_name.to_string(),
                capability: Capability::Shell,
                hint: "it has no shell; open the session on a container backend (docker, \
                       podman or kubernetes)"
                    .into(),
            });
        }
        // A command line is code too: the gate reads it, and what it hands an
        // interpreter, as it reads a run's code.
        let findings = self.check_command(command_line)?;
        let env = self.run_env(&options);
        self.execute(Workload::Shell(command_line), &env, options, findings)
    }

    /// The environment of a run: the session's, the run's, then the secrets.
    fn run_env(&self, options: &RunOptions) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.extend(options.env.iter().cloned());
        env.extend(self.secrets.env());
        env
    }

    /// Hands one run to the sandbox and makes its [`Execution`].
    fn execute(
        &mut self,
        workload: Workload<'_>,
        env: &[(String, String)],
        options: RunOptions,
        findings: Vec<Finding>,
    ) -> Result<Execution> {
        let limits = self.limits;
        let interpreted = matches!(workload, Workload::Code(_));
        let workdir = match &options.workdir {
            Some(dir) => dir_path(dir)?,
            None => String::new(),
        };
        let before = match self.earlier_output {
            EarlierOutput::Clear => {
                self.output = None;
                self.sandbox()?.files().clear(Layout::OUTPUT)?;
                FileScan::default()
            }
            EarlierOutput::Keep => self.output_before_run()?,
        };
        // Streamed output is masked on its way; what a sink holds back (a possible
        // beginning of a secret) follows once the run is over.
        let masked = |sink: Option<Sink>| match sink {
            Some(sink) if !self.secrets.is_empty() => {
                let (sink, flush) = self.secrets.mask_sink(sink);
                (Some(sink), Some(flush))
            }
            sink => (sink, None),
        };
        let (on_stdout, stdout_flush) = masked(options.on_stdout);
        let (on_stderr, stderr_flush) = masked(options.on_stderr);
        let secret_names = self.secrets.names();
        let last_value = match self.one_shot {
            true => LastValue::Hidden,
            false => LastValue::Shown,
        };
        let timeout = options.timeout.unwrap_or(limits.timeout);
        // The session's code calls tools; its installs and preludes do not come here.
        let tools = (!self.tools.is_empty()).then(|| {
            let calls = ToolCalls::new(self.tools.clone(), limits.tools, Instant::now() + timeout);
            Arc::new(match options.on_tool_call {
                Some(sink) if self.secrets.is_empty() => calls.observed(sink),
                Some(sink) => {
                    let secrets = self.secrets.clone();
                    calls.observed(Arc::new(move |call: &ToolCall| {
                        sink(&masked_call(&secrets, call.clone()))
                    }))
                }
                None => calls,
            })
        });
        let sandbox = self.sandbox()?;
        let started = Instant::now();
        let outcome = sandbox.run(RunRequest {
            workload,
            stdin: &options.stdin,
            env,
            secret_names: &secret_names,
            workdir: &workdir,
            timeout,
            max_output: options.max_output.unwrap_or(limits.max_output),
            on_stdout,
            on_stderr,
            last_value,
            args: match interpreted {
                true => &options.args,
                false => &[],
            },
            interrupt: options.interrupt.as_ref(),
            tools: tools.clone(),
        });
        // No call of this run is answered after it, whatever the sandbox left running.
        let tool_calls = tools.map(|calls| calls.finish()).unwrap_or_default();
        if let Ok(outcome) = &outcome {
            if let Some(flush) = stdout_flush {
                flush.flush(outcome.stdout_truncated);
            }
            if let Some(flush) = stderr_flush {
                flush.flush(outcome.stderr_truncated);
            }
        }
        let outcome = outcome?;
        let duration = started.elapsed();
        match &outcome.session {
            SessionState::Open if interpreted => self.flush_plots(env),
            // A new interpreter has no prelude.
            SessionState::Restarted { .. } => self.plot_capture = false,
            _ => {}
        }
        self.finish(outcome, &before, duration, findings, tool_calls)
    }

    /// Collects the artifacts of a run and makes its [`Execution`].
    fn finish(
        &mut self,
        outcome: Outcome,
        before: &FileScan,
        duration: Duration,
        findings: Vec<Finding>,
        tool_calls: Vec<ToolCall>,
    ) -> Result<Execution> {
        let limits = self.limits.artifacts;
        let collected = match (&outcome.session, self.sandbox.as_mut()) {
            (SessionState::Ended { .. }, _) | (_, None) => Collected::default(),
            (_, Some(sandbox)) => {
                let files = sandbox.files();
                match files.scan(Layout::OUTPUT) {
                    Ok(after) => {
                        let found = after.changed_since_with(before, limits, |rel, max| {
                            let path = format!("{}/{}", Layout::OUTPUT, rel.as_str());
                            files.read(&path, max).ok()
                        });
                        self.output = Some(after);
                        found
                    }
                    Err(_) => Collected::default(),
                }
            }
        };
        if let SessionState::Ended { reason } = &outcome.session {
            self.ended = Some(reason.clone());
            self.sandbox = None;
        }
        let secrets = &self.secrets;
        let mut artifacts_refused = collected.refused;
        let mut artifacts: Vec<Artifact> = Vec::with_capacity(collected.artifacts.len());
        for artifact in collected.artifacts {
            if secrets.is_empty() {
                artifacts.push(artifact);
                continue;
            }
            // A name carries a secret out as well as the contents do; two names that
            // mask alike would stand for one file, so the second is refused.
            match secrets.mask_path(&artifact.path) {
                Some(path) if !artifacts.iter().any(|a| a.path == path) => {
                    artifacts.push(Artifact::new(path, secrets.mask(artifact.bytes, false)));
                }
                _ => artifacts_refused += 1,
            }
        }
        Ok(Execution {
            language: self.handler.info().id.clone(),
            stdout: secrets.mask(outcome.stdout, outcome.stdout_truncated),
            stderr: secrets.mask(outcome.stderr, outcome.stderr_truncated),
            exit_code: outcome.exit_code,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
            artifacts_truncated: collected.left_out,
            artifacts_refused,
            duration,
            artifacts,
            findings,
            end: outcome.end,
            session: outcome.session,
            backend: self.backend_name.clone(),
            runs_with: self.toolchain().map(ToString::to_string),
            policy: self.policy.clone(),
            unenforced: self.unenforced.clone(),
            // A denied name can carry a secret out as well as a connection could, in
            // any case: DNS, TLS server names and Host headers fold it.
            egress_denied: outcome
                .egress_denied
                .into_iter()
                .map(|denial| denial.masked(|name| secrets.mask_folded(name)))
                .collect(),
            tool_calls: tool_calls
                .into_iter()
                .map(|call| masked_call(secrets, call))
                .collect(),
        })
    }

    /// Runs the handler's plot prelude in the interpreter, so figures land in the
    /// output directory.
    fn install_plot_capture(&mut self, env: &[(String, String)]) -> Result<()> {
        // A run whose files are not collected: the next run looks for itself.
        self.output = None;
        let Some(prelude) = self.handler.plot_prelude(&Layout.output_dir())? else {
            self.plot_capture = true;
            return Ok(());
        };
        self.host_code(
            &prelude,
            env,
            (Duration::from_secs(60), 64 << 10),
            "the plot prelude",
        )?;
        self.plot_capture = true;
        Ok(())
    }

    /// Runs `code`, the host's own (not through the analysis gate), in the
    /// interpreter with `env` and `limits` (time, output); its stdout, or an error
    /// saying `what` failed and why.
    fn host_code(
        &mut self,
        code: &str,
        env: &[(String, String)],
        limits: (Duration, usize),
        what: &str,
    ) -> Result<String> {
        // A run whose files are not collected: the next run looks for itself.
        self.output = None;
        let outcome = self.sandbox()?.run(RunRequest {
            env,
            timeout: limits.0,
            max_output: limits.1,
            ..RunRequest::new(Workload::Code(code))
        })?;
        if outcome.exit_code != 0 || outcome.session != SessionState::Open {
            return Err(Error::Runtime {
                runtime: self.backend_name.to_string(),
                reason: format!(
                    "{what} failed: {}",
                    String::from_utf8_lossy(&outcome.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&outcome.stdout).into_owned())
    }

    /// The output directory as a run finds it: as the last run left it, if nothing
    /// touched the sandbox since, or scanned. A run that completes is reported even if
    /// the directory cannot be scanned (the code may have replaced it with a file or a
    /// link).
    fn output_before_run(&mut self) -> Result<FileScan> {
        match self.output.take() {
            Some(snapshot) => Ok(snapshot),
            None => Ok(self
                .sandbox()?
                .files()
                .scan(Layout::OUTPUT)
                .unwrap_or_default()),
        }
    }

    /// Saves figures the run left open, as a program's exit would, with the
    /// handler's `plot-flush` code.
    fn flush_plots(&mut self, env: &[(String, String)]) {
        if !self.plot_capture {
            return;
        }
        if self.plot_flush.is_none() {
            let flush = self.handler.plot_flush(&Layout.output_dir()).ok().flatten();
            self.plot_flush = Some(flush);
        }
        let Some(Some(flush)) = &self.plot_flush else {
            return;
        };
        let flush = flush.clone();
        if let Some(sandbox) = self.sandbox.as_mut() {
            let _ = sandbox.run(RunRequest {
                env,
                max_output: 64 << 10,
                ..RunRequest::new(Workload::Code(&flush))
            });
        }
    }

    /// Writes `contents` to `path` (relative to the workspace) in the sandbox.
    pub fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<()> {
        let rel = sandbox_path(path)?;
        self.output = None;
        let written = self.sandbox()?.files().write(rel.as_str(), contents);
        self.masked(written)
    }

    /// Reads `path` (relative to the workspace) from the sandbox, with the session's
    /// secrets masked. A link on the way is refused.
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        let rel = sandbox_path(path)?;
        let read = self.sandbox()?.files().read(rel.as_str(), MAX_READ);
        let bytes = self.masked(read)?;
        Ok(self.secrets.mask(bytes, false))
    }

    /// The entries of directory `path` (relative; `""` or `"."` for the workspace),
    /// sorted, with the session's secrets masked in their names. An entry whose name
    /// cannot be shown safely (not UTF-8, a control character) is left out and
    /// counted in [`Listing::refused`].
    pub fn list_files(&mut self, path: &str) -> Result<Listing> {
        let rel = dir_path(path)?;
        let listed = self.sandbox()?.files().list(&rel);
        let entries = self.masked(listed)?;
        let mut listing = Listing::default();
        for entry in entries {
            let name = SandboxPath::from_path(Path::new(&entry.name))
                .ok()
                .filter(|name| !name.as_str().contains('/'))
                .and_then(|name| self.secrets.mask_path(&name));
            match name {
                Some(name) if !listing.entries.iter().any(|e| e.name == name) => {
                    listing.entries.push(ListEntry {
                        name,
                        is_dir: entry.is_dir(),
                        info: entry.info,
                    })
                }
                _ => listing.refused += 1,
            }
        }
        listing.entries.sort();
        Ok(listing)
    }

    /// What `path` (relative; `""` or `"."` for the workspace) is: a file, a
    /// directory or a link (described, never followed), with its size, permissions
    /// and modification time. A path that names nothing is [`Error::NoSuchFile`].
    ///
    /// ```no_run
    /// # let mut session = sandlot::from_environment()?.session("python").open()?;
    /// session.write_file("data/a.csv", b"x,y\n")?;
    /// assert_eq!(session.file_info("data/a.csv")?.size, 4);
    /// assert!(session.file_info("data")?.is_dir());
    /// # Ok::<(), sandlot::Error>(())
    /// ```
    pub fn file_info(&mut self, path: &str) -> Result<FileInfo> {
        let rel = dir_path(path)?;
        let info = self.sandbox()?.files().stat(&rel);
        self.masked(info)
    }

    /// Makes directory `path` (relative to the workspace) and its parents: `true`
    /// if it was made, `false` if it was a directory already (the workspace always
    /// is). A file in its place, or a link on the way, is an error.
    pub fn make_dir(&mut self, path: &str) -> Result<bool> {
        let rel = dir_path(path)?;
        if rel.is_empty() {
            self.sandbox()?;
            return Ok(false);
        }
        self.output = None;
        let made = self.sandbox()?.files().make_dir(&rel);
        self.masked(made)
    }

    /// Removes `path` (relative to the workspace): a file, a link (never what it
    /// points to) or a directory with everything in it. A path that names nothing is
    /// [`Error::NoSuchFile`]; the workspace itself cannot be removed.
    pub fn remove_path(&mut self, path: &str) -> Result<()> {
        let rel = sandbox_path(path)?;
        self.output = None;
        let removed = self.sandbox()?.files().remove(rel.as_str());
        self.masked(removed)
    }

    /// Moves the file, link or directory `from` to `to` (both relative to the
    /// workspace), making `to`'s parents and replacing a file there.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let (from, to) = (sandbox_path(from)?, sandbox_path(to)?);
        self.output = None;
        let moved = self.sandbox()?.files().rename(from.as_str(), to.as_str());
        self.masked(moved)
    }

    /// Copies the host file or directory `host_path` into the sandbox directory
    /// `sandbox_dir` (relative; `""` for the workspace), as a tar archive. A
    /// directory's contents are copied; links in it are left out.
    pub fn copy_in(&mut self, host_path: &Path, sandbox_dir: &str) -> Result<()> {
        let archive = crate::transfer::pack(host_path, MAX_READ)?;
        let rel = dir_path(sandbox_dir)?;
        self.output = None;
        let unpacked = self.sandbox()?.files().unpack(&rel, &archive);
        self.masked(unpacked)
    }

    /// Copies the sandbox file or directory `sandbox_path` out into the host directory
    /// `host_dir` (created if missing), as a tar archive, and says which files it
    /// wrote. What the sandbox sends is untrusted: only regular files and directories
    /// are written, never a link, never outside `host_dir` (every write goes through a
    /// capability handle on it), and no link on the way to `sandbox_path` is followed.
    /// The session's secrets are masked in the files' contents and names; a file
    /// whose name cannot be represented is left out and counted in
    /// [`Copied::refused`].
    pub fn copy_out(&mut self, sandbox_path: &str, host_dir: &Path) -> Result<Copied> {
        let rel = dir_path(sandbox_path)?;
        let packed = self.sandbox()?.files().pack(&rel, MAX_READ);
        let archive = self.masked(packed)?;
        let secrets = &self.secrets;
        let copied = crate::transfer::unpack(&archive, host_dir, |path, bytes| {
            Some((secrets.mask_path(&path)?, secrets.mask(bytes, false)))
        });
        self.masked(copied)
    }

    /// Ends the session and removes its sandbox. Dropping the session does the same.
    pub fn close(mut self) {
        self.sandbox = None;
    }
}

/// Largest file [`Session::read_file`] hands back.
const MAX_READ: u64 = 128 << 20;

/// `path` as a [`SandboxPath`], or an error that says what is wrong with it.
fn sandbox_path(path: &str) -> Result<SandboxPath> {
    SandboxPath::new(path).map_err(|problem| Error::InvalidPath {
        path: crate::sandbox_path::escape_controls(path).into_owned(),
        reason: problem.to_string(),
    })
}

/// A directory path: `""` or `"."` for the workspace, else as [`sandbox_path`].
fn dir_path(path: &str) -> Result<String> {
    if path.is_empty() || path == "." {
        Ok(String::new())
    } else {
        sandbox_path(path).map(|p| p.as_str().to_string())
    }
}

/// A [`Session`] for async code: each call runs on tokio's blocking pool. Open one with
/// [`crate::SessionBuilder::open_async`].
#[derive(Clone)]
pub struct AsyncSession {
    inner: Arc<std::sync::Mutex<Session>>,
}

impl From<Session> for AsyncSession {
    fn from(session: Session) -> Self {
        AsyncSession {
            inner: Arc::new(std::sync::Mutex::new(session)),
        }
    }
}

impl AsyncSession {
    /// Runs `code` with `options` without blocking the async runtime.
    pub async fn run_with(&self, code: String, options: RunOptions) -> Result<Execution> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .run_with(&code, options)
        })
        .await
        .map_err(|e| Error::Cancelled {
            what: format!("the run: {e}"),
        })?
    }

    /// Runs `code` with the session's limits.
    pub async fn run(&self, code: &str) -> Result<Execution> {
        self.run_with(code.to_string(), RunOptions::default()).await
    }
}

/// `call` as the session's caller sees it, live or in the record: a handler's message
/// may quote the arguments, and they the secrets.
fn masked_call(secrets: &Secrets, mut call: ToolCall) -> ToolCall {
    // The name is the code's too: a call of a tool named by a secret is refused, and
    // the record still says what it was called, cut at 64 bytes (so a value's
    // beginning at its end is masked too).
    let name = secrets.mask(std::mem::take(&mut call.name).into_bytes(), true);
    call.name = String::from_utf8_lossy(&name).into_owned();
    call.message = call.message.map(|m| secrets.mask_text(&m));
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;
    use crate::tool::ToolOutcome;

    /// A tool call's record holds what the code sent: a name and a message that may
    /// be a secret, the name cut at 64 bytes, and so a value's beginning.
    #[test]
    fn a_call_record_has_its_secrets_masked_in_its_name_and_message() {
        let value = format!("sk-{}", "x".repeat(70));
        let secrets = Secrets::new(vec![Secret::new("KEY", &value).unwrap()]);
        let cut: String = value.chars().take(64).collect();
        let call = ToolCall {
            name: cut,
            duration: Duration::ZERO,
            argument_bytes: 10,
            result_bytes: 0,
            outcome: ToolOutcome::UnknownTool,
            message: Some(format!("there is no tool `{value}`")),
        };
        let masked = masked_call(&secrets, call);
        assert_eq!(masked.name, "***");
        assert_eq!(masked.message.as_deref(), Some("there is no tool `***`"));
    }
}
