//! What every connection of one proxy shares: what it lets through ([`Access`]), the
//! denials recorded, the install under way, the secrets bound and the CA that lets
//! the proxy see through TLS to their hosts.

use super::denials::Denials;
use super::intercept::{Authority, Bound};
use sandlot_agent::InstallToken;
use sandlot_core::egress::AllowList;
use std::sync::{Arc, RwLock};

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
    pub(super) denials: Denials,
    /// What the code's connections may reach.
    pub(super) access: Access,
    /// The token of the install under way, if one is: its connections reach any
    /// public destination, and end when it changes.
    pub(super) install: tokio::sync::watch::Sender<Option<InstallToken>>,
    /// The session's secrets bound to hosts, put into requests to those hosts, and
    /// its request rules.
    pub(super) secrets: RwLock<Arc<Bound>>,
    /// Bumped when the request rules change: every connection open then ends, so
    /// that none outlives the rules it was checked against.
    pub(super) rules_changed: tokio::sync::watch::Sender<u64>,
    /// The proxy's own CA, which the sandbox trusts.
    pub(super) authority: Authority,
}

impl Shared {
    /// The bound secrets and rules as they are now: a connection takes them once,
    /// when it is read.
    pub(super) fn secrets(&self) -> Arc<Bound> {
        self.secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
