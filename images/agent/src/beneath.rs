//! Paths below the workspace, opened so that nothing running in the sandbox can
//! redirect them. Code lives on between requests (a kernel, a background job), so a
//! check of a path followed by an open of the same path is a race it could win by
//! swapping a directory for a symbolic link in between. Every path is instead resolved
//! from a descriptor of the workspace: with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` where the kernel and the engine's seccomp profile allow it,
//! otherwise one `openat(O_NOFOLLOW)` per component, each relative to the directory
//! opened before. Either way a link anywhere on the path is refused, not followed.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `openat2` turned out to be missing or filtered here.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// A path the host sent that is not a plain relative path.
#[derive(Debug)]
pub enum Refused {
    /// It is absolute, climbs with `..`, or holds a NUL byte.
    Outside,
    /// The system call failed.
    Io(io::Error),
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Self {
        Refused::Io(e)
    }
}

impl Refused {
    /// The reason, for a message that begins "cannot … `path`: ".
    pub fn reason(&self) -> String {
        match self {
            Refused::Outside => "it must stay inside the workspace".into(),
            Refused::Io(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                "it is, or passes through, a symbolic link".into()
            }
            Refused::Io(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                "it must stay inside the workspace".into()
            }
            Refused::Io(e) => e.to_string(),
        }
    }

    /// Whether the path (or a directory on it) does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, Refused::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

/// What `stat` says of a file, without following links.
pub type Stat = libc::stat;

/// The workspace, held open: every path is resolved from this descriptor.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
}

fn last_error<T>() -> io::Result<T> {
    Err(io::Error::last_os_error())
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return last_error();
    }
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn openat(dir: RawFd, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    // SAFETY: openat(2) with a valid NUL-terminated name.
    owned(unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            flags | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            libc::c_uint::from(mode),
        )
    })
}

/// The names of a relative path; `..`, absolute paths and NUL bytes are refused.
fn names(path: &str) -> Result<Vec<CString>, Refused> {
    let mut names = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => {
                names.push(CString::new(name.as_bytes()).map_err(|_| Refused::Outside)?)
            }
            Component::CurDir => {}
            _ => return Err(Refused::Outside),
        }
    }
    Ok(names)
}

/// A directory on the way that is a link fails with ENOTDIR under `O_DIRECTORY`: say
/// ELOOP, as openat2 does, so the message names the link.
fn link_or(dir: RawFd, name: &CStr, error: io::Error) -> io::Error {
    if error.raw_os_error() != Some(libc::ENOTDIR) {
        return error;
    }
    let mut stat = MaybeUninit::<Stat>::uninit();
    // SAFETY: fstatat(2) writes a whole stat on success.
    let ok = unsafe {
        libc::fstatat(
            dir,
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == 0;
    // SAFETY: initialised by the successful fstatat above.
    if ok && unsafe { stat.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFLNK {
        io::Error::from_raw_os_error(libc::ELOOP)
    } else {
        error
    }
}

/// `openat2` beneath `dir` refusing every link; `None` when this kernel (or the
/// engine's seccomp profile) does not offer it.
fn openat2(
    dir: RawFd,
    names: &[CString],
    flags: libc::c_int,
    mode: libc::mode_t,
) -> Option<io::Result<OwnedFd>> {
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
    let mut joined = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            joined.push(b'/');
        }
        joined.extend_from_slice(name.as_bytes());
    }
    if joined.is_empty() {
        joined.push(b'.');
    }
    let path = CString::new(joined).expect("names hold no NUL byte");
    // SAFETY: an all-zero open_how is valid (no flags, mode or resolve bits).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    if flags & libc::O_CREAT != 0 {
        how.mode = u64::from(mode);
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2(2) with a valid path and an open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        return Some(owned(fd as libc::c_int));
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        // Older kernels say ENOSYS; seccomp profiles that predate openat2 say EPERM.
        Some(libc::ENOSYS) | Some(libc::EPERM) => {
            NO_OPENAT2.store(true, Ordering::Relaxed);
            None
        }
        _ => Some(Err(error)),
    }
}

impl Root {
    /// Opens the workspace itself.
    pub fn open(path: &Path) -> io::Result<Root> {
        let path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("the workspace path holds a NUL byte"))?;
        // SAFETY: open(2) with a valid NUL-terminated path.
        let dir = owned(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })?;
        Ok(Root { dir })
    }

    /// Opens `path` below the root with `flags` (and `mode` when creating), refusing
    /// `..`, absolute paths and a symbolic link anywhere on the way.
    pub fn open_at(
        &self,
        path: &str,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> Result<OwnedFd, Refused> {
        let names = names(path)?;
        if let Some(opened) = openat2(self.dir.as_raw_fd(), &names, flags, mode) {
            return Ok(opened?);
        }
        self.walk(&names, flags, mode)
    }

    /// The same as [`Root::open_at`] one component at a time: each directory is
    /// opened without following links, relative to the one before.
    fn walk(
        &self,
        names: &[CString],
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> Result<OwnedFd, Refused> {
        let Some((last, parents)) = names.split_last() else {
            return Ok(openat(self.dir.as_raw_fd(), c".", flags, mode)?);
        };
        let mut dir: Option<OwnedFd> = None;
        for name in parents {
            let at = dir.as_ref().unwrap_or(&self.dir).as_raw_fd();
            dir = Some(
                openat(at, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
                    .map_err(|e| link_or(at, name, e))?,
            );
        }
        let at = dir.as_ref().unwrap_or(&self.dir).as_raw_fd();
        Ok(openat(at, last, flags, mode)?)
    }

    /// Opens a directory below the root.
    pub fn dir(&self, path: &str) -> Result<OwnedFd, Refused> {
        self.open_at(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)
    }

    /// The directory that holds `path` (made with its parents if `make`), and the
    /// name of `path` in it; `None` for the root itself.
    pub fn parent(&self, path: &str, make: bool) -> Result<Option<(OwnedFd, CString)>, Refused> {
        let mut names = names(path)?;
        let Some(last) = names.pop() else {
            return Ok(None);
        };
        let parent = names
            .iter()
            .map(|n| n.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let dir = if make {
            self.make_dirs(&parent)?
        } else {
            self.dir(&parent)?
        };
        Ok(Some((dir, last)))
    }

    /// Opens a directory below the root, making it and its parents if missing.
    pub fn make_dirs(&self, path: &str) -> Result<OwnedFd, Refused> {
        let names = names(path)?;
        let mut dir: Option<OwnedFd> = None;
        for name in &names {
            let at = dir.as_ref().unwrap_or(&self.dir).as_raw_fd();
            // SAFETY: mkdirat(2) with a valid NUL-terminated name.
            if unsafe { libc::mkdirat(at, name.as_ptr(), 0o755) } != 0 {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::AlreadyExists {
                    return Err(error.into());
                }
            }
            dir = Some(
                openat(at, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
                    .map_err(|e| link_or(at, name, e))?,
            );
        }
        match dir {
            Some(dir) => Ok(dir),
            None => Ok(openat(
                self.dir.as_raw_fd(),
                c".",
                libc::O_RDONLY | libc::O_DIRECTORY,
                0,
            )?),
        }
    }

    /// Creates or truncates a regular file below the root, making its parents, and
    /// returns it open for writing. A FIFO or anything else that is not a regular
    /// file is refused without blocking.
    pub fn create(&self, path: &str, mode: libc::mode_t) -> Result<File, Refused> {
        let mut names = names(path)?;
        let Some(last) = names.pop() else {
            return Err(Refused::Io(io::Error::from_raw_os_error(libc::EISDIR)));
        };
        let parent = names
            .iter()
            .map(|n| n.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let dir = self.make_dirs(&parent)?;
        let file = File::from(openat(
            dir.as_raw_fd(),
            &last,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NONBLOCK,
            mode,
        )?);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(Refused::Io(io::Error::other("not a regular file")));
        }
        Ok(file)
    }

    /// Opens a regular file below the root for reading; a FIFO never blocks it.
    pub fn read(&self, path: &str) -> Result<File, Refused> {
        let file = File::from(self.open_at(path, libc::O_RDONLY | libc::O_NONBLOCK, 0)?);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(Refused::Io(io::Error::other("not a regular file")));
        }
        Ok(file)
    }
}

/// The entries of an open directory (without `.` and `..`), each with what `stat`
/// says of it without following links. Entries that vanish meanwhile are left out.
pub fn entries(dir: &OwnedFd) -> io::Result<Vec<(CString, Stat)>> {
    // fdopendir takes the descriptor over: give it a copy.
    // SAFETY: fcntl(2) duplicating a valid descriptor.
    let copy = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        return last_error();
    }
    // SAFETY: `copy` is a valid directory descriptor that the stream now owns.
    let stream = unsafe { libc::fdopendir(copy) };
    if stream.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: `copy` is still ours when fdopendir failed.
        unsafe { libc::close(copy) };
        return Err(error);
    }
    // The copy shares its offset with `dir`, which may have been read before.
    // SAFETY: a valid stream.
    unsafe { libc::rewinddir(stream) };
    let mut found = Vec::new();
    loop {
        // SAFETY: a valid stream; the entry lives until the next readdir.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: d_name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        if let Ok(stat) = stat_in(dir, name) {
            found.push((name.to_owned(), stat));
        }
    }
    // SAFETY: closes the stream and the copy it owns.
    unsafe { libc::closedir(stream) };
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// What `fstatat` says of an entry of an open directory, not following a link.
pub fn stat_in(dir: &OwnedFd, name: &CStr) -> io::Result<Stat> {
    let mut stat = MaybeUninit::<Stat>::uninit();
    // SAFETY: fstatat(2) writes a whole stat on success.
    if unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } != 0
    {
        return last_error();
    }
    // SAFETY: initialised by the successful fstatat above.
    Ok(unsafe { stat.assume_init() })
}

/// Moves entry `from` of directory `from_dir` to entry `to` of `to_dir`: links are
/// moved themselves, never followed.
pub fn rename_in(from_dir: &OwnedFd, from: &CStr, to_dir: &OwnedFd, to: &CStr) -> io::Result<()> {
    // SAFETY: renameat(2) on valid directory descriptors and NUL-terminated names.
    if unsafe {
        libc::renameat(
            from_dir.as_raw_fd(),
            from.as_ptr(),
            to_dir.as_raw_fd(),
            to.as_ptr(),
        )
    } != 0
    {
        return last_error();
    }
    Ok(())
}

/// Opens a subdirectory of an open directory without following a link.
pub fn subdir(dir: &OwnedFd, name: &CStr) -> io::Result<OwnedFd> {
    openat(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// Opens a regular file in an open directory for reading without following a link.
pub fn file_in(dir: &OwnedFd, name: &CStr) -> io::Result<File> {
    openat(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_NONBLOCK, 0).map(File::from)
}

/// Removes an entry of an open directory without following a link: a file or a link
/// itself, or an empty directory (`dir_entry`).
pub fn remove_in(dir: &OwnedFd, name: &CStr, dir_entry: bool) -> io::Result<()> {
    let flags = if dir_entry { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: unlinkat(2) on a valid directory descriptor and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
        return last_error();
    }
    Ok(())
}

/// What `fstat` says of an open file or directory.
pub fn stat(file: &impl AsRawFd) -> io::Result<Stat> {
    let mut stat = MaybeUninit::<Stat>::uninit();
    // SAFETY: fstat(2) writes a whole stat on success.
    if unsafe { libc::fstat(file.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
        return last_error();
    }
    // SAFETY: initialised by the successful fstat above.
    Ok(unsafe { stat.assume_init() })
}

/// Whether a `stat` describes a directory.
pub fn is_dir(stat: &Stat) -> bool {
    stat.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Whether a `stat` describes a regular file.
pub fn is_file(stat: &Stat) -> bool {
    stat.st_mode & libc::S_IFMT == libc::S_IFREG
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "sandlot-agent-beneath-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Both ways of resolving refuse the same paths: the kernel's, and the walk used
    /// where openat2 is filtered.
    #[test]
    fn links_anywhere_on_the_path_are_refused_both_ways() {
        let dir = scratch("links");
        fs::create_dir_all(dir.join("a/b")).unwrap();
        fs::write(dir.join("a/b/c.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("etc")).unwrap();
        std::os::unix::fs::symlink("b", dir.join("a/link")).unwrap();
        std::os::unix::fs::symlink("c.txt", dir.join("a/b/alias")).unwrap();
        let root = Root::open(&dir).unwrap();
        for walk in [false, true] {
            let open = |path: &str| match walk {
                false => root.open_at(path, libc::O_RDONLY, 0),
                true => root.walk(&names(path)?, libc::O_RDONLY, 0),
            };
            assert!(open("a/b/c.txt").is_ok());
            assert!(open("./a/b/c.txt").is_ok());
            for linked in ["etc/passwd", "a/link/c.txt", "a/b/alias"] {
                let refused = open(linked).unwrap_err().reason();
                assert!(refused.contains("symbolic link"), "{linked}: {refused}");
            }
            for outside in ["../x", "/etc/passwd", "a/../../x"] {
                let refused = open(outside).unwrap_err().reason();
                assert!(
                    refused.contains("inside the workspace"),
                    "{outside}: {refused}"
                );
            }
            assert!(open("missing").unwrap_err().is_missing());
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_are_created_below_new_directories_but_never_through_links() {
        let dir = scratch("create");
        let outside = scratch("create-outside");
        std::os::unix::fs::symlink(&outside, dir.join("escape")).unwrap();
        let root = Root::open(&dir).unwrap();
        use std::io::Write;
        root.create("x/y/z.txt", 0o644)
            .unwrap()
            .write_all(b"made")
            .unwrap();
        assert_eq!(fs::read(dir.join("x/y/z.txt")).unwrap(), b"made");
        assert!(root.create("escape/evil", 0o644).is_err());
        assert!(root.make_dirs("escape/deeper").is_err());
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        // A FIFO fails at once instead of waiting for a reader.
        let fifo = CString::new(dir.join("pipe").as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) with a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(root.create("pipe", 0o644).is_err());
        assert!(root.read("pipe").is_err());
        let listed = entries(&root.dir("").unwrap()).unwrap();
        let names: Vec<_> = listed.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["escape", "pipe", "x"]);
        assert!(listed
            .iter()
            .all(|(n, s)| is_dir(s) == (n.as_bytes() == b"x")));
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }
}
