//! A live session's network changed by its client, within the server's policy.

use super::ids::{ClientId, SessionId};
use super::table::Inner;
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::{Policy, PolicyField};
use sandlot_core::session::NetworkUpdate;

impl Inner {
    /// [`SessionManager::update_network`](super::SessionManager::update_network).
    pub(super) fn update_network(
        &self,
        client: &ClientId,
        id: &SessionId,
        update: NetworkUpdate,
    ) -> Result<Policy> {
        self.in_entry(client, id, |entry, session| {
            let mut wanted = session.policy().clone();
            if let Some(requests) = &update.requests {
                wanted.requests = requests.clone();
            }
            // Only what the update touches is judged: the rest of the policy is as
            // the open admitted it.
            if wanted
                .looser_than(&self.policy)
                .contains(&PolicyField::Requests)
            {
                return Err(Error::NotAllowed {
                    fields: vec![format!("policy.{}", PolicyField::Requests)],
                });
            }
            let requests = update.requests.clone();
            session.update_network(update)?;
            if let Some(requests) = requests {
                *entry.requests.lock().unwrap_or_else(|e| e.into_inner()) = Some(requests);
            }
            Ok(session.policy().clone())
        })
    }
}
