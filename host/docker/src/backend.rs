//! The Docker or Podman backend: connecting to an engine, and the containers it makes
//! for sandboxes, lists and collects.

use crate::engine::{AgentDelivery, Engine, TlsFiles};
use crate::packages::Packages;
use crate::{container, egress};
use bollard::query_parameters::ListContainersOptions;
use bollard::Docker;
use sandlot_core::backend::{
    check_capabilities, owner, wait, Backend, BackendName, Capabilities, Capability, Check, Needs,
    Sandbox, SandboxSpec, Unsuitable,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::toolchain::Toolchain;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connects a [`ContainerBackend`].
///
/// ```no_run
/// use sandlot::docker::{ContainerBackend, Engine, TlsFiles};
/// # fn main() -> Result<(), sandlot::Error> {
/// let remote = ContainerBackend::builder(Engine::Docker)
///     .endpoint("tcp://build-box.internal:2376")
///     .tls(TlsFiles::from_dir("/etc/sandlot/docker-certs".as_ref()))
///     .name("build-box")
///     .connect()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ContainerBackendBuilder {
    engine: Engine,
    endpoint: Option<String>,
    tls: Option<TlsFiles>,
    delivery: Option<AgentDelivery>,
    name: Option<String>,
    cache_dir: Option<PathBuf>,
}

impl ContainerBackendBuilder {
    /// Where the engine listens: `unix:///path`, `tcp://host:port` (default: see
    /// [`ContainerBackend::connect`]).
    pub fn endpoint(&mut self, endpoint: impl Into<String>) -> &mut Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Speaks TLS with these files (default: `DOCKER_TLS_VERIFY` and
    /// `DOCKER_CERT_PATH`, for Docker).
    pub fn tls(&mut self, files: TlsFiles) -> &mut Self {
        self.tls = Some(files);
        self
    }

    /// How the agent gets into containers (default: bind mount for `unix://`
    /// endpoints, attach for any other).
    pub fn delivery(&mut self, delivery: AgentDelivery) -> &mut Self {
        self.delivery = Some(delivery);
        self
    }

    /// The backend's name in a [`Sandlot`](sandlot_core::Sandlot) (default: the engine's,
    /// `docker` or `podman`).
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = Some(name.into());
        self
    }

    /// Keeps what it read from images ([`Backend::toolchain`]) in `dir`, by image id,
    /// for the next process (default: in memory only).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Connects and negotiates the API version, so older engines work. An engine that
    /// does not answer is [`Error::EngineUnavailable`], which says how to start one.
    pub fn connect(&self) -> Result<ContainerBackend> {
        let engine = self.engine;
        let name = match &self.name {
            Some(name) => BackendName::new(name.clone())?,
            None => match engine {
                Engine::Docker => BackendName::DOCKER,
                Engine::Podman => BackendName::PODMAN,
            },
        };
        let endpoint = self
            .endpoint
            .clone()
            .unwrap_or_else(|| engine.default_endpoint());
        let unavailable = |reason: String| Error::EngineUnavailable {
            engine: engine.name().into(),
            endpoint: endpoint.clone(),
            reason,
            hint: engine.hint().into(),
        };
        let tls = self.tls.clone().or_else(|| match engine {
            Engine::Docker if !endpoint.starts_with("unix://") => {
                TlsFiles::from_docker_environment()
            }
            _ => None,
        });
        let local = endpoint.starts_with("unix://");
        let docker = if let Some(path) = endpoint.strip_prefix("unix://") {
            if !Path::new(path).exists() {
                return Err(unavailable("no socket there".into()));
            }
            Docker::connect_with_unix(path, 120, bollard::API_DEFAULT_VERSION)
        } else if let Some(tls) = &tls {
            for file in [&tls.ca, &tls.cert, &tls.key] {
                if !file.is_file() {
                    return Err(unavailable(format!(
                        "the TLS file {} does not exist (set DOCKER_CERT_PATH to the folder \
                         holding ca.pem, cert.pem and key.pem)",
                        file.display()
                    )));
                }
            }
            Docker::connect_with_ssl(
                &endpoint,
                &tls.key,
                &tls.cert,
                &tls.ca,
                120,
                bollard::API_DEFAULT_VERSION,
            )
        } else {
            Docker::connect_with_http(&endpoint, 120, bollard::API_DEFAULT_VERSION)
        }
        .map_err(|e| unavailable(e.to_string()))?;
        let delivery = self.delivery.unwrap_or(if local {
            AgentDelivery::BindMount
        } else {
            AgentDelivery::Attach
        });
        if delivery == AgentDelivery::BindMount && !local {
            return Err(unavailable(
                "the agent can be mounted only into containers of an engine on this \
                 machine; use AgentDelivery::Attach"
                    .into(),
            ));
        }
        // Made after every check that needs no engine: a runtime dropped on an error
        // path panics when the caller is itself on a runtime's thread.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-engine")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start an I/O runtime: {e}")))?;
        let negotiated = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version()).await
        });
        let docker = match negotiated {
            Ok(Ok(docker)) => docker,
            failed => {
                runtime.shutdown_background();
                return Err(unavailable(match failed {
                    Ok(Err(e)) => format!("{e:#}"),
                    _ => "no answer within 10 s".into(),
                }));
            }
        };
        // Docker names its default bridge `bridge`, Podman `podman`.
        let install_network = match engine {
            Engine::Docker => "bridge",
            Engine::Podman => "podman",
        }
        .to_string();
        Ok(ContainerBackend {
            name,
            engine,
            endpoint,
            docker,
            runtime: Arc::new(runtime),
            delivery,
            install_network,
            reaped: Mutex::new(false),
            packages: Packages::new(self.cache_dir.clone()),
        })
    }
}

/// A container sandlot made, as [`ContainerBackend::sandboxes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxInfo {
    /// The engine's container id.
    pub id: String,
    /// Container name, `sandlot-<sandbox id>`.
    pub name: String,
    /// The language it was opened for.
    pub language: String,
    /// Whether the process that opened it still runs.
    pub owner_alive: bool,
    /// The process id of the host process that opened it.
    pub owner_pid: Option<u32>,
    /// The host directory of its agent socket (bind-mount delivery only).
    pub ipc_dir: Option<String>,
}

/// The Docker or Podman backend.
pub struct ContainerBackend {
    pub(crate) name: BackendName,
    pub(crate) engine: Engine,
    endpoint: String,
    pub(crate) docker: Docker,
    pub(crate) runtime: Arc<tokio::runtime::Runtime>,
    pub(crate) delivery: AgentDelivery,
    /// The network a container joins while it installs libraries.
    pub(crate) install_network: String,
    /// Whether containers a crashed host left behind were reaped already.
    reaped: Mutex<bool>,
    /// The packages of the images looked into ([`Backend::toolchain`]).
    pub(crate) packages: Packages,
}

impl std::fmt::Debug for ContainerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerBackend")
            .field("name", &self.name)
            .field("engine", &self.engine)
            .field("endpoint", &self.endpoint)
            .field("delivery", &self.delivery)
            .finish_non_exhaustive()
    }
}

impl ContainerBackend {
    /// Configures a connection to `engine`.
    pub fn builder(engine: Engine) -> ContainerBackendBuilder {
        ContainerBackendBuilder {
            engine,
            endpoint: None,
            tls: None,
            delivery: None,
            name: None,
            cache_dir: None,
        }
    }

    /// Connects to `engine` at `endpoint` (`unix:///path`, `tcp://host:port`), or where
    /// it usually listens: `DOCKER_HOST` or `/var/run/docker.sock` for Docker (with TLS
    /// when `DOCKER_TLS_VERIFY` is set, from `DOCKER_CERT_PATH`); `CONTAINER_HOST`,
    /// `/run/podman/podman.sock` or `$XDG_RUNTIME_DIR/podman/podman.sock` for Podman.
    pub fn connect(engine: Engine, endpoint: Option<&str>) -> Result<ContainerBackend> {
        let mut builder = ContainerBackend::builder(engine);
        if let Some(endpoint) = endpoint {
            builder.endpoint(endpoint);
        }
        builder.connect()
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Where the engine listens.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// How the agent reaches the containers of this backend.
    pub fn delivery(&self) -> AgentDelivery {
        self.delivery
    }

    pub(crate) fn engine_error(
        &self,
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Error {
        Error::Engine {
            engine: self.engine.name().into(),
            context: context.into(),
            source: source.into(),
        }
    }

    /// Runs `future` on the backend's runtime and waits for it.
    pub(crate) fn wait<T: Send + 'static>(
        &self,
        context: &str,
        future: impl Future<Output = std::result::Result<T, bollard::errors::Error>> + Send + 'static,
    ) -> Result<T> {
        wait(self.runtime.handle(), future)
            .ok_or_else(|| self.engine_error(context, "the engine runtime stopped"))?
            .map_err(|e| self.engine_error(context, e))
    }

    /// Creates (without starting) a container called `name` from `body`.
    pub(crate) fn create_named(
        &self,
        name: &str,
        body: bollard::models::ContainerCreateBody,
    ) -> Result<bollard::models::ContainerCreateResponse> {
        let image = body.image.clone().unwrap_or_default();
        let docker = self.docker.clone();
        let name = name.to_string();
        self.wait(&format!("creating a container from {image}"), async move {
            docker
                .create_container(
                    Some(bollard::query_parameters::CreateContainerOptions {
                        name: Some(name),
                        ..Default::default()
                    }),
                    body,
                )
                .await
        })
    }

    /// Unpacks the tar `archive` into directory `dir` of `container`.
    pub(crate) fn upload(
        &self,
        container: &str,
        dir: &str,
        archive: Vec<u8>,
        context: &str,
    ) -> Result<()> {
        let docker = self.docker.clone();
        let (container, dir) = (container.to_string(), dir.to_string());
        self.wait(context, async move {
            docker
                .upload_to_container(
                    &container,
                    Some(bollard::query_parameters::UploadToContainerOptions {
                        path: dir,
                        ..Default::default()
                    }),
                    bollard::body_full(archive.into()),
                )
                .await
        })
    }

    /// Every container sandlot made on this engine, running or not.
    pub fn sandboxes(&self) -> Result<Vec<SandboxInfo>> {
        let mut filters = HashMap::new();
        filters.insert("label".to_string(), vec!["sandlot=1".to_string()]);
        let docker = self.docker.clone();
        let containers = self.wait("listing sandlot's containers", async move {
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
        })?;
        Ok(containers
            .into_iter()
            .filter_map(|container| {
                let labels = container.labels.unwrap_or_default();
                let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
                let owner = label("sandlot.owner");
                Some(SandboxInfo {
                    id: container.id?,
                    name: container
                        .names
                        .and_then(|n| n.into_iter().next())
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string(),
                    language: label("sandlot.language"),
                    owner_alive: owner::owner_alive(&owner),
                    owner_pid: owner::owner_pid(&owner),
                    ipc_dir: labels.get("sandlot.ipc").cloned(),
                })
            })
            .collect())
    }

    /// Removes sandlot's containers whose host process is gone (a crashed or killed
    /// host whose containers did not remove themselves), or every sandlot container
    /// when `all` is set, and the socket directories of hosts killed while they
    /// started one. Returns the names of the containers removed.
    pub fn gc(&self, all: bool) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for sandbox in self.sandboxes()? {
            if sandbox.owner_alive && !all {
                continue;
            }
            container::remove(&self.docker, self.runtime.handle(), sandbox.id.clone())
                .ok_or_else(|| {
                    self.engine_error("removing a container", "the engine runtime stopped")
                })?
                .map_err(|e| self.engine_error(format!("removing {}", sandbox.name), e))?;
            removed.push(sandbox.name);
        }
        container::sweep_ipc_dirs();
        egress::sweep_dirs();
        Ok(removed)
    }

    /// Runs `argv` in the container named `sandbox` through the engine's exec API, as
    /// `docker exec` does, and returns its exit code and standard output. Sandboxes
    /// never use this: their agent answers in a fraction of the time. It is here to
    /// compare the two and to look into a live sandbox.
    pub fn exec(&self, sandbox: &str, argv: &[&str]) -> Result<(i64, Vec<u8>)> {
        use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
        use futures_util::StreamExt;
        let docker = self.docker.clone();
        let sandbox = sandbox.to_string();
        let cmd: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        self.wait("exec", async move {
            let exec = docker
                .create_exec(
                    &sandbox,
                    CreateExecOptions {
                        cmd: Some(cmd),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        working_dir: Some(sandlot_core::layout::Layout::WORKSPACE.to_string()),
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
            Ok((code, stdout))
        })
    }
}

impl Backend for ContainerBackend {
    fn name(&self) -> BackendName {
        self.name.clone()
    }

    fn capabilities(&self, _language: &str) -> Capabilities {
        Capabilities::new([
            Capability::RunsPlans,
            Capability::Kernels,
            Capability::Shell,
            Capability::InstallLibraries,
            Capability::NetworkControl,
            Capability::Images,
            Capability::MemoryLimit,
            // In every language: Python has `sandlot_tools`, the rest `sandlot-tool`.
            Capability::Tools,
        ])
    }

    /// Every language and library: whether the image is present is checked when a
    /// sandbox opens, and installs happen in it.
    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        check_capabilities(needs, &self.capabilities(needs.language))
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        // Containers a crashed host left behind are reaped once per backend, before
        // the first new one is made.
        {
            let mut reaped = self.reaped.lock().unwrap_or_else(|e| e.into_inner());
            if !*reaped {
                *reaped = true;
                let _ = self.gc(false);
            }
        }
        Ok(Box::new(self.open_container(spec)?))
    }

    fn checks(&self) -> Vec<Check> {
        let mut checks = self.engine_checks();
        checks.push(sandlot_container::proxy::bound_secrets_check(
            (self.delivery != AgentDelivery::BindMount)
                .then_some("an engine on another machine cannot reach a proxy of this one"),
        ));
        checks
    }

    /// Read from the image's Debian package database, once per image.
    fn toolchain(&self, language: &str, image: &str) -> Result<Option<Toolchain>> {
        self.image_toolchain(language, image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An async caller (a server handler, a `#[tokio::test]`) that points at a dead engine
    // must get the error, not a panic from the backend's own runtime being dropped on
    // its thread.
    #[tokio::test]
    async fn a_dead_engine_reached_from_async_code_is_an_error_not_a_panic() {
        let err = match ContainerBackend::connect(
            Engine::Docker,
            Some("unix:///nonexistent/sandlot-test/docker.sock"),
        ) {
            Ok(_) => panic!("connected to a socket that does not exist"),
            Err(err) => err,
        };
        assert_eq!(err.kind(), sandlot_core::ErrorKind::Unavailable);
        assert!(err.to_string().contains("no socket there"), "{err}");
    }
}
