//! What every connection of one proxy shares: what it lets through ([`Access`]), the
//! denials recorded, and the install under way.

use sandlot_agent::InstallToken;
use sandlot_core::egress::{AllowList, Denial, DenyReason, Via};
use sandlot_core::secret::Injector;
use std::sync::{Arc, Mutex, RwLock};

/// Denials kept for one run; a loop that is refused a million times reports the first.
const MAX_DENIALS: usize = 100;

/// What a proxy lets a sandbox's code through to. An engine that cannot give a
/// sandbox a network later (a network namespace is fixed when it is made) sends
/// everything through a proxy instead; its installs go out with a token of their own
/// ([`EgressProxy::admit_install`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Nothing, and nothing recorded as denied: the sandbox simply has no network.
    Closed,
    /// Any public destination: no loopback, private or link-local address, whatever
    /// a name resolves to.
    Public,
    /// What the allow-list holds.
    Listed,
}

pub(super) struct Shared {
    pub(super) allow: AllowList,
    pub(super) denials: Mutex<Vec<Denial>>,
    /// What the code's connections may reach.
    pub(super) access: Access,
    /// The token of the install under way, if one is: its connections reach any
    /// public destination, and end when it changes.
    pub(super) install: tokio::sync::watch::Sender<Option<InstallToken>>,
    /// The session's secrets bound to hosts: put into requests to those hosts.
    pub(super) secrets: RwLock<Arc<Injector>>,
}

impl Shared {
    /// The bound secrets as they are now: a request takes them once, when it is read.
    pub(super) fn secrets(&self) -> Arc<Injector> {
        self.secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn deny(
        &self,
        host: &str,
        port: Option<u16>,
        via: Via,
        reason: DenyReason,
    ) -> Denial {
        let denial = Denial::new(host, port, via, reason);
        let mut denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
            denials.push(denial.clone());
        }
        denial
    }
}
