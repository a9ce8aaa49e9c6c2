//! Compiled components, cached on disk.
//!
//! Compiling a component with Cranelift takes milliseconds for a language handler and
//! up to minutes for an interpreter; loading the compiled artifact takes about as long
//! as mapping the file. The key is the SHA-256 of the wasm, wasmtime's engine
//! compatibility hash and [`ENGINE_CONFIG_VERSION`], so an artifact compiled by another
//! wasmtime or another engine configuration is never loaded.

use super::ENGINE_CONFIG_VERSION;
use crate::error::{Error, PluginSource, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// Loaded from the disk cache.
    Hit,
    /// Compiled, and the artifact stored for next time.
    Compiled,
    /// Compiled; the cache is off or could not be written.
    CompiledUncached,
}

/// The on-disk cache of compiled components.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    /// Seconds since its last change after which a file's digest may be remembered.
    settle_secs: i64,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write), or no cache.
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache {
            dir,
            settle_secs: 2,
        }
    }

    /// Where it keeps compiled artifacts; `None` when it keeps none.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Why what is compiled now will be compiled again by the next process, said so
    /// that a caller can tell the user once instead of promising "once": there is no
    /// cache directory, or it cannot be made or written. `None` when it can.
    pub fn unwritable(&self) -> Option<String> {
        let Some(dir) = &self.dir else {
            return Some("there is no cache (--no-cache, or no directory for one)".into());
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let probe = dir.join(format!(".probe-{}-{nanos}", std::process::id()));
        match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&probe, b"")) {
            Ok(()) => {
                let _ = std::fs::remove_file(&probe);
                None
            }
            Err(e) => Some(format!(
                "the cache {} cannot be written ({e})",
                dir.display()
            )),
        }
    }

    /// The compiled form of `wasm`, from the cache or freshly compiled.
    ///
    /// A cache that cannot be read or written is never an error: the component is
    /// compiled in memory instead.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        plugin: &PluginSource,
    ) -> Result<(Component, CacheOutcome)> {
        self.load_keyed(
            engine,
            || key(engine, wasm),
            || compile(engine, wasm, plugin),
        )
    }

    /// The artifact named by `key` if the cache holds a usable one, else `compile()`,
    /// stored for next time. `key` is computed only when there is a cache.
    fn load_keyed<A: Compiled, E>(
        &self,
        engine: &Engine,
        key: impl FnOnce() -> String,
        compile: impl FnOnce() -> std::result::Result<A, E>,
    ) -> std::result::Result<(A, CacheOutcome), E> {
        let Some(dir) = &self.dir else {
            return Ok((compile()?, CacheOutcome::CompiledUncached));
        };
        let path = dir.join(format!("{}.cwasm", key()));
        if path.is_file() {
            // SAFETY: `deserialize_file` trusts the file to be an artifact wasmtime
            // produced. Only this module writes into the cache directory, each file is
            // written whole and then renamed into place, and its name binds it to the
            // exact wasm and engine configuration; wasmtime itself checks the header and
            // the engine compatibility.
            #[allow(unsafe_code)]
            let cached = unsafe { A::deserialize_file(engine, &path) };
            if let Ok(loaded) = cached {
                return Ok((loaded, CacheOutcome::Hit));
            }
            // Unreadable or from an incompatible build: compile and replace it.
        }
        let compiled = compile()?;
        let stored = compiled
            .serialize()
            .ok()
            .is_some_and(|bytes| store(dir, &path, &bytes).is_ok());
        let outcome = if stored {
            CacheOutcome::Compiled
        } else {
            CacheOutcome::CompiledUncached
        };
        Ok((compiled, outcome))
    }
}

/// Something wasmtime compiles and the cache can hold: a core module or a component.
pub trait Compiled: Sized {
    /// Distinguishes the two in cache keys.
    const KIND: &'static [u8];
    /// Compiles `bytes`.
    fn compile_bytes(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self>;
    /// Loads an artifact this cache wrote.
    ///
    /// # Safety
    /// `path` must hold an artifact produced by `serialize` (see [`ComponentCache`]).
    #[allow(unsafe_code)]
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self>;
    /// The artifact's bytes.
    fn serialize(&self) -> wasmtime::Result<Vec<u8>>;
}

impl Compiled for Module {
    const KIND: &'static [u8] = b"module:";
    fn compile_bytes(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        Module::new(engine, bytes)
    }
    #[allow(unsafe_code)]
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller.
        unsafe { Module::deserialize_file(engine, path) }
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Module::serialize(self)
    }
}

impl Compiled for Component {
    const KIND: &'static [u8] = b"component-file:";
    fn compile_bytes(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        Component::new(engine, bytes)
    }
    #[allow(unsafe_code)]
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller.
        unsafe { Component::deserialize_file(engine, path) }
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Component::serialize(self)
    }
}

impl ComponentCache {
    /// The compiled form of the file at `path`, from the cache or freshly compiled,
    /// keyed by the SHA-256 of the bytes that are (or were) actually compiled.
    ///
    /// `claimed` is what a manifest says the file's SHA-256 is; a file whose bytes hash
    /// to something else is refused with [`FileLoadError::HashMismatch`], which names
    /// both. Hashing a 100 MB interpreter costs tens of milliseconds, so the digest is
    /// remembered in a stamp beside the artifacts, bound to the file's device, inode,
    /// size, modification and change times: replacing or editing the file changes at
    /// least one of them (the change time cannot be set by anyone), and the bytes are
    /// hashed again.
    pub fn load_file<A: Compiled>(
        &self,
        engine: &Engine,
        path: &Path,
        claimed: Option<&str>,
    ) -> std::result::Result<(A, CacheOutcome), FileLoadError> {
        let mut content = FileContent::open(self, path)?;
        content.check(claimed)?;
        let sha256 = content.sha256.clone();
        self.load_keyed(
            engine,
            || file_key::<A>(engine, &sha256),
            || {
                // Compile exactly the bytes whose hash names the artifact: the file may
                // have changed since its stamp was written.
                let bytes = content.bytes()?;
                content.check(claimed)?;
                if content.sha256 != sha256 {
                    return Err(FileLoadError::Changed);
                }
                A::compile_bytes(engine, &bytes).map_err(|e| FileLoadError::Compile {
                    path: path.to_path_buf(),
                    reason: format!("{e:#}"),
                })
            },
        )
    }

    /// The SHA-256 (hex) of the file at `path`, from its stamp when the file has not
    /// changed since it was last hashed.
    pub fn file_sha256(&self, path: &Path) -> std::result::Result<String, FileLoadError> {
        FileContent::open(self, path).map(|content| content.sha256)
    }

    /// A small record kept beside the artifacts under `kind/key` (what a runtime
    /// component says about itself, keyed by its content), if the cache holds one.
    pub fn note(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.as_ref()?.join(kind).join(key)).ok()
    }

    /// Keeps a record under `kind/key`; a cache that cannot be written keeps nothing.
    pub fn keep_note(&self, kind: &str, key: &str, bytes: &[u8]) {
        if let Some(dir) = &self.dir {
            let dir = dir.join(kind);
            let _ = store(&dir, &dir.join(key), bytes);
        }
    }

    /// Whether the file at `path` is compiled in the cache already, so loading it is
    /// fast. Hashes the file if its stamp is stale.
    pub fn has_file<A: Compiled>(&self, engine: &Engine, path: &Path) -> bool {
        let Some(dir) = &self.dir else { return false };
        FileContent::open(self, path).is_ok_and(|content| {
            dir.join(format!("{}.cwasm", file_key::<A>(engine, &content.sha256)))
                .is_file()
        })
    }
}

/// Why a file could not be loaded by [`ComponentCache::load_file`].
#[derive(Debug)]
pub enum FileLoadError {
    /// The file could not be read.
    Read(std::io::Error),
    /// Its bytes do not hash to what its manifest claims.
    HashMismatch { claimed: String, actual: String },
    /// It changed while it was being loaded.
    Changed,
    /// wasmtime rejected it.
    Compile { path: PathBuf, reason: String },
}

impl std::fmt::Display for FileLoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileLoadError::Read(e) => write!(f, "cannot read it: {e}"),
            FileLoadError::HashMismatch { claimed, actual } => write!(
                f,
                "its sha256 is {actual}, but its manifest says {claimed}; the file was \
                 replaced or damaged: install the runtime again, or correct the manifest"
            ),
            FileLoadError::Changed => write!(f, "it changed while it was being loaded; try again"),
            FileLoadError::Compile { path, reason } => {
                write!(f, "wasmtime cannot compile {}: {reason}", path.display())
            }
        }
    }
}

/// A file's SHA-256, from its stamp or from its bytes, and the bytes once read.
struct FileContent<'a> {
    path: &'a Path,
    sha256: String,
    bytes: Option<Vec<u8>>,
}

impl<'a> FileContent<'a> {
    fn open(cache: &ComponentCache, path: &'a Path) -> std::result::Result<Self, FileLoadError> {
        let meta = std::fs::metadata(path).map_err(FileLoadError::Read)?;
        let stamp_path = cache.dir.as_ref().map(|dir| stamp_path(dir, path));
        let identity = identity(&meta);
        if let Some(sha256) = stamp_path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| {
                let (id, sha) = text.trim().rsplit_once(' ')?;
                (id == identity).then(|| sha.to_string())
            })
        {
            return Ok(FileContent {
                path,
                sha256,
                bytes: None,
            });
        }
        let bytes = std::fs::read(path).map_err(FileLoadError::Read)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        // The stamp describes the file as it was before the read: if it changed
        // meanwhile, its identity no longer matches and the next load hashes again.
        // A file changed in the last moments could change again within the same
        // timestamp tick, unseen (git's "racy clean" case): it gets no stamp yet.
        let settled = settled(&meta, cache.settle_secs);
        if let (Some(stamp), Some(dir), true) = (&stamp_path, &cache.dir, settled) {
            let _ = store(
                &dir.join("stamps"),
                stamp,
                format!("{identity} {sha256}\n").as_bytes(),
            );
        }
        Ok(FileContent {
            path,
            sha256,
            bytes: Some(bytes),
        })
    }

    /// The file's bytes, read now if the stamp saved reading them; the hash is updated
    /// to match what was read.
    fn bytes(&mut self) -> std::result::Result<Vec<u8>, FileLoadError> {
        if let Some(bytes) = self.bytes.take() {
            return Ok(bytes);
        }
        let bytes = std::fs::read(self.path).map_err(FileLoadError::Read)?;
        self.sha256 = hex::encode(Sha256::digest(&bytes));
        Ok(bytes)
    }

    fn check(&self, claimed: Option<&str>) -> std::result::Result<(), FileLoadError> {
        match claimed {
            Some(claimed) if !claimed.eq_ignore_ascii_case(&self.sha256) => {
                Err(FileLoadError::HashMismatch {
                    claimed: claimed.to_ascii_lowercase(),
                    actual: self.sha256.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Whether the file was last changed long enough ago that a change now would show in
/// its timestamps (which the kernel keeps at a coarse, jiffy-sized resolution).
fn settled(meta: &std::fs::Metadata, settle_secs: i64) -> bool {
    use std::os::unix::fs::MetadataExt;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    now - meta.ctime().max(meta.mtime()) >= settle_secs
}

/// Where the remembered digest of the file at `path` lives.
fn stamp_path(dir: &Path, path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let name = hex::encode(Sha256::digest(absolute.as_os_str().as_encoded_bytes()));
    dir.join("stamps").join(format!("{}.stamp", &name[..32]))
}

/// What changes whenever a file is replaced or written: device, inode, size,
/// modification time and change time, to the nanosecond.
fn identity(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

fn compile(engine: &Engine, wasm: &[u8], plugin: &PluginSource) -> Result<Component> {
    Component::new(engine, wasm).map_err(|e| Error::Compile {
        plugin: plugin.clone(),
        reason: format!("{e:#}"),
    })
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so a
/// reader never sees a partial artifact, even with several processes racing.
fn store(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = path.with_extension(format!("{}-{nanos}.tmp", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The cache key of the component `wasm` for `engine`, hex.
fn key(engine: &Engine, wasm: &[u8]) -> String {
    artifact_key(engine, b"component:", &Sha256::digest(wasm))
}

/// The cache key of a file whose bytes have the SHA-256 (hex) `sha256`.
fn file_key<A: Compiled>(engine: &Engine, sha256: &str) -> String {
    artifact_key(engine, A::KIND, sha256.as_bytes())
}

fn artifact_key(engine: &Engine, kind: &[u8], wasm_hash: &[u8]) -> String {
    let mut hasher = DigestHasher(Sha256::new());
    hasher.0.update(kind);
    hasher.0.update(wasm_hash);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(ENGINE_CONFIG_VERSION);
    hex::encode(hasher.0.finalize())
}

/// Feeds [`Hash`] output into SHA-256: unlike `DefaultHasher`, stable across Rust
/// releases, so the cache survives an upgrade of the compiler that built sandlot.
struct DigestHasher(Sha256);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("DigestHasher is read through its digest, not finish()")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin() -> PluginSource {
        PluginSource::File {
            path: "x.wasm".into(),
        }
    }

    fn component() -> Vec<u8> {
        wat::parse_str("(component)").unwrap()
    }

    #[test]
    fn second_load_hits_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().join("nested")));
        let engine = super::super::shared();
        let (_, first) = cache.load(engine, &component(), &plugin()).unwrap();
        let (_, second) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!((first, second), (CacheOutcome::Compiled, CacheOutcome::Hit));
    }

    #[test]
    fn a_corrupt_artifact_is_recompiled_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().to_path_buf()));
        let engine = super::super::shared();
        cache.load(engine, &component(), &plugin()).unwrap();
        let artifact = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::write(&artifact, b"garbage").unwrap();
        let (_, outcome) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!(outcome, CacheOutcome::Compiled);
        let (_, outcome) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
    }

    #[test]
    fn an_unwritable_cache_says_so_and_a_writable_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().join("made")));
        assert_eq!(cache.unwritable(), None);
        assert_eq!(
            std::fs::read_dir(dir.path().join("made")).unwrap().count(),
            0
        );
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"").unwrap();
        let blocked = ComponentCache::new(Some(file.join("cache")))
            .unwritable()
            .unwrap();
        assert!(blocked.contains("cannot be written"), "{blocked}");
        assert!(ComponentCache::new(None)
            .unwritable()
            .unwrap()
            .contains("no cache"));
    }

    #[test]
    fn an_unwritable_cache_still_compiles() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A regular file where the directory should be: every write fails.
        let cache = ComponentCache::new(Some(file.path().join("cache")));
        let engine = super::super::shared();
        let (_, outcome) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!(outcome, CacheOutcome::CompiledUncached);
    }

    #[test]
    fn keys_differ_per_wasm() {
        let engine = super::super::shared();
        let a = key(engine, &component());
        let b = key(
            engine,
            &wat::parse_str("(component (core module))").unwrap(),
        );
        assert_ne!(a, b);
        assert_eq!(a, key(engine, &component()));
    }

    fn module(name: &str) -> Vec<u8> {
        wat::parse_str(format!("(module (func (export \"{name}\")))")).unwrap()
    }

    fn exports(module: &Module) -> Vec<String> {
        module.exports().map(|e| e.name().to_string()).collect()
    }

    /// A cache that remembers digests at once (an installed runtime is older than
    /// the two seconds a real cache waits).
    fn eager(dir: PathBuf) -> ComponentCache {
        ComponentCache {
            dir: Some(dir),
            settle_secs: 0,
        }
    }

    /// Replaces the file at `path` as an installer does: a new file renamed over it.
    fn replace(path: &Path, bytes: &[u8]) {
        let staged = path.with_extension("new");
        std::fs::write(&staged, bytes).unwrap();
        std::fs::rename(&staged, path).unwrap();
    }

    #[test]
    fn a_replaced_file_is_compiled_again_never_served_stale() {
        let dir = tempfile::tempdir().unwrap();
        let cache = eager(dir.path().join("cache"));
        let engine = super::super::shared();
        let path = dir.path().join("runtime.wasm");
        std::fs::write(&path, module("first")).unwrap();
        let (first, outcome) = cache.load_file::<Module>(engine, &path, None).unwrap();
        assert_eq!(
            (exports(&first), outcome),
            (vec!["first".into()], CacheOutcome::Compiled)
        );
        let (_, outcome) = cache.load_file::<Module>(engine, &path, None).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
        // Same name, same size, new bytes: what runs is what is on disk now.
        replace(&path, &module("other"));
        let (second, outcome) = cache.load_file::<Module>(engine, &path, None).unwrap();
        assert_eq!(
            (exports(&second), outcome),
            (vec!["other".into()], CacheOutcome::Compiled)
        );
        let (third, outcome) = cache.load_file::<Module>(engine, &path, None).unwrap();
        assert_eq!(
            (exports(&third), outcome),
            (vec!["other".into()], CacheOutcome::Hit)
        );
    }

    #[test]
    fn bytes_that_do_not_match_the_claim_are_refused_naming_both_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = eager(dir.path().join("cache"));
        let engine = super::super::shared();
        let path = dir.path().join("runtime.wasm");
        let claimed = hex::encode(Sha256::digest(module("claimed")));
        std::fs::write(&path, module("actual")).unwrap();
        let actual = hex::encode(Sha256::digest(module("actual")));
        let error = cache
            .load_file::<Module>(engine, &path, Some(&claimed))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&claimed) && error.contains(&actual),
            "{error}"
        );
        // The claim is checked against remembered digests too, not only fresh ones.
        cache
            .load_file::<Module>(engine, &path, Some(&actual))
            .unwrap();
        let error = cache
            .load_file::<Module>(engine, &path, Some(&claimed))
            .unwrap_err();
        assert!(
            matches!(error, FileLoadError::HashMismatch { .. }),
            "{error}"
        );
    }
}
