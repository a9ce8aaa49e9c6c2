//! A wasm sandbox's workspace: a fresh host directory (a tmpfs of the policy's size
//! where one can be made), preopened in the guest as `/workspace`, and the host's
//! access to it through a capability handle, so no path and no link the guest made
//! can lead the host outside it.

use cap_std::fs::Dir;
use sandlot_core::artifact::{FileScan, FileStat};
use sandlot_core::backend::{DirEntry, FileInfo, FileKind, SandboxFiles};
use sandlot_core::error::{Error, Result};
use sandlot_core::layout::Layout;
use std::path::{Path, PathBuf};

/// Folders of the workspace that belong to the host, not to the user's files.
const HIDDEN: [&str; 2] = [".sandlot", ".tmp"];

/// Workspaces are `$TMPDIR/sandlot-wasm-<owner stamp>-<random>`: a process that is
/// killed cannot remove its own, and the stamp tells [`sweep`] whose they were.
const PREFIX: &str = "sandlot-wasm-";

/// A workspace and its handle. Dropping it removes the directory.
pub(crate) struct Workspace {
    /// Declared before `dir`: the handle closes before the directory is removed.
    root: Dir,
    /// The tmpfs the workspace is, if it has a quota: the only way to it.
    tmpfs: Option<std::os::fd::OwnedFd>,
    /// Where the guest's preopen and the host's own writes reach it.
    path: PathBuf,
    /// The quota, in bytes (0: none).
    limit: u64,
    /// The directory on the host's disk that is the workspace, where it has no
    /// tmpfs. Removed last, on drop.
    _dir: Option<tempfile::TempDir>,
}

impl Workspace {
    /// Whether it is a directory on the host's disk, there until it is dropped, rather
    /// than a tmpfs that nothing but its handle reaches.
    pub(crate) fn on_disk(&self) -> bool {
        self._dir.is_some()
    }
}

fn io_error(path: &str, source: std::io::Error) -> Error {
    if source.kind() == std::io::ErrorKind::NotFound {
        return Error::NoSuchFile { path: path.into() };
    }
    // What the request asks of the path cannot be done to what is there: the
    // caller's to change, as the container backends say it.
    let refused = [
        libc::EISDIR,
        libc::ENOTDIR,
        libc::ENOTEMPTY,
        libc::EEXIST,
        libc::EINVAL,
    ];
    if source.raw_os_error().is_some_and(|e| refused.contains(&e)) {
        return Error::InvalidPath {
            path: path.into(),
            reason: source.to_string(),
        };
    }
    Error::Io {
        context: format!("sandbox file `{path}`"),
        source,
    }
}

impl Workspace {
    /// A write's error, said as what it is when the quota refused it.
    fn write_error(&self, path: &str, source: std::io::Error) -> Error {
        if source.raw_os_error() == Some(libc::ENOSPC) && self.tmpfs.is_some() {
            return Error::InvalidPath {
                path: path.into(),
                reason: format!(
                    "the workspace is full: it holds at most {} bytes (the policy's \
                     workdir_size)",
                    self.limit
                ),
            };
        }
        io_error(path, source)
    }
}

/// Removes the workspaces of processes that are gone (killed before they could remove
/// them) from the temp dir; returns their paths. A workspace of a running process is
/// never touched.
pub(crate) fn sweep() -> Vec<PathBuf> {
    sandlot_core::backend::owner::sweep_temp_dirs(PREFIX)
}

impl Workspace {
    /// A fresh workspace with its output folder, and a temporary folder if `tmp`,
    /// that holds at most `limit` bytes: a tmpfs of that size where the machine allows
    /// one (see [`quota`](super::quota)), else a plain directory.
    pub(crate) fn new(tmp: bool, limit: u64) -> Result<Workspace> {
        let io = |context: &str| {
            let context = context.to_string();
            move |source| Error::Io { context, source }
        };
        use std::os::fd::AsRawFd;
        let tmpfs = match super::quota::available() {
            Ok(()) if limit > 0 => Some(super::quota::tmpfs(limit).map_err(io(
                "cannot make the sandbox's workspace a tmpfs of its size",
            ))?),
            _ => None,
        };
        // Without a tmpfs, a directory of the shared temp dir, which is readable by
        // every local user: only this one may enter the workspace, and so reach what
        // the code wrote in it.
        let (path, dir) = match &tmpfs {
            Some(fd) => (
                PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
                None,
            ),
            None => {
                use std::os::unix::fs::PermissionsExt;
                let dir = tempfile::Builder::new()
                    .prefix(&format!(
                        "{PREFIX}{}-",
                        sandlot_core::backend::owner::owner_stamp()
                    ))
                    .permissions(std::fs::Permissions::from_mode(0o700))
                    .tempdir()
                    .map_err(io("cannot create the sandbox's workspace"))?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        let root = Dir::open_ambient_dir(&path, cap_std::ambient_authority())
            .map_err(io("cannot open the sandbox's workspace"))?;
        let folders: &[&str] = if tmp {
            &[Layout::OUTPUT, ".tmp"]
        } else {
            &[Layout::OUTPUT]
        };
        for folder in folders {
            root.create_dir(folder)
                .map_err(io("cannot prepare the sandbox's workspace"))?;
        }
        Ok(Workspace {
            root,
            tmpfs,
            path,
            limit,
            _dir: dir,
        })
    }

    /// Where the guest's preopen reaches the workspace (`/proc/self/fd/N` of its
    /// tmpfs, or the directory).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `path` as a relative path, refused if any part of it is a link: the guest can
    /// make links, and the host follows none.
    fn resolve(&self, path: &str) -> Result<PathBuf> {
        let rel = PathBuf::from(path);
        let mut walked = PathBuf::new();
        for component in rel.components() {
            walked.push(component);
            if self
                .root
                .symlink_metadata(&walked)
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                return Err(Error::InvalidPath {
                    path: path.into(),
                    reason: format!("`{}` is a symbolic link", walked.display()),
                });
            }
        }
        Ok(rel)
    }

    /// `path` as a relative path whose last component may be a link (described,
    /// removed or moved as itself), refused if any directory on the way is one, or if
    /// it is in a folder of the host's ([`HIDDEN`], which listings leave out).
    fn resolve_leaf(&self, path: &str) -> Result<PathBuf> {
        let rel = not_hidden(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.resolve(&parent.to_string_lossy())?;
        }
        Ok(rel)
    }

    /// Makes the directory `path` and its parents, refusing links on the way.
    pub(crate) fn create_dir_all(&self, path: &str) -> Result<()> {
        let rel = self.resolve(path)?;
        if !rel.as_os_str().is_empty() {
            self.root
                .create_dir_all(&rel)
                .map_err(|e| io_error(path, e))?;
            self.resolve(path)?;
        }
        Ok(())
    }

    /// The directory at `path` (`""` for the workspace itself).
    fn dir(&self, path: &str) -> Result<Dir> {
        let rel = self.resolve(path)?;
        if rel.as_os_str().is_empty() {
            return self.root.try_clone().map_err(|e| io_error(".", e));
        }
        self.root.open_dir(&rel).map_err(|e| io_error(path, e))
    }
}

/// `path` as a relative path, refused if it is in a folder of the host's
/// ([`HIDDEN`], which listings leave out).
fn not_hidden(path: &str) -> Result<PathBuf> {
    let rel = PathBuf::from(path);
    let top = rel.components().next().map(|c| c.as_os_str());
    if top.is_some_and(|top| HIDDEN.iter().any(|hidden| top == *hidden)) {
        return Err(Error::InvalidPath {
            path: path.into(),
            reason: "it belongs to the host, not to the sandbox's files".into(),
        });
    }
    Ok(rel)
}

/// What cap-std's metadata (taken without following a link) says of a file.
fn info_of(meta: &cap_std::fs::Metadata) -> FileInfo {
    use cap_std::fs::MetadataExt;
    let modified = meta.modified().ok().map(|t| t.into_std());
    FileInfo::from_unix(meta.mode(), meta.len(), modified)
}

impl SandboxFiles for Workspace {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        let rel = self.resolve(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.root
                .create_dir_all(parent)
                .map_err(|e| io_error(path, e))?;
            // Made just now or before: either way, no link on the way.
            self.resolve(&parent.to_string_lossy())?;
        }
        self.root
            .write(&rel, data)
            .map_err(|e| self.write_error(path, e))
    }

    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        use std::io::Read;
        let rel = self.resolve(path)?;
        let file = self.root.open(&rel).map_err(|e| io_error(path, e))?;
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        if !meta.is_file() {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: "not a regular file".into(),
            });
        }
        let mut data = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut data)
            .map_err(|e| io_error(path, e))?;
        if data.len() as u64 > max {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: format!("it is larger than {max} bytes"),
            });
        }
        Ok(data)
    }

    fn list(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let dir = self.dir(path)?;
        let top = path.is_empty();
        let mut entries: Vec<DirEntry> = dir
            .entries()
            .map_err(|e| io_error(path, e))?
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                if top && HIDDEN.iter().any(|hidden| name == *hidden) {
                    return None;
                }
                // Not following a link: a link is described as one.
                let info = entry
                    .metadata()
                    .ok()
                    .map_or(FileInfo::new(FileKind::Other, 0), |m| info_of(&m));
                Some(DirEntry::new(name, info))
            })
            .collect();
        entries.sort();
        Ok(entries)
    }

    fn scan(&mut self, path: &str) -> Result<FileScan> {
        let Ok(base) = self.dir(path) else {
            return Ok(FileScan::default());
        };
        let mut files = Vec::new();
        let mut stack = vec![(base, PathBuf::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let Ok(entries) = dir.entries() else { continue };
            for entry in entries.flatten() {
                let name = prefix.join(entry.file_name());
                // `entry.metadata` does not follow links: a link is neither a file
                // nor a directory here, and is never read.
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() {
                    if let Ok(sub) = entry.open_dir() {
                        stack.push((sub, name));
                    }
                } else if meta.is_file() {
                    files.push(FileStat {
                        path: name,
                        size: meta.len(),
                        modified: meta.modified().ok().map(|t| t.into_std()),
                    });
                }
            }
        }
        Ok(FileScan::from_stats(files))
    }

    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        let rel = self.resolve(path)?;
        sandlot_core::transfer::pack_dir(&self.root, &rel, max)
    }

    fn clear(&mut self, path: &str) -> Result<()> {
        let Ok(dir) = self.dir(path) else {
            // Missing, or code put a link or a file in the directory's place: that goes
            // instead (the handle removes a link itself, never what it points to), and
            // the directory is made again, empty.
            let place = Path::new(path);
            return match self.root.symlink_metadata(place) {
                Ok(_) => {
                    self.root
                        .remove_file(place)
                        .map_err(|e| io_error(path, e))?;
                    self.root
                        .create_dir_all(place)
                        .map_err(|e| io_error(path, e))
                }
                Err(_) => Ok(()),
            };
        };
        let entries = dir.entries().map_err(|e| io_error(path, e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            // `file_type` does not follow links: a link is removed, never its target.
            let removed = match entry.file_type() {
                Ok(kind) if kind.is_dir() => dir.remove_dir_all(&name),
                _ => dir.remove_file(&name),
            };
            match removed {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_error(path, e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn stat(&mut self, path: &str) -> Result<FileInfo> {
        let rel = self.resolve_leaf(path)?;
        let meta = if rel.as_os_str().is_empty() {
            self.root.dir_metadata()
        } else {
            self.root.symlink_metadata(&rel)
        };
        meta.map(|m| info_of(&m)).map_err(|e| io_error(path, e))
    }

    fn make_dir(&mut self, path: &str) -> Result<bool> {
        not_hidden(path)?;
        let rel = self.resolve(path)?;
        match self.root.symlink_metadata(&rel) {
            Ok(meta) if meta.is_dir() => Ok(false),
            Ok(_) => Err(Error::InvalidPath {
                path: path.into(),
                reason: "something other than a directory is there".into(),
            }),
            Err(_) => {
                self.create_dir_all(path)?;
                Ok(true)
            }
        }
    }

    fn remove(&mut self, path: &str) -> Result<()> {
        let rel = self.resolve_leaf(path)?;
        if rel.as_os_str().is_empty() {
            return Err(Error::InvalidPath {
                path: path.into(),
                reason: "the workspace itself cannot be removed".into(),
            });
        }
        // Not following a link: a link goes, never its target.
        let meta = self
            .root
            .symlink_metadata(&rel)
            .map_err(|e| io_error(path, e))?;
        let removed = if meta.is_dir() {
            self.root.remove_dir_all(&rel)
        } else {
            self.root.remove_file(&rel)
        };
        removed.map_err(|e| io_error(path, e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let (from_rel, to_rel) = (self.resolve_leaf(from)?, self.resolve_leaf(to)?);
        if from_rel.as_os_str().is_empty() || to_rel.as_os_str().is_empty() {
            return Err(Error::InvalidPath {
                path: from.into(),
                reason: "the workspace itself cannot be moved".into(),
            });
        }
        self.root
            .symlink_metadata(&from_rel)
            .map_err(|e| io_error(from, e))?;
        if let Some(parent) = to_rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(&parent.to_string_lossy())?;
        }
        self.root
            .rename(&from_rel, &self.root, &to_rel)
            .map_err(|e| io_error(from, e))
    }

    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        let rel = self.resolve(path)?;
        if !rel.as_os_str().is_empty() {
            self.root
                .create_dir_all(&rel)
                .map_err(|e| io_error(path, e))?;
        }
        let dest = self.dir(path)?;
        sandlot_core::transfer::unpack_into(archive, &dest, sandlot_core::transfer::as_is)
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_own_writes_count_against_the_quota() {
        let mut workspace = Workspace::new(true, 256 << 10).unwrap();
        workspace.write("a.bin", &vec![1; 100 << 10]).unwrap();
        let error = workspace.write("b.bin", &vec![1; 200 << 10]).unwrap_err();
        assert!(error.to_string().contains("workdir_size"), "{error}");
        // The host's own writes and the code's share the one limit: it is the file
        // system's.
        assert!(std::fs::write(workspace.path().join("c.bin"), vec![1; 200 << 10]).is_err());
        std::fs::remove_file(workspace.path().join("a.bin")).unwrap();
        workspace.write("b.bin", &vec![1; 200 << 10]).unwrap();
    }

    #[test]
    fn only_its_owner_can_enter_a_workspace() {
        use std::os::unix::fs::PermissionsExt;
        let workspace = Workspace::new(true, 0).unwrap();
        let mode = std::fs::metadata(workspace.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    #[test]
    fn links_the_guest_makes_are_never_followed() {
        let mut workspace = Workspace::new(true, 0).unwrap();
        std::os::unix::fs::symlink("/etc", workspace.path().join("etc")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", workspace.path().join("output/passwd")).unwrap();
        assert!(workspace.read("etc/passwd", 1 << 20).is_err());
        assert!(workspace.read("output/passwd", 1 << 20).is_err());
        assert!(workspace.write("etc/evil", b"x").is_err());
        assert!(workspace.pack("etc", 1 << 20).is_err());
        let scanned = workspace.scan("output").unwrap();
        assert!(scanned.is_empty(), "a link is not an artifact");

        workspace.write("data/in.csv", b"a,b\n").unwrap();
        let listed: Vec<(String, FileKind)> = workspace
            .list("")
            .unwrap()
            .into_iter()
            .map(|e| (e.name.to_string_lossy().into_owned(), e.info.kind))
            .collect();
        assert_eq!(
            listed,
            [
                ("data".into(), FileKind::Directory),
                ("etc".into(), FileKind::Link),
                ("output".into(), FileKind::Directory)
            ]
        );
        // Described, removed and moved as links: what they point to is untouched.
        assert_eq!(workspace.stat("etc").unwrap().kind, FileKind::Link);
        assert!(workspace.stat("etc/passwd").is_err());
        assert!(workspace.make_dir("etc/new").is_err());
        assert!(workspace.rename("data", "etc/data").is_err());
        workspace.rename("etc", "moved/etc").unwrap();
        workspace.remove("moved").unwrap();
        assert!(std::path::Path::new("/etc/passwd").exists());
        assert!(workspace.make_dir("made/deep").unwrap());
        assert!(!workspace.make_dir("made").unwrap());
        assert!(workspace.stat("").unwrap().is_dir());
        assert_eq!(workspace.stat("data/in.csv").unwrap().size, 4);
        assert!(workspace.remove("").is_err());
        // The host's own folders are not the sandbox's files.
        assert!(workspace.stat(".sandlot").is_err());
        assert!(workspace.remove(".tmp").is_err());
        assert!(workspace.rename("data", ".tmp/data").is_err());
        // A directory in a file's place is the request's fault, not an I/O failure.
        let error = workspace.rename("data", "data/in.csv").unwrap_err();
        assert!(matches!(error, Error::InvalidPath { .. }), "{error:?}");
        let archive = workspace.pack("data", 1 << 20).unwrap();
        workspace.unpack("copy", &archive).unwrap();
        assert_eq!(workspace.read("copy/in.csv", 10).unwrap(), b"a,b\n");
        assert_eq!(workspace.scan("copy").unwrap().len(), 1);

        // Clearing removes the links themselves, never what they point to.
        workspace.write("output/sub/a.png", b"png").unwrap();
        std::os::unix::fs::symlink(
            workspace.path().join("data"),
            workspace.path().join("output/data"),
        )
        .unwrap();
        workspace.clear("output").unwrap();
        assert_eq!(workspace.list("output").unwrap(), Vec::<DirEntry>::new());
        assert_eq!(workspace.read("data/in.csv", 10).unwrap(), b"a,b\n");
        // A link in the directory's place goes, and the directory is made again.
        std::fs::remove_dir(workspace.path().join("output")).unwrap();
        std::os::unix::fs::symlink(
            workspace.path().join("data"),
            workspace.path().join("output"),
        )
        .unwrap();
        workspace.clear("output").unwrap();
        assert_eq!(workspace.list("output").unwrap(), Vec::<DirEntry>::new());
        assert_eq!(workspace.read("data/in.csv", 10).unwrap(), b"a,b\n");
        assert!(std::path::Path::new("/etc/passwd").exists());
    }
}
