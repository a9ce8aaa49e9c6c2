//! What every front end of sandlot shares — the CLI, the MCP server, the HTTP API:
//! opening sessions from names (a language, a backend) as a user or a client gives
//! them, installing the wasm runtime a session needs on first use, and the JSON form
//! of an [`Execution`](crate::Execution) (see [`crate::execution`]).
//!
//! ```no_run
//! use sandlot::service::{OpenRequest, Service};
//! # fn main() -> Result<(), sandlot::Error> {
//! let mut service = Service::from_environment()?;
//! let mut session = service.open(&OpenRequest::new("python"), |step| eprintln!("{step}"))?;
//! let run = session.run("print(6 * 7)")?;
//! println!("{}", serde_json::to_string_pretty(&run.to_json()).unwrap());
//! # Ok(())
//! # }
//! ```

use crate::backend::{Capability, Needs};
use crate::config::Config;
use crate::dirs::{Dirs, Overrides};
use crate::entry::{BackendChoice, Sandlot, SessionBuilder};
use crate::error::Result;
use crate::policy::Policy;
use crate::session::{Limits, Session};

pub use crate::execution::EXECUTION_SCHEMA;

/// A session to open, as a front end receives it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OpenRequest {
    /// Language id or alias.
    pub language: String,
    /// `auto` or a backend's name.
    pub backend: BackendChoice,
    /// A container image, instead of the configured one.
    pub image: Option<String>,
    /// Libraries every run needs.
    pub libraries: Vec<String>,
    /// Capabilities the backend must have.
    pub required: Vec<Capability>,
    /// Limits.
    pub limits: Limits,
    /// Policy.
    pub policy: Policy,
    /// Environment of every run.
    pub env: Vec<(String, String)>,
    /// Secrets: variables of every run whose values are masked in what comes back.
    pub secrets: Vec<crate::secret::Secret>,
    /// Each run a program of its own, not a cell of the language's kernel (see
    /// [`crate::SessionBuilder::one_shot`]).
    pub one_shot: bool,
    /// What happens to the files earlier runs left in the output directory.
    pub earlier_output: crate::EarlierOutput,
}

impl OpenRequest {
    /// A session for `language` with every default.
    pub fn new(language: &str) -> OpenRequest {
        OpenRequest {
            language: language.to_string(),
            ..OpenRequest::default()
        }
    }
}

/// What [`Service::open`] is doing, for a front end to show: what the provider of
/// the session's backend reports while it prepares it.
pub use crate::provider::Progress;

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
    /// From the user's configuration file and environment.
    pub fn from_environment() -> Result<Service> {
        Service::from_config(Config::discover(None)?, &Overrides::default())
    }

    /// From `config`, the environment and `overrides` (the CLI's global flags).
    pub fn from_config(config: Config, overrides: &Overrides) -> Result<Service> {
        let dirs = Dirs::resolve(&config, overrides);
        let sandlot = Sandlot::from_config(config, overrides)?;
        Ok(Service { sandlot, dirs })
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
        let language = self.language_id(&request.language)?;
        let needs = needs_of(request, &language);
        Ok(!self.sandlot.needs_preparing(&request.backend, &needs))
    }

    /// Has the provider of the backend `request` would get prepare it, if it has to:
    /// the wasm provider installs (and compiles, once) a runtime sandlot knows.
    pub fn prepare(
        &mut self,
        request: &OpenRequest,
        mut progress: impl FnMut(Progress),
    ) -> Result<()> {
        let language = self.language_id(&request.language)?;
        let needs = needs_of(request, &language);
        self.sandlot
            .prepare(&request.backend, &needs, &mut progress)
    }

    /// Opens `request` with what is installed, without installing anything: a shared
    /// borrow, so many threads can open sessions at once.
    pub fn open_prepared(&self, request: &OpenRequest) -> Result<Session> {
        self.builder_for(request)?.open()
    }

    /// The [`SessionBuilder`] for `request`: it holds a handle of its own to the
    /// backends, so a caller may let go of the service before the slow open.
    pub fn builder_for(&self, request: &OpenRequest) -> Result<SessionBuilder> {
        let language = self.language_id(&request.language)?;
        let mut builder = self.sandlot.session(&language);
        builder
            .backend(request.backend.clone())
            .limits(request.limits)
            .policy(request.policy.clone())
            .libraries(&request.libraries)
            .one_shot(request.one_shot)
            .earlier_output(request.earlier_output);
        if let Some(image) = &request.image {
            builder.image(image);
        }
        for capability in &request.required {
            builder.require(*capability);
        }
        for (key, value) in &request.env {
            builder.env(key, value);
        }
        builder.secrets(&request.secrets);
        Ok(builder)
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

    /// The language id `name` (an id or an alias) stands for.
    fn language_id(&self, name: &str) -> Result<String> {
        Ok(self.sandlot.plugins().language(name)?.info().id.clone())
    }
}

/// What a session `request` opens needs of its backend (`language` being its id).
fn needs_of<'a>(request: &'a OpenRequest, language: &'a str) -> Needs<'a> {
    Needs::language(language)
        .with_libraries(&request.libraries)
        .with_image(request.image.as_deref())
        .with_capabilities(&request.required)
}
