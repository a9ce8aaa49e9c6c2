//! Where the native backend keeps its root filesystems and the agent, and what an error
//! there says to do.

use crate::spawn;
use sandlot_core::error::Error;
use std::path::PathBuf;

/// Names of the sandboxes' host directories in the temp dir:
/// `sandlot-native-<owner stamp>-<sandbox id>`.
pub(crate) const STATE_PREFIX: &str = "sandlot-native-";

/// Where the backend keeps root filesystems and the agent: `SANDLOT_NATIVE_DIR`, else
/// `/var/lib/sandlot/native` for root (the sandboxes' uids must get into it, and
/// root's home is closed to them), else `$XDG_DATA_HOME/sandlot/native`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SANDLOT_NATIVE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if spawn::is_root() {
        return PathBuf::from("/var/lib/sandlot/native");
    }
    sandlot_core::dirs::user_data().join("native")
}

/// An error about a file in the backend's directory ([`default_dir`]) that says what to
/// do where the directory cannot be written.
pub(crate) fn data_dir_error(context: String, source: std::io::Error) -> Error {
    use std::io::ErrorKind;
    let context = match source.kind() {
        ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied => format!(
            "{context}: this user cannot write there; set SANDLOT_NATIVE_DIR to a directory \
             it can (the root filesystems and the agent live in it), or run \
             `sandlot images build --engine native` as the directory's owner"
        ),
        _ => context,
    };
    Error::Io { context, source }
}
