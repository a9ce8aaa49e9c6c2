//! What every front end of sandlot shares — the CLI, the MCP server, the HTTP API:
//! opening sessions from names (a language, a backend) as a user or a client gives
//! them, installing the wasm runtime a session needs on first use, and the JSON form
//! of an [`Execution`](sandlot_core::Execution) (see [`sandlot_core::execution`]).
//!
//! ```no_run
//! use sandlot::server::service::{OpenRequest, Service};
//! # fn main() -> Result<(), sandlot::Error> {
//! let mut service = Service::from_environment(sandlot::providers())?;
//! let mut session = service.open(&OpenRequest::new("python"), |step| eprintln!("{step}"))?;
//! let run = session.run("print(6 * 7)")?;
//! println!("{}", serde_json::to_string_pretty(&run.to_json()).unwrap());
//! # Ok(())
//! # }
//! ```

use sandlot_core::config::Config;
use sandlot_core::dirs::{Dirs, Overrides};
use sandlot_core::entry::{Sandlot, SandlotBuilder, SessionBuilder};
use sandlot_core::error::Result;
use sandlot_core::provider::BackendProvider;
use sandlot_core::session::Session;
use std::sync::Arc;

pub use sandlot_core::execution::EXECUTION_SCHEMA;

/// A session to open, as every front end describes it.
pub use sandlot_core::OpenRequest;

/// What [`Service::open`] is doing, for a front end to show: what the provider of
/// the session's backend reports while it prepares it.
pub use sandlot_core::provider::Progress;

/// A [`Sandlot`] with the directories it was made from, and the front ends' shared
/// operations.
///
/// Not `Clone`: dropping it closes the pools it made (see its `Drop`), which copies
/// would share.
#[derive(Debug)]
pub struct Service {
    sandlot: Sandlot,
    dirs: Dirs,
}

impl Drop for Service {
    /// Closes the pools `sandlot.toml` asked for, so that nothing they warmed outlives
    /// the front end (a process that exits does not wait for background threads).
    fn drop(&mut self) {
        self.sandlot.close_pools(POOL_CLOSE_DEADLINE);
    }
}

/// How long a closing front end waits for pooled sessions still in use.
const POOL_CLOSE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

impl Service {
    /// From the user's configuration file and environment, with `providers` (the
    /// `sandlot` crate's `providers()` are the built-in ones).
    pub fn from_environment(providers: Vec<Arc<dyn BackendProvider>>) -> Result<Service> {
        Service::from_config(Config::discover(None)?, &Overrides::default(), providers)
    }

    /// From `config`, the environment and `overrides` (the CLI's global flags), with
    /// `providers`.
    pub fn from_config(
        config: Config,
        overrides: &Overrides,
        providers: Vec<Arc<dyn BackendProvider>>,
    ) -> Result<Service> {
        let dirs = Dirs::resolve(&config, overrides);
        let sandlot = SandlotBuilder::from_config(config, overrides)?
            .providers(providers)
            .build()?;
        Ok(Service { sandlot, dirs })
    }

    /// Over a ready `sandlot`, whose directories are `dirs`.
    pub fn new(sandlot: Sandlot, dirs: Dirs) -> Service {
        Service { sandlot, dirs }
    }

    /// The library's entry point.
    pub fn sandlot(&self) -> &Sandlot {
        &self.sandlot
    }

    /// The directories in force.
    pub fn dirs(&self) -> &Dirs {
        &self.dirs
    }

    /// Opens the session `request` describes. When the wasm backend would run it
    /// (named, or `auto` with nothing the wasm runtime lacks) and sandlot knows how to
    /// install the runtime, it is installed first; `progress` hears about the slow
    /// steps.
    pub fn open(
        &mut self,
        request: &OpenRequest,
        progress: impl FnMut(Progress),
    ) -> Result<Session> {
        self.prepare(request, progress)?;
        self.open_prepared(request)
    }

    /// Whether [`Service::open_prepared`] can open `request` as it is: false when the
    /// provider of its backend has to prepare it first (install the wasm runtime;
    /// [`Service::prepare`] does that).
    pub fn is_prepared(&self, request: &OpenRequest) -> Result<bool> {
        Ok(!self.builder_for(request).needs_preparing()?)
    }

    /// Has the provider of the backend `request` would get prepare it, if it has to:
    /// the wasm provider installs (and compiles, once) a runtime sandlot knows.
    pub fn prepare(
        &mut self,
        request: &OpenRequest,
        mut progress: impl FnMut(Progress),
    ) -> Result<()> {
        self.builder_for(request).prepare(&mut progress)
    }

    /// Opens `request` with what is installed, without installing anything: a shared
    /// borrow, so many threads can open sessions at once.
    pub fn open_prepared(&self, request: &OpenRequest) -> Result<Session> {
        self.builder_for(request).open()
    }

    /// The [`SessionBuilder`] for `request`: it holds a handle of its own to the
    /// backends, so a caller may let go of the service before the slow open.
    pub fn builder_for(&self, request: &OpenRequest) -> SessionBuilder {
        self.sandlot.session_for(request.clone())
    }

    /// The languages and backends, as the servers describe them: id, name, aliases,
    /// extension and capabilities of each language, and the backends' names.
    pub fn languages_json(&self) -> serde_json::Value {
        let languages: Vec<_> = self
            .sandlot
            .plugins()
            .languages()
            .iter()
            .map(|handler| {
                let info = handler.info();
                serde_json::json!({
                    "id": info.id,
                    "name": info.display_name,
                    "aliases": info.aliases,
                    "extension": info.file_extension,
                    "capabilities": info.capabilities,
                })
            })
            .collect();
        serde_json::json!({
            "languages": languages,
            "backends": self.sandlot.backend_names(),
        })
    }
}
