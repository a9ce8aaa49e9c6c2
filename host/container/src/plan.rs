//! Carrying out a language handler's plan through an agent: write the files, run the
//! commands in order, give installs the network (when the policy allows) and take it
//! away again before any of the user's code runs.

use super::client::{AgentClient, Output, RunCommand};
use super::sandbox::{outcome_of, AgentSandbox};
use sandlot_agent::{ExitReport, InstallProxy};
use sandlot_core::backend::{stop_threshold, Outcome, RunRequest};
use sandlot_core::error::Result;
use sandlot_core::language::{Command, Phase, Plan};
use sandlot_core::policy::Network;
use std::time::Duration;

/// Installing libraries may take minutes, whatever the run's own limit.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Where installs get their fresh home directories, relative to the workspace; emptied
/// after each install.
const INSTALL_HOMES: &str = ".sandlot/install";

/// Installers' chatter is kept only to explain a failure; this much is enough.
const INSTALL_OUTPUT: usize = 256 << 10;

/// The environment of an install or setup command: the run's without its secrets
/// (packages run their own code while they install, with the network on), then the
/// command's own. Earlier runs' code may have left files that installers pick up: a
/// `pip.py` in the working directory would be what `python3 -m pip` imports, with the
/// network on, so Python gets no implicit path entries.
fn install_env(
    run: &[(String, String)],
    secrets: &[String],
    command: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = run
        .iter()
        .filter(|(key, _)| !secrets.contains(key))
        .cloned()
        .collect();
    env.extend(command.iter().cloned());
    env.extend(
        [("PYTHONSAFEPATH", "1"), ("PYTHONNOUSERSITE", "1")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    env
}

impl AgentSandbox {
    /// Runs `plan`: its files, then its commands until one fails.
    pub(super) fn run_plan(&mut self, plan: &Plan, mut request: RunRequest<'_>) -> Result<Outcome> {
        let workdir = request.workdir;
        for file in &plan.files {
            let contents = file.contents.as_slice();
            let path = if workdir.is_empty() {
                file.path.clone()
            } else {
                format!("{workdir}/{}", file.path)
            };
            self.with_agent(|agent| agent.write(&path, contents))?;
        }
        let mut outcome = Outcome::default();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        for command in &plan.commands {
            let preparing = matches!(command.phase, Phase::Setup | Phase::Install);
            let (report, output) = if preparing {
                self.prepare(command, &request)?
            } else {
                // Whatever happened before, no code runs while the sandbox is online
                // unless the policy says so.
                self.network(false)?;
                let mut env = request.env.to_vec();
                env.extend(command.env.iter().cloned());
                let is_run = command.phase == Phase::Run;
                let stdin = if is_run { request.stdin } else { b"" };
                // The program calls tools; its build does not.
                let runtime = self.tool_runtime(&request)?.filter(|_| is_run);
                let calls = request.tools.clone();
                let run = RunCommand {
                    argv: &command.argv,
                    env: &env,
                    cwd: workdir,
                    stdin,
                    timeout: request.timeout,
                    max_output: request.max_output,
                    stop_after: stop_threshold(request.max_output),
                    interrupt: request.interrupt,
                    tools: super::sandbox::run_tools(calls.as_ref(), runtime.as_ref()),
                };
                // A build's output is diagnostics: it streams as stderr.
                self.command(&run, &mut request, is_run)?
            };
            let failed =
                report.code != 0 || report.timed_out || report.output_limited || report.on_request;
            let Output {
                stdout: out,
                stderr: err,
            } = output;
            match command.phase {
                Phase::Run => {
                    stdout.extend_from_slice(&out);
                    stderr.extend_from_slice(&err);
                }
                Phase::Build => {
                    stderr.extend_from_slice(&out);
                    stderr.extend_from_slice(&err);
                }
                Phase::Setup | Phase::Install if failed => {
                    stderr.extend_from_slice(&out);
                    stderr.extend_from_slice(&err);
                    if command.needs_network && self.policy().network == Network::Off {
                        stderr.extend_from_slice(
                            b"sandlot: the policy gives this sandbox no network (network = off), \
                              so libraries cannot be downloaded\n",
                        );
                    }
                }
                Phase::Setup | Phase::Install => {}
            }
            let this = outcome_of(&report, request.timeout);
            outcome.stdout_truncated |= this.stdout_truncated;
            outcome.stderr_truncated |= this.stderr_truncated;
            outcome.exit_code = this.exit_code;
            outcome.end = this.end;
            if failed {
                break;
            }
        }
        stdout.truncate(request.max_output);
        stderr.truncate(request.max_output);
        outcome.stdout = stdout;
        outcome.stderr = stderr;
        Ok(outcome)
    }

    /// Runs one install or setup command. Installs get the network (when the policy
    /// allows it), a home of their own and their own time limit; their chatter is
    /// shown only if they fail. With the network only for installs, the session's
    /// own code must not have it either: a thread an earlier cell left in the kernel
    /// would be online while the installer is, so everything but the agent stops
    /// until the network is cut again.
    fn prepare(
        &mut self,
        command: &Command,
        request: &RunRequest<'_>,
    ) -> Result<(ExitReport, Output)> {
        let online = command.needs_network && self.policy().network != Network::Off;
        let freeze = online && self.policy().network == Network::InstallOnly;
        let install_proxy = if freeze {
            self.with_agent(AgentClient::freeze)?
        } else {
            None
        };
        let result = self
            .go_online(online, install_proxy)
            .and_then(|()| self.install(command, request, install_proxy));
        // Whatever happened, the network is cut before the code goes on; where it
        // cannot be, the sandbox is lost and the code stays stopped.
        let cleaned = self.go_offline(online, install_proxy).and_then(|()| {
            if freeze {
                self.with_agent(AgentClient::thaw)?;
            }
            self.with_agent(|agent| agent.clear(INSTALL_HOMES))
        });
        // The install's own failure says more than what followed from it.
        let ran = result?;
        cleaned?;
        Ok(ran)
    }

    fn go_online(&mut self, online: bool, install_proxy: Option<InstallProxy>) -> Result<()> {
        if online {
            self.network(true)?;
        }
        match install_proxy {
            Some(proxy) => self.admit_install(Some(proxy.token)),
            None => Ok(()),
        }
    }

    fn go_offline(&mut self, online: bool, install_proxy: Option<InstallProxy>) -> Result<()> {
        let ended = match install_proxy {
            Some(_) => self.admit_install(None),
            None => Ok(()),
        };
        let cut = if online { self.network(false) } else { Ok(()) };
        ended.and(cut)
    }

    /// The install itself, its way out open.
    fn install(
        &mut self,
        command: &Command,
        request: &RunRequest<'_>,
        install_proxy: Option<InstallProxy>,
    ) -> Result<(ExitReport, Output)> {
        // A home of its own, under a name earlier code cannot have guessed (and,
        // frozen, cannot plant in now): configuration in the workspace's home
        // (`~/.config/pip/pip.conf`, `~/.npmrc`, `~/.gemrc`) steers no install.
        let home = format!(
            "{INSTALL_HOMES}/{}",
            sandlot_core::backend::owner::sandbox_id()
        );
        self.with_agent(|agent| agent.write(&format!("{home}/.keep"), b""))?;
        let mut env = install_env(request.env, request.secret_names, &command.env);
        let home_path = format!("{}/{home}", sandlot_core::layout::Layout::WORKSPACE);
        env.extend([
            ("HOME".to_string(), home_path.clone()),
            (
                "XDG_CONFIG_HOME".to_string(),
                format!("{home_path}/.config"),
            ),
            ("XDG_CACHE_HOME".to_string(), format!("{home_path}/.cache")),
        ]);
        if let Some(proxy) = install_proxy {
            // The install's own way out; the code's relays stay as closed as the code.
            env.extend(crate::proxy::proxy_environment(proxy.port));
        }
        // An installer runs in that home, never where the session's files are: what
        // the code left there (a `pkg-1.0.gem` RubyGems prefers to the registry, an
        // archive pip takes for a file, a module `python -m` would import) is out of
        // its sight. A setup command (`go mod init`) makes the session's own files,
        // offline, so it runs in the working directory.
        let cwd = match command.phase {
            Phase::Install => home.as_str(),
            _ => request.workdir,
        };
        let run = RunCommand {
            argv: &command.argv,
            env: &env,
            cwd,
            stdin: b"",
            timeout: INSTALL_TIMEOUT.max(request.timeout),
            max_output: INSTALL_OUTPUT,
            stop_after: 0,
            interrupt: request.interrupt,
            tools: None,
        };
        self.with_agent(|agent| agent.run(&run, &mut None, &mut None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn installers_never_get_the_secrets() {
        let run = pairs(&[("API_KEY", "sk-1234"), ("LANG", "C.UTF-8")]);
        let env = install_env(&run, &["API_KEY".into()], &pairs(&[("PIP_X", "1")]));
        assert!(!env.iter().any(|(k, _)| k == "API_KEY"), "{env:?}");
        assert!(env.contains(&("LANG".into(), "C.UTF-8".into())));
        assert!(env.contains(&("PIP_X".into(), "1".into())));
        assert!(env.contains(&("PYTHONSAFEPATH".into(), "1".into())));
    }
}
