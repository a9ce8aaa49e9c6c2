//! What a component declares, read before compiling it.
//!
//! The contract version travels in the component's export names
//! (`sandlot:plugin/handler@0.1.0`), so a plugin built for a future contract is refused
//! with a clear message without compiling or running any of it.

use crate::error::{Error, PluginSource, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fmt;
use wasmparser::{Encoding, Parser, Payload};

/// Versions of the `sandlot:plugin` WIT package this host loads, oldest first.
/// Language handlers may be built for the ones that have a language-handler world,
/// runtimes for the ones that have a runtime world ([`PluginKind::api_versions`]).
pub const SUPPORTED_API_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.4.0"];

/// The versions that define a language-handler world: 0.4.0 changed only runtimes.
const HANDLER_API_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0"];

/// The versions that define a runtime world: 0.3.0 changed only handlers.
const RUNTIME_API_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.4.0"];

/// The WIT package every plugin exports from.
const PACKAGE: &str = "sandlot:plugin";

/// The two kinds of plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    /// Exports `sandlot:plugin/handler`: knows one language.
    LanguageHandler,
    /// Exports `sandlot:plugin/interpreter`: executes code inside wasmtime.
    Runtime,
}

impl PluginKind {
    /// The contract versions this host loads plugins of this kind for, oldest first.
    pub fn api_versions(self) -> &'static [&'static str] {
        match self {
            PluginKind::LanguageHandler => HANDLER_API_VERSIONS,
            PluginKind::Runtime => RUNTIME_API_VERSIONS,
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PluginKind::LanguageHandler => "language-handler",
            PluginKind::Runtime => "runtime",
        })
    }
}

/// What a plugin component declares about itself, read without compiling it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inspection {
    /// Size of the file in bytes.
    pub size: usize,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Which kind of plugin it is.
    pub kind: PluginKind,
    /// The `sandlot:plugin` version it was built for.
    pub api_version: String,
    /// Names of everything it imports.
    pub imports: Vec<String>,
    /// Names of everything it exports.
    pub exports: Vec<String>,
}

/// Reads the header and top-level imports and exports of `bytes`, and checks that it is
/// a sandlot plugin of a supported contract version.
pub(crate) fn inspect(bytes: &[u8], plugin: &PluginSource) -> Result<Inspection> {
    let (imports, exports) = top_level_names(bytes, plugin)?;
    let mut claimed = exports.iter().filter_map(|name| {
        let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let kind = match interface {
            "handler" => PluginKind::LanguageHandler,
            "interpreter" => PluginKind::Runtime,
            _ => return None,
        };
        Some((kind, version))
    });
    let Some((kind, version)) = claimed.next() else {
        return Err(Error::NotAPlugin {
            plugin: plugin.clone(),
            exports,
        });
    };
    let supported = kind.api_versions();
    if !supported.contains(&version) {
        let found = if version.is_empty() {
            "(unversioned)".to_string()
        } else {
            version.to_string()
        };
        let newest = supported.last().copied().unwrap_or("0.0.0");
        return Err(Error::UnsupportedApi {
            plugin: plugin.clone(),
            newer: version_key(version) > version_key(newest),
            found,
            supported: supported.to_vec(),
        });
    }
    Ok(Inspection {
        size: bytes.len(),
        sha256: hex::encode(Sha256::digest(bytes)),
        kind,
        api_version: version.to_string(),
        imports,
        exports,
    })
}

/// `major.minor.patch` as numbers for ordering; anything unparsable sorts first.
fn version_key(version: &str) -> Vec<u64> {
    version
        .split(['.', '-', '+'])
        .take(3)
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// The names of the component's own imports and exports (not those of components or
/// modules nested inside it).
fn top_level_names(bytes: &[u8], plugin: &PluginSource) -> Result<(Vec<String>, Vec<String>)> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    let malformed = |e: wasmparser::BinaryReaderError| Error::NotWasm {
        plugin: plugin.clone(),
        reason: e.message().to_string(),
    };
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(malformed)? {
            Payload::Version {
                encoding: Encoding::Module,
                ..
            } if depth == 0 => {
                return Err(Error::CoreModule {
                    plugin: plugin.clone(),
                });
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    imports.push(import.map_err(malformed)?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    exports.push(export.map_err(malformed)?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> PluginSource {
        PluginSource::File {
            path: "test.wasm".into(),
        }
    }

    #[test]
    fn random_bytes_are_not_wasm() {
        let err = inspect(b"\x7fELF definitely not wasm", &source()).unwrap_err();
        assert!(matches!(err, Error::NotWasm { .. }), "{err}");
        assert!(err.to_string().contains("test.wasm"), "{err}");
    }

    #[test]
    fn core_modules_are_named_as_such() {
        let module = wat::parse_str("(module (func (export \"f\")))").unwrap();
        let err = inspect(&module, &source()).unwrap_err();
        assert!(matches!(err, Error::CoreModule { .. }), "{err}");
    }

    #[test]
    fn components_of_another_world_list_their_exports() {
        let component = wat::parse_str(
            r#"(component
                 (core module $m (func (export "f") (result i32) i32.const 1))
                 (core instance $i (instantiate $m))
                 (func $f (result u32) (canon lift (core func $i "f")))
                 (export "answer" (func $f)))"#,
        )
        .unwrap();
        let err = inspect(&component, &source()).unwrap_err();
        match err {
            Error::NotAPlugin { exports, .. } => assert_eq!(exports, vec!["answer"]),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("0.10.0") > version_key("0.9.1"));
        assert!(version_key("1.0.0") > version_key("0.1.0"));
        assert!(version_key("") < version_key("0.1.0"));
    }
}
