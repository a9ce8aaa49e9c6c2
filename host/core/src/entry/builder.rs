//! [`SandlotBuilder`]: the providers, pools, configuration and directories a
//! [`Sandlot`] is made with.

use super::sandlot::Sandlot;
use super::slot::Slot;
use crate::backend::pool::PoolOptions;
use crate::backend::Backend;
use crate::config::Config;
use crate::dirs::{Dirs, Overrides};
use crate::error::{Error, Result};
use crate::plugin::{PluginHost, PluginHostBuilder};
use crate::provider::{BackendProvider, ProviderContext};
use crate::snapshot::{Keeper, SnapshotKey, SnapshotTrust};
use std::path::PathBuf;
use std::sync::Arc;

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

    /// Puts the backend called `backend` in a [`Pool`](crate::backend::pool::Pool) with `options`: sessions
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
}
