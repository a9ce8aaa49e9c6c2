//! A sandbox's files, as every backend offers them.

use crate::artifact::{FileStat, Snapshot};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// The files of a sandbox, below its workspace. Paths are relative to the workspace,
/// `/`-separated, and already checked by the session to have normal components only;
/// an implementation still refuses any symbolic link on the way, because code in the
/// sandbox can make them.
pub trait SandboxFiles {
    /// Writes a file, creating its parent directories.
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()>;
    /// Reads a regular file of at most `max` bytes.
    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>>;
    /// The entries of a directory (`""` for the workspace), with their names as the
    /// file system holds them (the session checks and masks them before anyone sees
    /// them).
    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>>;
    /// Every regular file under a directory, for artifact collection; a missing
    /// directory is empty.
    fn scan(&mut self, path: &str) -> Result<Snapshot>;
    /// A tar of a file or of a directory's contents, links left out, at most `max` bytes.
    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>>;
    /// Unpacks a tar of regular files and directories into directory `path`.
    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()>;
    /// Empties directory `path`: its files, links and directories go, and no link is
    /// followed; a missing directory is empty already.
    fn clear(&mut self, path: &str) -> Result<()>;
}

/// One entry of a directory, as [`SandboxFiles::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    /// Its name, any bytes the file system allows: it was chosen by the code in the
    /// sandbox.
    pub name: std::ffi::OsString,
    /// Whether it is a directory (a link never is).
    pub is_dir: bool,
}

impl DirEntry {
    /// An entry named `name`.
    pub fn new(name: impl Into<std::ffi::OsString>, is_dir: bool) -> DirEntry {
        DirEntry {
            name: name.into(),
            is_dir,
        }
    }
}

/// Files held in memory: a [`SandboxFiles`] for backends whose sandboxes keep no files
/// of their own, and for tests.
///
/// ```
/// use sandlot::backend::{DirEntry, MemoryFiles, SandboxFiles};
/// let mut files = MemoryFiles::default();
/// files.write("output/a.txt", b"hi")?;
/// assert_eq!(files.list("")?, [DirEntry::new("output", true)]);
/// assert_eq!(files.read("output/a.txt", 10)?, b"hi");
/// # Ok::<(), sandlot::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles {
    files: BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
}

fn missing(path: &str) -> Error {
    Error::NoSuchFile { path: path.into() }
}

fn under(path: &str) -> PathBuf {
    PathBuf::from(path)
}

impl MemoryFiles {
    fn children(&self, dir: &Path) -> impl Iterator<Item = (&PathBuf, &(Vec<u8>, SystemTime))> {
        let dir = dir.to_path_buf();
        self.files
            .iter()
            .filter(move |(path, _)| path.starts_with(&dir) && *path != &dir)
    }
}

impl SandboxFiles for MemoryFiles {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.files
            .insert(under(path), (data.to_vec(), SystemTime::now()));
        Ok(())
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let (data, _) = self.files.get(&under(path)).ok_or_else(|| missing(path))?;
        if data.len() as u64 > max {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: format!("it is larger than {max} bytes"),
            });
        }
        Ok(data.clone())
    }

    fn clear(&mut self, path: &str) -> Result<()> {
        let dir = under(path);
        self.files
            .retain(|file, _| !file.starts_with(&dir) || file == &dir);
        Ok(())
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let dir = under(path);
        let mut entries: Vec<DirEntry> = self
            .children(&dir)
            .filter_map(|(file, _)| {
                let rest = file.strip_prefix(&dir).ok()?;
                let mut parts = rest.components();
                let first = parts.next()?.as_os_str().to_os_string();
                Some(DirEntry::new(first, parts.next().is_some()))
            })
            .collect();
        entries.sort();
        entries.dedup();
        Ok(entries)
    }

    fn scan(&mut self, path: &str) -> Result<Snapshot> {
        let dir = under(path);
        Ok(Snapshot::from_stats(self.children(&dir).filter_map(
            |(file, (data, modified))| {
                Some(FileStat {
                    path: file.strip_prefix(&dir).ok()?.to_path_buf(),
                    size: data.len() as u64,
                    modified: Some(*modified),
                })
            },
        )))
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let root = under(path);
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &Path, data: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, name, data)
        };
        let io = |e| Error::Io {
            context: format!("cannot pack `{path}`"),
            source: e,
        };
        if let Some((data, _)) = self.files.get(&root) {
            let name = root.file_name().map(PathBuf::from).unwrap_or_default();
            add(&name, data).map_err(io)?;
        } else {
            for (file, (data, _)) in self.children(&root) {
                if let Ok(name) = file.strip_prefix(&root) {
                    add(name, data).map_err(io)?;
                }
            }
        }
        let archive = tar.into_inner().map_err(io)?;
        if archive.len() as u64 > max {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: format!("it holds more than the {max} bytes one copy may move"),
            });
        }
        Ok(archive)
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        use std::io::Read;
        let broken = |e: std::io::Error| Error::Io {
            context: "broken tar archive".into(),
            source: e,
        };
        let mut tar = tar::Archive::new(archive);
        for entry in tar.entries().map_err(broken)? {
            let mut entry = entry.map_err(broken)?;
            let name = entry.path().map_err(broken)?.into_owned();
            if name
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Err(Error::InvalidPath {
                    path: name.display().to_string(),
                    reason: "an archive entry must stay inside the destination".into(),
                });
            }
            match entry.header().entry_type() {
                tar::EntryType::Directory => {}
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let mut data = Vec::new();
                    entry.read_to_end(&mut data).map_err(broken)?;
                    self.files
                        .insert(under(path).join(name), (data, SystemTime::now()));
                }
                other => {
                    return Err(Error::InvalidPath {
                        path: name.display().to_string(),
                        reason: format!("{other:?} entries (links, devices) are not copied"),
                    })
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_list_scan_and_copy_trees() {
        let mut files = MemoryFiles::default();
        files.write("a/b/c.txt", b"hi").unwrap();
        files.write("top.txt", b"x").unwrap();
        assert_eq!(
            files.list("").unwrap(),
            [DirEntry::new("a", true), DirEntry::new("top.txt", false)]
        );
        assert_eq!(files.list("a").unwrap(), [DirEntry::new("b", true)]);
        let archive = files.pack("a", 1 << 20).unwrap();
        files.unpack("copy", &archive).unwrap();
        assert_eq!(files.read("copy/b/c.txt", 10).unwrap(), b"hi");
        assert!(files.read("copy/b/c.txt", 1).is_err());
        let scanned = files.scan("copy").unwrap();
        assert_eq!(scanned.len(), 1);
    }
}
