//! Compiled components, cached on disk.
//!
//! Compiling a component with Cranelift takes milliseconds for a language handler and
//! up to minutes for an interpreter; loading the compiled artifact takes about as long
//! as mapping the file. The key is the SHA-256 of the wasm, wasmtime's engine
//! compatibility hash and [`ENGINE_CONFIG_VERSION`], so an artifact compiled by another
//! wasmtime or another engine configuration is never loaded.

use super::engine::ENGINE_CONFIG_VERSION;
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
pub(crate) struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write), or no cache.
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache { dir }
    }

    /// The compiled form of `wasm`, from the cache or freshly compiled.
    ///
    /// A cache that cannot be read or written is never an error: the component is
    /// compiled in memory instead.
    pub(crate) fn load(
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
pub(crate) trait Compiled: Sized {
    /// Distinguishes the two in cache keys.
    const KIND: &'static [u8];
    /// Compiles the file at `path`.
    fn compile_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self>;
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
    fn compile_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        Module::from_file(engine, path)
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
    fn compile_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        Component::from_file(engine, path)
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
    /// The compiled form of the file at `path`, whose SHA-256 (hex) is `sha256`, from
    /// the cache or freshly compiled. The file is read only when it must be compiled:
    /// runtimes are large (CPython is 100 MB) and their hash was verified when they
    /// were installed.
    pub(crate) fn load_file<A: Compiled>(
        &self,
        engine: &Engine,
        path: &Path,
        sha256: &str,
    ) -> wasmtime::Result<(A, CacheOutcome)> {
        self.load_keyed(
            engine,
            || file_key::<A>(engine, sha256),
            || A::compile_file(engine, path),
        )
    }

    /// Whether the file with this SHA-256 is cached, so loading it is fast.
    pub(crate) fn has_file<A: Compiled>(&self, engine: &Engine, sha256: &str) -> bool {
        let Some(dir) = &self.dir else { return false };
        dir.join(format!("{}.cwasm", file_key::<A>(engine, sha256)))
            .is_file()
    }
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

/// The cache key of the file whose SHA-256 (hex) is `sha256`.
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
        let engine = super::super::engine::shared();
        let (_, first) = cache.load(engine, &component(), &plugin()).unwrap();
        let (_, second) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!((first, second), (CacheOutcome::Compiled, CacheOutcome::Hit));
    }

    #[test]
    fn a_corrupt_artifact_is_recompiled_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().to_path_buf()));
        let engine = super::super::engine::shared();
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
    fn an_unwritable_cache_still_compiles() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A regular file where the directory should be: every write fails.
        let cache = ComponentCache::new(Some(file.path().join("cache")));
        let engine = super::super::engine::shared();
        let (_, outcome) = cache.load(engine, &component(), &plugin()).unwrap();
        assert_eq!(outcome, CacheOutcome::CompiledUncached);
    }

    #[test]
    fn keys_differ_per_wasm() {
        let engine = super::super::engine::shared();
        let a = key(engine, &component());
        let b = key(
            engine,
            &wat::parse_str("(component (core module))").unwrap(),
        );
        assert_ne!(a, b);
        assert_eq!(a, key(engine, &component()));
    }
}
