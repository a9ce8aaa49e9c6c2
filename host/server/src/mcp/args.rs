//! The arguments of each tool, as the model sends them: their doc comments are the JSON
//! schema the model reads, so they are a room of their own.

use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `execute_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecuteCode {
    /// Language id or alias: python, javascript, typescript, bash, java, cpp, go, r,
    /// ruby (`list_languages` has the full list).
    pub(super) language: String,
    /// The program. For Python and JavaScript, statements run top to bottom; for
    /// compiled languages, a whole program with its main function.
    pub(super) code: String,
    /// Packages the code needs (pip, npm, ... names). The WebAssembly runtimes bundle
    /// the common ones (numpy, pandas, matplotlib, scipy, scikit-learn, ...).
    #[serde(default)]
    pub(super) libraries: Vec<String>,
    /// Wall-clock limit in seconds; at most the server's (30 s unless configured).
    pub(super) timeout_seconds: Option<f64>,
    /// Where to run: `auto` (the default: WebAssembly when it can, else a jail or a
    /// container), `wasm`, `native`, `docker`, `podman` or `kubernetes`.
    pub(super) backend: Option<String>,
}

/// Arguments of `open_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OpenSession {
    /// Language id or alias, as for `execute_code`.
    pub(super) language: String,
    /// Where to run, as for `execute_code`.
    pub(super) backend: Option<String>,
    /// Packages every run of the session needs.
    #[serde(default)]
    pub(super) libraries: Vec<String>,
    /// Network access: `off`, `install-only` (only while installing libraries), `on`,
    /// or `allow-list` (only where the server's allow-list lets it). Only as open as
    /// the server's policy; the default is the server's.
    pub(super) network: Option<sandlot_core::Network>,
    /// Wall-clock limit of each run, in seconds; at most the server's.
    pub(super) timeout_seconds: Option<f64>,
    /// Memory cap in MiB; at most the server's.
    pub(super) memory_mb: Option<u64>,
}

/// Arguments of `run_in_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunInSession {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// Code to run; it sees the variables and files earlier runs left.
    pub(super) code: String,
    /// Wall-clock limit of this run in seconds; at most the server's (instead of the
    /// session's).
    pub(super) timeout_seconds: Option<f64>,
}

/// Arguments naming a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionRef {
    /// The id `open_session` returned.
    pub(super) session_id: String,
}

/// Arguments of `snapshot_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotSession {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// Keep the files alone, not the variables: for a backend that cannot capture
    /// the interpreter's memory.
    #[serde(default)]
    pub(super) files_only: bool,
}

/// Arguments of `restore_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RestoreSession {
    /// The id `snapshot_session` returned.
    pub(super) snapshot_id: String,
    /// Network access, as for `open_session`.
    pub(super) network: Option<sandlot_core::Network>,
    /// Wall-clock limit of each run, in seconds; at most the server's.
    pub(super) timeout_seconds: Option<f64>,
    /// Memory cap in MiB; at most the server's.
    pub(super) memory_mb: Option<u64>,
}

/// Arguments of `fork_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ForkSession {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// How many copies (default 1).
    pub(super) count: Option<usize>,
}

/// Arguments of `update_network`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateNetwork {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// The request rules from now on, each `[allow|deny] [METHOD] HOST[/PATH]`
    /// (`GET api.github.com/repos/**`); `[]` lifts them. Within the server's policy,
    /// for hosts the session may reach.
    pub(super) requests: Vec<String>,
}

/// Arguments naming a snapshot.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotRef {
    /// The id `snapshot_session` returned.
    pub(super) snapshot_id: String,
}

/// Arguments of `upload_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UploadFile {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// Path relative to the session's working directory, e.g. `data/input.csv`.
    pub(super) path: String,
    /// The contents as text.
    pub(super) text: Option<String>,
    /// The contents as base64, for binary files (instead of `text`).
    pub(super) base64: Option<String>,
}

/// Arguments of `download_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DownloadFile {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// Path relative to the session's working directory, e.g. `output/result.csv`.
    pub(super) path: String,
}

/// Arguments of `run_shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunShell {
    /// The id `open_session` returned.
    pub(super) session_id: String,
    /// A shell command line, e.g. `ls -la output && head -5 data.csv`.
    pub(super) command: String,
}

/// Arguments of `language_details`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LanguageRef {
    /// Language id or alias.
    pub(super) language: String,
}
