//! [`Ask`]: what a client may ask of a session, and the numbers in it read.

use sandlot_core::error::{Error, Result};
use std::time::Duration;

/// What a client of a server may ask of a session, as the MCP tools and the HTTP API
/// take it: everything but the language may be left to the server.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Ask {
    /// Language id or alias.
    pub language: String,
    /// `auto` or a backend's name.
    #[serde(default)]
    pub backend: Option<String>,
    /// Libraries every run needs.
    #[serde(default)]
    pub libraries: Vec<String>,
    /// Network access, at most the server's.
    #[serde(default)]
    pub network: Option<sandlot_core::Network>,
    /// Time limit of a run in seconds, at most the server's.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Memory cap in MiB, at most the server's.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Secrets by name: every run gets them as environment variables, and their
    /// values are masked (`***`) in output and files returned.
    #[serde(default)]
    pub secrets: sandlot_core::secret::SecretValues,
}

impl Ask {
    /// Asks for a session of `language`, the rest left to the server.
    pub fn new(language: &str) -> Ask {
        Ask {
            language: language.to_string(),
            ..Ask::default()
        }
    }
}

/// `value` seconds as a duration: a positive number, or an error naming `field`.
pub fn seconds(field: &str, value: Option<f64>) -> Result<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(Error::InvalidRequest {
            reason: format!("{field} must be a positive number of seconds, not {s}"),
        }),
    }
}
