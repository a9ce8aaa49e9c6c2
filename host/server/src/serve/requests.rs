//! What the HTTP API's clients send: the bodies the handlers take, and from which the
//! OpenAPI document's schemas are generated.

use crate::manager::Ask;
use serde::Deserialize;

/// `POST /v1/run`: what a session would be asked, and the code.
#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct RunOnce {
    #[serde(flatten)]
    pub(super) ask: Ask,
    /// The program.
    pub(super) code: String,
}

/// `POST /v1/sessions/{id}/run`.
#[derive(Deserialize, schemars::JsonSchema)]
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
pub(super) struct Shell {
    /// A shell command line.
    pub(super) command: String,
}
