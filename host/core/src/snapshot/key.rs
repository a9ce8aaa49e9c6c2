//! The key a host signs its snapshots with, and which snapshots it accepts.

use crate::error::{Error, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::io::Write;
use std::path::Path;

/// The secret a host signs the snapshots it makes with (HMAC-SHA-256), so that it
/// restores only its own unless told otherwise ([`SnapshotTrust`]).
///
/// ```
/// use sandlot::SnapshotKey;
/// let key = SnapshotKey::from_bytes([7; 32]);
/// assert_eq!(format!("{key:?}"), "SnapshotKey(..)");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotKey([u8; 32]);

impl fmt::Debug for SnapshotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SnapshotKey(..)")
    }
}

impl SnapshotKey {
    /// A key of the given bytes (to share one between hosts that restore each other's
    /// snapshots).
    pub fn from_bytes(bytes: [u8; 32]) -> SnapshotKey {
        SnapshotKey(bytes)
    }

    /// A new random key.
    pub fn generate() -> Result<SnapshotKey> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| Error::Io {
            context: "cannot draw a random snapshot key".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(SnapshotKey(bytes))
    }

    /// The key kept in `path` (32 bytes, readable by its owner only), made there first
    /// if there is none. A key file others can read is refused: whoever reads it can
    /// forge snapshots this host restores.
    pub fn load_or_create(path: &Path) -> Result<SnapshotKey> {
        let io = |what: &str, e: std::io::Error| Error::Io {
            context: format!("{what} the snapshot key `{}`", path.display()),
            source: e,
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                check_private(path)?;
                let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| Error::Config {
                    path: path.to_path_buf(),
                    reason: format!(
                        "a snapshot key is 32 bytes, this file has {}: remove it to have a \
                         new one made (snapshots signed with it will no longer restore)",
                        b.len()
                    ),
                })?;
                Ok(SnapshotKey(bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = SnapshotKey::generate()?;
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| io("cannot make the folder of", e))?;
                }
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(path) {
                    Ok(mut file) => {
                        file.write_all(&key.0)
                            .and_then(|()| file.sync_all())
                            .map_err(|e| io("cannot write", e))?;
                        Ok(key)
                    }
                    // Another process made it first: its key is the one.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        SnapshotKey::load_or_create(path)
                    }
                    Err(e) => Err(io("cannot make", e)),
                }
            }
            Err(e) => Err(io("cannot read", e)),
        }
    }

    /// The signature of a snapshot whose contents hash to `digest`.
    pub(crate) fn sign(&self, digest: &[u8; 32]) -> [u8; 32] {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(digest);
        mac.finalize().into_bytes().into()
    }

    /// Whether `signature` is this key's for `digest` (in constant time).
    pub(crate) fn verify(&self, digest: &[u8; 32], signature: &[u8; 32]) -> bool {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(digest);
        mac.verify_slice(signature).is_ok()
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| Error::Io {
        context: format!("cannot read the snapshot key `{}`", path.display()),
        source: e,
    })?;
    let me = euid();
    if meta.mode() & 0o077 != 0 || meta.uid() != me {
        return Err(Error::Config {
            path: path.to_path_buf(),
            reason: format!(
                "the snapshot key must be its owner's alone (mode 0600, owned by uid {me}); \
                 it is mode {:o}, owned by uid {}: `chmod 600` it, or remove it to have a \
                 new one made",
                meta.mode() & 0o777,
                meta.uid()
            ),
        });
    }
    Ok(())
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn euid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> Result<()> {
    Ok(())
}

/// Which snapshots a host restores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotTrust {
    /// Only those signed with its own [`SnapshotKey`] (the default).
    #[default]
    OwnKey,
    /// Any intact snapshot, whoever made it: its checksum must hold, its signature is
    /// not checked. For snapshots moved from another host that shares no key.
    AnyIntact,
}
