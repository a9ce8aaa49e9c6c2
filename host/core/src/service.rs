//! What every front end of sandlot shares — the CLI, the MCP server, the HTTP API:
//! opening sessions from names (a language, a backend) as a user or a client gives
//! them, installing the wasm runtime a session needs on first use, and the JSON form
//! of an [`Execution`](crate::Execution) (see [`crate::execution`]). It lives beside
//! [`Sandlot`] because everything it decides (which backend, what to prepare, what a
//! client can ask for) is the library's, whichever front end asks.
//!
//! ```no_run
//! use sandlot::service::Service;
//! use sandlot::OpenRequest;
//! # fn main() -> Result<(), sandlot::Error> {
//! let mut service = Service::from_environment(sandlot::providers())?;
//! let mut session = service.open(&OpenRequest::new("python"), |step| eprintln!("{step}"))?;
//! let run = session.run("print(6 * 7)")?;
//! println!("{}", serde_json::to_string_pretty(&run.to_json()).unwrap());
//! # Ok(())
//! # }
//! ```

use crate::backend::{Backend, Needs};
use crate::config::Config;
use crate::dirs::{Dirs, Overrides};
use crate::entry::{Sandlot, SandlotBuilder, SessionBuilder};
use crate::error::{Error, ErrorKind, Result};
use crate::language::LanguageInfo;
use crate::provider::{BackendProvider, Progress};
use crate::request::OpenRequest;
use crate::session::Session;
use crate::toolchain::Toolchain;
use std::sync::Arc;

/// Why a backend cannot serve now, in words for a client, not for the operator: what
/// to start or install is `sandlot doctor`'s to say.
fn why_not(error: &Error) -> String {
    match error.kind() {
        ErrorKind::Unavailable => "not running on this server".into(),
        ErrorKind::NotInstalled => "missing what it needs on this server".into(),
        ErrorKind::Config => "misconfigured on this server".into(),
        _ => first_clause(&error.to_string()).to_string(),
    }
}

/// The first clause of a reason, before its details and advice: `no WebAssembly
/// runtime for `bash` is installed (`sandlot runtimes install` ...)` is said as
/// `no WebAssembly runtime for `bash` is installed`.
fn first_clause(reason: &str) -> &str {
    let end = reason.find([';', '(']).unwrap_or(reason.len());
    reason[..end].trim_end_matches([' ', ':', ','])
}

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
        self.sandlot.close();
    }
}

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

    /// What `backend` runs the language of `info` with, in the image a session of it
    /// would get there ([`Sandlot::image_for`]); `None` where the backend cannot tell,
    /// or cannot look now.
    pub fn toolchain(&self, backend: &dyn Backend, info: &LanguageInfo) -> Option<Toolchain> {
        let image = self.sandlot.image_for(info);
        backend.toolchain(&info.id, image).ok().flatten()
    }

    /// One language in full, for a client deciding where to run: what its handler
    /// declares, and for each backend that can run it now, the interpreter and the
    /// libraries that come with it there; for each that cannot, why.
    pub fn language_details_json(&self, language: &str) -> Result<serde_json::Value> {
        use serde_json::json;
        let handler = self.sandlot.plugins().language(language)?;
        let info = handler.info();
        let needs = Needs::language(&info.id);
        let (mut backends, mut unavailable) = (Vec::new(), Vec::new());
        for name in self.sandlot.backend_names() {
            let backend = match self.sandlot.backend(name.as_str()) {
                Ok(backend) => backend,
                Err(e) => {
                    unavailable.push(json!({ "name": name.to_string(), "why": why_not(&e) }));
                    continue;
                }
            };
            if let Err(why) = backend.supports(&needs) {
                let why = first_clause(&why.0);
                unavailable.push(json!({ "name": name.to_string(), "why": why }));
                continue;
            }
            let toolchain = self.toolchain(backend.as_ref(), info);
            backends.push(json!({
                "name": name.to_string(),
                "runs_with": toolchain.as_ref().map(ToString::to_string),
                "toolchain": toolchain,
            }));
        }
        Ok(json!({
            "info": info,
            "source": handler.source().to_string(),
            "backends": backends,
            "unavailable": unavailable,
        }))
    }

    /// What a client (a model over MCP, a program over HTTP) can ask for now: the
    /// languages some backend here runs (id, name, aliases, extension, capabilities,
    /// and those backends), the backends that answer, and for each language and
    /// backend that cannot serve now, one short line saying why, which a model can act
    /// on by asking for another (not the operator's fix: that is `sandlot doctor`'s).
    pub fn languages_json(&self) -> serde_json::Value {
        use serde_json::json;
        let sandlot = &self.sandlot;
        // Each backend, or why it cannot be used now.
        type Answering = std::result::Result<Arc<dyn Backend>, String>;
        let backends: Vec<(String, Answering)> = sandlot
            .backend_names()
            .into_iter()
            .map(|name| {
                let backend = sandlot.backend(name.as_str()).map_err(|e| why_not(&e));
                (name.to_string(), backend)
            })
            .collect();
        let mut languages = Vec::new();
        let mut unavailable = Vec::new();
        for handler in sandlot.plugins().languages() {
            let info = handler.info();
            let needs = Needs::language(&info.id);
            let (mut runs_on, mut cannot) = (Vec::new(), Vec::new());
            let mut toolchains = serde_json::Map::new();
            for (name, backend) in &backends {
                let backend = match backend {
                    Ok(backend) => backend.as_ref(),
                    Err(why) => {
                        cannot.push(format!("{name}: {why}"));
                        continue;
                    }
                };
                match backend.supports(&needs) {
                    Ok(()) => {
                        runs_on.push(name.clone());
                        if let Some(toolchain) = self.toolchain(backend, info) {
                            toolchains.insert(name.clone(), json!(toolchain.to_string()));
                        }
                    }
                    Err(why) => cannot.push(format!("{name}: {}", first_clause(&why.0))),
                }
            }
            if runs_on.is_empty() {
                unavailable.push(json!({
                    "id": info.id,
                    "why": format!("no backend here can run it now: {}", cannot.join("; ")),
                }));
                continue;
            }
            languages.push(json!({
                "id": info.id,
                "name": info.display_name,
                "aliases": info.aliases,
                "extension": info.file_extension,
                "capabilities": info.capabilities,
                "backends": runs_on,
                // The same code meets another interpreter on another backend.
                "runs_with": toolchains,
            }));
        }
        let (up, down): (Vec<_>, Vec<_>) = backends.iter().partition(|(_, b)| b.is_ok());
        json!({
            "languages": languages,
            "backends": up.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "unavailable": {
                "languages": unavailable,
                "backends": down
                    .iter()
                    .map(|(name, why)| json!({ "name": name, "why": why.as_ref().err() }))
                    .collect::<Vec<_>>(),
            },
        })
    }
}
