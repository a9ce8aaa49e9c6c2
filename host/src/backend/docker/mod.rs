//! Containers through the Docker Engine API, spoken by Docker itself and by Podman's
//! compatible socket.
//!
//! Each session is one container: created hardened from the [`Policy`], started with
//! `sandlot-agent` as process 1, and removed with a single forced delete when the
//! session closes. The agent reaches the host over a Unix socket in a directory the
//! container sees read-only; runs, file copies and artifact scans all go through it, so
//! a run costs one round trip instead of a `docker exec`.
//!
//! Every container carries the labels `sandlot=1`, `sandlot.session` and
//! `sandlot.owner` (the host process and its start time); [`ContainerBackend::gc`]
//! removes those whose owner is gone, and opening the first session does it too.
//!
//! [`Policy`]: crate::Policy

mod agent;
pub mod images;
mod session;

use crate::backend::{Backend, BackendSession, SessionSpec};
use crate::error::{Error, Result};
use bollard::query_parameters::ListContainersOptions;
use bollard::Docker;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::Duration;

pub use images::{ImageInfo, Recipe};

/// Which engine is behind the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// Docker Engine.
    Docker,
    /// Podman's Docker-compatible API (`podman system service`).
    Podman,
}

impl Engine {
    /// `docker` or `podman`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Engine::Docker => {
                "start Docker (`dockerd &`, or `systemctl start docker`), or point DOCKER_HOST \
                 or sandlot.toml's `docker_host` at a running engine"
            }
            Engine::Podman => {
                "start Podman's API (`podman system service --time=0 unix:///run/podman/podman.sock &`), \
                 or point CONTAINER_HOST or sandlot.toml's `podman_host` at it"
            }
        }
    }

    /// Where the engine listens when nothing says otherwise.
    fn default_endpoint(self) -> String {
        match self {
            Engine::Docker => std::env::var("DOCKER_HOST")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "unix:///var/run/docker.sock".into()),
            Engine::Podman => {
                if let Some(host) = std::env::var("CONTAINER_HOST")
                    .ok()
                    .filter(|h| !h.is_empty())
                {
                    return host;
                }
                let rootful = PathBuf::from("/run/podman/podman.sock");
                match std::env::var_os("XDG_RUNTIME_DIR") {
                    Some(dir) if !rootful.exists() => format!(
                        "unix://{}",
                        PathBuf::from(dir).join("podman/podman.sock").display()
                    ),
                    _ => format!("unix://{}", rootful.display()),
                }
            }
        }
    }
}

/// A container sandlot made, as [`ContainerBackend::sandboxes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxInfo {
    /// The engine's container id.
    pub id: String,
    /// Container name, `sandlot-<session>`.
    pub name: String,
    /// The session id.
    pub session: String,
    /// The language it was opened for.
    pub language: String,
    /// Whether the process that opened it still runs.
    pub owner_alive: bool,
    /// The process id of the host process that opened it.
    pub owner_pid: Option<u32>,
    /// The host directory of its agent socket.
    pub ipc_dir: String,
}

/// The Docker or Podman backend.
pub struct ContainerBackend {
    engine: Engine,
    endpoint: String,
    docker: Docker,
    runtime: Arc<tokio::runtime::Runtime>,
    /// Image per language id, overriding the handler's default image.
    images: BTreeMap<String, String>,
    agent: PathBuf,
    /// The network a container joins while it installs libraries.
    install_network: String,
}

impl std::fmt::Debug for ContainerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerBackend")
            .field("engine", &self.engine)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl ContainerBackend {
    /// Connects to `engine` at `endpoint` (`unix:///path`, `tcp://host:port`), or where
    /// it usually listens: `DOCKER_HOST` or `/var/run/docker.sock` for Docker;
    /// `CONTAINER_HOST`, `/run/podman/podman.sock` or `$XDG_RUNTIME_DIR/podman/podman.sock`
    /// for Podman. The API version is negotiated, so older engines work.
    ///
    /// An engine that does not answer is [`Error::EngineUnavailable`], which says how
    /// to start one.
    pub fn connect(engine: Engine, endpoint: Option<&str>) -> Result<ContainerBackend> {
        let endpoint = endpoint
            .map(str::to_string)
            .unwrap_or_else(|| engine.default_endpoint());
        let unavailable = |reason: String| Error::EngineUnavailable {
            engine: engine.name().into(),
            endpoint: endpoint.clone(),
            reason,
            hint: engine.hint().into(),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-engine")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start an I/O runtime: {e}")))?;
        let docker = if let Some(path) = endpoint.strip_prefix("unix://") {
            if !std::path::Path::new(path).exists() {
                return Err(unavailable("no socket there".into()));
            }
            Docker::connect_with_unix(path, 120, bollard::API_DEFAULT_VERSION)
        } else {
            Docker::connect_with_host(&endpoint)
        }
        .map_err(|e| unavailable(e.to_string()))?;
        let docker = runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version()).await
            })
            .map_err(|_| unavailable("no answer within 10 s".into()))?
            .map_err(|e| unavailable(e.to_string()))?;
        // Docker names its default bridge `bridge`, Podman `podman`.
        let install_network = match engine {
            Engine::Docker => "bridge",
            Engine::Podman => "podman",
        }
        .to_string();
        Ok(ContainerBackend {
            engine,
            endpoint,
            docker,
            runtime: Arc::new(runtime),
            images: BTreeMap::new(),
            agent: agent_binary()?,
            install_network,
        })
    }

    /// Runs `language` in `image` instead of its handler's default image.
    pub fn set_image(&mut self, language: &str, image: &str) {
        self.images.insert(language.into(), image.into());
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Where the engine listens.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn engine_error(&self, context: impl Into<String>, error: impl std::fmt::Display) -> Error {
        Error::Engine {
            engine: self.engine.name().into(),
            context: context.into(),
            reason: error.to_string(),
        }
    }

    /// Every container sandlot made on this engine, running or not.
    pub fn sandboxes(&self) -> Result<Vec<SandboxInfo>> {
        let mut filters = HashMap::new();
        filters.insert("label".to_string(), vec!["sandlot=1".to_string()]);
        let docker = self.docker.clone();
        let containers = session::wait(self.runtime.handle(), async move {
            // Podman fails a listing that races with a removal ("no such container");
            // a second look a moment later sees a settled list.
            let mut attempt = 0;
            loop {
                let listed = docker
                    .list_containers(Some(ListContainersOptions {
                        all: true,
                        filters: Some(filters.clone()),
                        ..Default::default()
                    }))
                    .await;
                attempt += 1;
                match listed {
                    Err(_) if attempt < 5 => tokio::time::sleep(Duration::from_millis(50)).await,
                    other => return other,
                }
            }
        })
        .ok_or_else(|| {
            self.engine_error("listing sandlot's containers", "the engine runtime stopped")
        })?
        .map_err(|e| self.engine_error("listing sandlot's containers", e))?;
        Ok(containers
            .into_iter()
            .filter_map(|container| {
                let labels = container.labels.unwrap_or_default();
                let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
                Some(SandboxInfo {
                    id: container.id?,
                    name: container
                        .names
                        .and_then(|n| n.into_iter().next())
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string(),
                    session: label("sandlot.session"),
                    language: label("sandlot.language"),
                    owner_alive: session::owner_alive(&label("sandlot.owner")),
                    owner_pid: label("sandlot.owner")
                        .split(':')
                        .nth(1)
                        .and_then(|p| p.parse().ok()),
                    ipc_dir: label("sandlot.ipc"),
                })
            })
            .collect())
    }

    /// Removes sandlot's containers whose host process is gone (a crashed or killed
    /// host), or every sandlot container when `all` is set. Returns the names removed.
    pub fn gc(&self, all: bool) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for sandbox in self.sandboxes()? {
            if sandbox.owner_alive && !all {
                continue;
            }
            let result = session::remove(&self.docker, self.runtime.handle(), sandbox.id.clone());
            match result {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    return Err(self.engine_error(format!("removing {}", sandbox.name), e))
                }
                None => {
                    return Err(
                        self.engine_error("removing a container", "the engine runtime stopped")
                    )
                }
            }
            session::remove_ipc_dir(&sandbox.ipc_dir);
            removed.push(sandbox.name);
        }
        Ok(removed)
    }

    /// Runs `argv` in the container named `sandbox` through the engine's exec API, as
    /// `docker exec` does, and returns its exit code and standard output. Sessions never
    /// use this: their agent answers in a fraction of the time. It is here to compare
    /// the two and to look into a live sandbox.
    pub fn exec(&self, sandbox: &str, argv: &[&str]) -> Result<(i64, Vec<u8>)> {
        use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
        use futures_util::StreamExt;
        let docker = self.docker.clone();
        let sandbox = sandbox.to_string();
        let cmd: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        let result = session::wait(self.runtime.handle(), async move {
            let exec = docker
                .create_exec(
                    &sandbox,
                    CreateExecOptions {
                        cmd: Some(cmd),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        working_dir: Some(session::WORKDIR.to_string()),
                        ..Default::default()
                    },
                )
                .await?;
            let mut stdout = Vec::new();
            if let StartExecResults::Attached { mut output, .. } = docker
                .start_exec(&exec.id, Some(StartExecOptions::default()))
                .await?
            {
                while let Some(item) = output.next().await {
                    if let bollard::container::LogOutput::StdOut { message } = item? {
                        stdout.extend_from_slice(&message);
                    }
                }
            }
            let code = docker.inspect_exec(&exec.id).await?.exit_code.unwrap_or(-1);
            Ok::<_, bollard::errors::Error>((code, stdout))
        });
        result
            .ok_or_else(|| self.engine_error("exec", "the engine runtime stopped"))?
            .map_err(|e| self.engine_error("exec", e))
    }

    /// The image `language` runs in.
    fn image_for(&self, spec: &SessionSpec<'_>) -> String {
        self.images
            .get(spec.language)
            .cloned()
            .unwrap_or_else(|| spec.handler.info().default_image.clone())
    }
}

impl Backend for ContainerBackend {
    fn name(&self) -> &'static str {
        self.engine.name()
    }

    /// Every language: whether its image is present is checked when a session opens.
    fn serves(&self, _language: &str) -> bool {
        true
    }

    fn uses_host_workdir(&self) -> bool {
        false
    }

    fn open(&self, spec: &SessionSpec<'_>) -> Result<Box<dyn BackendSession>> {
        // Containers a crashed host left behind are reaped once per process and
        // engine, before the first new one is made.
        static REAPED: [Once; 2] = [Once::new(), Once::new()];
        REAPED[self.engine as usize].call_once(|| {
            let _ = self.gc(false);
        });
        let image = self.image_for(spec);
        Ok(Box::new(session::ContainerSession::open(
            self, spec, &image,
        )?))
    }
}

/// The agent executable, written once per version next to the component cache.
fn agent_binary() -> Result<PathBuf> {
    static AGENT: &[u8] = include_bytes!(env!("SANDLOT_AGENT_PATH"));
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(AGENT));
    let dir = crate::dirs::user_cache().join("agent").join(&digest[..16]);
    let path = dir.join("sandlot-agent");
    // It becomes process 1 of every container: use a file that is there only if it is
    // exactly ours (a shared temp dir could hold anyone's).
    let intact =
        std::fs::read(&path).is_ok_and(|bytes| hex::encode(sha2::Sha256::digest(&bytes)) == digest);
    if intact {
        return Ok(path);
    }
    let io = |e| Error::Io {
        context: format!("cannot install the container agent in {}", dir.display()),
        source: e,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    // Written under a temporary name and renamed, so a concurrent process never
    // mounts a half-written file.
    let staged = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
    std::fs::write(staged.path(), AGENT).map_err(io)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    staged.persist(&path).map_err(|e| io(e.error))?;
    Ok(path)
}
