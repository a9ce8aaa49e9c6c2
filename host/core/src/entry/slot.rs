//! One backend of a [`Sandlot`](super::Sandlot): ready, or made by its provider on
//! first use; pooled if asked.

use crate::backend::pool::{Pool, PoolOptions};
use crate::backend::{Backend, BackendName, Needs};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::provider::{BackendProvider, ProviderContext};
use std::sync::{Arc, Mutex};

/// One backend of a [`Sandlot`]: ready, or made by its provider on first use; pooled
/// if asked.
pub(super) struct Slot {
    pub(super) name: BackendName,
    pub(super) ready: Mutex<Option<Arc<dyn Backend>>>,
    /// What makes the backend; none for a backend registered ready.
    pub(super) provider: Option<Arc<dyn BackendProvider>>,
    /// Wrap the backend in a pool with these options.
    pub(super) pool: Option<PoolOptions>,
    /// That pool, once made.
    pub(super) pooled: Mutex<Option<Pool>>,
    /// Whether `auto` tries it (see [`BackendProvider::in_auto`]).
    pub(super) auto: bool,
}

impl Slot {
    pub(super) fn ready(backend: Arc<dyn Backend>) -> Slot {
        Slot {
            name: backend.name(),
            ready: Mutex::new(Some(backend)),
            provider: None,
            pool: None,
            pooled: Mutex::new(None),
            auto: true,
        }
    }

    pub(super) fn provided(provider: Arc<dyn BackendProvider>, config: &Config) -> Slot {
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
    pub(super) fn pool_with(&mut self, options: PoolOptions) -> Result<()> {
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
    pub(super) fn pool_made(&self) -> Option<Pool> {
        self.pooled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `backend`, in a pool if the slot asks for one.
    pub(super) fn pooled(&self, backend: Arc<dyn Backend>) -> Result<Arc<dyn Backend>> {
        let Some(options) = &self.pool else {
            return Ok(backend);
        };
        let pool = Pool::new(backend, options.clone())?;
        *self.pooled.lock().unwrap_or_else(|e| e.into_inner()) = Some(pool.clone());
        Ok(Arc::new(pool))
    }

    /// The backend, made now if it was not yet. A failure is not remembered: an
    /// engine started later is found by the next session.
    pub(super) fn get(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
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
    pub(super) fn serves(&self, needs: &Needs<'_>) -> bool {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|backend| backend.supports(needs).is_ok())
    }

    /// Forgets the backend made (and its pool) so that the provider makes it again,
    /// now if the provider is eager: after it installed what the old one could not see.
    pub(super) fn remake(&self, context: &ProviderContext) -> Result<()> {
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
