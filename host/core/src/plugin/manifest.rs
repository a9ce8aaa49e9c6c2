//! The optional manifest beside a plugin: `foo.toml` next to `foo.wasm`.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::Path;

/// What a plugin's sibling manifest may say. Unknown keys are errors, so a typo never
/// passes silently.
///
/// ```toml
/// description = "Lua 5.4 via the lua5.4 package"
/// enabled = true
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Shown by `sandlot plugins list`.
    pub description: Option<String>,
    /// `false` keeps the plugin out without deleting it.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

impl Default for Manifest {
    /// What a plugin without a manifest gets: enabled, no description.
    fn default() -> Self {
        Manifest {
            description: None,
            enabled: true,
        }
    }
}

impl Manifest {
    /// The manifest beside `wasm`, if there is one.
    pub(crate) fn beside(wasm: &Path) -> Result<Option<Manifest>> {
        let path = wasm.with_extension("toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::Manifest {
                    path,
                    reason: e.to_string(),
                })
            }
        };
        toml::from_str(&text)
            .map(Some)
            .map_err(|e| Error::Manifest {
                path,
                reason: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_manifest_is_none_and_typos_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("lua.wasm");
        assert_eq!(Manifest::beside(&wasm).unwrap(), None);

        std::fs::write(dir.path().join("lua.toml"), "enabled = false\n").unwrap();
        let manifest = Manifest::beside(&wasm).unwrap().unwrap();
        assert!(!manifest.enabled);

        std::fs::write(dir.path().join("lua.toml"), "enabeld = false\n").unwrap();
        let err = Manifest::beside(&wasm).unwrap_err().to_string();
        assert!(err.contains("lua.toml") && err.contains("enabeld"), "{err}");
    }
}
