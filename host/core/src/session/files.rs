//! The session's workspace as files: read, written, listed, moved and copied in and
//! out, every path checked and every answer masked. A door of its own, beside runs.

use super::state::Session;
use crate::backend::{FileInfo, ListEntry, Listing};
use crate::error::{Error, Result};
use crate::sandbox_path::SandboxPath;
use crate::transfer::Copied;
use std::path::Path;

impl Session {
    /// Writes `contents` to `path` (relative to the workspace) in the sandbox.
    pub fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<()> {
        let rel = sandbox_path(path)?;
        self.output = None;
        let written = self.sandbox()?.files().write(rel.as_str(), contents);
        self.masked(written)
    }

    /// Reads `path` (relative to the workspace) from the sandbox, with the session's
    /// secrets masked. A link on the way is refused.
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        let rel = sandbox_path(path)?;
        let read = self.sandbox()?.files().read(rel.as_str(), MAX_READ);
        let bytes = self.masked(read)?;
        Ok(self.secrets.mask(bytes, false))
    }

    /// The entries of directory `path` (relative; `""` or `"."` for the workspace),
    /// sorted, with the session's secrets masked in their names. An entry whose name
    /// cannot be shown safely (not UTF-8, a control character) is left out and
    /// counted in [`Listing::refused`].
    pub fn list_files(&mut self, path: &str) -> Result<Listing> {
        let rel = dir_path(path)?;
        let listed = self.sandbox()?.files().list(&rel);
        let entries = self.masked(listed)?;
        let mut listing = Listing::default();
        for entry in entries {
            let name = SandboxPath::from_path(Path::new(&entry.name))
                .ok()
                .filter(|name| !name.as_str().contains('/'))
                .and_then(|name| self.secrets.mask_path(&name));
            match name {
                Some(name) if !listing.entries.iter().any(|e| e.name == name) => {
                    listing.entries.push(ListEntry {
                        name,
                        is_dir: entry.is_dir(),
                        info: entry.info,
                    })
                }
                _ => listing.refused += 1,
            }
        }
        listing.entries.sort();
        Ok(listing)
    }

    /// What `path` (relative; `""` or `"."` for the workspace) is: a file, a
    /// directory or a link (described, never followed), with its size, permissions
    /// and modification time. A path that names nothing is [`Error::NoSuchFile`].
    ///
    /// ```no_run
    /// # let mut session = sandlot::from_environment()?.session("python").open()?;
    /// session.write_file("data/a.csv", b"x,y\n")?;
    /// assert_eq!(session.file_info("data/a.csv")?.size, 4);
    /// assert!(session.file_info("data")?.is_dir());
    /// # Ok::<(), sandlot::Error>(())
    /// ```
    pub fn file_info(&mut self, path: &str) -> Result<FileInfo> {
        let rel = dir_path(path)?;
        let info = self.sandbox()?.files().stat(&rel);
        self.masked(info)
    }

    /// Makes directory `path` (relative to the workspace) and its parents: `true`
    /// if it was made, `false` if it was a directory already (the workspace always
    /// is). A file in its place, or a link on the way, is an error.
    pub fn make_dir(&mut self, path: &str) -> Result<bool> {
        let rel = dir_path(path)?;
        if rel.is_empty() {
            self.sandbox()?;
            return Ok(false);
        }
        self.output = None;
        let made = self.sandbox()?.files().make_dir(&rel);
        self.masked(made)
    }

    /// Removes `path` (relative to the workspace): a file, a link (never what it
    /// points to) or a directory with everything in it. A path that names nothing is
    /// [`Error::NoSuchFile`]; the workspace itself cannot be removed.
    pub fn remove_path(&mut self, path: &str) -> Result<()> {
        let rel = sandbox_path(path)?;
        self.output = None;
        let removed = self.sandbox()?.files().remove(rel.as_str());
        self.masked(removed)
    }

    /// Moves the file, link or directory `from` to `to` (both relative to the
    /// workspace), making `to`'s parents and replacing a file there.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let (from, to) = (sandbox_path(from)?, sandbox_path(to)?);
        self.output = None;
        let moved = self.sandbox()?.files().rename(from.as_str(), to.as_str());
        self.masked(moved)
    }

    /// Copies the host file or directory `host_path` into the sandbox directory
    /// `sandbox_dir` (relative; `""` for the workspace), as a tar archive. A
    /// directory's contents are copied; links in it are left out.
    pub fn copy_in(&mut self, host_path: &Path, sandbox_dir: &str) -> Result<()> {
        let archive = crate::transfer::pack(host_path, MAX_READ)?;
        let rel = dir_path(sandbox_dir)?;
        self.output = None;
        let unpacked = self.sandbox()?.files().unpack(&rel, &archive);
        self.masked(unpacked)
    }

    /// Copies the sandbox file or directory `sandbox_path` out into the host directory
    /// `host_dir` (created if missing), as a tar archive, and says which files it
    /// wrote. What the sandbox sends is untrusted: only regular files and directories
    /// are written, never a link, never outside `host_dir` (every write goes through a
    /// capability handle on it), and no link on the way to `sandbox_path` is followed.
    /// The session's secrets are masked in the files' contents and names; a file
    /// whose name cannot be represented is left out and counted in
    /// [`Copied::refused`].
    pub fn copy_out(&mut self, sandbox_path: &str, host_dir: &Path) -> Result<Copied> {
        let rel = dir_path(sandbox_path)?;
        let packed = self.sandbox()?.files().pack(&rel, MAX_READ);
        let archive = self.masked(packed)?;
        let secrets = &self.secrets;
        let copied = crate::transfer::unpack(&archive, host_dir, |path, bytes| {
            Some((secrets.mask_path(&path)?, secrets.mask(bytes, false)))
        });
        self.masked(copied)
    }
}

/// Largest file [`Session::read_file`] hands back.
const MAX_READ: u64 = 128 << 20;

/// `path` as a [`SandboxPath`], or an error that says what is wrong with it.
fn sandbox_path(path: &str) -> Result<SandboxPath> {
    SandboxPath::new(path).map_err(|problem| Error::InvalidPath {
        path: crate::sandbox_path::escape_controls(path).into_owned(),
        reason: problem.to_string(),
    })
}

/// A directory path: `""` or `"."` for the workspace, else as [`sandbox_path`].
pub(super) fn dir_path(path: &str) -> Result<String> {
    if path.is_empty() || path == "." {
        Ok(String::new())
    } else {
        sandbox_path(path).map(|p| p.as_str().to_string())
    }
}
