//! The providers of the Docker and Podman backends: each engine is connected when a
//! session first needs it, at the endpoint sandlot.toml names or where the engine
//! usually listens, and the connection is shared from then on.

use crate::backend::ContainerBackend;
use crate::engine::Engine;
use sandlot_core::backend::{Backend, BackendName};
use sandlot_core::error::Result;
use sandlot_core::provider::{BackendProvider, ProviderContext};
use std::sync::{Arc, Mutex};

/// Connects one container engine's [`ContainerBackend`] on first use.
pub struct ContainerProvider {
    engine: Engine,
    connected: Mutex<Option<Arc<ContainerBackend>>>,
}

impl ContainerProvider {
    /// The provider of `engine`'s backend, named after the engine.
    pub fn new(engine: Engine) -> ContainerProvider {
        ContainerProvider {
            engine,
            connected: Mutex::new(None),
        }
    }

    /// The engine it connects.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The engine's backend, connected now if it was not yet: at the configured
    /// endpoint (`docker_host` / `podman_host`), else where the engine usually
    /// listens. A failure is not remembered.
    pub fn backend(&self, context: &ProviderContext) -> Result<Arc<ContainerBackend>> {
        let mut connected = self.connected.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(backend) = &*connected {
            return Ok(backend.clone());
        }
        let config = context.config();
        let endpoint = match self.engine {
            Engine::Podman => config.podman_host.as_deref(),
            _ => config.docker_host.as_deref(),
        };
        let mut builder = ContainerBackend::builder(self.engine);
        if let Some(endpoint) = endpoint {
            builder.endpoint(endpoint);
        }
        // Beside the compiled components: what images hold is as much a cache.
        if let Some(dir) = context.cache_dir() {
            builder.cache_dir(dir.join("image-packages"));
        }
        let backend = Arc::new(builder.connect()?);
        *connected = Some(backend.clone());
        Ok(backend)
    }
}

impl BackendProvider for ContainerProvider {
    fn name(&self) -> BackendName {
        match self.engine {
            Engine::Podman => BackendName::PODMAN,
            _ => BackendName::DOCKER,
        }
    }

    fn connect(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
        Ok(self.backend(context)?)
    }
}

impl ContainerBackend {
    /// The Docker or Podman backend of `sandlot`, connected on first use: at the
    /// configured endpoint (`docker_host` / `podman_host` in sandlot.toml), else where
    /// the engine usually listens.
    pub fn of(sandlot: &sandlot_core::Sandlot, engine: Engine) -> Result<Arc<ContainerBackend>> {
        match sandlot
            .providers::<ContainerProvider>()
            .find(|p| p.engine() == engine)
        {
            Some(provider) => provider.backend(sandlot.context()),
            None => Err(sandlot.unknown_backend(engine.name())),
        }
    }
}
