//! A sandbox driven by its agent, whatever engine made it.

use super::client::{AgentClient, Output, RunCommand, RunTools};
use sandlot_agent::ExitReport;
use sandlot_core::artifact::{FileScan, FileStat};
use sandlot_core::backend::{
    stop_threshold, DirEntry, EndReason, FileInfo, Outcome, RunRequest, Sandbox, SandboxFiles,
    SessionState, Workload,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::language::KernelSpec;
use sandlot_core::policy::{Network, Policy};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

/// What an engine does for one of its sandboxes; the agent does everything else.
pub trait SandboxHandle: Send {
    /// The engine's name for the sandbox.
    fn name(&self) -> String;
    /// Connects the sandbox to the network libraries install over, or cuts it off.
    /// Only called for sandboxes whose policy is [`Network::InstallOnly`], with
    /// every process of the code stopped while it is online.
    fn set_network(&mut self, online: bool) -> Result<()>;
    /// Lets the install whose agent drew `token` out through the engine's egress
    /// proxy, or ends it (`None`): how a sandbox whose network is fixed when it is
    /// made gets one for its installs. Only called for an engine whose agent relays
    /// the sandbox's egress (it answered the freeze with an install proxy).
    fn admit_install(&mut self, token: Option<sandlot_agent::InstallToken>) -> Result<()> {
        crate::proxy::EgressProxy::admit_install_on(None, token)
    }
    /// Kills and removes the sandbox and everything it holds. Called once.
    fn destroy(&mut self);
    /// What the sandbox's egress allow-list refused since the last call; nothing
    /// for an engine that enforces none.
    fn take_denials(&mut self) -> Vec<sandlot_core::egress::Denial> {
        Vec::new()
    }
    /// Hands the secrets bound to hosts to the engine's egress proxy
    /// ([`crate::proxy::EgressProxy::bind_secrets`]); nothing for an engine without
    /// one.
    fn bind_secrets(&mut self, _secrets: std::sync::Arc<sandlot_core::secret::Injector>) {}
    /// Hands request rules to the engine's egress proxy
    /// ([`crate::proxy::EgressProxy::set_request_rules`]); an engine without one takes
    /// none.
    fn set_request_rules(&mut self, rules: &sandlot_core::egress::RequestRules) -> Result<()> {
        crate::proxy::EgressProxy::set_request_rules_on(None, &self.name(), rules)
    }
}

/// A sandbox whose agent runs plans, shell commands and file requests, on behalf of
/// any engine (Docker, Podman, Kubernetes): the engine only makes it, switches its
/// network and removes it.
pub struct AgentSandbox {
    agent: Option<AgentClient>,
    handle: Box<dyn SandboxHandle>,
    policy: Policy,
    /// Whether the sandbox is on the install network now.
    online: bool,
    /// Why the sandbox is gone, once it is.
    lost: Option<String>,
    /// The language's kernel, which runs [`Workload::Code`].
    pub(super) kernel: Option<KernelSpec>,
    /// Whether the kernel runs now (it starts with the first code that needs it, and
    /// again after it was lost).
    pub(super) kernel_running: bool,
    /// Where tool calls are answered; without it the sandbox offers no tools.
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for AgentSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSandbox")
            .field("name", &self.handle.name())
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl AgentSandbox {
    /// A sandbox whose agent answers on `agent`. `online` says whether the engine
    /// made it connected to a network.
    pub fn new(
        agent: AgentClient,
        handle: Box<dyn SandboxHandle>,
        policy: Policy,
        online: bool,
    ) -> AgentSandbox {
        AgentSandbox {
            agent: Some(agent),
            handle,
            policy,
            online,
            lost: None,
            kernel: None,
            kernel_running: false,
            runtime: None,
        }
    }

    /// The same sandbox, answering its code's tool calls on `runtime` (the engine's
    /// client runtime: a multi-threaded one, which runs tasks without being driven).
    pub fn with_tool_runtime(mut self, runtime: tokio::runtime::Handle) -> AgentSandbox {
        self.runtime = Some(runtime);
        self
    }

    /// The runtime that answers tool calls of `request`, if it has tools: a run with
    /// tools in a sandbox without a runtime is refused.
    pub(super) fn tool_runtime(
        &self,
        request: &RunRequest<'_>,
    ) -> Result<Option<tokio::runtime::Handle>> {
        match (&request.tools, &self.runtime) {
            (None, _) => Ok(None),
            (Some(_), Some(runtime)) => Ok(Some(runtime.clone())),
            (Some(_), None) => Err(Error::BackendCannot {
                backend: self.handle.name(),
                capability: sandlot_core::capability::Capability::Tools,
                hint: "it was made without a runtime to answer tool calls on".into(),
            }),
        }
    }

    /// The same sandbox, running [`Workload::Code`] in the language's `kernel`.
    pub fn with_kernel(mut self, kernel: Option<KernelSpec>) -> AgentSandbox {
        self.kernel = kernel;
        self
    }

    pub(super) fn agent(&mut self) -> Result<&mut AgentClient> {
        match self.agent.as_mut() {
            Some(agent) => Ok(agent),
            None => Err(Error::SessionEnded {
                reason: self
                    .lost
                    .clone()
                    .unwrap_or_else(|| "the sandbox is gone".into()),
            }),
        }
    }

    /// Runs `call` on the agent; if the agent fails, the sandbox is gone.
    pub(super) fn with_agent<T>(
        &mut self,
        call: impl FnOnce(&mut AgentClient) -> Result<T>,
    ) -> Result<T> {
        let result = call(self.agent()?);
        if let Err(Error::Agent { reason }) = &result {
            self.lose(reason.clone());
        }
        result
    }

    fn lose(&mut self, reason: String) {
        self.agent = None;
        self.lost = Some(reason);
    }

    /// Puts the sandbox on or off the install network, if its policy switches it.
    pub(super) fn network(&mut self, on: bool) -> Result<()> {
        if self.online == on || self.policy.network != Network::InstallOnly {
            return Ok(());
        }
        match self.handle.set_network(on) {
            Ok(()) => {
                self.online = on;
                Ok(())
            }
            Err(e) => {
                if on {
                    // A join that failed may still have happened (an answer that
                    // came too late): the next cut must make sure.
                    self.online = true;
                } else {
                    // Still online: this sandbox must run no more code.
                    self.lose(format!("it could not be cut off the network: {e}"));
                }
                Err(e)
            }
        }
    }

    /// Lets the install whose agent drew `token` out, or ends it (`None`); a
    /// sandbox whose install cannot be ended runs no more code.
    pub(super) fn admit_install(
        &mut self,
        token: Option<sandlot_agent::InstallToken>,
    ) -> Result<()> {
        let admitted = self.handle.admit_install(token);
        if let (Err(e), None) = (&admitted, token) {
            self.lose(format!("its install could not be ended: {e}"));
        }
        admitted
    }

    pub(super) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Runs one command through the agent.
    pub(super) fn command(
        &mut self,
        command: &RunCommand<'_>,
        request: &mut RunRequest<'_>,
        stream_stdout: bool,
    ) -> Result<(ExitReport, Output)> {
        let mut no_stdout = None;
        let on_stdout = if stream_stdout {
            &mut request.on_stdout
        } else {
            &mut no_stdout
        };
        let on_stderr = &mut request.on_stderr;
        self.with_agent(|agent| agent.run(command, on_stdout, on_stderr))
    }

    /// Makes the run's working directory if it is missing, as a plan's files would:
    /// unpacking nothing makes the directory, beneath the workspace and through no link.
    pub(super) fn make_workdir(&mut self, workdir: &str) -> Result<()> {
        if workdir.is_empty() {
            return Ok(());
        }
        let empty = tar::Builder::new(Vec::new())
            .into_inner()
            .map_err(|e| Error::Io {
                context: "cannot make an empty archive".into(),
                source: e,
            })?;
        self.with_agent(|agent| agent.unpack(workdir, &empty))
    }

    fn shell(&mut self, command_line: &str, mut request: RunRequest<'_>) -> Result<Outcome> {
        self.network(false)?;
        self.make_workdir(request.workdir)?;
        let argv = ["sh".to_string(), "-c".to_string(), command_line.to_string()];
        let runtime = self.tool_runtime(&request)?;
        let calls = request.tools.clone();
        let command = RunCommand {
            argv: &argv,
            env: request.env,
            cwd: request.workdir,
            stdin: request.stdin,
            timeout: request.timeout,
            max_output: request.max_output,
            stop_after: stop_threshold(request.max_output),
            interrupt: request.interrupt,
            tools: run_tools(calls.as_ref(), runtime.as_ref()),
        };
        let (report, output) = self.command(&command, &mut request, true)?;
        let mut outcome = outcome_of(&report, request.timeout);
        outcome.stdout = output.stdout;
        outcome.stderr = output.stderr;
        Ok(outcome)
    }
}

/// The tools of a run, where it has them and a runtime to answer them.
pub(super) fn run_tools<'a>(
    calls: Option<&'a std::sync::Arc<sandlot_core::tool::ToolCalls>>,
    runtime: Option<&'a tokio::runtime::Handle>,
) -> Option<RunTools<'a>> {
    Some(RunTools {
        calls: calls?,
        runtime: runtime?,
    })
}

/// The outcome of a command as the agent reported it, without its output.
pub(super) fn outcome_of(report: &ExitReport, timeout: Duration) -> Outcome {
    // An OOM kill of some other process in the sandbox does not make the command's
    // own end a memory error: only its own death by SIGKILL does.
    let end = if report.timed_out {
        EndReason::TimedOut { limit: timeout }
    } else if report.on_request {
        EndReason::Interrupted
    } else if report.output_limited {
        EndReason::OutputLimit
    } else if report.oom_killed && report.signal == 9 {
        EndReason::MemoryLimit
    } else if report.signal != 0 {
        EndReason::Killed {
            signal: report.signal,
        }
    } else {
        EndReason::Completed
    };
    Outcome {
        exit_code: end.exit_code().unwrap_or(report.code),
        stdout_truncated: report.stdout_truncated,
        stderr_truncated: report.stderr_truncated,
        end,
        session: SessionState::Open,
        ..Outcome::default()
    }
}

impl Sandbox for AgentSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let result = match request.workload {
            Workload::Plan(plan) => self.run_plan(plan, request),
            Workload::Shell(line) => self.shell(line, request),
            Workload::Code(code) if self.kernel.is_some() => self.run_cell(code, request),
            other => return Err(other.unsupported(&self.handle.name())),
        };
        let mut outcome = match result {
            // The agent is process 1: without it the sandbox is gone.
            Err(Error::Agent { reason }) => Outcome::lost(format!("the sandbox stopped: {reason}")),
            Err(Error::SessionEnded { reason }) => Outcome::lost(reason),
            other => other?,
        };
        outcome.egress_denied = self.handle.take_denials();
        Ok(outcome)
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        self
    }

    fn name(&self) -> String {
        self.handle.name()
    }

    fn bind_secrets(&mut self, secrets: std::sync::Arc<sandlot_core::secret::Injector>) {
        self.handle.bind_secrets(secrets);
    }

    fn set_request_rules(&mut self, rules: &sandlot_core::egress::RequestRules) -> Result<()> {
        self.handle.set_request_rules(rules)
    }
}

impl SandboxFiles for AgentSandbox {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.with_agent(|agent| agent.write(path, data))
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with_agent(|agent| agent.read(path, max))
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let mut entries: Vec<DirEntry> = self
            .with_agent(|agent| agent.entries(path, false))?
            .into_iter()
            .map(|e| {
                let info = info_of(&e);
                DirEntry::new(OsString::from_vec(e.path), info)
            })
            .collect();
        entries.sort();
        Ok(entries)
    }

    fn scan(&mut self, path: &str) -> Result<FileScan> {
        let entries = self.with_agent(|agent| agent.entries(path, true))?;
        Ok(FileScan::from_stats(entries.into_iter().map(|e| {
            FileStat {
                path: PathBuf::from(OsString::from_vec(e.path)),
                size: e.size,
                modified: Some(UNIX_EPOCH + Duration::from_nanos(e.mtime_ns)),
            }
        })))
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with_agent(|agent| agent.pack(path, max))
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.with_agent(|agent| agent.unpack(path, archive))
    }

    fn clear(&mut self, path: &str) -> Result<()> {
        self.with_agent(|agent| agent.clear(path))
    }

    fn stat(&mut self, path: &str) -> Result<FileInfo> {
        self.with_agent(|agent| agent.stat(path))
            .map(|entry| info_of(&entry))
    }

    fn make_dir(&mut self, path: &str) -> Result<bool> {
        match self.stat(path) {
            Ok(info) if info.is_dir() => return Ok(false),
            Ok(_) => {
                return Err(Error::InvalidPath {
                    path: path.into(),
                    reason: "something other than a directory is there".into(),
                })
            }
            Err(_) => {}
        }
        self.with_agent(|agent| agent.make_dir(path)).map(|()| true)
    }

    fn remove(&mut self, path: &str) -> Result<()> {
        self.with_agent(|agent| agent.remove(path))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.with_agent(|agent| agent.rename(from, to))
    }
}

/// What the agent says of a file, as the host describes it.
fn info_of(entry: &sandlot_agent::Entry) -> FileInfo {
    let modified = UNIX_EPOCH + Duration::from_nanos(entry.mtime_ns);
    FileInfo::from_unix(entry.mode, entry.size, Some(modified))
}

impl Drop for AgentSandbox {
    fn drop(&mut self) {
        // Hang up first: the agent kills everything and exits at once, and an engine
        // removes a stopped sandbox faster than a running one.
        self.agent = None;
        self.handle.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reports_become_end_reasons() {
        let timeout = Duration::from_secs(2);
        let end = |report: ExitReport| {
            let o = outcome_of(&report, timeout);
            (o.end, o.exit_code)
        };
        assert_eq!(
            end(ExitReport {
                code: 3,
                ..Default::default()
            }),
            (EndReason::Completed, 3)
        );
        assert_eq!(
            end(ExitReport {
                code: 137,
                signal: 9,
                timed_out: true,
                ..Default::default()
            }),
            (EndReason::TimedOut { limit: timeout }, 124)
        );
        assert_eq!(
            end(ExitReport {
                code: 137,
                signal: 9,
                oom_killed: true,
                ..Default::default()
            }),
            (EndReason::MemoryLimit, 137)
        );
        assert_eq!(
            end(ExitReport {
                code: 139,
                signal: 11,
                oom_killed: true,
                ..Default::default()
            }),
            (EndReason::Killed { signal: 11 }, 139)
        );
        assert_eq!(
            end(ExitReport {
                code: 137,
                signal: 9,
                output_limited: true,
                ..Default::default()
            }),
            (EndReason::OutputLimit, 141)
        );
        // A cell the host interrupted: its driver reported 1 after the traceback.
        assert_eq!(
            end(ExitReport {
                code: 1,
                interrupted: true,
                on_request: true,
                ..Default::default()
            }),
            (EndReason::Interrupted, 130)
        );
    }
}
