//! The Kubernetes backend's provider: the cluster of sandlot.toml's `[kubernetes]`
//! section (or the environment's kubeconfig), connected when a session first needs
//! it; `auto` tries it only when that section exists.

use crate::backend::KubernetesBackend;
use sandlot_core::backend::{Backend, BackendName};
use sandlot_core::config::{Config, KubernetesConfig};
use sandlot_core::error::Result;
use sandlot_core::provider::{BackendProvider, ProviderContext};
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

impl KubernetesBackend {
    /// The Kubernetes backend of `sandlot`, connected on first use with sandlot.toml's
    /// `[kubernetes]` settings, else the environment's kubeconfig.
    pub fn of(sandlot: &sandlot_core::Sandlot) -> Result<Arc<KubernetesBackend>> {
        match sandlot.providers::<KubernetesProvider>().next() {
            Some(provider) => provider.backend(sandlot.context()),
            None => Err(sandlot.unknown_backend(BackendName::KUBERNETES.as_str())),
        }
    }
}
