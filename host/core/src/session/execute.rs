//! One run through the sandbox and the Execution made of it: output masked on its
//! way, tool calls recorded, artifacts collected. Every door of the run path ends here.

use super::files::dir_path;
use super::options::RunOptions;
use super::state::Session;
use crate::artifact::{Artifact, Collected, EarlierOutput, FileScan};
use crate::backend::{LastValue, Outcome, RunRequest, SessionState, Sink, Workload};
use crate::error::{Error, Result};
use crate::execution::Execution;
use crate::language::Finding;
use crate::layout::Layout;
use crate::secret::Secrets;
use crate::tool::{ToolCall, ToolCalls};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Session {
    /// Hands one run to the sandbox and makes its [`Execution`].
    pub(super) fn execute(
        &mut self,
        workload: Workload<'_>,
        env: &[(String, String)],
        options: RunOptions,
        findings: Vec<Finding>,
    ) -> Result<Execution> {
        let limits = self.limits;
        let interpreted = matches!(workload, Workload::Code(_));
        let workdir = match &options.workdir {
            Some(dir) => dir_path(dir)?,
            None => String::new(),
        };
        let before = match self.earlier_output {
            EarlierOutput::Clear => {
                self.output = None;
                self.sandbox()?.files().clear(Layout::OUTPUT)?;
                FileScan::default()
            }
            EarlierOutput::Keep => self.output_before_run()?,
        };
        // Streamed output is masked on its way; what a sink holds back (a possible
        // beginning of a secret) follows once the run is over.
        let masked = |sink: Option<Sink>| match sink {
            Some(sink) if !self.secrets.is_empty() => {
                let (sink, flush) = self.secrets.mask_sink(sink);
                (Some(sink), Some(flush))
            }
            sink => (sink, None),
        };
        let (on_stdout, stdout_flush) = masked(options.on_stdout);
        let (on_stderr, stderr_flush) = masked(options.on_stderr);
        let secret_names = self.secrets.names();
        let last_value = match self.one_shot {
            true => LastValue::Hidden,
            false => LastValue::Shown,
        };
        let timeout = options.timeout.unwrap_or(limits.timeout);
        // The session's code calls tools; its installs and preludes do not come here.
        let tools = (!self.tools.is_empty()).then(|| {
            let calls = ToolCalls::new(self.tools.clone(), limits.tools, Instant::now() + timeout);
            Arc::new(match options.on_tool_call {
                Some(sink) if self.secrets.is_empty() => calls.observed(sink),
                Some(sink) => {
                    let secrets = self.secrets.clone();
                    calls.observed(Arc::new(move |call: &ToolCall| {
                        sink(&masked_call(&secrets, call.clone()))
                    }))
                }
                None => calls,
            })
        });
        let sandbox = self.sandbox()?;
        let started = Instant::now();
        let outcome = sandbox.run(RunRequest {
            workload,
            stdin: &options.stdin,
            env,
            secret_names: &secret_names,
            workdir: &workdir,
            timeout,
            max_output: options.max_output.unwrap_or(limits.max_output),
            on_stdout,
            on_stderr,
            last_value,
            args: match interpreted {
                true => &options.args,
                false => &[],
            },
            interrupt: options.interrupt.as_ref(),
            tools: tools.clone(),
        });
        // No call of this run is answered after it, whatever the sandbox left running.
        let tool_calls = tools.map(|calls| calls.finish()).unwrap_or_default();
        if let Ok(outcome) = &outcome {
            if let Some(flush) = stdout_flush {
                flush.flush(outcome.stdout_truncated);
            }
            if let Some(flush) = stderr_flush {
                flush.flush(outcome.stderr_truncated);
            }
        }
        let outcome = outcome?;
        let duration = started.elapsed();
        match &outcome.session {
            SessionState::Open if interpreted => self.flush_plots(env),
            // A new interpreter has no prelude.
            SessionState::Restarted { .. } => self.plot_capture = false,
            _ => {}
        }
        self.finish(outcome, &before, duration, findings, tool_calls)
    }

    /// Collects the artifacts of a run and makes its [`Execution`].
    pub(super) fn finish(
        &mut self,
        outcome: Outcome,
        before: &FileScan,
        duration: Duration,
        findings: Vec<Finding>,
        tool_calls: Vec<ToolCall>,
    ) -> Result<Execution> {
        let limits = self.limits.artifacts;
        let collected = match (&outcome.session, self.sandbox.as_mut()) {
            (SessionState::Ended { .. }, _) | (_, None) => Collected::default(),
            (_, Some(sandbox)) => {
                let files = sandbox.files();
                match files.scan(Layout::OUTPUT) {
                    Ok(after) => {
                        let found = after.changed_since_with(before, limits, |rel, max| {
                            let path = format!("{}/{}", Layout::OUTPUT, rel.as_str());
                            files.read(&path, max).ok()
                        });
                        self.output = Some(after);
                        found
                    }
                    Err(_) => Collected::default(),
                }
            }
        };
        if let SessionState::Ended { reason } = &outcome.session {
            self.ended = Some(reason.clone());
            self.sandbox = None;
        }
        let secrets = &self.secrets;
        let mut artifacts_refused = collected.refused;
        let mut artifacts: Vec<Artifact> = Vec::with_capacity(collected.artifacts.len());
        for artifact in collected.artifacts {
            if secrets.is_empty() {
                artifacts.push(artifact);
                continue;
            }
            // A name carries a secret out as well as the contents do; two names that
            // mask alike would stand for one file, so the second is refused.
            match secrets.mask_path(&artifact.path) {
                Some(path) if !artifacts.iter().any(|a| a.path == path) => {
                    artifacts.push(Artifact::new(path, secrets.mask(artifact.bytes, false)));
                }
                _ => artifacts_refused += 1,
            }
        }
        Ok(Execution {
            language: self.handler.info().id.clone(),
            stdout: secrets.mask(outcome.stdout, outcome.stdout_truncated),
            stderr: secrets.mask(outcome.stderr, outcome.stderr_truncated),
            exit_code: outcome.exit_code,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
            artifacts_truncated: collected.left_out,
            artifacts_refused,
            duration,
            artifacts,
            findings,
            end: outcome.end,
            session: outcome.session,
            backend: self.backend_name.clone(),
            runs_with: self.toolchain().map(ToString::to_string),
            policy: self.policy.clone(),
            unenforced: self.unenforced.clone(),
            // A denied name can carry a secret out as well as a connection could, in
            // any case: DNS, TLS server names and Host headers fold it.
            egress_denied: outcome
                .egress_denied
                .into_iter()
                .map(|denial| denial.masked(|name| secrets.mask_folded(name)))
                .collect(),
            tool_calls: tool_calls
                .into_iter()
                .map(|call| masked_call(secrets, call))
                .collect(),
        })
    }

    /// Runs `code`, the host's own (not through the analysis gate), in the
    /// interpreter with `env` and `limits` (time, output); its stdout, or an error
    /// saying `what` failed and why.
    pub(super) fn host_code(
        &mut self,
        code: &str,
        env: &[(String, String)],
        limits: (Duration, usize),
        what: &str,
    ) -> Result<String> {
        // A run whose files are not collected: the next run looks for itself.
        self.output = None;
        let outcome = self.sandbox()?.run(RunRequest {
            env,
            timeout: limits.0,
            max_output: limits.1,
            ..RunRequest::new(Workload::Code(code))
        })?;
        if outcome.exit_code != 0 || outcome.session != SessionState::Open {
            return Err(Error::Runtime {
                runtime: self.backend_name.to_string(),
                reason: format!(
                    "{what} failed: {}",
                    String::from_utf8_lossy(&outcome.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&outcome.stdout).into_owned())
    }

    /// The output directory as a run finds it: as the last run left it, if nothing
    /// touched the sandbox since, or scanned. A run that completes is reported even if
    /// the directory cannot be scanned (the code may have replaced it with a file or a
    /// link).
    pub(super) fn output_before_run(&mut self) -> Result<FileScan> {
        match self.output.take() {
            Some(snapshot) => Ok(snapshot),
            None => Ok(self
                .sandbox()?
                .files()
                .scan(Layout::OUTPUT)
                .unwrap_or_default()),
        }
    }
}

/// `call` as the session's caller sees it, live or in the record: a handler's message
/// may quote the arguments, and they the secrets.
pub(super) fn masked_call(secrets: &Secrets, mut call: ToolCall) -> ToolCall {
    // The name is the code's too: a call of a tool named by a secret is refused, and
    // the record still says what it was called, cut at 64 bytes (so a value's
    // beginning at its end is masked too).
    let name = secrets.mask(std::mem::take(&mut call.name).into_bytes(), true);
    call.name = String::from_utf8_lossy(&name).into_owned();
    call.message = call.message.map(|m| secrets.mask_text(&m));
    call
}
