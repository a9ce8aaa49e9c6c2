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
//! ```

use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Settings read from `sandlot.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
        Ok(Config {
            path: Some(path.to_path_buf()),
            plugin_dirs: file.plugin_dirs.iter().map(|d| base.join(d)).collect(),
            cache_dir: file.cache_dir.map(|d| base.join(d)),
            runtimes_dir: file.runtimes_dir.map(|d| base.join(d)),
            docker_host: file.docker_host,
            podman_host: file.podman_host,
            images: file.images,
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
    fn a_missing_explicit_file_is_an_error() {
        let err = Config::discover(Some(Path::new("/nonexistent/sandlot.toml"))).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/sandlot.toml"),
            "{err}"
        );
    }
}
