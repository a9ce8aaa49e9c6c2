//! A sandbox's files, as every backend offers them.

use crate::artifact::{FileScan, FileStat};
use crate::error::{Error, Result};
use crate::sandbox_path::SandboxPath;
use std::collections::{BTreeMap, BTreeSet};
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
    fn scan(&mut self, path: &str) -> Result<FileScan>;
    /// A tar of a file or of a directory's contents, links left out, at most `max` bytes.
    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>>;
    /// Unpacks a tar of regular files and directories into directory `path`.
    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()>;
    /// Empties directory `path`: its files, links and directories go, and no link is
    /// followed; a missing directory is empty already.
    fn clear(&mut self, path: &str) -> Result<()>;
    /// What `path` is (`""`: the workspace); a link at its end is described, not
    /// followed. A path that names nothing is [`Error::NoSuchFile`].
    fn stat(&mut self, path: &str) -> Result<FileInfo>;
    /// Makes directory `path` and its parents: `true` if it was made, `false` if it
    /// was a directory already. Something else in its place is an error.
    fn make_dir(&mut self, path: &str) -> Result<bool>;
    /// Removes a file, a link (never what it points to) or a directory with
    /// everything in it. A path that names nothing is [`Error::NoSuchFile`].
    fn remove(&mut self, path: &str) -> Result<()>;
    /// Moves a file, link or directory from `from` to `to`, making `to`'s parents
    /// and replacing a file (or an empty directory) there.
    fn rename(&mut self, from: &str, to: &str) -> Result<()>;
}

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link: described, never followed.
    Link,
    /// Anything else (a FIFO, a socket, a device).
    Other,
}

/// What a sandbox's file system says of one file, a link not followed.
///
/// ```
/// use sandlot::backend::{FileInfo, FileKind};
/// let info = FileInfo::new(FileKind::File, 11).with_mode(0o644);
/// assert!(!info.is_dir());
/// assert_eq!(info.permissions(), "-rw-r--r--");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct FileInfo {
    /// What it is.
    pub kind: FileKind,
    /// Its size in bytes (a directory's is the file system's figure).
    pub size: u64,
    /// Its permission bits (`0o7777` at most); 0 where the backend has none.
    pub mode: u32,
    /// When it last changed, where the backend knows.
    pub modified: Option<SystemTime>,
}

impl FileInfo {
    /// A file of `kind` and `size`, with no permissions or time known yet.
    pub fn new(kind: FileKind, size: u64) -> FileInfo {
        FileInfo {
            kind,
            size,
            mode: 0,
            modified: None,
        }
    }

    /// The same with permission bits `mode` (type bits are dropped).
    pub fn with_mode(mut self, mode: u32) -> FileInfo {
        self.mode = mode & 0o7777;
        self
    }

    /// The same with modification time `modified`.
    pub fn with_modified(mut self, modified: Option<SystemTime>) -> FileInfo {
        self.modified = modified;
        self
    }

    /// From a Unix `st_mode` (type and permission bits), size and time.
    pub fn from_unix(st_mode: u32, size: u64, modified: Option<SystemTime>) -> FileInfo {
        let kind = match st_mode & 0o170000 {
            0o100000 => FileKind::File,
            0o040000 => FileKind::Directory,
            0o120000 => FileKind::Link,
            _ => FileKind::Other,
        };
        FileInfo::new(kind, size)
            .with_mode(st_mode)
            .with_modified(modified)
    }

    /// Whether it is a directory (a link never is).
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Directory
    }

    /// Its type and permissions as `ls -l` shows them: `drwxr-xr-x`.
    pub fn permissions(&self) -> String {
        let kind = match self.kind {
            FileKind::Directory => 'd',
            FileKind::Link => 'l',
            FileKind::File => '-',
            FileKind::Other => '?',
        };
        let mut text = String::from(kind);
        for shift in [6, 3, 0] {
            let bits = (self.mode >> shift) & 0o7;
            text.push(if bits & 4 != 0 { 'r' } else { '-' });
            text.push(if bits & 2 != 0 { 'w' } else { '-' });
            text.push(if bits & 1 != 0 { 'x' } else { '-' });
        }
        text
    }
}

/// A directory's entries, as [`Session::list_files`](crate::session::Session::list_files) gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listing {
    /// The entries, sorted by name.
    pub entries: Vec<ListEntry>,
    /// Entries left out because their names cannot be shown safely (not UTF-8, a
    /// control character), or, once a secret was masked in them, stood for an entry
    /// already listed.
    pub refused: usize,
}

impl Listing {
    /// The names, a directory's with a `/` after it: `["data/", "notes.txt"]`.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| {
                if e.is_dir {
                    format!("{}/", e.name.as_str())
                } else {
                    e.name.as_str().to_string()
                }
            })
            .collect()
    }
}

/// One entry of a [`Listing`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct ListEntry {
    /// Its name: one component.
    pub name: SandboxPath,
    /// Whether it is a directory (a link never is).
    pub is_dir: bool,
    /// What the file system says of it: kind, size, permissions, time.
    pub info: FileInfo,
}

/// One entry of a directory, as [`SandboxFiles::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    /// Its name, any bytes the file system allows: it was chosen by the code in the
    /// sandbox.
    pub name: std::ffi::OsString,
    /// What it is.
    pub info: FileInfo,
}

impl DirEntry {
    /// An entry named `name`.
    pub fn new(name: impl Into<std::ffi::OsString>, info: FileInfo) -> DirEntry {
        DirEntry {
            name: name.into(),
            info,
        }
    }

    /// Whether it is a directory (a link never is).
    pub fn is_dir(&self) -> bool {
        self.info.is_dir()
    }
}

/// Files held in memory: a [`SandboxFiles`] for backends whose sandboxes keep no files
/// of their own, and for tests.
///
/// ```
/// use sandlot::backend::{MemoryFiles, SandboxFiles};
/// let mut files = MemoryFiles::default();
/// files.write("output/a.txt", b"hi")?;
/// let listed = files.list("")?;
/// assert_eq!((listed[0].name.to_str(), listed[0].is_dir()), (Some("output"), true));
/// assert_eq!(files.read("output/a.txt", 10)?, b"hi");
/// # Ok::<(), sandlot::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles {
    files: BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
    /// Directories made on their own ([`SandboxFiles::make_dir`]); a file's parents
    /// are directories without being listed here.
    dirs: BTreeSet<PathBuf>,
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

    fn is_dir(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty()
            || self.dirs.iter().any(|d| d.starts_with(dir))
            || self.children(dir).next().is_some()
    }
}

fn dir_info() -> FileInfo {
    FileInfo::new(FileKind::Directory, 0).with_mode(0o755)
}

fn file_info(data: &[u8], modified: SystemTime) -> FileInfo {
    FileInfo::new(FileKind::File, data.len() as u64)
        .with_mode(0o644)
        .with_modified(Some(modified))
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
        self.dirs.retain(|d| !d.starts_with(&dir) || d == &dir);
        Ok(())
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let dir = under(path);
        if !self.is_dir(&dir) {
            return Err(missing(path));
        }
        let files = self
            .children(&dir)
            .map(|(file, (data, modified))| (file.as_path(), Some(file_info(data, *modified))));
        let dirs = self.dirs.iter().map(|d| (d.as_path(), None));
        let mut entries: Vec<DirEntry> = files
            .chain(dirs)
            .filter_map(|(file, info)| {
                let rest = file.strip_prefix(&dir).ok()?;
                let mut parts = rest.components();
                let first = parts.next()?.as_os_str().to_os_string();
                let info = match (parts.next(), info) {
                    (None, Some(info)) => info,
                    _ => dir_info(),
                };
                Some(DirEntry::new(first, info))
            })
            .collect();
        entries.sort();
        entries.dedup_by(|a, b| a.name == b.name);
        Ok(entries)
    }

    fn stat(&mut self, path: &str) -> Result<FileInfo> {
        let at = under(path);
        match self.files.get(&at) {
            Some((data, modified)) => Ok(file_info(data, *modified)),
            None if self.is_dir(&at) => Ok(dir_info()),
            None => Err(missing(path)),
        }
    }

    fn make_dir(&mut self, path: &str) -> Result<bool> {
        let at = under(path);
        if self.is_dir(&at) {
            return Ok(false);
        }
        if let Some(file) = at.ancestors().find(|a| self.files.contains_key(*a)) {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: format!("`{}` is a file", file.display()),
            });
        }
        self.dirs.insert(at);
        Ok(true)
    }

    fn remove(&mut self, path: &str) -> Result<()> {
        let at = under(path);
        if self.files.remove(&at).is_some() {
            return Ok(());
        }
        if at.as_os_str().is_empty() || !self.is_dir(&at) {
            return Err(missing(path));
        }
        self.files.retain(|file, _| !file.starts_with(&at));
        self.dirs.retain(|d| !d.starts_with(&at));
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let (from_at, to_at) = (under(from), under(to));
        let refuse = |reason: &str| {
            Err(Error::InvalidPath {
                path: to.into(),
                reason: reason.into(),
            })
        };
        if to_at.starts_with(&from_at) && to_at != from_at {
            return refuse("a directory cannot move into itself");
        }
        if self.is_dir(&to_at) && !to_at.as_os_str().is_empty() {
            return refuse("a directory is there");
        }
        if to_at
            .ancestors()
            .skip(1)
            .any(|a| self.files.contains_key(a))
        {
            return refuse("a file is on the way");
        }
        if let Some(file) = self.files.remove(&from_at) {
            self.files.insert(to_at, file);
            return Ok(());
        }
        if from_at.as_os_str().is_empty() || !self.is_dir(&from_at) {
            return Err(missing(from));
        }
        let moved = |p: &PathBuf| to_at.join(p.strip_prefix(&from_at).unwrap_or(p));
        let files: Vec<_> = self
            .files
            .iter()
            .filter(|(p, _)| p.starts_with(&from_at))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        for (path, file) in files {
            self.files.remove(&path);
            self.files.insert(moved(&path), file);
        }
        let dirs: Vec<_> = self
            .dirs
            .iter()
            .filter(|d| d.starts_with(&from_at))
            .cloned()
            .collect();
        for dir in dirs {
            self.dirs.remove(&dir);
            self.dirs.insert(moved(&dir));
        }
        self.dirs.insert(to_at);
        Ok(())
    }

    fn scan(&mut self, path: &str) -> Result<FileScan> {
        let dir = under(path);
        Ok(FileScan::from_stats(self.children(&dir).filter_map(
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
        let names = |files: &mut MemoryFiles, dir: &str| -> Vec<(String, bool)> {
            let listed = files.list(dir).unwrap();
            listed
                .iter()
                .map(|e| (e.name.to_string_lossy().into_owned(), e.is_dir()))
                .collect()
        };
        assert_eq!(
            names(&mut files, ""),
            [("a".into(), true), ("top.txt".into(), false)]
        );
        assert_eq!(names(&mut files, "a"), [("b".into(), true)]);
        let archive = files.pack("a", 1 << 20).unwrap();
        files.unpack("copy", &archive).unwrap();
        assert_eq!(files.read("copy/b/c.txt", 10).unwrap(), b"hi");
        assert!(files.read("copy/b/c.txt", 1).is_err());
        let scanned = files.scan("copy").unwrap();
        assert_eq!(scanned.len(), 1);
    }

    #[test]
    fn memory_files_make_move_and_remove() {
        let mut files = MemoryFiles::default();
        assert!(files.make_dir("empty/deep").unwrap());
        assert!(!files.make_dir("empty").unwrap());
        assert!(files.stat("empty/deep").unwrap().is_dir());
        files.write("a/b.txt", b"hello").unwrap();
        assert!(files.make_dir("a/b.txt/c").is_err());
        assert_eq!(files.stat("a/b.txt").unwrap().size, 5);
        files.rename("a", "z/a").unwrap();
        assert_eq!(files.read("z/a/b.txt", 10).unwrap(), b"hello");
        assert!(matches!(files.stat("a"), Err(Error::NoSuchFile { .. })));
        assert!(files.rename("z", "z/a/inside").is_err());
        assert!(files.rename("z/a/b.txt", "z/a/b.txt/c").is_err());
        assert!(files.rename("empty", "z").is_err());
        files.remove("z").unwrap();
        assert!(files.list("z").is_err());
        assert!(matches!(files.remove("z"), Err(Error::NoSuchFile { .. })));
    }
}
