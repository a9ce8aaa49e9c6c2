//! [`Bound`]: what a proxy holds the requests to some hosts to (the session's
//! secrets bound to hosts, its request rules), and how it reaches those hosts
//! through TLS.

use super::upstream::client_config;
use rustls::ClientConfig;
use sandlot_core::egress::RequestRules;
use sandlot_core::secret::Injector;
use std::sync::{Arc, OnceLock};

/// The secrets bound to hosts, the request rules, and the TLS to the hosts either
/// names, made when first needed.
#[derive(Default)]
pub(crate) struct Bound {
    pub(crate) injector: Arc<Injector>,
    pub(crate) rules: Arc<RequestRules>,
    upstream: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl Bound {
    pub(crate) fn new(injector: Arc<Injector>, rules: Arc<RequestRules>) -> Bound {
        Bound {
            injector,
            rules,
            upstream: OnceLock::new(),
        }
    }

    /// Whether the requests to `host` must be read, through TLS too: a secret is
    /// bound to it, or a rule names it.
    pub(crate) fn sees_through(&self, host: &str) -> bool {
        self.injector.binds(host) || self.rules.governs(host)
    }

    /// How the proxy connects to a host it sees through, or why it cannot (the
    /// roots the session trusts are not CA certificates).
    pub(crate) fn upstream(&self) -> Result<Arc<ClientConfig>, String> {
        self.upstream
            .get_or_init(|| client_config(self.injector.upstream_ca()).map_err(|e| e.to_string()))
            .clone()
    }
}
