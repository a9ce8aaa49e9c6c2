//! One container: created from the policy, driven through its agent, removed at once.

use super::agent::{open_to_container, AgentClient, Output};
use super::{ContainerBackend, Engine};
use crate::artifact::Snapshot;
use crate::backend::{BackendSession, RawOutput, RunRequest, SandboxFiles, SessionSpec, Sink};
use crate::error::{Error, Result};
use crate::language::{Phase, PlanOptions};
use crate::plugin::LanguageHandler;
use crate::policy::{Network, Policy, Seccomp};
use bollard::models::{
    ContainerCreateBody, HostConfig, NetworkConnectRequest, NetworkDisconnectRequest,
};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions};
use bollard::Docker;
use std::collections::HashMap;
use std::future::Future;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the container sees its workspace, the agent and the socket directory.
pub(crate) const WORKDIR: &str = "/workspace";
const AGENT_PATH: &str = "/.sandlot/agent";
const IPC_DIR: &str = "/.sandlot/ipc";

/// Installing libraries may take minutes, whatever the run's own limit.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `future` on the backend's runtime and waits for it. Unlike `block_on`, this
/// works from any thread, including an async task's (as when a session is dropped).
pub(crate) fn wait<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    future: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv().ok()
}

pub(crate) struct ContainerSession {
    engine: Engine,
    docker: Docker,
    runtime: tokio::runtime::Handle,
    /// Keeps the runtime alive for the removal at drop, even if the backend is gone.
    _runtime: Arc<tokio::runtime::Runtime>,
    id: String,
    name: String,
    agent: Option<AgentClient>,
    ipc: Option<tempfile::TempDir>,
    handler: LanguageHandler,
    policy: Policy,
    install_network: String,
    /// Whether the container is on `install_network` now.
    connected: bool,
    max_output: usize,
}

/// Removes a container that never became a session.
struct Cleanup<'a> {
    backend: &'a ContainerBackend,
    id: Option<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let _ = remove(&self.backend.docker, self.backend.runtime.handle(), id);
        }
    }
}

/// Kills and deletes a container in one request; `None` if the runtime is gone. A
/// container that is already gone counts as removed. Podman, busy with other
/// containers, sometimes fails a removal it then does at the second try, so failures
/// are retried a few times.
pub(crate) fn remove(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    id: String,
) -> Option<std::result::Result<(), bollard::errors::Error>> {
    let docker = docker.clone();
    wait(runtime, async move {
        let mut attempt = 0;
        loop {
            let result = docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptions {
                        force: true,
                        v: true,
                        ..Default::default()
                    }),
                )
                .await;
            attempt += 1;
            match result {
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => return Ok(()),
                Err(_) if attempt < 4 => {
                    tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
                }
                other => return other,
            }
        }
    })
}

impl ContainerSession {
    pub(crate) fn open(
        backend: &ContainerBackend,
        spec: &SessionSpec<'_>,
        image: &str,
    ) -> Result<ContainerSession> {
        let engine = backend.engine;
        let handle = backend.runtime.handle().clone();
        let docker = backend.docker.clone();
        let call = |context: &str, e: bollard::errors::Error| backend.engine_error(context, e);

        let present = {
            let docker = docker.clone();
            let image = image.to_string();
            wait(&handle, async move { docker.inspect_image(&image).await })
        };
        match present {
            Some(Ok(_)) => {}
            Some(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })) => {
                return Err(Error::ImageMissing {
                    engine: engine.name().into(),
                    image: image.into(),
                    language: spec.language.into(),
                })
            }
            Some(Err(e)) => return Err(call(&format!("looking up image {image}"), e)),
            None => {
                return Err(
                    backend.engine_error("looking up an image", "the engine runtime stopped")
                )
            }
        }

        let session_id = session_id();
        let ipc = tempfile::Builder::new()
            .prefix("sandlot-ipc-")
            .tempdir()
            .map_err(|e| Error::Io {
                context: "cannot create the agent's socket directory".into(),
                source: e,
            })?;
        let socket = ipc.path().join("agent.sock");
        let listener = UnixListener::bind(&socket)
            .and_then(|l| {
                open_to_container(ipc.path(), &socket, spec.policy.uid, spec.policy.gid).map(|()| l)
            })
            .map_err(|e| Error::Io {
                context: format!("cannot listen on {}", socket.display()),
                source: e,
            })?;

        let policy = *spec.policy;
        let config = container_config(
            spec,
            image,
            &policy,
            &backend.agent,
            ipc.path(),
            &session_id,
            &backend.install_network,
        );
        let name = format!("sandlot-{session_id}");
        let created = {
            let docker = docker.clone();
            let name = name.clone();
            wait(&handle, async move {
                docker
                    .create_container(
                        Some(CreateContainerOptions {
                            name: Some(name),
                            ..Default::default()
                        }),
                        config,
                    )
                    .await
            })
        }
        .ok_or_else(|| backend.engine_error("creating a container", "the engine runtime stopped"))?
        .map_err(|e| call(&format!("creating a container from {image}"), e))?;
        let mut cleanup = Cleanup {
            backend,
            id: Some(created.id.clone()),
        };
        let id = created.id;

        if policy.network == Network::InstallOnly {
            // Created on the bridge so that installs can join it later (a container made
            // with no network can never join one), and cut off before anything runs.
            set_network(&docker, &handle, &backend.install_network, &id, false).map_err(|e| {
                backend.engine_error("cutting the new container off the network", e)
            })?;
        }
        {
            let docker = docker.clone();
            let id = id.clone();
            wait(
                &handle,
                async move { docker.start_container(&id, None).await },
            )
        }
        .ok_or_else(|| backend.engine_error("starting a container", "the engine runtime stopped"))?
        .map_err(|e| call(&format!("starting a container from {image}"), e))?;

        let agent = AgentClient::accept(&listener, Duration::from_secs(30), || {
            container_running(&docker, &handle, &id).map_err(|reason| Error::Agent {
                reason: format!(
                    "the container stopped before its agent connected ({reason}); \
                     is `{image}` a Linux image for this machine's architecture?"
                ),
            })
        })?;
        cleanup.id = None;
        Ok(ContainerSession {
            engine,
            docker,
            runtime: handle,
            _runtime: backend.runtime.clone(),
            id,
            name,
            agent: Some(agent),
            ipc: Some(ipc),
            handler: spec.handler.clone(),
            policy,
            install_network: backend.install_network.clone(),
            connected: policy.network == Network::On,
            max_output: spec.max_output,
        })
    }

    /// The agent is process 1: without it the container is gone.
    fn ended(&mut self, reason: String) -> RawOutput {
        self.agent = None;
        RawOutput {
            exit_code: 137,
            ended: Some(format!("the container stopped: {reason}")),
            ..RawOutput::default()
        }
    }

    fn agent(&mut self) -> Result<&mut AgentClient> {
        self.agent.as_mut().ok_or_else(|| Error::SessionEnded {
            reason: "the container is gone".into(),
        })
    }

    fn network(&mut self, on: bool) -> Result<()> {
        if self.connected == on || self.policy.network != Network::InstallOnly {
            return Ok(());
        }
        match set_network(
            &self.docker,
            &self.runtime,
            &self.install_network,
            &self.id,
            on,
        ) {
            Ok(()) => {
                self.connected = on;
                Ok(())
            }
            Err(e) => {
                if !on {
                    // Still online: this sandbox must run no more code.
                    self.agent = None;
                }
                Err(Error::Engine {
                    engine: self.engine.name().into(),
                    context: format!(
                        "{} the install network `{}`",
                        if on { "joining" } else { "leaving" },
                        self.install_network
                    ),
                    reason: e,
                })
            }
        }
    }

    /// Runs `call` on the agent; if the agent fails, the session has ended.
    fn with_agent<T>(&mut self, call: impl FnOnce(&mut AgentClient) -> Result<T>) -> Result<T> {
        let result = call(self.agent()?);
        if let Err(Error::Agent { .. }) = &result {
            self.agent = None;
        }
        result
    }

    /// Runs one command of a plan through the agent.
    #[allow(clippy::too_many_arguments)]
    fn command(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        stdin: &[u8],
        timeout: Duration,
        output: &mut Output,
        on_stdout: &mut Option<Sink>,
        on_stderr: &mut Option<Sink>,
    ) -> Result<sandlot_agent::ExitReport> {
        let max_output = self.max_output;
        self.agent()?.run(
            argv, env, stdin, timeout, max_output, output, on_stdout, on_stderr,
        )
    }

    fn run_plan(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        let plan = self.handler.plan(
            request.code,
            request.libraries,
            &PlanOptions {
                workdir: WORKDIR.into(),
                output_dir: format!("{WORKDIR}/output"),
                capture_plots: request.capture_plots,
                args: Vec::new(),
            },
        )?;
        for file in &plan.files {
            self.agent()?.write(&file.path, file.contents.as_bytes())?;
        }
        let mut on_stdout = request.on_stdout;
        let mut on_stderr = request.on_stderr;
        let mut raw = RawOutput::default();
        for command in &plan.commands {
            let preparing = matches!(command.phase, Phase::Setup | Phase::Install);
            let mut output = Output::default();
            let report = if preparing {
                // Installs get the network (when the policy allows it) and their own
                // time limit; their chatter is shown only if they fail.
                let online = command.needs_network && self.policy.network != Network::Off;
                if online {
                    self.network(true)?;
                }
                // Earlier runs' code may have left files that installers pick up: a
                // `pip.py` in the working directory would be what `python3 -m pip`
                // imports, with the network on. Python gets no implicit path entries.
                let mut env = command.env.clone();
                env.extend(
                    [("PYTHONSAFEPATH", "1"), ("PYTHONNOUSERSITE", "1")]
                        .map(|(k, v)| (k.to_string(), v.to_string())),
                );
                let report = self.command(
                    &command.argv,
                    &env,
                    b"",
                    INSTALL_TIMEOUT.max(request.timeout),
                    &mut output,
                    &mut None,
                    &mut None,
                );
                if online {
                    self.network(false)?;
                }
                report?
            } else {
                // Whatever happened before, no code runs while the sandbox is online
                // unless the policy says so.
                self.network(false)?;
                let stdin = if command.phase == Phase::Run {
                    request.stdin
                } else {
                    b""
                };
                let mut no_stdout = None;
                // A build's output is diagnostics: it streams as stderr.
                let stdout_sink = if command.phase == Phase::Run {
                    &mut on_stdout
                } else {
                    &mut no_stdout
                };
                self.command(
                    &command.argv,
                    &command.env,
                    stdin,
                    request.timeout,
                    &mut output,
                    stdout_sink,
                    &mut on_stderr,
                )?
            };
            let failed = report.code != 0 || report.timed_out;
            match command.phase {
                Phase::Run => {
                    raw.stdout.extend_from_slice(&output.stdout);
                    raw.stderr.extend_from_slice(&output.stderr);
                }
                Phase::Build => {
                    raw.stderr.extend_from_slice(&output.stdout);
                    raw.stderr.extend_from_slice(&output.stderr);
                }
                Phase::Setup | Phase::Install if failed => {
                    raw.stderr.extend_from_slice(&output.stdout);
                    raw.stderr.extend_from_slice(&output.stderr);
                    if command.needs_network && self.policy.network == Network::Off {
                        raw.stderr.extend_from_slice(
                            b"sandlot: the policy gives this sandbox no network (network = off), \
                              so libraries cannot be downloaded\n",
                        );
                    }
                }
                Phase::Setup | Phase::Install => {}
            }
            raw.stdout_truncated |= report.stdout_truncated;
            raw.stderr_truncated |= report.stderr_truncated;
            raw.timed_out = report.timed_out;
            (raw.exit_code, raw.memory_exceeded) = exit_of(&report);
            if failed {
                break;
            }
        }
        raw.stdout.truncate(self.max_output);
        raw.stderr.truncate(self.max_output);
        Ok(raw)
    }
}

impl BackendSession for ContainerSession {
    fn run(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        match self.run_plan(request) {
            Err(Error::Agent { reason }) => Ok(self.ended(reason)),
            other => other,
        }
    }

    fn shell(&mut self, request: RunRequest<'_>) -> Result<RawOutput> {
        let argv = ["sh".to_string(), "-c".to_string(), request.code.to_string()];
        let mut output = Output::default();
        let (mut on_stdout, mut on_stderr) = (request.on_stdout, request.on_stderr);
        let report = match self.command(
            &argv,
            &[],
            request.stdin,
            request.timeout,
            &mut output,
            &mut on_stdout,
            &mut on_stderr,
        ) {
            Err(Error::Agent { reason }) => return Ok(self.ended(reason)),
            other => other?,
        };
        let (exit_code, memory_exceeded) = exit_of(&report);
        Ok(RawOutput {
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: report.stdout_truncated,
            stderr_truncated: report.stderr_truncated,
            exit_code,
            timed_out: report.timed_out,
            memory_exceeded,
            ended: None,
        })
    }

    fn missing_libraries(&self, _libraries: &[String]) -> Vec<String> {
        Vec::new()
    }

    fn files(&mut self) -> Option<&mut dyn SandboxFiles> {
        Some(self)
    }

    fn runs_plans(&self) -> bool {
        true
    }

    fn sandbox_name(&self) -> Option<&str> {
        Some(&self.name)
    }
}

impl SandboxFiles for ContainerSession {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.with_agent(|agent| agent.write(path, data))
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with_agent(|agent| agent.read(path, max))
    }

    fn list(&mut self, path: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .with_agent(|agent| agent.entries(path, false))?
            .into_iter()
            .map(|e| {
                if e.is_dir {
                    format!("{}/", e.path)
                } else {
                    e.path
                }
            })
            .collect();
        names.sort();
        Ok(names)
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with_agent(|agent| agent.pack(path, max))
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.with_agent(|agent| agent.unpack(path, archive))
    }

    fn scan(&mut self, path: &str) -> Result<Snapshot> {
        let entries = self.with_agent(|agent| agent.entries(path, true))?;
        Ok(Snapshot::from_entries(entries.into_iter().map(|e| {
            (
                PathBuf::from(e.path),
                e.size,
                Some(UNIX_EPOCH + Duration::from_nanos(e.mtime_ns)),
            )
        })))
    }
}

impl Drop for ContainerSession {
    fn drop(&mut self) {
        // Kill and delete in one request: no graceful stop, nothing to wait for.
        self.agent = None;
        let _ = remove(&self.docker, &self.runtime, std::mem::take(&mut self.id));
        self.ipc = None;
    }
}

/// The exit code the caller sees (124 at the time limit, 137 at the memory cap), and
/// whether the memory cap ended the command.
fn exit_of(report: &sandlot_agent::ExitReport) -> (i32, bool) {
    // An OOM kill of some other process in the container does not make the command's
    // own exit code a memory error: only its own death by SIGKILL does.
    let memory_exceeded = report.oom_killed && report.signal == 9 && !report.timed_out;
    let code = if report.timed_out {
        124
    } else if memory_exceeded {
        137
    } else {
        report.code
    };
    (code, memory_exceeded)
}

fn set_network(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    network: &str,
    id: &str,
    on: bool,
) -> std::result::Result<(), String> {
    let docker = docker.clone();
    let network = network.to_string();
    let id = id.to_string();
    wait(runtime, async move {
        if on {
            docker
                .connect_network(
                    &network,
                    NetworkConnectRequest {
                        container: id,
                        endpoint_config: None,
                    },
                )
                .await
        } else {
            docker
                .disconnect_network(
                    &network,
                    NetworkDisconnectRequest {
                        container: id,
                        force: Some(true),
                    },
                )
                .await
        }
    })
    .unwrap_or_else(|| Err(bollard::errors::Error::RequestTimeoutError))
    .map_err(|e| e.to_string())
}

/// `Err` with the container's state and last output when it is not running.
fn container_running(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    id: &str,
) -> std::result::Result<(), String> {
    let docker = docker.clone();
    let id = id.to_string();
    let state = wait(
        runtime,
        async move { docker.inspect_container(&id, None).await },
    )
    .ok_or("the engine runtime stopped")?
    .map_err(|e| e.to_string())?
    .state
    .unwrap_or_default();
    if state.running == Some(true) {
        return Ok(());
    }
    Err(format!(
        "exit code {}{}",
        state.exit_code.unwrap_or(-1),
        state
            .error
            .filter(|e| !e.is_empty())
            .map(|e| format!(", {e}"))
            .unwrap_or_default()
    ))
}

#[allow(clippy::too_many_arguments)]
fn container_config(
    spec: &SessionSpec<'_>,
    image: &str,
    policy: &Policy,
    agent: &Path,
    ipc: &Path,
    session_id: &str,
    install_network: &str,
) -> ContainerCreateBody {
    let mut env = vec![
        "HOME=/workspace".to_string(),
        "TMPDIR=/tmp".to_string(),
        "LANG=C.UTF-8".to_string(),
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
    ];
    env.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
    let labels = HashMap::from([
        ("sandlot".to_string(), "1".to_string()),
        ("sandlot.session".to_string(), session_id.to_string()),
        ("sandlot.language".to_string(), spec.language.to_string()),
        ("sandlot.owner".to_string(), owner_tag()),
        ("sandlot.ipc".to_string(), ipc.display().to_string()),
    ]);
    let mut security_opt = Vec::new();
    if policy.no_new_privileges {
        security_opt.push("no-new-privileges".to_string());
    }
    if policy.seccomp == Seccomp::Unconfined {
        security_opt.push("seccomp=unconfined".to_string());
    }
    let tmpfs = |size: u64| format!("rw,exec,nosuid,nodev,size={size},mode=1777");
    let memory = spec.memory.min(i64::MAX as usize) as i64;
    ContainerCreateBody {
        image: Some(image.into()),
        entrypoint: Some(vec![AGENT_PATH.into()]),
        cmd: Some(vec![
            "serve".into(),
            format!("{IPC_DIR}/agent.sock"),
            WORKDIR.into(),
        ]),
        env: Some(env),
        user: Some(format!("{}:{}", policy.uid, policy.gid)),
        labels: Some(labels),
        host_config: Some(HostConfig {
            binds: Some(vec![
                format!("{}:{AGENT_PATH}:ro", agent.display()),
                format!("{}:{IPC_DIR}:ro", ipc.display()),
            ]),
            tmpfs: Some(HashMap::from([
                (WORKDIR.to_string(), tmpfs(policy.workdir_size)),
                ("/tmp".to_string(), tmpfs(policy.workdir_size)),
            ])),
            readonly_rootfs: Some(policy.read_only_root),
            cap_drop: policy.drop_capabilities.then(|| vec!["ALL".to_string()]),
            security_opt: Some(security_opt),
            pids_limit: Some(i64::from(policy.pids_limit)),
            memory: Some(memory),
            // Swap would turn the memory cap into a slowdown.
            memory_swap: Some(memory),
            nano_cpus: Some(i64::from(policy.cpu_millis) * 1_000_000),
            network_mode: Some(match policy.network {
                Network::Off => "none".into(),
                _ => install_network.into(),
            }),
            init: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A fresh, unguessable-enough name for a session.
fn session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// `boot-id:pid:start-time:pid-namespace` of this process: unique on this machine
/// across restarts, and telling apart hosts in different PID namespaces (a sandlot
/// inside a container that shares the engine).
fn owner_tag() -> String {
    let pid = std::process::id();
    format!(
        "{}:{pid}:{}:{}",
        boot_id(),
        start_time(pid).unwrap_or(0),
        pid_namespace()
    )
}

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks after boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields resume after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Whether the process that made a container is still running. A tag from another boot
/// counts as dead: after a reboot none of its processes exist. (An engine shared by
/// several machines should therefore be collected with `sandlot gc` on one of them
/// only when their sessions are idle.)
pub(crate) fn owner_alive(tag: &str) -> bool {
    // The namespace (`pid:[inode]`) holds a colon itself: it is the rest of the tag.
    let mut parts = tag.splitn(4, ':');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if boot != boot_id() {
        return false;
    }
    // Made by a process in another PID namespace: its pid means nothing here, so it
    // is left alone.
    if parts.next().is_some_and(|ns| ns != pid_namespace()) {
        return true;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start_time(pid) == Some(start)
}

/// Removes an agent socket directory a dead session left, if it is one.
pub(crate) fn remove_ipc_dir(dir: &str) {
    let path = Path::new(dir);
    let is_ours = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("sandlot-ipc-"));
    if is_ours && path.starts_with(std::env::temp_dir()) {
        let _ = std::fs::remove_dir_all(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_one_is_not() {
        assert!(owner_alive(&owner_tag()));
        let pid = std::process::id();
        assert!(!owner_alive(&format!("{}:{pid}:1", boot_id())));
        assert!(!owner_alive(&format!(
            "{}:{pid}:1:{}",
            boot_id(),
            pid_namespace()
        )));
        // Another PID namespace's process cannot be looked up here: left alone.
        assert!(owner_alive(&format!("{}:{pid}:1:pid:[1]", boot_id())));
        assert!(!owner_alive("garbage"));
    }
}
