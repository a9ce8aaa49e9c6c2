//! Interactive runs: the language's kernel, started in the sandbox with the first code
//! that needs it, and each run one cell of it. A cell past its limit is interrupted
//! and the kernel keeps its state; a kernel that does not come back is killed, and the
//! next run starts a fresh one.

use super::client::RunCell;
use super::sandbox::{outcome_of, AgentSandbox};
use sandlot_core::backend::{stop_threshold, Outcome, RunRequest, Sandbox, SessionState, Workload};
use sandlot_core::error::Result;
use sandlot_core::layout::Layout;
use std::time::Duration;

/// Where the driver is written, relative to the workspace.
const DRIVER_DIR: &str = ".sandlot/kernel";

/// How long a kernel may take to say it is ready (an interpreter starting on a busy
/// machine, importing its driver).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an interrupted cell has to come back before its kernel is killed: long
/// enough for an interpreter to unwind, short enough that a run still returns within
/// about a second of its limit.
const GRACE: Duration = Duration::from_secs(1);

impl AgentSandbox {
    /// Runs `code` as one cell of the kernel, starting the kernel first if it does not
    /// run.
    pub(super) fn run_cell(&mut self, code: &str, mut request: RunRequest<'_>) -> Result<Outcome> {
        let Some(spec) = self.kernel.clone() else {
            return Err(Workload::Code(code).unsupported(&self.name()));
        };
        // No code runs online unless the policy says so.
        self.network(false)?;
        if !self.kernel_running {
            let driver = format!("{DRIVER_DIR}/{}", spec.driver_name);
            self.with_agent(|agent| agent.write(&driver, spec.driver.as_bytes()))?;
            let argv = spec.command(&format!("{}/{driver}", Layout::WORKSPACE));
            self.with_agent(|agent| agent.start_kernel(&argv, &spec.env, START_TIMEOUT))?;
            self.kernel_running = true;
        }
        self.make_workdir(request.workdir)?;
        let runtime = self.tool_runtime(&request)?;
        let calls = request.tools.clone();
        let cell = RunCell {
            code: code.as_bytes(),
            stdin: request.stdin,
            env: request.env,
            cwd: request.workdir,
            timeout: request.timeout,
            max_output: request.max_output,
            stop_after: stop_threshold(request.max_output),
            grace: GRACE,
            interrupt: request.interrupt,
            tools: super::sandbox::run_tools(calls.as_ref(), runtime.as_ref()),
        };
        let on_stdout = &mut request.on_stdout;
        let on_stderr = &mut request.on_stderr;
        let (report, output) = self.with_agent(|agent| agent.cell(&cell, on_stdout, on_stderr))?;
        let mut outcome = outcome_of(&report, request.timeout);
        if report.kernel_ended {
            self.kernel_running = false;
            outcome.session = SessionState::Restarted {
                reason: if report.timed_out || report.output_limited || report.on_request {
                    format!(
                        "the kernel did not come back within {} s of the interrupt, so it \
                         was stopped; the next run starts a fresh one",
                        GRACE.as_secs()
                    )
                } else if report.oom_killed {
                    "the kernel ran out of memory; the next run starts a fresh one".into()
                } else {
                    format!(
                        "the kernel exited ({}); the next run starts a fresh one",
                        if report.signal != 0 {
                            format!("signal {}", report.signal)
                        } else {
                            format!("status {}", report.code)
                        }
                    )
                },
            };
        }
        outcome.stdout = output.stdout;
        outcome.stderr = output.stderr;
        Ok(outcome)
    }
}
