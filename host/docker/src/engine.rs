//! Where a container engine is and how sandlot reaches it: the engine behind the API,
//! how the agent gets into its containers, the TLS files of a remote one.

use std::path::{Path, PathBuf};

/// Which engine is behind the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

    pub(crate) fn hint(self) -> &'static str {
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
    pub(crate) fn default_endpoint(self) -> String {
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

/// How the agent gets into a container and how the host reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentDelivery {
    /// Mount the agent and a socket directory from this machine (engines on this
    /// machine only).
    BindMount,
    /// Copy the agent into the container and speak over its attached standard input
    /// and output (any engine, including one on another machine).
    Attach,
}

/// The client certificate and the certificate authority of a TLS connection to an
/// engine, as `docker --tlsverify` uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The authority that signed the engine's certificate (`ca.pem`).
    pub ca: PathBuf,
    /// This client's certificate (`cert.pem`).
    pub cert: PathBuf,
    /// This client's private key (`key.pem`).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `ca.pem`, `cert.pem` and `key.pem` in `dir`, as `DOCKER_CERT_PATH` holds them.
    pub fn from_dir(dir: &Path) -> TlsFiles {
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        }
    }

    /// What Docker's own client would use: `DOCKER_CERT_PATH` (default `~/.docker`)
    /// when `DOCKER_TLS_VERIFY` is set to anything but `0` or nothing.
    pub fn from_docker_environment() -> Option<TlsFiles> {
        let verify = std::env::var("DOCKER_TLS_VERIFY").ok()?;
        if verify.is_empty() || verify == "0" {
            return None;
        }
        let dir = std::env::var_os("DOCKER_CERT_PATH")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")))?;
        Some(TlsFiles::from_dir(&dir))
    }
}
