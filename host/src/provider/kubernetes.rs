//! The Kubernetes backend's provider: the cluster of sandlot.toml's `[kubernetes]`
//! section (or the environment's kubeconfig), connected when a session first needs
//! it; `auto` tries it only when that section exists.

use super::{BackendProvider, ProviderContext};
use crate::backend::kubernetes::KubernetesBackend;
use crate::backend::{Backend, BackendName};
use crate::config::{Config, KubernetesConfig};
use crate::error::Result;
use std::sync::{Arc, Mutex};

/// Connects the [`KubernetesBackend`] on first use.
#[derive(Default)]
pub struct KubernetesProvider {
    connected: Mutex<Option<Arc<KubernetesBackend>>>,
}

impl KubernetesProvider {
    /// The cluster's backend, connected now if it was not yet, with sandlot.toml's
    /// `[kubernetes]` settings, else the environment's kubeconfig. A failure is not
    /// remembered.
    pub fn backend(&self, context: &ProviderContext) -> Result<Arc<KubernetesBackend>> {
        let mut connected = self.connected.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(backend) = &*connected {
            return Ok(backend.clone());
        }
        let builder = KubernetesBackend::configured(&context.config().kubernetes)?;
        let backend = Arc::new(builder.connect()?);
        *connected = Some(backend.clone());
        Ok(backend)
    }
}

impl BackendProvider for KubernetesProvider {
    fn name(&self) -> BackendName {
        BackendName::KUBERNETES
    }

    /// Only a cluster sandlot.toml names: the ambient kubeconfig may point anywhere.
    fn in_auto(&self, config: &Config) -> bool {
        config.kubernetes != KubernetesConfig::default()
    }

    fn connect(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
        Ok(self.backend(context)?)
    }
}
