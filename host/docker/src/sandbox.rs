//! One container: created from the policy with the agent as process 1, removed at once.

use crate::backend::ContainerBackend;
use crate::container::{remove, AGENT_PATH, IPC_PREFIX};
use crate::egress::Egress;
use crate::engine::{AgentDelivery, Engine};
use crate::socket::open_to_container;
use bollard::container::LogOutput;
use bollard::models::{
    ContainerCreateBody, HostConfig, NetworkConnectRequest, NetworkDisconnectRequest,
};
use bollard::query_parameters::AttachContainerOptions;
use bollard::Docker;
use sandlot_container::proxy::{Access, EgressProxy};
use sandlot_container::{accept_unix, AgentClient, AgentSandbox, SandboxHandle, Transport};
use sandlot_core::backend::wait;
use sandlot_core::backend::{owner, SandboxSpec};
use sandlot_core::error::{Error, Result};
use sandlot_core::layout::Layout;
use sandlot_core::policy::{Network, Policy, Seccomp};
use std::collections::HashMap;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the agent lives in every container.
const AGENT_DIR: &str = "/.sandlot";
/// The socket directory, for bind-mount delivery.
const IPC_DIR: &str = "/.sandlot/ipc";

/// How long a new container has to start its agent.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How much of the agent's own standard error is kept to explain a failed start.
const AGENT_STDERR: usize = 4096;

/// The engine's side of one container.
struct Container {
    engine: Engine,
    docker: Docker,
    runtime: tokio::runtime::Handle,
    /// Keeps the runtime alive for the removal at drop, even if the backend is gone.
    _runtime: Arc<tokio::runtime::Runtime>,
    id: String,
    name: String,
    install_network: String,
    /// The socket directory (bind-mount delivery).
    ipc: Option<tempfile::TempDir>,
    /// The egress proxy, under an allow-list; it goes after the container.
    egress: Option<Egress>,
    removed: bool,
}

impl SandboxHandle for Container {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn set_network(&mut self, online: bool) -> Result<()> {
        if self.egress.is_some() {
            // No network at all: installs go out through the egress proxy
            // (`admit_install`).
            return Ok(());
        }
        set_network(
            &self.docker,
            &self.runtime,
            &self.install_network,
            &self.id,
            online,
        )
        .map_err(|source| Error::Engine {
            engine: self.engine.name().into(),
            context: format!(
                "{} the install network `{}`",
                if online { "joining" } else { "leaving" },
                self.install_network
            ),
            source: Box::new(source),
        })
    }

    fn admit_install(&mut self, token: Option<sandlot_agent::InstallToken>) -> Result<()> {
        EgressProxy::admit_install_on(self.egress.as_ref().map(Egress::proxy), token)
    }

    fn take_denials(&mut self) -> Vec<sandlot_core::egress::Denial> {
        self.egress
            .as_ref()
            .map(Egress::take_denials)
            .unwrap_or_default()
    }

    fn bind_secrets(&mut self, secrets: Arc<sandlot_core::secret::Injector>) {
        if let Some(egress) = &self.egress {
            egress.proxy().bind_secrets(secrets);
        }
    }

    fn set_request_rules(&mut self, rules: &sandlot_core::egress::RequestRules) -> Result<()> {
        let name = self.name();
        EgressProxy::set_request_rules_on(self.egress.as_ref().map(Egress::proxy), &name, rules)
    }

    fn destroy(&mut self) {
        if !std::mem::replace(&mut self.removed, true) {
            // Kill and delete in one request: no graceful stop, nothing to wait for.
            let _ = remove(&self.docker, &self.runtime, self.id.clone());
            self.ipc = None;
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Makes, starts and connects to one container for `spec`.
impl ContainerBackend {
    /// Makes, starts and connects to one container for `spec`.
    pub(crate) fn open_container(&self, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
        open(self, spec)
    }
}

fn open(backend: &ContainerBackend, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
    let engine = backend.engine;
    let handle = backend.runtime.handle().clone();
    let docker = backend.docker.clone();
    let image = spec.image.to_string();

    let present = {
        let docker = docker.clone();
        let image = image.clone();
        wait(&handle, async move { docker.inspect_image(&image).await })
    };
    match present {
        Some(Ok(_)) => {}
        Some(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => {
            return Err(Error::ImageMissing {
                engine: engine.name().into(),
                image,
                language: spec.language.into(),
            })
        }
        Some(Err(e)) => return Err(backend.engine_error(format!("looking up image {image}"), e)),
        None => {
            return Err(backend.engine_error("looking up an image", "the engine runtime stopped"))
        }
    }

    let id = owner::sandbox_id();
    let name = format!("sandlot-{id}");
    let policy = spec.policy.clone();
    let (listener, ipc) = match backend.delivery {
        AgentDelivery::BindMount => {
            // Named after this process, so one killed before it removed the directory
            // can be told apart (see `sweep_ipc_dirs`).
            let ipc = tempfile::Builder::new()
                .prefix(&format!("{IPC_PREFIX}{}-", owner::owner_stamp()))
                .tempdir()
                .map_err(|e| Error::Io {
                    context: "cannot create the agent's socket directory".into(),
                    source: e,
                })?;
            let socket = ipc.path().join("agent.sock");
            let listener = UnixListener::bind(&socket)
                .and_then(|l| {
                    open_to_container(ipc.path(), &socket, policy.uid, policy.gid).map(|()| l)
                })
                .map_err(|e| Error::Io {
                    context: format!("cannot listen on {}", socket.display()),
                    source: e,
                })?;
            (Some(listener), Some(ipc))
        }
        AgentDelivery::Attach => (None, None),
    };
    let agent_file = match backend.delivery {
        AgentDelivery::BindMount => Some(sandlot_container::executable_file()?),
        AgentDelivery::Attach => None,
    };
    let egress = match egress_access(&policy, backend.delivery) {
        Err(()) => {
            return Err(Error::BackendCannot {
                backend: backend.name.to_string(),
                capability: sandlot_core::capability::Capability::NetworkControl,
                hint: "an egress allow-list needs an engine on this machine, whose containers \
                       can reach a socket of the host's; use network = \"off\" or \"on\" here"
                    .into(),
            })
        }
        Ok(Some(access)) => Some(Egress::start(&policy, access, &handle)?),
        Ok(None) => None,
    };
    let mut config = container_config(
        spec,
        &id,
        backend.delivery,
        agent_file.as_deref(),
        ipc.as_ref().map(|d| d.path()),
        &backend.install_network,
    );
    if let Some(egress) = &egress {
        egress.configure(&mut config);
    }
    let created = backend.create_named(&name, config)?;
    // From here on, dropping `container` removes it: a sandbox that never became one
    // leaves nothing behind.
    let mut container = Container {
        engine,
        docker: docker.clone(),
        runtime: handle.clone(),
        _runtime: backend.runtime.clone(),
        id: created.id.clone(),
        name,
        install_network: backend.install_network.clone(),
        ipc,
        egress,
        removed: false,
    };
    let id = created.id;

    let attached = match backend.delivery {
        AgentDelivery::Attach => Some(deliver_and_attach(backend, &id)?),
        AgentDelivery::BindMount => None,
    };
    if policy.network == Network::InstallOnly && container.egress.is_none() {
        // Created on the bridge so that installs can join it later (a container made
        // with no network can never join one), and cut off before anything runs.
        container.set_network(false)?;
    }
    {
        let docker = docker.clone();
        let id = id.clone();
        backend.wait(&format!("starting a container from {image}"), async move {
            docker.start_container(&id, None).await
        })?;
    }
    let stopped = |reason: String| Error::Agent {
        reason: format!(
            "the container stopped before its agent answered ({reason}); is `{image}` a \
             Linux image for this machine's architecture?"
        ),
    };
    let agent = match (listener, attached) {
        (Some(listener), _) => {
            let stream = accept_unix(&listener, START_DEADLINE, || {
                container_running(&docker, &handle, &id).map_err(stopped)
            })?;
            let transport =
                Transport::unix(stream, Duration::from_secs(60)).map_err(|e| Error::Agent {
                    reason: format!("socket setup failed: {e}"),
                })?;
            let agent = AgentClient::connect(transport, START_DEADLINE)?;
            // Connected: the socket is no longer needed, so nothing is left on the
            // host even if this process is killed now.
            container.ipc = None;
            agent
        }
        (None, Some((transport, stderr))) => AgentClient::connect(transport, START_DEADLINE)
            .map_err(|e| {
                let said =
                    String::from_utf8_lossy(&stderr.lock().unwrap_or_else(|e| e.into_inner()))
                        .trim()
                        .to_string();
                match container_running(&docker, &handle, &id) {
                    Err(reason) if said.is_empty() => stopped(reason),
                    Err(reason) => stopped(format!("{reason}; the agent said: {said}")),
                    Ok(()) => e,
                }
            })?,
        (None, None) => unreachable!("every delivery gives the agent a way back"),
    };
    let online = policy.network == Network::On;
    Ok(
        AgentSandbox::new(agent, Box::new(container), policy, online)
            .with_kernel(spec.kernel.cloned())
            .with_tool_runtime(handle),
    )
}

/// Copies the agent into the created container and attaches to its standard streams,
/// before it starts so that not a byte of the agent's hello is lost. Returns the
/// transport and the agent's own standard error, for diagnostics.
fn deliver_and_attach(
    backend: &ContainerBackend,
    id: &str,
) -> Result<(Transport, Arc<Mutex<Vec<u8>>>)> {
    let archive = sandlot_container::archive("agent")?;
    backend.upload(
        id,
        AGENT_DIR,
        archive,
        "copying the agent into the container",
    )?;
    let attached = {
        let docker = backend.docker.clone();
        let id = id.to_string();
        backend.wait("attaching to the container", async move {
            docker
                .attach_container(
                    &id,
                    Some(AttachContainerOptions {
                        stdin: true,
                        stdout: true,
                        stderr: true,
                        stream: true,
                        logs: false,
                        detach_keys: None,
                    }),
                )
                .await
        })?
    };
    let bollard::container::AttachContainerResults {
        mut output,
        mut input,
    } = attached;
    let (to_host, from_agent) = std::sync::mpsc::channel::<Vec<u8>>();
    let (to_agent, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let said = stderr.clone();
    let reading = backend.runtime.spawn(async move {
        use futures_util::StreamExt;
        while let Some(item) = output.next().await {
            match item {
                Ok(LogOutput::StdOut { message }) => {
                    if to_host.send(message.to_vec()).is_err() {
                        return;
                    }
                }
                Ok(LogOutput::StdErr { message }) => {
                    let mut kept = said.lock().unwrap_or_else(|e| e.into_inner());
                    let room = AGENT_STDERR.saturating_sub(kept.len());
                    kept.extend_from_slice(&message[..message.len().min(room)]);
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
        // Dropping `to_host` ends the agent's stream for the client.
    });
    let writing = backend.runtime.spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Some(bytes) = outgoing.recv().await {
            if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                return;
            }
        }
        // The client is gone: closing our side closes the agent's standard input.
        let _ = input.shutdown().await;
    });
    let transport = Transport::channels(
        from_agent,
        move |bytes| to_agent.send(bytes).is_ok(),
        move || {
            reading.abort();
            writing.abort();
        },
    );
    Ok((transport, stderr))
}

/// What a container's code may reach through an egress proxy of its own, if it gets
/// one: under an allow-list, what the list holds (only an engine on this machine can
/// mount the proxy's socket: `Err` otherwise); with the network only for installs,
/// nothing, its installs going out through the agent's install proxy, so that the
/// container is never on a network, not even while its code is stopped for an
/// install (a listening socket of the code would take connections from the network's
/// other containers then). A remote engine's containers join the bridge for installs
/// instead.
fn egress_access(
    policy: &Policy,
    delivery: AgentDelivery,
) -> std::result::Result<Option<Access>, ()> {
    let local = delivery == AgentDelivery::BindMount;
    match policy.network {
        Network::AllowList if local => Ok(Some(Access::Listed)),
        Network::AllowList => Err(()),
        Network::InstallOnly if local => Ok(Some(Access::Closed)),
        _ => Ok(None),
    }
}

fn set_network(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    network: &str,
    id: &str,
    on: bool,
) -> std::result::Result<(), bollard::errors::Error> {
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
}

/// `Err` with the container's state when it is not running.
fn container_running(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    id: &str,
) -> std::result::Result<(), String> {
    let docker = docker.clone();
    let id = id.to_string();
    let state = match wait(
        runtime,
        async move { docker.inspect_container(&id, None).await },
    )
    .ok_or("the engine runtime stopped")?
    {
        Ok(inspect) => inspect.state.unwrap_or_default(),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Err("it exited and removed itself".into()),
        Err(e) => return Err(e.to_string()),
    };
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

/// What the engine needs to create the container: everything fixed for the sandbox's
/// life. Per-run settings (environment, limits of a run) go to the agent with each
/// command instead.
fn container_config(
    spec: &SandboxSpec<'_>,
    id: &str,
    delivery: AgentDelivery,
    agent: Option<&Path>,
    ipc: Option<&Path>,
    install_network: &str,
) -> ContainerCreateBody {
    let policy: &Policy = spec.policy;
    let workspace = Layout::WORKSPACE;
    let mut env = vec![
        format!("HOME={workspace}"),
        "TMPDIR=/tmp".to_string(),
        "LANG=C.UTF-8".to_string(),
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
    ];
    // The agent filters system calls itself, on top of the engine's profile, unless
    // the policy asked for no filtering at all.
    if policy.seccomp == Seccomp::Unconfined {
        env.push(format!("{}=unconfined", sandlot_agent::SECCOMP_VARIABLE));
    }
    let mut labels = HashMap::from([
        ("sandlot".to_string(), "1".to_string()),
        ("sandlot.sandbox".to_string(), id.to_string()),
        ("sandlot.language".to_string(), spec.language.to_string()),
        ("sandlot.owner".to_string(), owner::owner_tag()),
    ]);
    if let Some(ipc) = ipc {
        labels.insert("sandlot.ipc".to_string(), ipc.display().to_string());
    }
    let mut security_opt = Vec::new();
    if policy.no_new_privileges {
        security_opt.push("no-new-privileges".to_string());
    }
    if policy.seccomp == Seccomp::Unconfined {
        security_opt.push("seccomp=unconfined".to_string());
    }
    let tmpfs = |size: u64| format!("rw,exec,nosuid,nodev,size={size},mode=1777");
    let memory = spec.memory.min(i64::MAX as usize) as i64;
    let (cmd, binds, volumes) = match delivery {
        AgentDelivery::BindMount => (
            vec![
                "serve".to_string(),
                format!("{IPC_DIR}/agent.sock"),
                workspace.to_string(),
            ],
            Some(vec![
                format!(
                    "{}:{AGENT_PATH}:ro",
                    agent.map(|a| a.display().to_string()).unwrap_or_default()
                ),
                format!(
                    "{}:{IPC_DIR}:ro",
                    ipc.map(|d| d.display().to_string()).unwrap_or_default()
                ),
            ]),
            None,
        ),
        // The agent is copied into a volume before the container starts: the archive
        // API cannot write into a read-only root filesystem, but it can into a volume,
        // which is removed with the container.
        AgentDelivery::Attach => (
            vec!["serve-stdio".to_string(), workspace.to_string()],
            None,
            Some(vec![AGENT_DIR.to_string()]),
        ),
    };
    let attach = delivery == AgentDelivery::Attach;
    ContainerCreateBody {
        image: Some(spec.image.into()),
        entrypoint: Some(vec![AGENT_PATH.into()]),
        cmd: Some(cmd),
        env: Some(env),
        user: Some(format!("{}:{}", policy.uid, policy.gid)),
        labels: Some(labels),
        volumes,
        attach_stdin: Some(attach),
        attach_stdout: Some(attach),
        attach_stderr: Some(attach),
        open_stdin: Some(attach),
        // The agent's input closes when the host's attach connection does.
        stdin_once: Some(attach),
        tty: Some(false),
        host_config: Some(HostConfig {
            binds,
            tmpfs: Some(HashMap::from([
                (workspace.to_string(), tmpfs(policy.workdir_size)),
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
            // When the agent exits (the host hung up, or was killed), the container
            // goes with it.
            auto_remove: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_engine_keeps_install_only_containers_off_every_network() {
        let with = |network| Policy {
            network,
            ..Policy::default()
        };
        let local = AgentDelivery::BindMount;
        let remote = AgentDelivery::Attach;
        assert_eq!(
            egress_access(&with(Network::InstallOnly), local),
            Ok(Some(Access::Closed))
        );
        assert_eq!(egress_access(&with(Network::InstallOnly), remote), Ok(None));
        assert_eq!(
            egress_access(&with(Network::AllowList), local),
            Ok(Some(Access::Listed))
        );
        assert_eq!(egress_access(&with(Network::AllowList), remote), Err(()));
        for network in [Network::Off, Network::On] {
            assert_eq!(egress_access(&with(network), local), Ok(None));
            assert_eq!(egress_access(&with(network), remote), Ok(None));
        }
    }
}
