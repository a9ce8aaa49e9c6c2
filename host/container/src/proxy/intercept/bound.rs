//! [`Bound`]: the secrets of the session a proxy serves, and how it reaches their
//! hosts through TLS.

use super::upstream::client_config;
use rustls::ClientConfig;
use sandlot_core::secret::Injector;
use std::sync::{Arc, OnceLock};

/// The secrets bound to hosts, and the TLS to those hosts, made when first needed.
#[derive(Default)]
pub(crate) struct Bound {
    pub(crate) injector: Arc<Injector>,
    upstream: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl Bound {
    pub(crate) fn new(injector: Arc<Injector>) -> Bound {
        Bound {
            injector,
            upstream: OnceLock::new(),
        }
    }

    /// How the proxy connects to a bound host, or why it cannot (the roots the
    /// session trusts are not CA certificates).
    pub(crate) fn upstream(&self) -> Result<Arc<ClientConfig>, String> {
        self.upstream
            .get_or_init(|| client_config(self.injector.upstream_ca()).map_err(|e| e.to_string()))
            .clone()
    }
}
