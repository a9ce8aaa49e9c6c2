//! The [`Sandlot`] type: the handlers, the backends by name, the snapshot keeper and
//! the warm starts every session of a process shares.

use super::slot::Slot;
use crate::backend::pool::Pool;
use crate::backend::{Backend, BackendName};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::language::LanguageInfo;
use crate::plugin::PluginHost;
use crate::provider::{BackendProvider, ProviderContext};
use crate::snapshot::{Keeper, Snapshot};
use std::any::Any;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The entry point of the library: loaded language handlers and backends.
///
/// Create one per process and open sessions from it; it caches compiled runtimes and
/// engine connections. Clones are cheap and share everything.
///
/// Backends are held by name, each made by a [`BackendProvider`] (see
/// [`crate::provider`]). The built-in ones come first, in the order `auto` tries
/// them: `wasm`, `native` (in `auto` only where it enforces every limit the engines
/// do), `docker`, `podman`, `kubernetes` (engines and the cluster are connected on
/// first use); more can be added, from this crate or any other, with
/// [`SandlotBuilder::provider`](crate::SandlotBuilder::provider) or, ready made, [`SandlotBuilder::backend`](crate::SandlotBuilder::backend).
#[derive(Clone)]
pub struct Sandlot {
    pub(super) context: ProviderContext,
    pub(super) slots: Arc<Vec<Arc<Slot>>>,
    pub(super) snapshots: Arc<Keeper>,
    pub(super) warm: Arc<crate::session::warm::WarmStarts>,
    /// The handlers every session's command lines are read with.
    pub(super) readers: Arc<crate::session::gate::Readers>,
}

impl std::fmt::Debug for Sandlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandlot")
            .field("backends", &self.backend_names())
            .finish_non_exhaustive()
    }
}

impl Sandlot {
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

    /// The error for a backend called `name` that this `Sandlot` does not have, with
    /// the names of those it has.
    pub fn unknown_backend(&self, name: &str) -> Error {
        Error::UnknownBackend {
            name: name.to_string(),
            known: self.backend_names().iter().map(|n| n.to_string()).collect(),
        }
    }

    /// The pool of the backend called `name` (see [`SandlotBuilder::pool`](crate::SandlotBuilder::pool)), made now
    /// if its engine was not connected yet.
    pub fn pool(&self, name: &str) -> Result<Pool> {
        let slot = self.slot(name)?;
        slot.get(&self.context)?;
        slot.pool_made().ok_or_else(|| Error::NotPooled {
            backend: name.to_string(),
        })
    }

    /// The pool of the backend called `name`, if it is pooled and made.
    pub(super) fn pool_made(&self, name: &str) -> Option<Pool> {
        self.slot(name).ok()?.pool_made()
    }

    /// The slot of the backend called `name`.
    pub(super) fn slot(&self, name: &str) -> Result<&Slot> {
        self.slots
            .iter()
            .find(|s| s.name == name)
            .map(|slot| slot.as_ref())
            .ok_or_else(|| self.unknown_backend(name))
    }

    /// How long [`Sandlot::close`] lets sessions still using a pooled sandbox run
    /// before the pool destroys it anyway.
    pub const POOL_CLOSE_DEADLINE: Duration = Duration::from_secs(10);

    /// Closes every pool this `Sandlot` made, giving sessions in use
    /// [`Sandlot::POOL_CLOSE_DEADLINE`]: what a front end does as it ends (the CLI,
    /// the server, the Python package's `Sandlot.close` and its exit hook). Sessions
    /// opened later open unpooled.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// let sandlot = sandlot::from_environment()?;
    /// // ... sessions from pooled backends ...
    /// sandlot.close();
    /// # Ok(())
    /// # }
    /// ```
    pub fn close(&self) {
        self.close_pools(Self::POOL_CLOSE_DEADLINE);
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

    /// Turns warm starts on or off for this `Sandlot` and its clones (see
    /// [`SandlotBuilder::warm_start`](crate::SandlotBuilder::warm_start)); off also drops the bases made, and their
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
    /// with this host's key and trust ([`SandlotBuilder::snapshot_key`](crate::SandlotBuilder::snapshot_key)).
    pub fn open_snapshot(&self, path: &Path) -> Result<Snapshot> {
        Snapshot::open(path, self.snapshots.key()?, self.snapshots.trust)
    }

    /// [`Sandlot::open_snapshot`] of a stream (read to its end).
    pub fn read_snapshot(&self, input: &mut dyn std::io::Read) -> Result<Snapshot> {
        Snapshot::read(input, self.snapshots.key()?, self.snapshots.trust)
    }
}
