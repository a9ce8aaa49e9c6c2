//! What a backend runs a language's code with: the interpreter or compiler and the
//! libraries that are there without an install.
//!
//! Backends differ here, and a program notices: the wasm backend's Python is the
//! runtime sandlot installs (CPython 3.15, pandas 3), a container's is whatever its image
//! holds (`sandlot/python` has Debian's CPython 3.11 and pandas 1.5). [`Backend::toolchain`]
//! says which, so that a caller (or a model, over MCP) can tell before it runs.
//!
//! [`Backend::toolchain`]: crate::backend::Backend::toolchain

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The interpreter or compiler a backend runs a language with, and what comes with it.
///
/// ```
/// use sandlot::toolchain::Toolchain;
///
/// let python = Toolchain::new("CPython", "3.11.2", "the Debian packages of sandlot/python:latest")
///     .with_library("pandas", "1.5.3");
/// assert_eq!(python.to_string(), "CPython 3.11.2");
/// assert_eq!(python.libraries["pandas"], "1.5.3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Toolchain {
    /// The interpreter or compiler, e.g. `CPython`, `Node.js`, `QuickJS`, `GCC`.
    pub name: String,
    /// Its version as its makers write it (`3.11.2`), not a distribution's
    /// (`3.11.2-6+deb12u6`); empty when the backend cannot tell.
    pub version: String,
    /// The libraries there without an install, by the name an install would use, with
    /// their versions (empty where a backend knows only the name).
    pub libraries: BTreeMap<String, String>,
    /// Where this was read, e.g. "the runtime cpython-3.15-wasi" or "the Debian packages
    /// of sandlot/python:latest".
    pub source: String,
}

impl Toolchain {
    /// A toolchain without libraries.
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        source: impl Into<String>,
    ) -> Toolchain {
        Toolchain {
            name: name.into(),
            version: version.into(),
            libraries: BTreeMap::new(),
            source: source.into(),
        }
    }

    /// The same with one more library.
    pub fn with_library(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.libraries.insert(name.into(), version.into());
        self
    }
}

/// `CPython 3.11.2`: what a person reads first.
impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version.as_str() {
            "" => f.write_str(&self.name),
            version => write!(f, "{} {version}", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_version_is_not_printed_as_an_empty_one() {
        let node = Toolchain::new("Node.js", "", "somewhere");
        assert_eq!(node.to_string(), "Node.js");
        assert_eq!(
            serde_json::to_value(&node).unwrap()["libraries"],
            serde_json::json!({})
        );
    }
}
