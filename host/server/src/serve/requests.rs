//! What the HTTP API's clients send: the bodies the handlers take, and from which the
//! OpenAPI document's schemas are generated.

use crate::manager::Ask;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// `POST /v1/run`: what a session would be asked, and the code.
#[derive(schemars::JsonSchema)]
pub(super) struct RunOnce {
    #[serde(flatten)]
    pub(super) ask: Ask,
    /// The program.
    pub(super) code: String,
}

/// By hand, because serde cannot refuse unknown fields beside a flattened struct: the
/// code is taken out, and the rest must be exactly an [`Ask`], which refuses what it
/// does not know (`timout_seconds` is a typo to report, not a field to ignore).
impl<'de> Deserialize<'de> for RunOnce {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let code = match fields.remove("code") {
            Some(Value::String(code)) => code,
            Some(_) => return Err(D::Error::custom("`code` must be a string: the program")),
            None => return Err(D::Error::missing_field("code")),
        };
        let ask = Ask::deserialize(Value::Object(fields)).map_err(D::Error::custom)?;
        Ok(RunOnce { ask, code })
    }
}

/// `POST /v1/sessions/{id}/run`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionRun {
    /// Code to run; it sees what earlier runs of the session left.
    pub(super) code: String,
    /// Time limit of this run in seconds, at most the server's.
    #[serde(default)]
    pub(super) timeout_seconds: Option<f64>,
    /// Standard input of the run, as text.
    #[serde(default)]
    pub(super) stdin: Option<String>,
}

/// `POST /v1/sessions/{id}/shell`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Shell {
    /// A shell command line.
    pub(super) command: String,
}
