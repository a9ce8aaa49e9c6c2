//! The run path: code and command lines on their way in, checked, given their
//! libraries and plot prelude, and handed on to `execute.rs`.

use super::files::dir_path;
use super::options::RunOptions;
use super::state::Session;
use crate::backend::{Capability, Needs, RunRequest, Workload};
use crate::error::{Error, Result};
use crate::execution::Execution;
use crate::language::PlanOptions;
use crate::layout::Layout;
use std::time::Instant;

impl Session {
    /// Runs `code` with the session's limits.
    pub fn run(&mut self, code: &str) -> Result<Execution> {
        self.run_with(code, RunOptions::default())
    }

    /// Runs `code` with `options`.
    pub fn run_with(&mut self, code: &str, options: RunOptions) -> Result<Execution> {
        let result = self.run_unmasked(code, options);
        self.masked(result)
    }

    fn run_unmasked(&mut self, code: &str, options: RunOptions) -> Result<Execution> {
        self.sandbox()?;
        if self.kernel.is_some() && !options.args.is_empty() {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "program arguments ({}) need a one-shot session: this session runs \
                     cells in the {} kernel, which have no command line; open it with \
                     one_shot(true) (`sandlot run`, `/v1/run` and `execute_code` do)",
                    options.args.join(" "),
                    self.language()
                ),
            });
        }
        let findings = self.check(code)?;
        let mut libraries = self.libraries.clone();
        libraries.extend(
            options
                .libraries
                .iter()
                .filter(|l| !self.libraries.contains(l))
                .cloned(),
        );
        if !libraries.is_empty() {
            self.handler.check_libraries(&libraries)?;
            let needs = Needs::language(self.language()).with_libraries(&libraries);
            self.backend
                .supports(&needs)
                .map_err(|why| Error::LibrariesUnavailable {
                    backend: self.backend_name.to_string(),
                    language: self.language().to_string(),
                    reason: why.0,
                })?;
        }
        let env = self.run_env(&options);
        // The language's kernel, or a backend that runs no plans (an interpreter in
        // process), runs the code itself; otherwise the handler plans a program.
        let interpreted = self.kernel.is_some() || !self.capabilities.has(Capability::RunsPlans);
        // Once the prelude runs in the interpreter, every run's figures are flushed:
        // the handler need not be asked (a call costs about 0.1 ms).
        let may_plot = (interpreted && self.plot_capture) || self.handler.may_plot(code)?;
        let workdir = match options.workdir.as_deref().map(dir_path).transpose()? {
            Some(dir) if !dir.is_empty() => format!("{}/{dir}", Layout::WORKSPACE),
            _ => Layout::WORKSPACE.to_string(),
        };
        let plan = if !interpreted {
            Some(self.handler.plan(
                code,
                &libraries,
                &PlanOptions {
                    workdir,
                    output_dir: Layout.output_dir(),
                    capture_plots: may_plot,
                    args: options.args.clone(),
                },
            )?)
        } else {
            // A one-shot run is a program of its own: where the interpreter keeps
            // state (wasm), it starts afresh, and the prelude goes in again.
            if self.one_shot && self.used {
                self.sandbox()?.reset()?;
                self.plot_capture = false;
            }
            self.used = true;
            if let Some(failed) = self.install_libraries(&libraries, &env, &options)? {
                return Ok(failed);
            }
            // The prelude costs milliseconds in an interpreter that has just started,
            // so it runs before the first code that may plot, not when the session
            // opens.
            if may_plot && !self.plot_capture {
                self.install_plot_capture(&env)?;
            }
            None
        };
        let workload = match &plan {
            Some(plan) => Workload::Plan(plan),
            None => Workload::Code(code),
        };
        self.execute(workload, &env, options, findings)
    }

    /// Installs the libraries a run needs that the session's interpreter does not have
    /// yet (a kernel keeps what earlier runs installed). A failed install is the run's
    /// [`Execution`], with the installer's output.
    fn install_libraries(
        &mut self,
        libraries: &[String],
        env: &[(String, String)],
        options: &RunOptions,
    ) -> Result<Option<Execution>> {
        let pending: Vec<String> = libraries
            .iter()
            .filter(|l| !self.installed.contains(l))
            .cloned()
            .collect();
        if pending.is_empty() || !self.capabilities.has(Capability::InstallLibraries) {
            return Ok(None);
        }
        let commands = self.handler.install(&pending, Layout::WORKSPACE)?;
        let plan = crate::language::Plan {
            files: Vec::new(),
            commands,
        };
        let before = self.output_before_run()?;
        let timeout = options.timeout.unwrap_or(self.limits.timeout);
        let max_output = options.max_output.unwrap_or(self.limits.max_output);
        let started = Instant::now();
        let secret_names = self.secrets.names();
        let outcome = self.sandbox()?.run(RunRequest {
            env,
            secret_names: &secret_names,
            timeout,
            max_output,
            ..RunRequest::new(Workload::Plan(&plan))
        })?;
        if outcome.exit_code == 0 && outcome.end == crate::backend::EndReason::Completed {
            self.installed.extend(pending);
            return Ok(None);
        }
        self.finish(outcome, &before, started.elapsed(), Vec::new(), Vec::new())
            .map(Some)
    }

    /// Runs a shell command line with `sh -c` in the sandbox's workspace, as a
    /// terminal would, with the session's limits; pipes, redirections and globs work.
    /// Only backends with [`Capability::Shell`] have a shell (the container backends);
    /// on others this is [`Error::BackendCannot`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), sandlot::Error> {
    /// # let sandlot = sandlot::from_environment()?;
    /// let mut session = sandlot.session("python").backend("docker").open()?;
    /// let listing = session.execute_command("python3 --version && ls / | wc -l")?;
    /// assert!(listing.success());
    /// # Ok(())
    /// # }
    /// ```
    pub fn execute_command(&mut self, command_line: &str) -> Result<Execution> {
        self.execute_command_with(command_line, RunOptions::default())
    }

    /// [`Session::execute_command`] with options (`libraries` is not used).
    pub fn execute_command_with(
        &mut self,
        command_line: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let result = self.command_unmasked(command_line, options);
        self.masked(result)
    }

    fn command_unmasked(&mut self, command_line: &str, options: RunOptions) -> Result<Execution> {
        self.sandbox()?;
        if !self.capabilities.has(Capability::Shell) {
            return Err(Error::BackendCannot {
                backend: self.backend_name.to_string(),
                capability: Capability::Shell,
                hint: "it has no shell; open the session on a container backend (docker, \
                       podman or kubernetes)"
                    .into(),
            });
        }
        // A command line is code too: the gate reads it, and what it hands an
        // interpreter, as it reads a run's code.
        let findings = self.check_command(command_line)?;
        let env = self.run_env(&options);
        self.execute(Workload::Shell(command_line), &env, options, findings)
    }

    /// The environment of a run: the session's, the run's, then the secrets.
    fn run_env(&self, options: &RunOptions) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.extend(options.env.iter().cloned());
        env.extend(self.secrets.env());
        env
    }
}
