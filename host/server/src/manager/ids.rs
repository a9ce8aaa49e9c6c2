//! Who owns a session, and the session's name: [`ClientId`], [`SessionId`].

use serde::Serialize;
use std::fmt;

/// Who owns sessions: an MCP connection, an HTTP API token. A client sees and uses
/// only its own sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ClientId(String);

impl ClientId {
    /// The client called `name`.
    pub fn new(name: impl Into<String>) -> ClientId {
        ClientId(name.into())
    }

    /// A client of its own, for a connection that has no name (an MCP connection).
    pub fn unique(prefix: &str) -> ClientId {
        ClientId(format!(
            "{prefix}-{}",
            sandlot_core::backend::owner::sandbox_id()
        ))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session's name as clients pass it back: `s-` and 32 hexadecimal digits, from
/// randomly keyed hashes, so that one client cannot guess another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    pub(super) fn fresh() -> SessionId {
        let (a, b) = (
            sandlot_core::backend::owner::sandbox_id(),
            sandlot_core::backend::owner::sandbox_id(),
        );
        SessionId(format!("s-{a}{b}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> SessionId {
        SessionId(id.to_string())
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> SessionId {
        SessionId(id)
    }
}

/// The span of everything done in session `id`, for the servers' logs.
pub(super) fn session_span(client: &ClientId, id: &SessionId) -> tracing::Span {
    tracing::info_span!("session", id = %id, %client)
}
