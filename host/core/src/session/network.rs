//! Changing a live session's network: its request rules, from the next request on.

use super::state::Session;
use crate::egress::RequestRules;
use crate::error::{Error, Result};

/// A change to a live session's network, for [`Session::update_network`]: each field
/// set replaces what the session's policy had; one left `None` keeps it.
///
/// ```
/// use sandlot::session::NetworkUpdate;
/// let update = NetworkUpdate::requests(["GET api.github.com/repos/**"].try_into()?);
/// assert!(update.requests.is_some());
/// # Ok::<(), sandlot::egress::InvalidRule>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct NetworkUpdate {
    /// The request rules ([`Policy::requests`](crate::Policy::requests)) from now on;
    /// an empty list lifts them all.
    #[serde(default)]
    pub requests: Option<RequestRules>,
}

impl NetworkUpdate {
    /// An update that replaces the request rules with `rules`.
    pub fn requests(rules: RequestRules) -> NetworkUpdate {
        NetworkUpdate {
            requests: Some(rules),
        }
    }
}

impl Session {
    /// The policy the session runs under now: the one it was opened with, and what
    /// [`Session::update_network`] changed since.
    pub fn policy(&self) -> &crate::Policy {
        &self.policy
    }

    /// Changes the session's network as `update` says, from the next request its
    /// code makes on: a request already sent is not recalled, a kept-alive
    /// connection's next request is checked against the new rules. The rules must
    /// hold for the session's policy as they would when it opened (with an
    /// allow-list, for listed hosts): an invalid update is refused
    /// ([`Error::InvalidPolicy`]) and changes nothing. A server checks what its
    /// clients ask for against its own policy before it gets here.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sandlot::session::NetworkUpdate;
    /// use sandlot::{Network, Policy};
    /// let sandlot = sandlot::from_environment()?;
    /// let mut session = sandlot
    ///     .session("python")
    ///     .policy(Policy {
    ///         network: Network::AllowList,
    ///         allow: "api.github.com".parse()?,
    ///         ..Policy::default()
    ///     })
    ///     .open()?;
    /// // From now on, reading only.
    /// session.update_network(NetworkUpdate::requests(["GET api.github.com"].try_into()?))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn update_network(&mut self, update: NetworkUpdate) -> Result<()> {
        let Some(requests) = update.requests else {
            return Ok(());
        };
        let mut policy = self.policy.clone();
        policy.requests = requests;
        policy
            .check_requests()
            .map_err(|reason| Error::InvalidPolicy { reason })?;
        self.sandbox()?.set_request_rules(&policy.requests)?;
        self.policy = policy;
        Ok(())
    }
}
