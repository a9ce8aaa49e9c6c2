//! Sessions: open a sandbox for a language, run code in it as often as you like, get
//! back what it printed, its exit code and the files it made.
//!
//! ```no_run
//! # fn main() -> Result<(), sandlot::Error> {
//! let sandlot = sandlot::Sandlot::from_environment()?;
//! let mut session = sandlot.session("python").open()?;
//! let first = session.run("x = 6 * 7")?;
//! assert!(first.success());
//! let second = session.run("print(x)")?;
//! assert_eq!(second.stdout_text(), "42\n");
//! session.close();
//! # Ok(())
//! # }
//! ```

use crate::artifact::{Artifact, ArtifactLimits, Snapshot};
use crate::backend::docker::{ContainerBackend, Engine};
use crate::backend::wasm::{WasmBackend, WORKDIR};
use crate::backend::{Backend, BackendSession, RunRequest, SessionSpec, Sink};
use crate::dirs::{Dirs, Overrides};
use crate::error::{Error, Result};
use crate::language::Finding;
use crate::plugin::{LanguageHandler, PluginHost, PluginHostBuilder};
pub use crate::policy::Policy;
use crate::Config;
use serde::Serialize;
use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Resource limits of a session. The defaults suit model-written data analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit of one run.
    pub timeout: Duration,
    /// Most memory the sandbox may use.
    pub memory: usize,
    /// Most bytes kept of each of stdout and stderr per run; the rest is dropped and
    /// the execution says so.
    pub max_output: usize,
    /// Bounds on the files handed back per run.
    pub artifacts: ArtifactLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory: 1 << 30,
            max_output: 1 << 20,
            artifacts: ArtifactLimits::default(),
        }
    }
}

/// Which backend runs the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BackendChoice {
    /// The embedded WebAssembly backend when it serves the language.
    #[default]
    Auto,
    /// The embedded WebAssembly backend.
    Wasm,
    /// A Docker container.
    Docker,
    /// A Podman container, through Podman's Docker-compatible API.
    Podman,
}

/// Container engines a [`Sandlot`] has connected to.
type Connected = Vec<(Engine, Arc<ContainerBackend>)>;

/// The entry point of the library: loaded language handlers and backends.
///
/// Create one per process and open sessions from it; it caches compiled runtimes.
/// Clones are cheap and share everything.
#[derive(Clone)]
pub struct Sandlot {
    plugins: Arc<PluginHost>,
    wasm: Arc<WasmBackend>,
    config: Arc<Config>,
    /// Container engines, connected on first use.
    containers: Arc<std::sync::Mutex<Connected>>,
}

impl Sandlot {
    /// Plugins, runtimes and caches from the user's configuration file (see
    /// [`Config::discover`]) and environment, in the order [`crate::dirs`] documents.
    pub fn from_environment() -> Result<Sandlot> {
        let config = Config::discover(None)?;
        Sandlot::from_config(config, &Overrides::default())
    }

    /// Plugins, runtimes and caches from `config`, the environment and `overrides`
    /// (the CLI's global flags), in the order [`crate::dirs`] documents.
    pub fn from_config(config: Config, overrides: &Overrides) -> Result<Sandlot> {
        let dirs = Dirs::resolve(&config, overrides);
        let plugins = PluginHostBuilder::from_dirs(&dirs).load()?;
        Ok(
            Sandlot::new(plugins, dirs.runtimes_dir(), dirs.cache.value.clone())?
                .with_config(config),
        )
    }

    /// Uses `config`'s container settings (engine endpoints, images per language).
    pub fn with_config(mut self, config: Config) -> Sandlot {
        self.config = Arc::new(config);
        self.containers = Default::default();
        self
    }

    /// The Docker or Podman backend, connected on first use: at the configured
    /// endpoint (`docker_host` / `podman_host` in sandlot.toml), else where the engine
    /// usually listens. Each language runs in the configured image (`[images]`), else
    /// its handler's default image.
    pub fn containers(&self, engine: Engine) -> Result<Arc<ContainerBackend>> {
        let mut connected = self.containers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, backend)) = connected.iter().find(|(e, _)| *e == engine) {
            return Ok(backend.clone());
        }
        let endpoint = match engine {
            Engine::Podman => self.config.podman_host.as_deref(),
            _ => self.config.docker_host.as_deref(),
        };
        let mut backend = ContainerBackend::connect(engine, endpoint)?;
        for (language, image) in &self.config.images {
            backend.set_image(language, image);
        }
        let backend = Arc::new(backend);
        connected.push((engine, backend.clone()));
        Ok(backend)
    }

    /// From loaded plugins, a runtimes directory and a cache directory.
    pub fn new(
        plugins: PluginHost,
        runtimes_dir: &Path,
        cache_dir: Option<PathBuf>,
    ) -> Result<Sandlot> {
        let wasm = WasmBackend::discover(runtimes_dir, cache_dir)?;
        Ok(Sandlot {
            plugins: Arc::new(plugins),
            wasm: Arc::new(wasm),
            config: Arc::new(Config::default()),
            containers: Default::default(),
        })
    }

    /// Looks for runtimes in `runtimes_dir` again, e.g. after installing one.
    pub fn rediscover_runtimes(
        &mut self,
        runtimes_dir: &Path,
        cache_dir: Option<PathBuf>,
    ) -> Result<()> {
        self.wasm = Arc::new(WasmBackend::discover(runtimes_dir, cache_dir)?);
        Ok(())
    }

    /// The loaded plugins.
    pub fn plugins(&self) -> &PluginHost {
        &self.plugins
    }

    /// The embedded WebAssembly backend.
    pub fn wasm(&self) -> &WasmBackend {
        &self.wasm
    }

    /// Starts configuring a session for `language` (an id or alias).
    pub fn session(&self, language: &str) -> SessionBuilder {
        SessionBuilder {
            sandlot: self.clone(),
            language: language.to_string(),
            backend: BackendChoice::Auto,
            limits: Limits::default(),
            policy: Policy::default(),
            env: Vec::new(),
        }
    }
}

/// Configures and opens a [`Session`].
#[derive(Clone)]
pub struct SessionBuilder {
    sandlot: Sandlot,
    language: String,
    backend: BackendChoice,
    limits: Limits,
    policy: Policy,
    env: Vec<(String, String)>,
}

impl SessionBuilder {
    /// The security policy (default: [`Policy::default`]).
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// Which backend runs the code (default: [`BackendChoice::Auto`]).
    pub fn backend(&mut self, backend: BackendChoice) -> &mut Self {
        self.backend = backend;
        self
    }

    /// All limits at once.
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// Wall-clock limit of each run.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.limits.timeout = timeout;
        self
    }

    /// Memory cap of the sandbox, in bytes.
    pub fn memory(&mut self, bytes: usize) -> &mut Self {
        self.limits.memory = bytes;
        self
    }

    /// Adds an environment variable; nothing else from the host is visible.
    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// [`SessionBuilder::open`] for async code: opens on tokio's blocking pool.
    ///
    /// Blocking calls into the wasm backend must not run on an async worker thread
    /// (wasmtime's WASI layer would panic), so async code uses this and
    /// [`AsyncSession`].
    pub async fn open_async(&self) -> Result<AsyncSession> {
        let builder = self.clone();
        tokio::task::spawn_blocking(move || builder.open())
            .await
            .map_err(|e| Error::InvalidInput(format!("opening the session was cancelled: {e}")))?
            .map(AsyncSession::from)
    }

    /// Opens the sandbox: a fresh scratch directory, a fresh interpreter.
    ///
    /// Blocking; from async code use [`SessionBuilder::open_async`].
    pub fn open(&self) -> Result<Session> {
        let handler = self.sandlot.plugins.language(&self.language)?.clone();
        let language = handler.info().id.clone();
        let container;
        let backend: &dyn Backend = match self.backend {
            BackendChoice::Wasm => &*self.sandlot.wasm,
            BackendChoice::Auto if self.sandlot.wasm.serves(&language) => &*self.sandlot.wasm,
            BackendChoice::Auto => {
                // No WebAssembly runtime: the first container engine that answers.
                container = self.sandlot.containers(Engine::Docker).or_else(|docker| {
                    self.sandlot.containers(Engine::Podman).map_err(|podman| {
                        Error::InvalidInput(format!(
                            "no WebAssembly runtime serves {language} (`sandlot runtimes install` has python \
                             and javascript), and no container engine answers: {docker}; {podman}"
                        ))
                    })
                })?;
                &*container
            }
            BackendChoice::Docker => {
                container = self.sandlot.containers(Engine::Docker)?;
                &*container
            }
            BackendChoice::Podman => {
                container = self.sandlot.containers(Engine::Podman)?;
                &*container
            }
        };
        if !backend.serves(&language) {
            return Err(Error::RuntimeNotInstalled { language });
        }
        // Only backends whose sandbox sees a host directory get one: a container's
        // files live in the container, and a host killed with -9 would leak the dir.
        let scratch = if backend.uses_host_workdir() {
            let scratch = tempfile::Builder::new()
                .prefix("sandlot-")
                .tempdir()
                .map_err(|e| Error::Io {
                    context: "cannot create the session's scratch directory".into(),
                    source: e,
                })?;
            std::fs::create_dir(scratch.path().join("output")).map_err(|e| Error::Io {
                context: "cannot create the session's output directory".into(),
                source: e,
            })?;
            Some(scratch)
        } else {
            None
        };
        let inner = backend.open(&SessionSpec {
            language: &language,
            workdir: scratch.as_ref().map_or(Path::new(""), |s| s.path()),
            memory: self.limits.memory,
            max_output: self.limits.max_output,
            env: &self.env,
            handler: &handler,
            policy: &self.policy,
        })?;
        Ok(Session {
            inner: Some(inner),
            handler,
            scratch,
            limits: self.limits,
            policy: self.policy,
            backend: backend.name(),
            plot_capture: false,
        })
    }
}

/// Options of one run.
#[derive(Default)]
pub struct RunOptions {
    /// Libraries the code needs. The wasm backend's runtimes cannot install any, but
    /// have many built in (Python: numpy, pandas, scipy, scikit-learn, matplotlib,
    /// seaborn, statsmodels, ...); asking for one they lack is an error that says so.
    pub libraries: Vec<String>,
    /// Wall-clock limit, instead of the session's.
    pub timeout: Option<Duration>,
    /// Standard input.
    pub stdin: Vec<u8>,
    /// Sees stdout as it is written.
    pub on_stdout: Option<Sink>,
    /// Sees stderr as it is written.
    pub on_stderr: Option<Sink>,
}

/// What one run gave.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    /// Standard output, as bytes (see [`Execution::stdout_text`]).
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    /// Standard error, as bytes.
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    /// Exit code: the program's, 124 after a timeout, 137 after the memory cap.
    pub exit_code: i32,
    /// Whether the run was stopped at its time limit.
    pub timed_out: bool,
    /// Whether the run was stopped at the memory cap.
    pub memory_exceeded: bool,
    /// Whether stdout went past the cap and was cut.
    pub stdout_truncated: bool,
    /// Whether stderr went past the cap and was cut.
    pub stderr_truncated: bool,
    /// Whether files were left out of `artifacts` by the limits.
    pub artifacts_truncated: bool,
    /// Wall-clock time of the run (`duration_ms` in JSON).
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
    /// Files created or changed in the output directory.
    pub artifacts: Vec<Artifact>,
    /// The static analysis of the code.
    pub findings: Vec<Finding>,
    /// Set when the session cannot run anything more, with the reason.
    pub session_ended: Option<String>,
    /// The backend that ran it.
    pub backend: &'static str,
    /// The policy in force for the run.
    pub policy: Policy,
}

fn millis<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1e3)
}

fn lossy<S: serde::Serializer>(
    bytes: &[u8],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}

impl Execution {
    /// Standard output as text; invalid UTF-8 becomes U+FFFD.
    pub fn stdout_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// Standard error as text; invalid UTF-8 becomes U+FFFD.
    pub fn stderr_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }

    /// Exit code 0, no limit hit.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && !self.timed_out && !self.memory_exceeded
    }

    /// The artifacts that are images.
    pub fn plots(&self) -> impl Iterator<Item = &Artifact> {
        self.artifacts.iter().filter(|a| a.is_plot)
    }
}

/// A sandbox for one language. State (variables, files) persists from one run to the
/// next and is never shared with another session. Dropping it cleans up.
pub struct Session {
    inner: Option<Box<dyn BackendSession>>,
    handler: LanguageHandler,
    /// The host directory behind the sandbox's working directory, for backends that
    /// have one (the wasm backend); container sessions keep their files inside.
    scratch: Option<tempfile::TempDir>,
    limits: Limits,
    policy: Policy,
    backend: &'static str,
    /// Whether the handler's plot prelude has run in this sandbox.
    plot_capture: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("language", &self.handler.info().id)
            .field("backend", &self.backend)
            .field("workdir", &self.scratch.as_ref().map(|s| s.path()))
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The language id.
    pub fn language(&self) -> &str {
        &self.handler.info().id
    }

    /// The backend's name for the sandbox: the container's name on Docker and Podman
    /// (`sandlot-<session id>`), `None` for the wasm backend or a closed session.
    pub fn sandbox_name(&self) -> Option<&str> {
        self.inner.as_ref().and_then(|i| i.sandbox_name())
    }

    /// Runs `code` with the session's limits.
    pub fn run(&mut self, code: &str) -> Result<Execution> {
        self.run_with(code, RunOptions::default())
    }

    /// Runs `code` with `options`.
    pub fn run_with(&mut self, code: &str, options: RunOptions) -> Result<Execution> {
        let findings = self.handler.analyze(code)?;
        if let Some(threshold) = self.policy.block_at {
            let blocking: Vec<Finding> = findings
                .iter()
                .filter(|f| f.severity >= threshold)
                .cloned()
                .collect();
            if !blocking.is_empty() {
                return Err(Error::Blocked {
                    findings: blocking,
                    threshold,
                });
            }
        }
        if !options.libraries.is_empty() {
            let missing = self
                .inner
                .as_ref()
                .map(|inner| inner.missing_libraries(&options.libraries))
                .unwrap_or_default();
            if !missing.is_empty() {
                return Err(Error::InvalidInput(format!(
                    "the {} backend cannot install {} for {}; it has only the libraries its runtime bundles \
                     (`sandlot runtimes list` shows the runtime)",
                    self.backend,
                    missing.join(", "),
                    self.language()
                )));
            }
        }
        let runs_plans = self.inner.as_ref().is_some_and(|i| i.runs_plans());
        let before = self.outputs()?;
        let started = Instant::now();
        // The prelude costs milliseconds in an interpreter that just started, so it
        // runs before the first code that may plot, not when the session opens.
        // Backends that run whole plans get it inside the plan instead.
        let may_plot = mentions_plotting(code);
        if !runs_plans && !self.plot_capture && may_plot {
            self.install_plot_capture()?;
        }
        let inner = self.inner.as_mut().ok_or_else(|| Error::SessionEnded {
            reason: "the session is closed".into(),
        })?;
        let raw = inner.run(RunRequest {
            code,
            stdin: &options.stdin,
            timeout: options.timeout.unwrap_or(self.limits.timeout),
            on_stdout: options.on_stdout,
            on_stderr: options.on_stderr,
            libraries: &options.libraries,
            capture_plots: may_plot && self.handler.info().can_capture_plots,
        })?;
        if raw.ended.is_none() && !runs_plans {
            self.flush_plots();
        }
        self.finish(raw, &before, started, findings)
    }

    /// Runs a shell command line with `sh -c` in the sandbox's working directory, as a
    /// terminal would, with the session's limits; pipes, redirections and globs work.
    /// Container backends only: the wasm backend has no shell, and says so.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// # let sandlot = sandlot::Sandlot::from_environment()?;
    /// let mut session = sandlot.session("python").backend(sandlot::BackendChoice::Docker).open()?;
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
        let before = self.outputs()?;
        let started = Instant::now();
        let inner = self.inner.as_mut().ok_or_else(|| Error::SessionEnded {
            reason: "the session is closed".into(),
        })?;
        let raw = inner.shell(RunRequest {
            code: command_line,
            stdin: &options.stdin,
            timeout: options.timeout.unwrap_or(self.limits.timeout),
            on_stdout: options.on_stdout,
            on_stderr: options.on_stderr,
            libraries: &[],
            capture_plots: false,
        })?;
        self.finish(raw, &before, started, Vec::new())
    }

    /// Collects the artifacts of a run and makes its [`Execution`].
    fn finish(
        &mut self,
        raw: crate::backend::RawOutput,
        before: &Snapshot,
        started: Instant,
        findings: Vec<Finding>,
    ) -> Result<Execution> {
        let output_dir = self.host_dir().join("output");
        let duration = started.elapsed();
        let limits = self.limits.artifacts;
        let (artifacts, artifacts_truncated) = match self.inner.as_mut().and_then(|i| i.files()) {
            // A run that completed is reported even if its output directory cannot
            // be scanned (the code may have replaced it with a file or a link).
            Some(files) if raw.ended.is_none() => match files.scan("output") {
                Ok(after) => after.changed_since_with(before, limits, |rel, max| {
                    files
                        .read(&format!("output/{}", rel.to_string_lossy()), max)
                        .ok()
                }),
                Err(_) => (Vec::new(), false),
            },
            Some(_) => (Vec::new(), false),
            None => Snapshot::take(&output_dir).changed_since(before, &output_dir, limits),
        };
        if raw.ended.is_some() {
            self.inner = None;
        }
        Ok(Execution {
            stdout: raw.stdout,
            stderr: raw.stderr,
            exit_code: raw.exit_code,
            timed_out: raw.timed_out,
            memory_exceeded: raw.memory_exceeded,
            stdout_truncated: raw.stdout_truncated,
            stderr_truncated: raw.stderr_truncated,
            artifacts_truncated,
            duration,
            artifacts,
            findings,
            session_ended: raw.ended,
            backend: self.backend,
            policy: self.policy,
        })
    }

    /// The files in the output directory now.
    fn outputs(&mut self) -> Result<Snapshot> {
        match self.inner.as_mut().and_then(|i| i.files()) {
            Some(files) => Ok(files.scan("output").unwrap_or_default()),
            None => Ok(Snapshot::take(&self.host_dir().join("output"))),
        }
    }

    /// Writes `contents` to `path` (relative to the working directory) in the sandbox.
    pub fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<()> {
        let rel = sandbox_path(path)?;
        if let Some(files) = self.inner.as_mut().and_then(|i| i.files()) {
            return files.write(&rel.to_string_lossy(), contents);
        }
        let dir = self.workdir()?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            dir.create_dir_all(parent).map_err(|e| io_error(path, e))?;
        }
        dir.write(&rel, contents).map_err(|e| io_error(path, e))
    }

    /// Reads `path` (relative to the working directory) from the sandbox. A link that
    /// points out of the sandbox is refused.
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        let rel = sandbox_path(path)?;
        if let Some(files) = self.inner.as_mut().and_then(|i| i.files()) {
            return files.read(&rel.to_string_lossy(), MAX_READ);
        }
        self.workdir()?.read(&rel).map_err(|e| io_error(path, e))
    }

    /// The entries of directory `path` (relative; `""` or `"."` for the working
    /// directory), sorted; directories end with `/`.
    pub fn list_files(&mut self, path: &str) -> Result<Vec<String>> {
        if let Some(files) = self.inner.as_mut().and_then(|i| i.files()) {
            let rel = if path.is_empty() || path == "." {
                String::new()
            } else {
                sandbox_path(path)?.to_string_lossy().into_owned()
            };
            let mut names = files.list(&rel)?;
            names.retain(|name| name != ".sandlot/");
            return Ok(names);
        }
        let dir = self.workdir()?;
        let entries = if path.is_empty() || path == "." {
            dir.entries()
        } else {
            dir.read_dir(sandbox_path(path)?)
        }
        .map_err(|e| io_error(path, e))?;
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                Some(if is_dir { format!("{name}/") } else { name })
            })
            .filter(|name| name != ".sandlot/" && name != ".tmp/")
            .collect();
        names.sort();
        Ok(names)
    }

    /// Copies the host file or directory `host_path` into the sandbox directory
    /// `sandbox_dir` (relative; `""` for the working directory), as a tar archive. A
    /// directory's contents are copied; links in it are left out.
    pub fn copy_in(&mut self, host_path: &Path, sandbox_dir: &str) -> Result<()> {
        let archive = crate::transfer::pack(host_path, MAX_READ)?;
        let rel = if sandbox_dir.is_empty() || sandbox_dir == "." {
            PathBuf::new()
        } else {
            sandbox_path(sandbox_dir)?
        };
        if let Some(files) = self.inner.as_mut().and_then(|i| i.files()) {
            return files.unpack(&rel.to_string_lossy(), &archive);
        }
        self.no_links_on(&rel)?;
        crate::transfer::unpack(&archive, &self.host_dir().join(&rel)).map(|_| ())
    }

    /// Copies the sandbox file or directory `sandbox_path` out into the host directory
    /// `host_dir` (created if missing), as a tar archive, and returns the files written
    /// (relative, `/`-separated). What the sandbox sends is untrusted: only regular
    /// files and directories are written, never a link, never outside `host_dir`, and
    /// no link on the way to `sandbox_path` is followed.
    pub fn copy_out(&mut self, sandbox_path: &str, host_dir: &Path) -> Result<Vec<String>> {
        let rel = if sandbox_path.is_empty() || sandbox_path == "." {
            PathBuf::new()
        } else {
            self::sandbox_path(sandbox_path)?
        };
        let archive = match self.inner.as_mut().and_then(|i| i.files()) {
            Some(files) => files.pack(&rel.to_string_lossy(), MAX_READ)?,
            None => {
                self.no_links_on(&rel)?;
                crate::transfer::pack(&self.host_dir().join(&rel), MAX_READ)?
            }
        };
        crate::transfer::unpack(&archive, host_dir)
    }

    /// The host directory behind the working directory. Only backends without
    /// [`SandboxFiles`](crate::backend::SandboxFiles) reach here, and those always
    /// have one; the empty path (which opens nothing) stands in otherwise.
    fn host_dir(&self) -> &Path {
        self.scratch.as_ref().map_or(Path::new(""), |s| s.path())
    }

    /// Refuses `rel` (below the host scratch directory) if any part of it is a link.
    fn no_links_on(&self, rel: &Path) -> Result<()> {
        let mut path = self.host_dir().to_path_buf();
        for component in rel.components() {
            path.push(component);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::InvalidPath {
                    path: rel.display().to_string(),
                    reason: format!(
                        "`{}` is a symbolic link",
                        component.as_os_str().to_string_lossy()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Ends the session and removes its files. Dropping the session does the same.
    pub fn close(mut self) {
        self.inner = None;
    }

    fn workdir(&self) -> Result<cap_std::fs::Dir> {
        cap_std::fs::Dir::open_ambient_dir(self.host_dir(), cap_std::ambient_authority())
            .map_err(|e| io_error(".", e))
    }

    /// Runs the handler's plot prelude once, so figures land in the output directory.
    fn install_plot_capture(&mut self) -> Result<()> {
        self.plot_capture = true;
        if !self.handler.info().can_capture_plots {
            return Ok(());
        }
        let Some(prelude) = self.handler.plot_prelude(&format!("{WORKDIR}/output"))? else {
            return Ok(());
        };
        let Some(inner) = self.inner.as_mut() else {
            return Ok(());
        };
        let raw = inner.run(RunRequest {
            code: &prelude,
            stdin: b"",
            timeout: Duration::from_secs(60),
            on_stdout: None,
            on_stderr: None,
            libraries: &[],
            capture_plots: false,
        })?;
        if raw.exit_code != 0 || raw.ended.is_some() {
            return Err(Error::Runtime {
                runtime: self.backend.into(),
                reason: format!(
                    "the plot prelude failed: {}",
                    String::from_utf8_lossy(&raw.stderr).trim()
                ),
            });
        }
        Ok(())
    }

    /// Saves figures the run left open, as a program's exit would.
    fn flush_plots(&mut self) {
        if !self.plot_capture || self.handler.info().id != "python" {
            return;
        }
        if let Some(inner) = self.inner.as_mut() {
            let _ = inner.run(RunRequest {
                code: FLUSH_PYTHON_FIGURES,
                stdin: b"",
                timeout: Duration::from_secs(30),
                on_stdout: None,
                on_stderr: None,
                libraries: &[],
                capture_plots: false,
            });
        }
    }
}

/// Whether `code` may draw a figure, directly or through a library (`df.plot()`,
/// seaborn, ggplot2...). A miss only means left-open figures are not saved for that
/// run; figures saved explicitly into the output directory always come back.
fn mentions_plotting(code: &str) -> bool {
    [
        "plot",
        "plt",
        "matplotlib",
        "seaborn",
        "figure",
        "hist",
        "png(",
    ]
    .iter()
    .any(|word| code.contains(word))
}

/// Largest file [`Session::read_file`] hands back from a container.
const MAX_READ: u64 = 128 << 20;

/// The Python prelude registers its figure saver as `sys._sandlot_save_figures`.
const FLUSH_PYTHON_FIGURES: &str =
    "import sys as _sl_sys\nif hasattr(_sl_sys, '_sandlot_save_figures'):\n    _sl_sys._sandlot_save_figures()\n";

/// `path` as a relative path with normal components only.
fn sandbox_path(path: &str) -> Result<PathBuf> {
    let invalid = |reason: &str| Error::InvalidPath {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    let rel = Path::new(path);
    if path.is_empty() || path.contains('\0') {
        return Err(invalid("empty or contains NUL"));
    }
    if rel.is_absolute() {
        return Err(invalid("must be relative to the working directory"));
    }
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(invalid("must not contain `..` or `.`"));
    }
    Ok(rel.to_path_buf())
}

fn io_error(path: &str, source: std::io::Error) -> Error {
    Error::Io {
        context: format!("sandbox file `{path}`"),
        source,
    }
}

/// A [`Session`] for async code: each call runs on tokio's blocking pool. Open one with
/// [`SessionBuilder::open_async`].
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
        .map_err(|e| Error::InvalidInput(format!("the run was cancelled: {e}")))?
    }

    /// Runs `code` with the session's limits.
    pub async fn run(&self, code: &str) -> Result<Execution> {
        self.run_with(code.to_string(), RunOptions::default()).await
    }
}
