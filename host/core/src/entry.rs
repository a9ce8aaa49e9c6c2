//! The entry point of the library: loaded language handlers and the backends, by name.

use crate::artifact::EarlierOutput;
use crate::backend::pool::{Pool, PoolOptions, Preinstall};
use crate::backend::{Backend, BackendName, Capability, Needs, SandboxSpec};
use crate::config::Config;
use crate::dirs::{Dirs, Overrides};
use crate::error::{Error, Result};
use crate::language::{KernelSpec, LanguageInfo};
use crate::layout::Layout;
use crate::plugin::{LanguageHandler, PluginHost, PluginHostBuilder};
use crate::policy::Policy;
use crate::provider::{Asked, BackendProvider, Prepared, Progress, ProviderContext};
use crate::request::{BackendChoice, OpenRequest};
use crate::secret::{Secret, Secrets};
use crate::session::warm::Claim;
use crate::session::{AsyncSession, Limits, Session, Settings};
use crate::snapshot::{Keeper, Snapshot, SnapshotKey, SnapshotTrust};
use crate::tool::{Tool, ToolSet};
use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One backend of a [`Sandlot`]: ready, or made by its provider on first use; pooled
/// if asked.
struct Slot {
    name: BackendName,
    ready: Mutex<Option<Arc<dyn Backend>>>,
    /// What makes the backend; none for a backend registered ready.
    provider: Option<Arc<dyn BackendProvider>>,
    /// Wrap the backend in a pool with these options.
    pool: Option<PoolOptions>,
    /// That pool, once made.
    pooled: Mutex<Option<Pool>>,
    /// Whether `auto` tries it (see [`BackendProvider::in_auto`]).
    auto: bool,
}

impl Slot {
    fn ready(backend: Arc<dyn Backend>) -> Slot {
        Slot {
            name: backend.name(),
            ready: Mutex::new(Some(backend)),
            provider: None,
            pool: None,
            pooled: Mutex::new(None),
            auto: true,
        }
    }

    fn provided(provider: Arc<dyn BackendProvider>, config: &Config) -> Slot {
        Slot {
            name: provider.name(),
            ready: Mutex::new(None),
            auto: provider.in_auto(config),
            provider: Some(provider),
            pool: None,
            pooled: Mutex::new(None),
        }
    }

    /// Puts the backend in a pool: now if it is ready, else when it is made.
    fn pool_with(&mut self, options: PoolOptions) -> Result<()> {
        self.pool = Some(options);
        let ready = self
            .ready
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(backend) = ready {
            let pooled = self.pooled(backend)?;
            *self.ready.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(pooled);
        }
        Ok(())
    }

    /// The slot's pool, once made.
    fn pool_made(&self) -> Option<Pool> {
        self.pooled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `backend`, in a pool if the slot asks for one.
    fn pooled(&self, backend: Arc<dyn Backend>) -> Result<Arc<dyn Backend>> {
        let Some(options) = &self.pool else {
            return Ok(backend);
        };
        let pool = Pool::new(backend, options.clone())?;
        *self.pooled.lock().unwrap_or_else(|e| e.into_inner()) = Some(pool.clone());
        Ok(Arc::new(pool))
    }

    /// The backend, made now if it was not yet. A failure is not remembered: an
    /// engine started later is found by the next session.
    fn get(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(backend) = &*ready {
            return Ok(backend.clone());
        }
        let backend = match &self.provider {
            Some(provider) => provider.connect(context)?,
            None => {
                return Err(Error::UnknownBackend {
                    name: self.name.to_string(),
                    known: Vec::new(),
                })
            }
        };
        let backend = self.pooled(backend)?;
        *ready = Some(backend.clone());
        Ok(backend)
    }

    /// Whether the backend is made and serves `needs`.
    fn serves(&self, needs: &Needs<'_>) -> bool {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|backend| backend.supports(needs).is_ok())
    }

    /// Forgets the backend made (and its pool) so that the provider makes it again,
    /// now if the provider is eager: after it installed what the old one could not see.
    fn remake(&self, context: &ProviderContext) -> Result<()> {
        let Some(provider) = &self.provider else {
            return Ok(());
        };
        *self.ready.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.pooled.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if provider.eager() {
            self.get(context)?;
        }
        Ok(())
    }
}

/// The entry point of the library: loaded language handlers and backends.
///
/// Create one per process and open sessions from it; it caches compiled runtimes and
/// engine connections. Clones are cheap and share everything.
///
/// Backends are held by name, each made by a [`BackendProvider`] (see
/// [`crate::provider`]). The built-in ones come first, in the order `auto` tries
/// them: `wasm`, `docker`, `podman`, `kubernetes` (engines and the cluster are
/// connected on first use); more can be added, from this crate or any other, with
/// [`SandlotBuilder::provider`] or, ready made, [`SandlotBuilder::backend`].
#[derive(Clone)]
pub struct Sandlot {
    context: ProviderContext,
    slots: Arc<Vec<Arc<Slot>>>,
    snapshots: Arc<Keeper>,
    warm: Arc<crate::session::warm::WarmStarts>,
    /// The handlers every session's command lines are read with.
    readers: Arc<crate::session::gate::Readers>,
}

impl std::fmt::Debug for Sandlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandlot")
            .field("backends", &self.backend_names())
            .finish_non_exhaustive()
    }
}

/// Configures a [`Sandlot`].
pub struct SandlotBuilder {
    plugins: PluginHost,
    config: Config,
    runtimes_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    providers: Vec<Arc<dyn BackendProvider>>,
    extra: Vec<Arc<dyn Backend>>,
    pools: Vec<(String, PoolOptions)>,
    snapshot_key: Option<SnapshotKey>,
    snapshot_trust: SnapshotTrust,
    warm_start: bool,
}

impl SandlotBuilder {
    /// The key snapshots are signed with and checked against. Default: the one in
    /// sandlot's data directory (`snapshot.key`), made there on first use. Hosts that
    /// restore each other's snapshots share one.
    pub fn snapshot_key(mut self, key: SnapshotKey) -> Self {
        self.snapshot_key = Some(key);
        self
    }

    /// Warm starts (default off): sessions of a language whose backend captures
    /// interpreters (Python on wasm) start from a base snapshot with the language's
    /// data stack imported, made once per process in the background, instead of
    /// importing it on their first cell. See [`Sandlot::set_warm_start`].
    pub fn warm_start(mut self, on: bool) -> Self {
        self.warm_start = on;
        self
    }

    /// Which snapshots [`Sandlot::open_snapshot`] and [`Sandlot::read_snapshot`]
    /// accept. Default: only those signed with this host's key.
    pub fn snapshot_trust(mut self, trust: SnapshotTrust) -> Self {
        self.snapshot_trust = trust;
        self
    }

    /// Puts the backend called `backend` in a [`Pool`] with `options`: sessions
    /// opened on it draw pre-warmed sandboxes, one per session (see
    /// [`crate::backend::pool`]). A container engine's pool is made when the engine is
    /// first connected.
    pub fn pool(mut self, backend: &str, options: PoolOptions) -> Self {
        self.pools.retain(|(name, _)| name != backend);
        self.pools.push((backend.to_string(), options));
        self
    }

    /// Container settings (engine endpoints, images per language) from `config`.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Where the wasm backend finds its runtimes (default: see [`crate::dirs`]).
    pub fn runtimes_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.runtimes_dir = Some(dir.into());
        self
    }

    /// Where compiled runtimes are cached; `None` caches nothing on disk.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Registers `providers`, in order, after those registered before them (see
    /// [`provider`](Self::provider)). The `sandlot` crate's `providers()` are the
    /// built-in ones its features enable.
    pub fn providers(
        mut self,
        providers: impl IntoIterator<Item = Arc<dyn BackendProvider>>,
    ) -> Self {
        self.providers.extend(providers);
        self
    }

    /// Registers `provider` after those registered before it; one with the name of a
    /// provider registered before replaces it in place.
    pub fn provider(mut self, provider: Arc<dyn BackendProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    /// Registers a ready `backend` after the providers' backends; one with the name
    /// of a provider's backend replaces it in place.
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.extra.push(backend);
        self
    }

    /// Makes the [`Sandlot`]: the eager providers' backends now (the wasm backend
    /// finds its runtimes), the others on first use.
    pub fn build(self) -> Result<Sandlot> {
        let runtimes_dir = match self.runtimes_dir {
            Some(dir) => dir,
            None => {
                Dirs::resolve(&self.config, &Overrides::default())
                    .runtimes
                    .value
            }
        };
        let context = ProviderContext {
            config: Arc::new(self.config),
            plugins: Arc::new(self.plugins),
            runtimes_dir,
            cache_dir: self.cache_dir,
        };
        let mut slots: Vec<Slot> = Vec::new();
        let provided = self
            .providers
            .into_iter()
            .map(|provider| Slot::provided(provider, &context.config));
        for slot in provided.chain(self.extra.into_iter().map(Slot::ready)) {
            match slots.iter_mut().find(|s| s.name == slot.name) {
                Some(existing) => *existing = slot,
                None => slots.push(slot),
            }
        }
        for slot in &slots {
            if slot.provider.as_ref().is_some_and(|p| p.eager()) {
                slot.get(&context)?;
            }
        }
        for (name, options) in self.pools {
            let known: Vec<String> = slots.iter().map(|s| s.name.to_string()).collect();
            let slot = slots
                .iter_mut()
                .find(|s| s.name == name.as_str())
                .ok_or(Error::UnknownBackend { name, known })?;
            slot.pool_with(options)?;
        }
        Ok(Sandlot {
            readers: Arc::new(crate::session::gate::Readers::of(&context.plugins)),
            context,
            slots: Arc::new(slots.into_iter().map(Arc::new).collect()),
            snapshots: Arc::new(Keeper::new(self.snapshot_key, self.snapshot_trust)),
            warm: Arc::new(crate::session::warm::WarmStarts::new(self.warm_start)),
        })
    }
}

impl SandlotBuilder {
    /// Plugins, runtimes and caches from the user's configuration file (see
    /// [`Config::discover`]) and environment, in the order [`crate::dirs`] documents;
    /// no provider yet.
    pub fn from_environment() -> Result<SandlotBuilder> {
        let config = Config::discover(None)?;
        SandlotBuilder::from_config(config, &Overrides::default())
    }

    /// Plugins, runtimes, caches and pools from `config`, the environment and
    /// `overrides` (the CLI's global flags), in the order [`crate::dirs`] documents;
    /// no provider yet.
    pub fn from_config(config: Config, overrides: &Overrides) -> Result<SandlotBuilder> {
        let dirs = Dirs::resolve(&config, overrides);
        let plugins = PluginHostBuilder::from_dirs(&dirs).load()?;
        let mut builder = Sandlot::builder(plugins)
            .runtimes_dir(dirs.runtimes_dir())
            .cache_dir(dirs.cache.value.clone());
        for (backend, options) in &config.pools {
            builder = builder.pool(backend, options.clone());
        }
        Ok(builder.config(config))
    }
}

impl Sandlot {
    /// Starts configuring a [`Sandlot`] over `plugins`, with no provider: the `sandlot`
    /// crate's `builder` adds the built-in ones its features enable.
    pub fn builder(plugins: PluginHost) -> SandlotBuilder {
        SandlotBuilder {
            plugins,
            config: Config::default(),
            runtimes_dir: None,
            cache_dir: None,
            providers: Vec::new(),
            extra: Vec::new(),
            pools: Vec::new(),
            snapshot_key: None,
            snapshot_trust: SnapshotTrust::default(),
            warm_start: false,
        }
    }

    /// The loaded plugins.
    pub fn plugins(&self) -> &PluginHost {
        &self.context.plugins
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.context.config
    }

    /// The container image a session of `language` gets unless it names one: the
    /// configured one (`[images]` in sandlot.toml), else its handler's default.
    pub fn image_for<'a>(&'a self, language: &'a LanguageInfo) -> &'a str {
        match self.config().images.get(&language.id) {
            Some(image) => image,
            None => &language.default_image,
        }
    }

    /// What the providers make their backends from.
    pub fn context(&self) -> &ProviderContext {
        &self.context
    }

    /// The registered providers of type `P` (a built-in one, or an application's),
    /// in registration order: how typed access to a provider's backend is reached.
    pub fn providers<P: BackendProvider>(&self) -> impl Iterator<Item = &P> {
        self.slots
            .iter()
            .filter_map(|slot| slot.provider.as_deref())
            .filter_map(|provider| (provider as &dyn Any).downcast_ref::<P>())
    }

    /// Whether opening a session with `needs` on `choice` would first have a provider
    /// prepare its backend (install a runtime): a front end then says so, and takes
    /// the time.
    pub fn needs_preparing(&self, choice: &BackendChoice, needs: &Needs<'_>) -> bool {
        for (slot, asked) in self.candidates(choice) {
            let preparing = slot
                .provider
                .as_ref()
                .is_some_and(|p| p.needs_preparing(&self.context, needs, asked));
            if preparing {
                return true;
            }
            if slot.serves(needs) {
                return false;
            }
        }
        false
    }

    /// Has the provider of the backend a session with `needs` would get on `choice`
    /// prepare it, if it needs to (the wasm provider installs the language's runtime
    /// on first use, and says when a runtime is compiled); `progress` hears about the
    /// slow steps. For `auto`, each provider in order, until a backend made serves
    /// `needs` (one not made yet is not connected for this).
    pub fn prepare(
        &self,
        choice: &BackendChoice,
        needs: &Needs<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        for (slot, asked) in self.candidates(choice) {
            if let Some(provider) = &slot.provider {
                if provider.prepare(&self.context, needs, asked, progress)? == Prepared::Remake {
                    slot.remake(&self.context)?;
                }
            }
            if slot.serves(needs) {
                break;
            }
        }
        Ok(())
    }

    /// The slots whose providers are asked to prepare for `choice`, and how: the one
    /// named, or for `auto` those `auto` tries, in order.
    fn candidates(&self, choice: &BackendChoice) -> Vec<(&Slot, Asked)> {
        match choice {
            BackendChoice::Named(name) => self
                .slot(name)
                .ok()
                .map(|slot| (slot, Asked::ByName))
                .into_iter()
                .collect(),
            BackendChoice::Auto => self
                .slots
                .iter()
                .filter(|slot| slot.auto)
                .map(|slot| (slot.as_ref(), Asked::ByAuto))
                .collect(),
        }
    }

    /// The error for a backend this `Sandlot` does not have.
    /// The error for a backend called `name` that this `Sandlot` does not have, with
    /// the names of those it has.
    pub fn unknown_backend(&self, name: &str) -> Error {
        Error::UnknownBackend {
            name: name.to_string(),
            known: self.backend_names().iter().map(|n| n.to_string()).collect(),
        }
    }

    /// The pool of the backend called `name` (see [`SandlotBuilder::pool`]), made now
    /// if its engine was not connected yet.
    pub fn pool(&self, name: &str) -> Result<Pool> {
        let slot = self.slot(name)?;
        slot.get(&self.context)?;
        slot.pool_made().ok_or_else(|| Error::NotPooled {
            backend: name.to_string(),
        })
    }

    /// The pool of the backend called `name`, if it is pooled and made.
    fn pool_made(&self, name: &str) -> Option<Pool> {
        self.slot(name).ok()?.pool_made()
    }

    /// The slot of the backend called `name`.
    fn slot(&self, name: &str) -> Result<&Slot> {
        self.slots
            .iter()
            .find(|s| s.name == name)
            .map(|slot| slot.as_ref())
            .ok_or_else(|| self.unknown_backend(name))
    }

    /// Closes every pool this `Sandlot` made (see [`Pool::close`]): sessions in use
    /// get until `deadline`, and every pooled sandbox is gone when this returns. A
    /// process that ends without it leaves in-process sandboxes' workspaces behind.
    pub fn close_pools(&self, deadline: Duration) {
        for pool in self.slots.iter().filter_map(|slot| slot.pool_made()) {
            pool.close(deadline);
        }
    }

    /// The names of the backends, in the order `auto` tries them.
    pub fn backend_names(&self) -> Vec<BackendName> {
        self.slots.iter().map(|s| s.name.clone()).collect()
    }

    /// The backend called `name`, connected now if it was not yet.
    pub fn backend(&self, name: &str) -> Result<Arc<dyn Backend>> {
        self.slot(name)?.get(&self.context)
    }

    /// The backend a session gets: the one named, checked against `needs`, or for
    /// `auto` the first that answers and can serve `needs`. Says why each backend
    /// before it was passed over (in the error, when none can).
    pub fn choose(&self, choice: &BackendChoice, needs: &Needs<'_>) -> Result<Chosen> {
        match choice {
            BackendChoice::Named(name) => {
                let backend = self.backend(name)?;
                backend
                    .supports(needs)
                    .map_err(|why| Error::BackendUnsuitable {
                        backend: name.to_string(),
                        language: needs.language.to_string(),
                        reason: why.0,
                    })?;
                Ok(Chosen {
                    backend,
                    passed_over: Vec::new(),
                })
            }
            BackendChoice::Auto => {
                let mut passed_over = Vec::new();
                for slot in self.slots.iter().filter(|slot| slot.auto) {
                    match slot.get(&self.context) {
                        Ok(backend) => match backend.supports(needs) {
                            Ok(()) => {
                                return Ok(Chosen {
                                    backend,
                                    passed_over,
                                })
                            }
                            Err(why) => passed_over.push((slot.name.clone(), why.0)),
                        },
                        Err(error) => passed_over.push((slot.name.clone(), error.to_string())),
                    }
                }
                Err(Error::NoBackend {
                    language: needs.language.to_string(),
                    passed_over: passed_over
                        .into_iter()
                        .map(|(name, why)| (name.to_string(), why))
                        .collect(),
                })
            }
        }
    }

    /// Turns warm starts on or off for this `Sandlot` and its clones (see
    /// [`SandlotBuilder::warm_start`]); off also drops the bases made, and their
    /// memory. A warm session's namespace is a fresh one's: the base imports into the
    /// interpreter's module cache and binds no name. Long-lived hosts (servers,
    /// notebooks) gain most: the first session of each backend starts fresh while
    /// the base is made beside it, every later one starts warm.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// let sandlot = sandlot::from_environment()?;
    /// sandlot.set_warm_start(true);
    /// sandlot.session("python").backend("wasm").warm_up()?; // made now, not beside the first session
    /// let mut session = sandlot.session("python").backend("wasm").open()?;
    /// session.run("import pandas as pd")?; // already imported: no time
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_warm_start(&self, on: bool) {
        self.warm.set(on);
    }

    /// Whether warm starts are on.
    pub fn warm_start(&self) -> bool {
        self.warm.on()
    }

    /// Reads the snapshot file at `path` and checks it whole (see [`Snapshot::read`]),
    /// with this host's key and trust ([`SandlotBuilder::snapshot_key`]).
    pub fn open_snapshot(&self, path: &Path) -> Result<Snapshot> {
        Snapshot::open(path, self.snapshots.key()?, self.snapshots.trust)
    }

    /// [`Sandlot::open_snapshot`] of a stream (read to its end).
    pub fn read_snapshot(&self, input: &mut dyn std::io::Read) -> Result<Snapshot> {
        Snapshot::read(input, self.snapshots.key()?, self.snapshots.trust)
    }

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

/// The backend [`Sandlot::choose`] picked.
#[derive(Clone)]
#[non_exhaustive]
pub struct Chosen {
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// The backends tried before it, and why each could not serve.
    pub passed_over: Vec<(BackendName, String)>,
}

/// Configures and opens a [`Session`]: an [`OpenRequest`] and the [`Sandlot`] it is
/// opened on.
#[derive(Clone)]
pub struct SessionBuilder {
    sandlot: Sandlot,
    request: OpenRequest,
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
    /// (`"wasm"`, `"docker"`, `"podman"`, or one registered by the application).
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
    /// [`SandlotBuilder::pool`]) and waits until the first is, so the next
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
                let settings =
                    self.settings(resolved.kernel.clone(), resolved.image.clone(), Vec::new());
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
            self.settings(kernel, image, preinstalled),
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
        let settings = self.settings(resolved.kernel, resolved.image, Vec::new());
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
    ) -> Settings {
        Settings {
            limits: self.request.limits,
            policy: self.request.policy.clone(),
            env: self.request.env.clone(),
            secrets: Secrets::new(self.request.secrets.clone()),
            libraries: self.request.libraries.clone(),
            kernel,
            one_shot: self.request.one_shot,
            earlier_output: self.request.earlier_output,
            preinstalled,
            image,
            tools: self.request.tools.clone(),
            snapshots: self.sandlot.snapshots.clone(),
            readers: self.sandlot.readers.clone(),
        }
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
