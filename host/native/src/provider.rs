//! The provider of the native backend: bubblewrap is found when a session first needs
//! the backend, and the backend is shared from then on.

use crate::backend::NativeBackend;
use sandlot_core::backend::{Backend, BackendName};
use sandlot_core::config::Config;
use sandlot_core::error::Result;
use sandlot_core::provider::{BackendProvider, ProviderContext};
use std::sync::{Arc, Mutex};

/// Connects the [`NativeBackend`] on first use.
#[derive(Default)]
pub struct NativeProvider {
    connected: Mutex<Option<Arc<NativeBackend>>>,
}

impl NativeProvider {
    /// The backend, connected now if it was not yet, with root filesystems in
    /// [`crate::dir::default_dir`]. A failure is not remembered.
    pub fn backend(&self, _context: &ProviderContext) -> Result<Arc<NativeBackend>> {
        let mut connected = self.connected.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(backend) = &*connected {
            return Ok(backend.clone());
        }
        let backend = Arc::new(NativeBackend::connect(&crate::dir::default_dir())?);
        *connected = Some(backend.clone());
        Ok(backend)
    }
}

impl BackendProvider for NativeProvider {
    fn name(&self) -> BackendName {
        BackendName::NATIVE
    }

    /// Where it enforces every limit a container engine does: with bubblewrap
    /// installed and cgroup v1 hierarchies to put limits in, as root or as a user root
    /// delegated a cgroup to. Elsewhere a session gets it only by naming it (and
    /// `doctor` says what is missing), so that `auto` never trades a limit for speed
    /// behind the caller's back.
    fn in_auto(&self, _config: &Config) -> bool {
        crate::jail::Bwrap::on_path()
            && if crate::spawn::is_root() {
                crate::cgroup::Cgroups::mounted()
            } else {
                crate::cgroup::Cgroups::detect().is_ok()
            }
    }

    fn connect(&self, context: &ProviderContext) -> Result<Arc<dyn Backend>> {
        Ok(self.backend(context)?)
    }
}

impl NativeBackend {
    /// The native backend of `sandlot`, connected on first use.
    pub fn of(sandlot: &sandlot_core::Sandlot) -> Result<Arc<NativeBackend>> {
        match sandlot.providers::<NativeProvider>().next() {
            Some(provider) => provider.backend(sandlot.context()),
            None => Err(sandlot.unknown_backend("native")),
        }
    }
}
