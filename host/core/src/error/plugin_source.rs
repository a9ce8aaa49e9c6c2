//! Where a plugin came from: every plugin error names it, and the plugin host
//! names plugins the same way, so it stands apart from the error enum.

use std::fmt;
use std::path::PathBuf;

/// Where a plugin came from. Every plugin error names it, so a user knows which file
/// to fix or remove.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PluginSource {
    /// Embedded in the sandlot binary.
    Builtin {
        /// File stem of the built-in component, e.g. `python`.
        name: &'static str,
    },
    /// A `.wasm` file found in a plugin directory or given on the command line.
    File {
        /// Path of the component.
        path: PathBuf,
    },
}

impl PluginSource {
    /// Whether the plugin is embedded in the binary.
    pub fn is_builtin(&self) -> bool {
        matches!(self, PluginSource::Builtin { .. })
    }
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginSource::Builtin { name } => write!(f, "built-in plugin `{name}`"),
            PluginSource::File { path } => write!(f, "plugin {}", path.display()),
        }
    }
}
