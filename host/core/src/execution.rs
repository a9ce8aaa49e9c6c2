//! What one run gave, and its JSON form.
//!
//! The JSON form is a stable, versioned document: the CLI prints it (`sandlot run
//! --json`), and the servers send it. Version 1 (`"schema": "sandlot.execution/1"`):
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `schema` | string | `sandlot.execution/1` |
//! | `language` | string | the language id |
//! | `backend` | string | the backend that ran it |
//! | `runs_with` | string or null | the interpreter and version it ran with there (`CPython 3.11.2`), null where the backend cannot tell (see [`Toolchain`](crate::Toolchain)) |
//! | `stdout`, `stderr` | string | the output, as UTF-8 (invalid bytes become U+FFFD) |
//! | `stdout_base64`, `stderr_base64` | string, only when the output is not UTF-8 | the exact bytes |
//! | `exit_code` | integer | the program's; 124 after a timeout, 137 at the memory cap |
//! | `end` | object | why it ended: `{"reason": "completed"}`, `"timed-out"` with `limit_ms`, `"memory-limit"`, `"output-limit"`, `"interrupted"`, `"killed"` with `signal`, `"sandbox-lost"` with `cause` |
//! | `session` | object | the session after it: `{"state": "open"}`, `"restarted"` or `"ended"`, with `reason` |
//! | `stdout_truncated`, `stderr_truncated`, `artifacts_truncated` | bool | whether a cap cut something |
//! | `duration_ms` | number | wall-clock time of the run |
//! | `artifacts_refused` | integer | files left out because their names cannot be represented safely (not UTF-8, control characters) |
//! | `artifacts` | array | files made: `path` (relative, `/`-separated, never `..`; a backslash is part of a name), `size`, `mime`, `is_plot`, `base64` |
//! | `findings` | array | the static analysis: `rule_id`, `severity`, `line`, `message` |
//! | `policy` | object | the policy in force |
//! | `unenforced` | array of strings | fields of the policy the backend could not apply (e.g. `workdir_size` on wasm) |
//! | `tool_calls` | array | the tools the code called ([`crate::tool`]), in order: `name`, `duration_ms`, `argument_bytes`, `result_bytes`, `outcome` (`ok`, `tool_error`, `unknown_tool`, `invalid_arguments`, `timeout`, `too_large`, `budget_exceeded`, `protocol`), `message` when it failed |
//! | `egress_denied` | array | under an allow-list, what the run was refused: `host`, `port` (null for a DNS lookup), `via` (`dns`, `http`, `connect`, `tls`), `reason` (`{"kind": "not-listed"}`, `"private-address"` with `addresses`, `"server-name-mismatch"` with `server_name`, `"no-server-name"`) |
//!
//! A later version only adds fields; one that changes or removes any is
//! `sandlot.execution/2`.

use crate::artifact::Artifact;
use crate::backend::{millis, BackendName, EndReason, SessionState};
use crate::egress::Denial;
use crate::language::Finding;
use crate::policy::{Policy, PolicyField};
use crate::tool::ToolCall;
use base64::Engine as _;
use serde::ser::SerializeMap;
use serde::Serialize;
use std::borrow::Cow;
use std::time::Duration;

/// The `schema` of the JSON form this version of sandlot writes.
pub const EXECUTION_SCHEMA: &str = "sandlot.execution/1";

/// What one run gave.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Execution {
    /// The language id.
    pub language: String,
    /// Standard output, as bytes (see [`Execution::stdout_text`]).
    pub stdout: Vec<u8>,
    /// Standard error, as bytes.
    pub stderr: Vec<u8>,
    /// Exit code: the program's, 124 after a timeout, 137 after the memory cap.
    pub exit_code: i32,
    /// Why the run ended.
    pub end: EndReason,
    /// What the session is after the run.
    pub session: SessionState,
    /// Whether stdout went past the cap and was cut.
    pub stdout_truncated: bool,
    /// Whether stderr went past the cap and was cut.
    pub stderr_truncated: bool,
    /// Whether files were left out of `artifacts` by the limits.
    pub artifacts_truncated: bool,
    /// How many files were left out of `artifacts` because their names cannot be
    /// represented safely (not UTF-8, a control character: see
    /// [`SandboxPath`](crate::SandboxPath)), or, once a secret was masked in them,
    /// stood for a file already there.
    pub artifacts_refused: usize,
    /// Wall-clock time of the run.
    pub duration: Duration,
    /// Files created or changed in the output directory.
    pub artifacts: Vec<Artifact>,
    /// The static analysis of the code.
    pub findings: Vec<Finding>,
    /// The backend that ran it.
    pub backend: BackendName,
    /// What it ran with there, e.g. `CPython 3.11.2`: the same code meets another
    /// interpreter, and other libraries, on another backend. `None` where the backend
    /// cannot tell ([`Session::toolchain`](crate::Session::toolchain) has the rest).
    pub runs_with: Option<String>,
    /// The policy in force for the run.
    pub policy: Policy,
    /// The policy's restrictions the backend could not apply.
    pub unenforced: Vec<PolicyField>,
    /// Under [`Network::AllowList`](crate::Network::AllowList), the connections and
    /// lookups the run was refused, each once, in order.
    pub egress_denied: Vec<Denial>,
    /// The tool calls the code made, in the order they were answered.
    pub tool_calls: Vec<ToolCall>,
}

impl Execution {
    /// Standard output as text; invalid UTF-8 becomes U+FFFD.
    pub fn stdout_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// Standard error as text; invalid UTF-8 becomes U+FFFD.
    pub fn stderr_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }

    /// Exit code 0, and the program finished by itself.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && self.end == EndReason::Completed
    }

    /// Whether the run was stopped at its time limit.
    pub fn timed_out(&self) -> bool {
        matches!(self.end, EndReason::TimedOut { .. })
    }

    /// Whether the run was stopped at the memory cap.
    pub fn memory_exceeded(&self) -> bool {
        self.end == EndReason::MemoryLimit
    }

    /// Whether the session can run nothing more.
    pub fn session_ended(&self) -> bool {
        matches!(self.session, SessionState::Ended { .. })
    }

    /// The artifacts that are images.
    pub fn plots(&self) -> impl Iterator<Item = &Artifact> {
        self.artifacts.iter().filter(|a| a.is_plot)
    }

    /// Writes every artifact below the host directory `dir` (made if missing), each
    /// through a capability handle on `dir` ([`Artifact::write_into`]): no name the
    /// code chose and no link already in `dir` can lead a write outside it.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// # let sandlot = sandlot::from_environment()?;
    /// let mut session = sandlot.session("python").open()?;
    /// let run = session.run("open('output/report.txt', 'w').write('done')")?;
    /// run.write_artifacts(std::path::Path::new("results"))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_artifacts(&self, dir: &std::path::Path) -> crate::error::Result<()> {
        let io = |context: String| move |source| crate::error::Error::Io { context, source };
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let root = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())
            .map_err(io(format!("cannot open {}", dir.display())))?;
        for artifact in &self.artifacts {
            artifact.write_into(&root).map_err(io(format!(
                "cannot write `{}` in {}",
                artifact.path,
                dir.display()
            )))?;
        }
        Ok(())
    }

    /// The documented JSON form (see the [module documentation](self)).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// An artifact with its contents, as the JSON form carries it.
struct ArtifactJson<'a>(&'a Artifact);

impl Serialize for ArtifactJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("path", &a.path)?;
        map.serialize_entry("size", &a.size)?;
        map.serialize_entry("mime", &a.mime)?;
        map.serialize_entry("is_plot", &a.is_plot)?;
        map.serialize_entry(
            "base64",
            &base64::engine::general_purpose::STANDARD.encode(&a.bytes),
        )?;
        map.end()
    }
}

struct Millis(Duration);

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        millis(&self.0, serializer)
    }
}

impl Serialize for Execution {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("schema", EXECUTION_SCHEMA)?;
        map.serialize_entry("language", &self.language)?;
        map.serialize_entry("backend", &self.backend)?;
        map.serialize_entry("runs_with", &self.runs_with)?;
        for (name, bytes) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            map.serialize_entry(name, &String::from_utf8_lossy(bytes))?;
            if std::str::from_utf8(bytes).is_err() {
                map.serialize_entry(
                    &format!("{name}_base64"),
                    &base64::engine::general_purpose::STANDARD.encode(bytes),
                )?;
            }
        }
        map.serialize_entry("exit_code", &self.exit_code)?;
        map.serialize_entry("end", &self.end)?;
        map.serialize_entry("session", &self.session)?;
        map.serialize_entry("stdout_truncated", &self.stdout_truncated)?;
        map.serialize_entry("stderr_truncated", &self.stderr_truncated)?;
        map.serialize_entry("artifacts_truncated", &self.artifacts_truncated)?;
        map.serialize_entry("artifacts_refused", &self.artifacts_refused)?;
        map.serialize_entry("duration_ms", &Millis(self.duration))?;
        let artifacts: Vec<_> = self.artifacts.iter().map(ArtifactJson).collect();
        map.serialize_entry("artifacts", &artifacts)?;
        map.serialize_entry("findings", &self.findings)?;
        map.serialize_entry("policy", &self.policy)?;
        map.serialize_entry("unenforced", &self.unenforced)?;
        map.serialize_entry("egress_denied", &self.egress_denied)?;
        map.serialize_entry("tool_calls", &self.tool_calls)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution() -> Execution {
        Execution {
            language: "python".into(),
            stdout: b"ok \xff\n".to_vec(),
            stderr: Vec::new(),
            exit_code: 124,
            end: EndReason::TimedOut {
                limit: Duration::from_secs(2),
            },
            session: SessionState::Restarted {
                reason: "it ran past its time limit".into(),
            },
            stdout_truncated: false,
            stderr_truncated: false,
            artifacts_truncated: false,
            artifacts_refused: 1,
            duration: Duration::from_millis(2100),
            artifacts: vec![Artifact::new(
                crate::sandbox_path::SandboxPath::new("a.png").unwrap(),
                vec![1, 2],
            )],
            findings: Vec::new(),
            backend: BackendName::WASM,
            runs_with: Some("CPython 3.15.0".into()),
            policy: Policy::default(),
            unenforced: vec![PolicyField::WorkdirSize],
            egress_denied: vec![Denial {
                host: "evil.net".into(),
                port: Some(443),
                via: crate::egress::Via::Connect,
                reason: crate::egress::DenyReason::NotListed,
            }],
            tool_calls: vec![ToolCall {
                name: "search".into(),
                duration: Duration::from_millis(3),
                argument_bytes: 40,
                result_bytes: 0,
                outcome: crate::tool::ToolOutcome::InvalidArguments,
                message: Some("search: /q: 5 is not of type \"string\"".into()),
            }],
        }
    }

    #[test]
    fn the_json_form_is_the_documented_one() {
        let json = execution().to_json();
        assert_eq!(json["schema"], EXECUTION_SCHEMA);
        assert_eq!(json["backend"], "wasm");
        assert_eq!(json["runs_with"], "CPython 3.15.0");
        assert_eq!(json["unenforced"], serde_json::json!(["workdir_size"]));
        assert_eq!(json["stdout"], "ok \u{fffd}\n");
        assert_eq!(json["stdout_base64"], "b2sg/wo=");
        assert!(
            json.get("stderr_base64").is_none(),
            "valid UTF-8 needs no copy"
        );
        assert_eq!(json["end"]["reason"], "timed-out");
        assert_eq!(json["end"]["limit_ms"], 2000.0);
        assert_eq!(json["session"]["state"], "restarted");
        assert_eq!(json["duration_ms"], 2100.0);
        assert_eq!(json["artifacts"][0]["base64"], "AQI=");
        assert_eq!(json["artifacts"][0]["mime"], "image/png");
        assert_eq!(json["artifacts_refused"], 1);
        assert_eq!(json["policy"]["network"], "install-only");
        assert_eq!(
            json["egress_denied"],
            serde_json::json!([{"host": "evil.net", "port": 443, "via": "connect", "reason": {"kind": "not-listed"}}])
        );
        assert_eq!(
            json["tool_calls"],
            serde_json::json!([{"name": "search", "duration_ms": 3.0, "argument_bytes": 40,
                "result_bytes": 0, "outcome": "invalid_arguments",
                "message": "search: /q: 5 is not of type \"string\""}])
        );
    }

    #[test]
    fn success_needs_a_clean_end() {
        let mut run = execution();
        assert!(!run.success() && run.timed_out());
        run.exit_code = 0;
        run.end = EndReason::Completed;
        assert!(run.success());
    }
}
