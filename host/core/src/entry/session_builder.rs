//! [`SessionBuilder`]: a session's request, resolved (language, handler, backend,
//! image, kernel) and opened; or restored from a snapshot.

use super::choice::Chosen;
use super::sandlot::Sandlot;
use crate::artifact::EarlierOutput;
use crate::backend::pool::Preinstall;
use crate::backend::{Capability, SandboxSpec};
use crate::error::{Error, Result};
use crate::language::KernelSpec;
use crate::layout::Layout;
use crate::plugin::LanguageHandler;
use crate::policy::Policy;
use crate::provider::Progress;
use crate::request::{BackendChoice, OpenRequest};
use crate::secret::{Secret, Secrets, UpstreamCa};
use crate::session::warm::Claim;
use crate::session::{AsyncSession, Limits, Session, Settings};
use crate::snapshot::Snapshot;
use crate::tool::{Tool, ToolSet};
use std::sync::Arc;
use std::time::Duration;

impl Sandlot {
    /// A session holding what `snapshot` holds, on the backend it was taken on (one of
    /// files alone: on any), with
    /// this host's defaults for everything else. To give it a policy, limits,
    /// secrets or tools of its own, use [`SessionBuilder::restore`].
    pub fn restore(&self, snapshot: &Snapshot) -> Result<Session> {
        let mut builder = self.session(snapshot.language());
        if snapshot.holds_memory() || snapshot.holds_namespace() {
            builder.backend(snapshot.backend());
        }
        builder.restore(snapshot)
    }

    /// Starts configuring a session for `language` (an id or alias), under the
    /// configuration's `[policy]` (else [`Policy::default`]).
    pub fn session(&self, language: &str) -> SessionBuilder {
        let mut request = OpenRequest::new(language);
        request.policy = self.config().policy.clone().unwrap_or_default();
        self.session_for(request)
    }

    /// Starts from a whole `request`, as a front end received it: it is opened as
    /// it says, policy included.
    pub fn session_for(&self, request: OpenRequest) -> SessionBuilder {
        SessionBuilder {
            sandlot: self.clone(),
            request,
        }
    }
}

/// Configures and opens a [`Session`]: an [`OpenRequest`] and the [`Sandlot`] it is
/// opened on.
#[derive(Clone)]
pub struct SessionBuilder {
    pub(super) sandlot: Sandlot,
    pub(super) request: OpenRequest,
}

impl SessionBuilder {
    /// The request this builder opens.
    pub fn request(&self) -> &OpenRequest {
        &self.request
    }

    /// Whether [`open`](Self::open) would first have the backend's provider prepare
    /// it (install a runtime): a front end then says so, and takes the time.
    pub fn needs_preparing(&self) -> Result<bool> {
        let language = self.language_id()?;
        let needs = self.request.needs(&language);
        Ok(self.sandlot.needs_preparing(&self.request.backend, &needs))
    }

    /// Has the provider of the backend this session would get prepare it, if it
    /// has to (see [`Sandlot::prepare`]); `progress` hears about the slow steps.
    pub fn prepare(&self, progress: &mut dyn FnMut(Progress)) -> Result<()> {
        let language = self.language_id()?;
        let needs = self.request.needs(&language);
        self.sandlot
            .prepare(&self.request.backend, &needs, progress)
    }

    /// The id of the request's language (it may name an alias).
    fn language_id(&self) -> Result<String> {
        Ok(self
            .sandlot
            .plugins()
            .language(&self.request.language)?
            .info()
            .id
            .clone())
    }

    /// The security policy (default: the configuration's `[policy]`, else
    /// [`Policy::default`]).
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.request.policy = policy;
        self
    }

    /// Which backend runs the code: `"auto"` (the default), or a backend's name
    /// (`"wasm"`, `"native"`, `"docker"`, `"podman"`, `"kubernetes"`, or one
    /// registered by the application).
    pub fn backend(&mut self, backend: impl Into<BackendChoice>) -> &mut Self {
        self.request.backend = backend.into();
        self
    }

    /// All limits at once.
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.request.limits = limits;
        self
    }

    /// Wall-clock limit of each run.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.request.limits.timeout = timeout;
        self
    }

    /// Memory cap of the sandbox, in bytes.
    pub fn memory(&mut self, bytes: usize) -> &mut Self {
        self.request.limits.memory = bytes;
        self
    }

    /// Adds an environment variable every run gets; nothing else from the host is
    /// visible.
    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.request.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Adds a secret: every run gets it as the environment variable `name`, and its
    /// value is masked in everything the session returns (see [`crate::secret`]).
    /// A name shorter than a variable name allows, or a value under
    /// [`crate::secret::MIN_LEN`] bytes, is [`Error::InvalidSecret`].
    pub fn secret(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let secret = Secret::new(name, value)?;
        Ok(self.secrets(&[secret]))
    }

    /// Adds secrets made with [`Secret::new`] (see [`SessionBuilder::secret`]).
    pub fn secrets(&mut self, secrets: &[Secret]) -> &mut Self {
        for secret in secrets {
            self.request.secrets.retain(|s| s.name() != secret.name());
            self.request.secrets.push(secret.clone());
        }
        self
    }

    /// Trusts `ca`, besides the host's roots, for the upstreams a bound secret is sent
    /// to over TLS ([`UpstreamCa`]): the CA of an internal API, say.
    pub fn trust_upstream(&mut self, ca: &UpstreamCa) -> &mut Self {
        self.request.upstream_ca = std::mem::take(&mut self.request.upstream_ca).and(ca);
        self
    }

    /// Lets the session's code call `tool` ([`crate::tool`]): `auto` then picks a
    /// backend that can ([`Capability::Tools`]). A second tool of the same name is
    /// [`Error::InvalidTool`].
    pub fn tool(&mut self, tool: Tool) -> Result<&mut Self> {
        self.request.tools.add(tool)?;
        Ok(self)
    }

    /// Lets the session's code call every tool of `tools` (see [`SessionBuilder::tool`]).
    pub fn tools(&mut self, tools: &ToolSet) -> Result<&mut Self> {
        self.request.tools.extend(tools)?;
        Ok(self)
    }

    /// The container image to run in, instead of the configured one (`[images]` in
    /// sandlot.toml) or the language handler's default. `auto` then picks a backend
    /// that runs images.
    pub fn image(&mut self, image: &str) -> &mut Self {
        self.request.image = Some(image.to_string());
        self
    }

    /// Libraries every run of the session needs, installed with the first run that
    /// can. `auto` picks a backend that can provide them.
    pub fn libraries(&mut self, libraries: &[String]) -> &mut Self {
        self.request.libraries = libraries.to_vec();
        self
    }

    /// A capability the session's backend must have, e.g.
    /// [`Capability::Shell`] for [`Session::execute_command`]. `auto` picks a backend
    /// that has it.
    pub fn require(&mut self, capability: Capability) -> &mut Self {
        if !self.request.required.contains(&capability) {
            self.request.required.push(capability);
        }
        self
    }

    /// Runs each program on its own, in a fresh process, instead of in the language's
    /// kernel (default: `false`, so container sessions keep variables, functions and
    /// imports from one run to the next, as wasm sessions do). Languages without a
    /// kernel (Java, C++, Go, ...) always run one program per run; on the wasm backend
    /// each run after the first gets a fresh interpreter.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// # let sandlot = sandlot::from_environment()?;
    /// let mut session = sandlot.session("python").backend("docker").one_shot(true).open()?;
    /// session.run("x = 1")?;
    /// assert!(!session.run("print(x)")?.success());
    /// # Ok(())
    /// # }
    /// ```
    pub fn one_shot(&mut self, one_shot: bool) -> &mut Self {
        self.request.one_shot = one_shot;
        self
    }

    /// What happens to the files earlier runs left in the output directory
    /// (default: [`EarlierOutput::Keep`]). Either way a run returns only the files it
    /// created or changed.
    pub fn earlier_output(&mut self, earlier_output: EarlierOutput) -> &mut Self {
        self.request.earlier_output = earlier_output;
        self
    }

    /// [`SessionBuilder::open`] for async code: opens on tokio's blocking pool.
    pub async fn open_async(&self) -> Result<AsyncSession> {
        let builder = self.clone();
        tokio::task::spawn_blocking(move || builder.open())
            .await
            .map_err(|e| Error::Cancelled {
                what: format!("opening the session: {e}"),
            })?
            .map(AsyncSession::from)
    }

    /// Keeps sandboxes of this session's kind ready in its backend's pool (see
    /// [`SandlotBuilder::pool`](crate::SandlotBuilder::pool)) and waits until the first is, so the next
    /// [`SessionBuilder::open`] starts warm. The backend is chosen as `open` would
    /// choose it; one without a pool is an error.
    pub fn warm(&self) -> Result<()> {
        let resolved = self.resolve()?;
        let pool = self.sandlot.pool(resolved.chosen.backend.name().as_str())?;
        let preinstall = self.preinstall(&resolved)?;
        pool.warm_with(
            &resolved.spec(&self.request.policy, self.request.limits.memory),
            preinstall.as_ref(),
        )
    }

    /// What a pool installs in its sandboxes before hand-out: the session's libraries,
    /// where its kernel keeps what is installed.
    fn preinstall(&self, resolved: &Resolved) -> Result<Option<Preinstall>> {
        let installs = resolved
            .chosen
            .backend
            .capabilities(&resolved.language)
            .has(Capability::InstallLibraries);
        if self.request.libraries.is_empty() || resolved.kernel.is_none() || !installs {
            return Ok(None);
        }
        let commands = resolved
            .handler
            .install(&self.request.libraries, Layout::WORKSPACE)?;
        Ok(Some(Preinstall {
            libraries: self.request.libraries.clone(),
            plan: crate::language::Plan {
                files: Vec::new(),
                commands,
            },
        }))
    }

    /// The handler, the backend and what the sandbox is fixed to.
    fn resolve(&self) -> Result<Resolved> {
        let handler = self
            .sandlot
            .plugins()
            .language(&self.request.language)?
            .clone();
        let language = handler.info().id.clone();
        self.sandlot
            .plugins()
            .check_restricted(&self.request.policy.restricted)?;
        self.request
            .policy
            .check_requests()
            .map_err(|reason| crate::error::Error::InvalidPolicy { reason })?;
        let kernel = match self.request.one_shot {
            true => None,
            false => handler.kernel(Layout::WORKSPACE, &Layout.output_dir())?,
        };
        let needs = self.request.needs(&language).with_kernel(kernel.is_some());
        let chosen = self.sandlot.choose(&self.request.backend, &needs)?;
        let image = self
            .request
            .image
            .clone()
            .unwrap_or_else(|| self.sandlot.image_for(handler.info()).to_string());
        let kernel = kernel.filter(|_| {
            chosen
                .backend
                .capabilities(&language)
                .has(Capability::Kernels)
        });
        Ok(Resolved {
            handler,
            language,
            kernel,
            chosen,
            image,
        })
    }

    /// Opens the sandbox on the chosen backend.
    ///
    /// Blocking; from async code use [`SessionBuilder::open_async`].
    pub fn open(&self) -> Result<Session> {
        let resolved = self.resolve()?;
        // Before any sandbox is made: what the installer would take for a path, an
        // archive or an address is refused, whichever backend was chosen.
        resolved.handler.check_libraries(&self.request.libraries)?;
        if let Some(session) = self.open_warm(&resolved) {
            return Ok(session);
        }
        self.open_resolved(resolved)
    }

    /// Makes now, if it is not made yet, the base snapshot sessions like this one
    /// start from with warm starts on ([`Sandlot::set_warm_start`]); a host calls it
    /// when it starts, so that no session waits for the base. `false` where such
    /// sessions cannot start warm (warm starts off, a backend that does not capture
    /// interpreters, a language without a base, a policy that restricts a module of
    /// the base). Fails if the base cannot be made: its session's error.
    pub fn warm_up(&self) -> Result<bool> {
        let resolved = self.resolve()?;
        let Some((key, warm_cell)) = self.warm_key(&resolved) else {
            return Ok(false);
        };
        if let Claim::Ready(_) = self.sandlot.warm.claim(&key) {
            return Ok(true);
        }
        // Made here even if a thread is making it beside: the caller waits for one,
        // and hears why it failed.
        let made = self.base_builder(&resolved).make_base(warm_cell);
        self.sandlot.warm.made(&key, made.as_ref().ok().cloned());
        made.map(|_| true)
    }

    /// What a base for this builder's sessions is made for, and its cell; `None`
    /// where they cannot start warm.
    fn warm_key(&self, resolved: &Resolved) -> Option<(String, &'static str)> {
        if !self.sandlot.warm.on() || self.request.one_shot {
            return None;
        }
        let (warm_cell, modules) = crate::session::warm::cell(&resolved.language)?;
        let backend = &resolved.chosen.backend;
        let name = backend.name();
        if !backend
            .capabilities(&resolved.language)
            .has(Capability::SnapshotMemory)
            || self.sandlot.pool_made(name.as_str()).is_some()
        {
            return None;
        }
        let restricts_base = self
            .request
            .policy
            .restricted
            .for_language(resolved.handler.info())
            .iter()
            .any(|r| {
                let top = r.name.as_str().split('.').next().unwrap_or_default();
                modules.contains(&top)
            });
        if restricts_base {
            return None;
        }
        Some((
            format!(
                "{name}\n{}\n{}\n{:?}",
                resolved.language, resolved.image, resolved.kernel
            ),
            warm_cell,
        ))
    }

    /// A session from the base for this builder's sessions, if there is one it can
    /// start from; makes the base beside, if there is none yet.
    fn open_warm(&self, resolved: &Resolved) -> Option<Session> {
        let (key, warm_cell) = self.warm_key(resolved)?;
        match self.sandlot.warm.claim(&key) {
            Claim::Ready(base) => {
                if base
                    .memory()
                    .is_some_and(|m| m.size > self.request.limits.memory as u64)
                {
                    return None;
                }
                let settings = self
                    .settings(resolved.kernel.clone(), resolved.image.clone(), Vec::new())
                    .ok()?;
                let restored = Session::restore(
                    resolved.chosen.backend.clone(),
                    resolved.chosen.passed_over.clone(),
                    resolved.handler.clone(),
                    settings,
                    &base,
                );
                match restored {
                    Ok(session) => Some(session),
                    Err(e) => {
                        // A base that no longer restores (the runtime changed) is
                        // made again; anything else, the fresh open says.
                        if e.kind() == crate::error::ErrorKind::InvalidInput {
                            self.sandlot.warm.forget(&key);
                        }
                        None
                    }
                }
            }
            Claim::Make => {
                let builder = self.base_builder(resolved);
                let warm = self.sandlot.warm.clone();
                let spawned = std::thread::Builder::new()
                    .name("sandlot-warm-base".into())
                    .spawn(move || {
                        let made = builder.make_base(warm_cell).ok();
                        warm.made(&key, made);
                    });
                if spawned.is_err() {
                    // No thread to spare: a later session tries again.
                    self.sandlot.warm.forget(&self.warm_key(resolved)?.0);
                }
                None
            }
            Claim::Wait => None,
        }
    }

    /// The builder of a base for `resolved`: the same language, backend, image and
    /// kernel, and nothing of this request's own (environment, secrets, tools,
    /// policy, limits), which are the restoring session's to apply.
    fn base_builder(&self, resolved: &Resolved) -> SessionBuilder {
        let mut request = OpenRequest::new(&resolved.language);
        request.backend = BackendChoice::Named(resolved.chosen.backend.name().to_string());
        request.image = self.request.image.clone();
        SessionBuilder {
            sandlot: self.sandlot.clone(),
            request,
        }
    }

    /// Opens a fresh session, runs `warm_cell` and captures it: a base.
    fn make_base(&self, warm_cell: &str) -> Result<Arc<Snapshot>> {
        let resolved = self.resolve()?;
        let mut session = self.open_resolved(resolved)?;
        let ran = session.run(warm_cell)?;
        if ran.exit_code != 0 {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "the warm start's base could not import its data stack: {}",
                    ran.stderr_text().trim()
                ),
            });
        }
        Ok(Arc::new(session.capture_base()?))
    }

    /// Opens a fresh session for `resolved`.
    fn open_resolved(&self, resolved: Resolved) -> Result<Session> {
        let spec = resolved.spec(&self.request.policy, self.request.limits.memory);
        let pool = self
            .sandlot
            .pool_made(resolved.chosen.backend.name().as_str());
        let (sandbox, preinstalled) = match pool {
            Some(pool) => {
                let preinstall = self.preinstall(&resolved)?;
                let sandbox = pool.open_with(&spec, preinstall.as_ref())?;
                (sandbox, preinstall.map(|p| p.libraries).unwrap_or_default())
            }
            None => (resolved.chosen.backend.open(&spec)?, Vec::new()),
        };
        let Resolved {
            handler,
            kernel,
            chosen: Chosen {
                backend,
                passed_over,
            },
            image,
            ..
        } = resolved;
        Ok(Session::new(
            sandbox,
            backend,
            passed_over,
            handler,
            self.settings(kernel, image, preinstalled)?,
        ))
    }
}

impl SessionBuilder {
    /// A session holding what `snapshot` holds (see [`crate::snapshot`]), under this
    /// builder's policy, limits, environment, secrets and tools: nothing in a
    /// snapshot loosens them. A snapshot that holds an interpreter's state restores
    /// on the backend it was taken on only; one of files alone, on any.
    pub fn restore(&self, snapshot: &Snapshot) -> Result<Session> {
        let resolved = self.resolve()?;
        let settings = self.settings(resolved.kernel, resolved.image, Vec::new())?;
        Session::restore(
            resolved.chosen.backend,
            resolved.chosen.passed_over,
            resolved.handler,
            settings,
            snapshot,
        )
    }

    /// What a session opened by this builder keeps for all its runs.
    fn settings(
        &self,
        kernel: Option<KernelSpec>,
        image: String,
        preinstalled: Vec<String>,
    ) -> Result<Settings> {
        Ok(Settings {
            limits: self.request.limits,
            policy: self.request.policy.clone(),
            env: self.request.env.clone(),
            secrets: Secrets::new(
                self.request.secrets.clone(),
                self.request.upstream_ca.clone(),
            )?,
            libraries: self.request.libraries.clone(),
            kernel,
            one_shot: self.request.one_shot,
            earlier_output: self.request.earlier_output,
            preinstalled,
            image,
            tools: self.request.tools.clone(),
            snapshots: self.sandlot.snapshots.clone(),
            readers: self.sandlot.readers.clone(),
        })
    }
}

/// What a [`SessionBuilder`] resolves to before a sandbox is opened.
struct Resolved {
    handler: LanguageHandler,
    language: String,
    kernel: Option<KernelSpec>,
    chosen: Chosen,
    image: String,
}

impl Resolved {
    fn spec<'a>(&'a self, policy: &'a Policy, memory: usize) -> SandboxSpec<'a> {
        SandboxSpec::new(&self.language, &self.image, policy, memory)
            .with_kernel(self.kernel.as_ref())
    }
}
