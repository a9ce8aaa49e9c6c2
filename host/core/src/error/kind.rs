//! The kinds of failure: what a program or a server's client acts on without reading
//! a message. Stable names, kept apart from the variants they group.

use std::fmt;

/// What kind of failure an [`Error`](crate::Error) is: what a program (or a server
/// answering a client) can act on without reading the message.
///
/// Stable: each kind's [`as_str`](ErrorKind::as_str) is what `sandlot serve` answers
/// as `error.kind` and what MCP tool errors name; new kinds may be added.
///
/// ```
/// use sandlot::{Error, ErrorKind};
///
/// let error = Error::PoolExhausted { backend: "docker".into(), max_size: 4 };
/// assert_eq!(error.kind(), ErrorKind::Exhausted);
/// assert!(error.kind().is_retryable());
/// assert_eq!(error.kind().as_str(), "exhausted");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The code was refused before it ran: the analysis gate found what the policy
    /// blocks. Change the code, or the policy.
    Blocked,
    /// The request is malformed or names something invalid: a path, a secret, a
    /// policy, pool options, a backend name that cannot be one.
    InvalidInput,
    /// The request names something there is none of: a language, a backend, a
    /// runtime to install, an image recipe, a session.
    NotFound,
    /// A server does not allow what was asked: a looser policy or higher limits than
    /// its own.
    NotAllowed,
    /// The backend cannot do what the session or call needs (a capability, the
    /// libraries, a pool), or no backend can. Ask another backend, or less.
    Unsupported,
    /// Every sandbox of a pool, or every session a client or server may hold, is in
    /// use. Worth retrying after a while.
    Exhausted,
    /// The session can run nothing more: open a new one.
    SessionEnded,
    /// What the call needs does not answer now: the container engine or cluster, or
    /// a server that is shutting down. Worth retrying after a while.
    Unavailable,
    /// An image or runtime the session needs is not installed where it runs: the
    /// operator installs it (`sandlot images build`, `sandlot runtimes install`).
    NotInstalled,
    /// A plugin cannot be loaded or misbehaved when called.
    Plugin,
    /// The configuration (sandlot.toml, a manifest, a pod template) is invalid.
    Config,
    /// The host failed: an I/O error, an engine's error, an agent that broke the
    /// protocol, a runtime that failed, a build or install that did not finish.
    Internal,
}

impl ErrorKind {
    /// Every kind, in the order above.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::Blocked,
        ErrorKind::InvalidInput,
        ErrorKind::NotFound,
        ErrorKind::NotAllowed,
        ErrorKind::Unsupported,
        ErrorKind::Exhausted,
        ErrorKind::SessionEnded,
        ErrorKind::Unavailable,
        ErrorKind::NotInstalled,
        ErrorKind::Plugin,
        ErrorKind::Config,
        ErrorKind::Internal,
    ];

    /// The kind's stable name, in `snake_case`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Blocked => "blocked",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::NotAllowed => "not_allowed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Exhausted => "exhausted",
            ErrorKind::SessionEnded => "session_ended",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::NotInstalled => "not_installed",
            ErrorKind::Plugin => "plugin",
            ErrorKind::Config => "config",
            ErrorKind::Internal => "internal",
        }
    }

    /// Whether the same call may succeed later unchanged: a pool or session limit
    /// that frees up, an engine that comes back.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Exhausted | ErrorKind::Unavailable)
    }

    /// Whether the caller's request is at fault (as opposed to the host or its
    /// configuration): what a server answers with a 4xx status.
    pub fn is_caller_error(self) -> bool {
        matches!(
            self,
            ErrorKind::Blocked
                | ErrorKind::InvalidInput
                | ErrorKind::NotFound
                | ErrorKind::NotAllowed
                | ErrorKind::Unsupported
                | ErrorKind::Exhausted
                | ErrorKind::SessionEnded
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
