//! One sandbox: a jail with the agent as its process 1, reached over a socket pair
//! that is its standard input and output.

use crate::backend::NativeBackend;
use crate::cgroup::{Limits, Slot};
use crate::dir::STATE_PREFIX;
use crate::jail::{self, JailSpec};
use crate::spawn::{Jailed, Launch};
use sandlot_container::proxy::{Access, EgressProxy, SANDBOX_ADDRESS};
use sandlot_container::{AgentClient, AgentSandbox, SandboxHandle, Transport};
use sandlot_core::backend::{owner, SandboxSpec};
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::{Network, Seccomp};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a new jail has to start its agent.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How much of the jail's standard error is kept to explain a failed start.
const JAIL_STDERR: usize = 4096;

/// The host's side of one sandbox.
struct Jail {
    name: String,
    child: Option<Jailed>,
    cgroups: Option<Slot>,
    egress: Option<EgressProxy>,
    /// The sandbox's host directory (its egress socket); it goes last.
    state: Option<tempfile::TempDir>,
}

impl SandboxHandle for Jail {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The network namespace is fixed when the jail is made, and the code's way
    /// out through the proxy with it: installs go out with a token of their own
    /// ([`SandboxHandle::admit_install`]).
    fn set_network(&mut self, _online: bool) -> Result<()> {
        Ok(())
    }

    fn admit_install(&mut self, token: Option<sandlot_agent::InstallToken>) -> Result<()> {
        EgressProxy::admit_install_on(self.egress.as_ref(), token)
    }

    fn take_denials(&mut self) -> Vec<sandlot_core::egress::Denial> {
        self.egress
            .as_ref()
            .map(EgressProxy::take_denials)
            .unwrap_or_default()
    }

    fn bind_secrets(&mut self, secrets: std::sync::Arc<sandlot_core::secret::Injector>) {
        if let Some(egress) = &self.egress {
            egress.bind_secrets(secrets);
        }
    }

    fn set_request_rules(
        &mut self,
        rules: &sandlot_core::egress::RequestRules,
    ) -> sandlot_core::error::Result<()> {
        let name = self.name();
        EgressProxy::set_request_rules_on(self.egress.as_ref(), &name, rules)
    }

    fn destroy(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The agent was told first (the host hung up) and is taking everything
            // down; killing bwrap makes sure: its child, the sandbox's process 1,
            // dies with it, and with process 1 every process of the namespace.
            child.kill();
            child.wait();
        }
        if let Some(mut slot) = self.cgroups.take() {
            if !slot.remove(Duration::from_secs(2)) {
                // Processes the kernel has not reaped yet: `gc` (and the next
                // backend start) removes the cgroups once they are gone.
                tracing::debug!("cgroups of {} left for gc", self.name);
            }
        }
        self.egress = None;
        self.state = None;
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Makes, starts and connects to one jail for `spec`.
impl NativeBackend {
    /// Makes one jail for `spec` and connects to the agent in it.
    pub(crate) fn open_jail(&self, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
        open(self, spec)
    }
}

fn open(backend: &NativeBackend, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
    let rootfs = backend.rootfs_of(spec)?;
    let agent = backend.agent_file()?;
    let policy = spec.policy.clone();
    let id = owner::sandbox_id();
    let name = format!("sandlot-{id}");
    let io = |context: String| move |source| Error::Io { context, source };
    // The host directory: the egress socket lives in it, and `sandboxes` lists it.
    let state = tempfile::Builder::new()
        .prefix(&format!("{STATE_PREFIX}{}-{id}-", owner::owner_stamp()))
        .tempdir()
        .map_err(io("cannot make the sandbox's host directory".into()))?;
    let host_uid = backend.root.then(crate::spawn::host_uid);
    let mut jail = Jail {
        name,
        child: None,
        cgroups: None,
        egress: None,
        state: None,
    };
    if let Some(cgroups) = &backend.cgroups {
        let slot = cgroups
            .make(
                &format!("{}-{id}", owner::owner_stamp()),
                Limits {
                    memory: spec.memory as u64,
                    pids: policy.pids_limit,
                    cpu_millis: policy.cpu_millis,
                },
            )
            .map_err(io("cannot make the sandbox's cgroups".into()))?;
        jail.cgroups = Some(slot);
    }
    let egress_dir = state.path().join("egress");
    if policy.network != Network::Off {
        let access = match policy.network {
            Network::AllowList => Access::Listed,
            Network::On => Access::Public,
            // Cut off until an install opens it.
            _ => Access::Closed,
        };
        jail.egress = Some(start_egress(
            backend,
            &egress_dir,
            &policy,
            access,
            host_uid,
        )?);
    }
    let memory_cgroup = jail
        .cgroups
        .as_ref()
        .and_then(Slot::memory)
        .map(Path::to_path_buf);
    let filters = if policy.seccomp == Seccomp::EngineDefault {
        crate::seccomp::descriptors().map_err(io("cannot prepare the seccomp profile".into()))?
    } else {
        Vec::new()
    };
    let filter_fds: Vec<_> = filters.iter().map(AsRawFd::as_raw_fd).collect();
    let args = jail::argv(&JailSpec {
        rootfs: &rootfs.path,
        agent: &agent,
        policy: &policy,
        egress: jail.egress.as_ref().map(|_| egress_dir.as_path()),
        memory_cgroup: memory_cgroup.as_deref(),
        seccomp: &filter_fds,
        rlimits: backend.cgroups.is_none().then_some(jail::Rlimits {
            processes: policy.pids_limit,
            memory_per_process: spec.memory as u64,
        }),
    });
    let (host, sandbox) = UnixStream::pair().map_err(io("cannot make a socket pair".into()))?;
    let launch = Launch {
        program: backend.bwrap.path.clone(),
        args,
        stdio: std::os::fd::OwnedFd::from(sandbox),
        cgroups: jail
            .cgroups
            .as_ref()
            .map(Slot::procs_files)
            .unwrap_or_default(),
        host_uid,
        inherited: filters,
    };
    let mut child = backend.spawner.spawn(launch).map_err(|e| Error::Agent {
        reason: format!("cannot start {}: {e}", backend.bwrap.path.display()),
    })?;
    // The sandbox's end of the pair is the jail's alone: when the jail ends, the
    // host's end reads its end.
    let said = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut stderr) = child.stderr.take() {
        let said = said.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = said.lock().unwrap_or_else(|e| e.into_inner());
                let room = JAIL_STDERR.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        });
    }
    jail.child = Some(child);
    jail.state = Some(state);
    let transport = Transport::unix(host, Duration::from_secs(60)).map_err(|e| Error::Agent {
        reason: format!("socket setup failed: {e}"),
    })?;
    let agent = AgentClient::connect(transport, START_DEADLINE).map_err(|e| {
        // Give bwrap a moment to say why it stopped.
        if let Some(child) = jail.child.as_mut() {
            for _ in 0..50 {
                if child.ended() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        std::thread::sleep(Duration::from_millis(5));
        let said = String::from_utf8_lossy(&said.lock().unwrap_or_else(|e| e.into_inner()))
            .trim()
            .to_string();
        let kernel = crate::jail::user_namespaces_refused()
            .map(|why| format!("; {why}"))
            .unwrap_or_default();
        if said.is_empty() && kernel.is_empty() {
            e
        } else {
            Error::Agent {
                reason: format!("the jail stopped before its agent answered: {said}{kernel}"),
            }
        }
    })?;
    let online = policy.network == Network::On;
    Ok(AgentSandbox::new(agent, Box::new(jail), policy, online)
        .with_kernel(spec.kernel.cloned())
        .with_tool_runtime(backend.runtime.handle().clone()))
}

/// Starts the sandbox's egress proxy on a socket in `dir`, which only the sandbox's
/// host uid (or, not root, this user) can reach, beside the `resolv.conf` that sends
/// its DNS to the agent's relay.
fn start_egress(
    backend: &NativeBackend,
    dir: &Path,
    policy: &sandlot_core::policy::Policy,
    access: Access,
    host_uid: Option<u32>,
) -> Result<EgressProxy> {
    use std::os::unix::fs::PermissionsExt;
    let io = |context: String| move |source| Error::Io { context, source };
    std::fs::create_dir(dir).map_err(io(format!("cannot make {}", dir.display())))?;
    let socket = dir.join("proxy.sock");
    let listener = UnixListener::bind(&socket)
        .map_err(io(format!("cannot listen on {}", socket.display())))?;
    std::fs::write(
        dir.join("resolv.conf"),
        format!("nameserver {SANDBOX_ADDRESS}\noptions ndots:0 attempts:1\n"),
    )
    .map_err(io(format!("cannot write {}/resolv.conf", dir.display())))?;
    let given = match host_uid {
        Some(uid) => std::os::unix::fs::chown(dir, Some(uid), Some(uid))
            .and_then(|()| std::os::unix::fs::chown(&socket, Some(uid), Some(uid))),
        None => Ok(()),
    };
    given
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)))
        .and_then(|()| std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)))
        .and_then(|()| {
            std::fs::set_permissions(
                dir.join("resolv.conf"),
                std::fs::Permissions::from_mode(0o644),
            )
        })
        .map_err(io(format!("cannot hand {} to the sandbox", dir.display())))?;
    // Its parent, the sandbox's host directory, is this process's own (0700): the
    // jail binds the directory by path, as the sandbox's uid.
    if let Some(parent) = dir.parent() {
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711))
            .map_err(io(format!("cannot open {}", parent.display())))?;
    }
    let proxy = EgressProxy::serve_with(
        listener,
        policy.allow.clone(),
        access,
        backend.runtime.handle(),
    )
    .map_err(io("cannot start the egress proxy".into()))?;
    proxy.set_request_rules(policy.requests.clone());
    proxy.write_trust(dir).map_err(io(format!(
        "cannot write the egress proxy's CA in {}",
        dir.display()
    )))?;
    Ok(proxy)
}
