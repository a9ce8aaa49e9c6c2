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
        let (ask, code) = beside_an_ask(deserializer, "code", |code| match code {
            Some(Value::String(code)) => Ok(code),
            Some(_) => Err("`code` must be a string: the program".into()),
            None => Err("missing field `code`".into()),
        })?;
        Ok(RunOnce { ask, code })
    }
}

/// An [`Ask`] and one field beside it: `field` is taken out of the object and read by
/// `read` (given `None` when it is absent), and the rest must be exactly an `Ask`.
fn beside_an_ask<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    field: &str,
    read: impl FnOnce(Option<Value>) -> Result<T, String>,
) -> Result<(Ask, T), D::Error> {
    use serde::de::Error;
    let mut fields = serde_json::Map::<String, Value>::deserialize(deserializer)?;
    let value = read(fields.remove(field)).map_err(D::Error::custom)?;
    let ask = Ask::deserialize(Value::Object(fields)).map_err(D::Error::custom)?;
    Ok((ask, value))
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

/// `POST /v1/sessions`: what the session is asked, and the tools its client answers.
#[derive(schemars::JsonSchema)]
pub(super) struct OpenSession {
    #[serde(flatten)]
    pub(super) ask: Ask,
    /// Tools the session's code may call, answered by this client: each call comes as
    /// a `tool_call` event (`id`, `name`, `arguments`) of the streamed run that made
    /// it, and the client posts the result to `/v1/sessions/{id}/tool_calls/{call}`
    /// within the server's tool call timeout.
    #[serde(default)]
    pub(super) tools: Vec<DeclaredTool>,
}

/// By hand, as [`RunOnce`]: `tools` is taken out, and the rest must be an [`Ask`].
impl<'de> Deserialize<'de> for OpenSession {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (ask, tools) = beside_an_ask(deserializer, "tools", |tools| match tools {
            None => Ok(Vec::new()),
            Some(tools) => {
                Vec::<DeclaredTool>::deserialize(tools).map_err(|e| format!("tools: {e}"))
            }
        })?;
        Ok(OpenSession { ask, tools })
    }
}

/// A tool a client declares when it opens a session, and answers itself.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DeclaredTool {
    /// An identifier: a letter, then letters, digits or `_`, at most 64.
    pub(super) name: String,
    /// What it does, for the code (and the model that writes it).
    #[serde(default)]
    pub(super) description: String,
    /// JSON Schema of its arguments, of `"type": "object"` (default: any object).
    #[serde(default = "any_object", alias = "inputSchema")]
    pub(super) input_schema: Value,
}

fn any_object() -> Value {
    serde_json::json!({ "type": "object" })
}

/// `POST /v1/sessions/{id}/tool_calls/{call}`: the answer to one call of a client's
/// tool, its `value` or its `error`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolResult {
    /// What the tool returns to the code (any JSON; absent: null).
    #[serde(default)]
    pub(super) value: Option<Value>,
    /// Instead of a value: the message of the `ToolError` the code gets.
    #[serde(default)]
    pub(super) error: Option<String>,
}

/// `POST /v1/sessions/{id}/snapshot` (the body may be left out).
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TakeSnapshot {
    /// Keep the files alone, not the interpreter's memory: for a backend that cannot
    /// capture it (default false: such a backend refuses).
    #[serde(default)]
    pub(super) files_only: bool,
}

/// `POST /v1/sessions/{id}/fork` (the body may be left out).
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Fork {
    /// How many sessions (default 1), at most the server's sessions per client.
    #[serde(default)]
    pub(super) count: Option<usize>,
}

/// `PUT /v1/sessions/{id}/network`: what changes in a live session's network, from
/// its code's next request on; a field left out stays as it is.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateNetwork {
    /// The request rules from now on, each `[allow|deny] [METHOD] HOST[/PATH]`
    /// (`[]` lifts them): within the server's policy, for hosts the session's
    /// allow-list holds.
    #[serde(default)]
    pub(super) requests: Option<sandlot_core::egress::RequestRules>,
}

impl UpdateNetwork {
    /// The update as the manager takes it.
    pub(super) fn update(self) -> sandlot_core::session::NetworkUpdate {
        let mut update = sandlot_core::session::NetworkUpdate::default();
        update.requests = self.requests;
        update
    }
}

/// `POST /v1/snapshots/{id}/restore` (the body may be left out): what an open asks,
/// the language and backend excepted, which are the snapshot's.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Restore {
    /// Network access, at most the server's.
    #[serde(default)]
    pub(super) network: Option<sandlot_core::Network>,
    /// Time limit of a run in seconds, at most the server's.
    #[serde(default)]
    pub(super) timeout_seconds: Option<f64>,
    /// Memory cap in MiB, at most the server's.
    #[serde(default)]
    pub(super) memory_mb: Option<u64>,
    /// Secrets by name, as for an open.
    #[serde(default)]
    pub(super) secrets: sandlot_core::secret::SecretValues,
}

impl Restore {
    /// The [`Ask`] of the restored session.
    pub(super) fn ask(self) -> Ask {
        Ask {
            network: self.network,
            timeout_seconds: self.timeout_seconds,
            memory_mb: self.memory_mb,
            secrets: self.secrets,
            ..Ask::default()
        }
    }
}
