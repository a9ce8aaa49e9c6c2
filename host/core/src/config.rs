//! The `sandlot.toml` configuration file. [`crate::dirs`] says how its directories
//! rank against flags and the environment.
//!
//! ```toml
//! # Extra plugin directories, relative to this file.
//! plugin_dirs = ["plugins", "/opt/sandlot/plugins"]
//! # Where compiled components are cached, and where runtimes are installed.
//! cache_dir = "/var/cache/sandlot"
//! runtimes_dir = "/opt/sandlot/runtimes"
//! # Container engines (defaults: DOCKER_HOST; CONTAINER_HOST or Podman's socket).
//! docker_host = "unix:///var/run/docker.sock"
//! podman_host = "unix:///run/podman/podman.sock"
//!
//! # The image each language runs in, instead of its handler's default.
//! [images]
//! python = "sandlot/polyglot:latest"
//!
//! # The policy sessions get unless they set their own: a preset (strict, standard,
//! # permissive) and the fields that differ from it (see `sandlot::policy`).
//! [policy]
//! preset = "standard"
//! network = "off"
//!
//! # The wasm backend: sandboxes in 2 worker processes of their own instead of in
//! # this one (default 0: in this process), started from `worker_program` (default:
//! # this program; it must serve as a worker, as the `sandlot` binary does).
//! [wasm]
//! workers = 2
//! worker_program = "/usr/local/bin/sandlot"
//! pin_workers = true                       # each worker keeps to one core (default)
//!
//! # A Kubernetes cluster (backend `kubernetes`); every key is optional.
//! [kubernetes]
//! kubeconfig = "/etc/sandlot/kubeconfig"   # default: KUBECONFIG, ~/.kube/config
//! context = "sandboxes"                    # default: the kubeconfig's current one
//! namespace = "sandlot"                    # default: the context's, else "default"
//! image_prefix = "registry.internal:5000"  # pull images from there (default: the
//!                                          # node's engine already has them)
//! pod_template = "pod.yaml"                # merged under the generated pod
//! network_policy_enforced = true           # default: detect the network plugin
//! start_timeout = 120                      # seconds a pod may take to start
//! pod_lifetime = 86400                     # activeDeadlineSeconds of every pod
//!
//! # A pool of pre-warmed sandboxes for a backend (see `sandlot::backend::pool`);
//! # every key is optional. Durations are in seconds; 0 means never.
//! [pool.docker]
//! min_idle = 2
//! max_size = 4
//! idle_timeout = 600
//! max_lifetime = 3600
//! health_check = true
//! acquire_timeout = 30
//! when_exhausted = "wait"   # or "fail-fast", "overflow"
//!
//! # `sandlot mcp`'s code mode: upstream MCP servers whose tools the sandboxed code
//! # calls as functions (`time_get_current_time`). A command, or a loopback URL.
//! # A command server starts with none of sandlot's environment but PATH, HOME, the
//! # locale, TZ, TMPDIR and the certificates' paths: give it the rest by name.
//! [mcp.upstream.time]
//! command = ["mcp-server-time", "--local-timezone", "UTC"]
//! env = { TZ = "UTC" }                     # set to these values
//! inherit_env = ["GITHUB_TOKEN"]           # passed on from sandlot's environment
//! [mcp.upstream.docs]
//! url = "http://127.0.0.1:3001/mcp"
//! ```

use crate::error::{Error, Result};
use crate::policy::{Policy, PolicySettings};
use crate::pool_options::{Exhausted, PoolOptions};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Settings read from `sandlot.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The file the settings came from, if any.
    pub path: Option<PathBuf>,
    /// Plugin directories, resolved against the file's directory.
    pub plugin_dirs: Vec<PathBuf>,
    /// Cache directory for compiled components.
    pub cache_dir: Option<PathBuf>,
    /// Directory of installed WebAssembly runtimes.
    pub runtimes_dir: Option<PathBuf>,
    /// Docker's endpoint, e.g. `unix:///var/run/docker.sock` (default: `DOCKER_HOST`).
    pub docker_host: Option<String>,
    /// Podman's endpoint (default: `CONTAINER_HOST`, then Podman's usual sockets).
    pub podman_host: Option<String>,
    /// Container image per language id, instead of the handler's default image.
    pub images: std::collections::BTreeMap<String, String>,
    /// Pools by backend name (`[pool.docker]`): sessions on that backend draw
    /// pre-warmed sandboxes.
    pub pools: std::collections::BTreeMap<String, PoolOptions>,
    /// The policy of sessions that set none (`[policy]`); `None`: [`Policy::default`].
    pub policy: Option<Policy>,
    /// The wasm backend's settings (`[wasm]`).
    pub wasm: WasmConfig,
    /// The Kubernetes backend's settings (`[kubernetes]`).
    pub kubernetes: KubernetesConfig,
    /// `sandlot serve`'s settings (`[serve]`).
    pub serve: ServeConfig,
    /// `sandlot mcp`'s settings (`[mcp]`).
    pub mcp: McpConfig,
}

/// The `[wasm]` section: where the wasm backend runs its sandboxes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WasmConfig {
    /// How many worker processes hold the sandboxes; 0 (the default): this process
    /// does. Sessions opened on several threads scale with the cores in workers (see
    /// `sandlot::wasm::worker`).
    #[serde(default)]
    pub workers: usize,
    /// The program started as a worker; `None`: this process's own executable.
    pub worker_program: Option<PathBuf>,
    /// Whether each worker keeps to one core, in turn; `None`: yes.
    pub pin_workers: Option<bool>,
}

/// The `[mcp]` section: settings of `sandlot mcp`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct McpConfig {
    /// Upstream MCP servers by name (`[mcp.upstream.NAME]`), whose tools become
    /// functions inside the sandbox; `--upstream` adds to them.
    #[serde(default)]
    pub upstream: std::collections::BTreeMap<String, UpstreamConfig>,
}

/// An `[mcp.upstream.NAME]` section: where one upstream MCP server is, a command or
/// a URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// A program and its arguments, spoken to over its standard input and output.
    pub command: Option<Vec<String>>,
    /// A streamable-HTTP endpoint on a loopback address.
    pub url: Option<String>,
    /// Variables a command server starts with, on top of the few of sandlot's own
    /// every one gets (`PATH`, `HOME`, the locale, `TZ`, `TMPDIR`, the certificates').
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Variables of sandlot's own environment passed on to a command server by name;
    /// one that is not set is an error when the server starts.
    #[serde(default)]
    pub inherit_env: Vec<String>,
}

/// The `[serve]` section: settings of the HTTP API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServeConfig {
    /// A file of bearer tokens, one `NAME:SECRET` per line (`#` starts a comment),
    /// resolved against the config file's directory; besides `SANDLOT_API_TOKENS`.
    pub tokens_file: Option<PathBuf>,
}

/// The `[kubernetes]` section: how the `kubernetes` backend reaches its cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct KubernetesConfig {
    /// The kubeconfig file (resolved against the config file's directory).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context.
    pub context: Option<String>,
    /// The namespace pods are made in.
    pub namespace: Option<String>,
    /// The registry images are pulled from.
    pub image_prefix: Option<String>,
    /// A pod template file (resolved against the config file's directory).
    pub pod_template: Option<PathBuf>,
    /// Whether the cluster enforces NetworkPolicy; unset: detect.
    pub network_policy_enforced: Option<bool>,
    /// Seconds a pod may take to start.
    pub start_timeout: Option<u64>,
    /// Seconds a pod may live at most.
    pub pod_lifetime: Option<u64>,
}

/// A `[pool.NAME]` section; what it leaves out is [`PoolOptions::default`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolSection {
    min_idle: Option<usize>,
    max_size: Option<usize>,
    idle_timeout: Option<f64>,
    max_lifetime: Option<f64>,
    health_check: Option<bool>,
    acquire_timeout: Option<f64>,
    when_exhausted: Option<Exhausted>,
}

impl PoolSection {
    fn options(self, name: &str) -> std::result::Result<PoolOptions, String> {
        let seconds = |key: &str, value: f64| {
            Duration::try_from_secs_f64(value)
                .map_err(|_| format!("[pool.{name}] {key} = {value}: seconds, 0 or more"))
        };
        let never = |key: &str, value: Option<f64>, default: Option<Duration>| match value {
            None => Ok(default),
            Some(0.0) => Ok(None),
            Some(v) => seconds(key, v).map(Some),
        };
        let default = PoolOptions::default();
        let options = PoolOptions {
            min_idle: self.min_idle.unwrap_or(default.min_idle),
            max_size: self.max_size.unwrap_or(default.max_size),
            idle_timeout: never("idle_timeout", self.idle_timeout, default.idle_timeout)?,
            max_lifetime: never("max_lifetime", self.max_lifetime, default.max_lifetime)?,
            health_check: self.health_check.unwrap_or(default.health_check),
            acquire_timeout: match self.acquire_timeout {
                Some(v) => seconds("acquire_timeout", v)?,
                None => default.acquire_timeout,
            },
            when_exhausted: self.when_exhausted.unwrap_or(default.when_exhausted),
        };
        match options.problem() {
            Some(problem) => Err(format!("[pool.{name}]: {problem}")),
            None => Ok(options),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    plugin_dirs: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    runtimes_dir: Option<PathBuf>,
    docker_host: Option<String>,
    podman_host: Option<String>,
    #[serde(default)]
    images: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pool: std::collections::BTreeMap<String, PoolSection>,
    policy: Option<PolicySettings>,
    #[serde(default)]
    wasm: WasmConfig,
    #[serde(default)]
    kubernetes: KubernetesConfig,
    #[serde(default)]
    serve: ServeConfig,
    #[serde(default)]
    mcp: McpConfig,
}

impl Config {
    /// Finds and reads the configuration: `explicit` if given (it must exist), else
    /// `$SANDLOT_CONFIG` (it must exist), else `./sandlot.toml`, else
    /// `$XDG_CONFIG_HOME/sandlot/sandlot.toml`; none of them is the default config.
    pub fn discover(explicit: Option<&Path>) -> Result<Config> {
        if let Some(path) = explicit {
            return Config::read(path);
        }
        if let Some(path) = std::env::var_os("SANDLOT_CONFIG").filter(|p| !p.is_empty()) {
            return Config::read(Path::new(&path));
        }
        let candidates = [
            Some(PathBuf::from("sandlot.toml")),
            std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))
                .map(|d| d.join("sandlot/sandlot.toml")),
        ];
        match candidates.into_iter().flatten().find(|p| p.is_file()) {
            Some(path) => Config::read(&path),
            None => Ok(Config::default()),
        }
    }

    /// Reads the configuration file at `path`.
    pub fn read(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Config::parse(&text, path)
    }

    /// Parses `text` as if read from `path`; relative directories are resolved against
    /// the directory of `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let file: File = toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let policy = file
            .policy
            .map(|settings| settings.policy())
            .transpose()
            .map_err(|reason| Error::Config {
                path: path.to_path_buf(),
                reason: format!("[policy]: {reason}"),
            })?;
        let mut pools = std::collections::BTreeMap::new();
        for (name, section) in file.pool {
            let options = section.options(&name).map_err(|reason| Error::Config {
                path: path.to_path_buf(),
                reason,
            })?;
            pools.insert(name, options);
        }
        Ok(Config {
            path: Some(path.to_path_buf()),
            plugin_dirs: file.plugin_dirs.iter().map(|d| base.join(d)).collect(),
            cache_dir: file.cache_dir.map(|d| base.join(d)),
            runtimes_dir: file.runtimes_dir.map(|d| base.join(d)),
            docker_host: file.docker_host,
            podman_host: file.podman_host,
            images: file.images,
            pools,
            policy,
            wasm: WasmConfig {
                worker_program: file.wasm.worker_program.map(|f| base.join(f)),
                ..file.wasm
            },
            kubernetes: KubernetesConfig {
                kubeconfig: file.kubernetes.kubeconfig.map(|f| base.join(f)),
                pod_template: file.kubernetes.pod_template.map(|f| base.join(f)),
                ..file.kubernetes
            },
            serve: ServeConfig {
                tokens_file: file.serve.tokens_file.map(|f| base.join(f)),
            },
            mcp: file.mcp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dirs_resolve_against_the_file() {
        let config = Config::parse(
            "plugin_dirs = [\"plugins\", \"/abs\"]\ncache_dir = \"cache\"\n",
            Path::new("/etc/sandlot/sandlot.toml"),
        )
        .unwrap();
        assert_eq!(
            config.plugin_dirs,
            vec![PathBuf::from("/etc/sandlot/plugins"), PathBuf::from("/abs")]
        );
        assert_eq!(config.cache_dir, Some(PathBuf::from("/etc/sandlot/cache")));
    }

    #[test]
    fn unknown_keys_name_the_file_and_key() {
        let err = Config::parse("plugin_dir = []\n", Path::new("/x/sandlot.toml")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/x/sandlot.toml") && text.contains("plugin_dir"),
            "{text}"
        );
    }

    #[test]
    fn the_wasm_section_sets_workers_and_resolves_their_program() {
        let config = Config::parse(
            "[wasm]\nworkers = 2\nworker_program = \"bin/sandlot\"\npin_workers = false\n",
            Path::new("/etc/sandlot/sandlot.toml"),
        )
        .unwrap();
        assert_eq!(config.wasm.workers, 2);
        assert_eq!(
            config.wasm.worker_program,
            Some(PathBuf::from("/etc/sandlot/bin/sandlot"))
        );
        assert_eq!(config.wasm.pin_workers, Some(false));
        assert_eq!(
            Config::default().wasm.workers,
            0,
            "in this process by default"
        );
        let error = Config::parse("[wasm]\nworker = 2\n", Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("worker"), "{error}");
    }

    #[test]
    fn the_kubernetes_section_resolves_its_files_and_refuses_unknown_keys() {
        let config = Config::parse(
            "[kubernetes]\nkubeconfig = \"kube.conf\"\nnamespace = \"sb\"\n\
             pod_template = \"/abs/pod.yaml\"\nnetwork_policy_enforced = false\n",
            Path::new("/etc/sandlot/sandlot.toml"),
        )
        .unwrap();
        let kubernetes = &config.kubernetes;
        assert_eq!(
            kubernetes.kubeconfig,
            Some(PathBuf::from("/etc/sandlot/kube.conf"))
        );
        assert_eq!(
            kubernetes.pod_template,
            Some(PathBuf::from("/abs/pod.yaml"))
        );
        assert_eq!(kubernetes.namespace.as_deref(), Some("sb"));
        assert_eq!(kubernetes.network_policy_enforced, Some(false));
        let error = Config::parse("[kubernetes]\nnamesapce = \"x\"\n", Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("namesapce"), "{error}");
    }

    #[test]
    fn pool_sections_fill_in_the_defaults_and_check_their_values() {
        let config = Config::parse(
            "[pool.docker]\nmax_size = 4\nidle_timeout = 0\nwhen_exhausted = \"fail-fast\"\n",
            Path::new("/x/sandlot.toml"),
        )
        .unwrap();
        let docker = &config.pools["docker"];
        assert_eq!(docker.max_size, 4);
        assert_eq!(docker.idle_timeout, None, "0 means never");
        assert_eq!(docker.when_exhausted, Exhausted::FailFast);
        assert_eq!(docker.min_idle, PoolOptions::default().min_idle);
        for bad in [
            "[pool.docker]\nwhen_exhausted = \"sometimes\"\n",
            "[pool.docker]\nmin_idle = 5\nmax_size = 4\n",
            "[pool.docker]\nacquire_timeout = -1\n",
            "[pool.docker]\nmax = 4\n",
        ] {
            let err = Config::parse(bad, Path::new("/x/sandlot.toml")).unwrap_err();
            assert!(err.to_string().contains("/x/sandlot.toml"), "{err}");
        }
    }

    #[test]
    fn the_policy_section_is_a_preset_with_overrides() {
        let config = Config::parse(
            "[policy]\npreset = \"strict\"\npids_limit = 64\n",
            Path::new("/x/sandlot.toml"),
        )
        .unwrap();
        let policy = config.policy.unwrap();
        assert_eq!(policy.pids_limit, 64);
        assert_eq!(policy.network, crate::policy::Network::Off);
        let err = Config::parse(
            "cache_dir = \"c\"\n[policy]\nuid = \"root\"\n",
            Path::new("/x/sandlot.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/x/sandlot.toml") && err.contains("uid") && err.contains("line 3"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_explicit_file_is_an_error() {
        let err = Config::discover(Some(Path::new("/nonexistent/sandlot.toml"))).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/sandlot.toml"),
            "{err}"
        );
    }
}
