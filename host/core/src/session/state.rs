//! The Session type: what a session holds between runs, how it is made, and what it
//! says about itself. Its runs, files and snapshots are impl blocks in rooms of their own.

use super::gate::Readers;
use super::limits::Limits;
use super::settings::Settings;
use crate::artifact::{EarlierOutput, FileScan};
use crate::backend::{Backend, BackendName, Capabilities, Sandbox};
use crate::error::{Error, Result};
use crate::language::Restriction;
use crate::plugin::LanguageHandler;
use crate::policy::Policy;
use crate::secret::Secrets;
use crate::tool::ToolSet;
use crate::toolchain::Toolchain;
use std::sync::{Arc, OnceLock};

/// A sandbox for one language. State (files, and variables where the backend keeps
/// them) persists from one run to the next and is never shared with another session.
/// Dropping it removes the sandbox.
pub struct Session {
    pub(super) sandbox: Option<Box<dyn Sandbox>>,
    pub(super) backend: Arc<dyn Backend>,
    /// The image the sandbox was made from, where the backend runs images.
    pub(super) image: String,
    /// What the backend runs the language with, asked once.
    pub(super) toolchain: OnceLock<Option<Toolchain>>,
    pub(super) backend_name: BackendName,
    /// The policy's restrictions the backend cannot apply.
    pub(super) unenforced: Vec<crate::policy::PolicyField>,
    pub(super) passed_over: Vec<(BackendName, String)>,
    pub(super) capabilities: Capabilities,
    pub(super) handler: LanguageHandler,
    pub(super) limits: Limits,
    /// The tools the code may call; each run gets its own
    /// [`ToolCalls`](crate::tool::ToolCalls).
    pub(super) tools: ToolSet,
    pub(super) policy: Policy,
    /// The policy's restricted modules and calls of the session's language, handed
    /// to every analysis.
    pub(super) restricted: Vec<Restriction>,
    pub(super) env: Vec<(String, String)>,
    /// Given to every run as variables, masked in everything returned.
    pub(super) secrets: Secrets,
    pub(super) libraries: Vec<String>,
    /// The language's kernel, if the sandbox runs code in it.
    pub(super) kernel: Option<crate::language::KernelSpec>,
    /// Whether each run is a program on its own (its last value not shown), rather
    /// than a cell.
    pub(super) one_shot: bool,
    /// What happens to the output directory's files before each run.
    pub(super) earlier_output: EarlierOutput,
    /// Whether the handler's plot prelude runs in the sandbox's interpreter now.
    pub(super) plot_capture: bool,
    /// The key its snapshots are sealed with.
    pub(super) snapshots: Arc<crate::snapshot::Keeper>,
    /// The handlers command lines are read with.
    pub(super) readers: Arc<Readers>,
    /// Whether code ran in the sandbox's interpreter since it started: a one-shot
    /// session's next run then starts a fresh one.
    pub(super) used: bool,
    /// The handler's code that saves figures left open, once asked for.
    pub(super) plot_flush: Option<Option<String>>,
    /// Libraries installed into the running interpreter's reach so far.
    pub(super) installed: Vec<String>,
    /// Why the session can run nothing more, once it cannot.
    pub(super) ended: Option<String>,
    /// The output directory as the last run left it, while nothing else has touched
    /// the sandbox since: the next run's "before" then needs no scan of its own.
    pub(super) output: Option<FileScan>,
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
        // Always, bound secrets or none: a pooled sandbox keeps no earlier session's.
        let mut sandbox = sandbox;
        sandbox.bind_secrets(secrets.injector());
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
    /// [`Capability::PersistentState`](crate::backend::Capability::PersistentState)
    /// where the backend runs the language's kernel.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The backend's name for the sandbox: the container's name on Docker and Podman
    /// (`sandlot-<id>`); `None` once the session has ended.
    pub fn sandbox_name(&self) -> Option<String> {
        self.sandbox.as_ref().map(|s| s.name())
    }

    pub(super) fn sandbox(&mut self) -> Result<&mut Box<dyn Sandbox>> {
        let ended = &self.ended;
        self.sandbox.as_mut().ok_or_else(|| Error::SessionEnded {
            reason: ended
                .clone()
                .unwrap_or_else(|| "the session is closed".into()),
        })
    }

    /// `result` with the session's secrets masked in its error: a message can quote
    /// what the sandbox wrote (a hook's error output, what an agent answered).
    pub(super) fn masked<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|error| self.secrets.mask_error(error))
    }

    /// Ends the session and removes its sandbox. Dropping the session does the same.
    pub fn close(mut self) {
        self.sandbox = None;
    }
}
