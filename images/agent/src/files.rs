//! File requests: write, read, list, scan, pack and unpack below the workspace, every
//! path resolved through [`Root`] so that nothing the code in the sandbox does between
//! requests can point one outside.

use crate::beneath::{self, Refused, Root};
use sandlot_agent::Entry;
use std::ffi::{CStr, CString};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

pub fn refused<'a>(what: &'a str, path: &'a str) -> impl FnOnce(Refused) -> String + 'a {
    move |e| format!("cannot {what} `{path}`: {}", e.reason())
}

/// Why a read, a listing or a pack failed: the path names nothing, or another reason.
/// The host answers the first as "not found", which a client acts on differently.
#[derive(Debug)]
pub enum Failure {
    Missing(String),
    Other(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Other(message)
    }
}

impl Failure {
    /// What it says.
    #[cfg(test)]
    pub fn message(&self) -> &str {
        match self {
            Failure::Missing(message) | Failure::Other(message) => message,
        }
    }

    /// The reply that reports it.
    pub fn reply(self) -> sandlot_agent::Reply {
        match self {
            Failure::Missing(message) => sandlot_agent::Reply::Missing(message),
            Failure::Other(message) => sandlot_agent::Reply::Error(message),
        }
    }
}

/// [`refused`], telling a path that names nothing from other failures.
fn failed<'a>(what: &'a str, path: &'a str) -> impl FnOnce(Refused) -> Failure + 'a {
    move |e| {
        let missing = e.is_missing();
        let message = refused(what, path)(e);
        if missing {
            Failure::Missing(message)
        } else {
            Failure::Other(message)
        }
    }
}

/// Writes a file below the root; `mode`, when given (from an archive), is set even on
/// a file that existed, which otherwise keeps its own.
pub fn write_file(root: &Root, path: &str, data: &[u8], mode: Option<u32>) -> Result<(), String> {
    if path.trim_matches(['/', '.']).is_empty() {
        return Err("cannot write to the workspace itself".into());
    }
    let mut file = root
        .create(path, mode.unwrap_or(0o644))
        .map_err(refused("write", path))?;
    file.write_all(data)
        .map_err(|e| format!("cannot write `{path}`: {e}"))?;
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(mode & 0o777))
            .map_err(|e| format!("cannot write `{path}`: {e}"))?;
    }
    Ok(())
}

pub fn read_file(root: &Root, path: &str, max: u64) -> Result<Vec<u8>, Failure> {
    let file = root.read(path).map_err(failed("read", path))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if meta.len() > max {
        return Err(format!(
            "`{path}` is {} bytes, more than the {max} allowed",
            meta.len()
        )
        .into());
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if data.len() as u64 > max {
        return Err(format!("`{path}` grew past the {max} bytes allowed").into());
    }
    Ok(data)
}

fn mtime_ns(stat: &beneath::Stat) -> u64 {
    (stat.st_mtime.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(stat.st_mtime_nsec.max(0) as u64)
}

fn entry(path: Vec<u8>, stat: &beneath::Stat) -> Entry {
    Entry {
        path,
        is_dir: beneath::is_dir(stat),
        size: stat.st_size.max(0) as u64,
        mtime_ns: mtime_ns(stat),
        mode: stat.st_mode,
    }
}

/// What `path` below the root is, its last link not followed; the entry is named
/// as the path's last component (empty for the root).
pub fn stat(root: &Root, path: &str) -> Result<Entry, Failure> {
    let io = |e: io::Error| failed("stat", path)(Refused::Io(e));
    match root.parent(path, false).map_err(failed("stat", path))? {
        None => {
            let dir = root.dir("").map_err(failed("stat", path))?;
            Ok(entry(Vec::new(), &beneath::stat(&dir).map_err(io)?))
        }
        Some((dir, name)) => {
            let stat = beneath::stat_in(&dir, &name).map_err(io)?;
            Ok(entry(name.to_bytes().to_vec(), &stat))
        }
    }
}

/// Makes directory `path` below the root and its parents; one that exists is kept.
pub fn make_dir(root: &Root, path: &str) -> Result<(), String> {
    root.make_dirs(path)
        .map(drop)
        .map_err(refused("make the directory", path))
}

/// Removes `path` below the root: a file, a link (never what it points to) or a
/// directory with everything in it.
pub fn remove(root: &Root, path: &str) -> Result<(), Failure> {
    let io = |e: io::Error| failed("remove", path)(Refused::Io(e));
    let Some((dir, name)) = root.parent(path, false).map_err(failed("remove", path))? else {
        return Err(Failure::Other("cannot remove the workspace itself".into()));
    };
    let stat = beneath::stat_in(&dir, &name).map_err(io)?;
    if beneath::is_dir(&stat) {
        // Emptied through the handle of the directory just looked at, not by name
        // again: code swapping it meanwhile cannot point the removal elsewhere.
        let base = beneath::subdir(&dir, &name).map_err(io)?;
        empty(base, path)?;
    }
    beneath::remove_in(&dir, &name, beneath::is_dir(&stat)).map_err(io)
}

/// Moves `from` to `to` below the root, making `to`'s parents; a file (or an empty
/// directory) at `to` is replaced.
pub fn rename(root: &Root, from: &str, to: &str) -> Result<(), Failure> {
    let whole = |_| Failure::Other("cannot move the workspace itself".into());
    let (from_dir, from_name) = root
        .parent(from, false)
        .map_err(failed("move", from))?
        .ok_or(())
        .map_err(whole)?;
    // What is not there is said before the destination's folders are made.
    beneath::stat_in(&from_dir, &from_name).map_err(|e| failed("move", from)(Refused::Io(e)))?;
    let (to_dir, to_name) = root
        .parent(to, true)
        .map_err(failed("move to", to))?
        .ok_or(())
        .map_err(whole)?;
    beneath::rename_in(&from_dir, &from_name, &to_dir, &to_name)
        .map_err(|e| failed("move", from)(Refused::Io(e)))
}

pub fn list(root: &Root, path: &str) -> Result<Vec<Entry>, Failure> {
    let dir = root.dir(path).map_err(failed("list", path))?;
    let found = beneath::entries(&dir).map_err(|e| format!("cannot list `{path}`: {e}"))?;
    Ok(found
        .iter()
        .map(|(name, stat)| entry(name.to_bytes().to_vec(), stat))
        .collect())
}

/// A directory's entries, each with what `stat` says of it.
type Listing = Vec<(CString, beneath::Stat)>;

/// Every directory below `dir` (itself first), each with its path relative to `dir`
/// (empty for itself) as the file system's bytes, opened without following links.
fn tree(dir: OwnedFd) -> Vec<(Vec<u8>, OwnedFd, Listing)> {
    let mut found = Vec::new();
    let mut stack = vec![(Vec::new(), dir)];
    while let Some((rel, dir)) = stack.pop() {
        let Ok(items) = beneath::entries(&dir) else {
            continue;
        };
        for (name, stat) in items.iter().rev() {
            if beneath::is_dir(stat) {
                if let Ok(sub) = beneath::subdir(&dir, name) {
                    stack.push((join(&rel, name), sub));
                }
            }
        }
        found.push((rel, dir, items));
    }
    found
}

/// `rel/name`, in the file system's bytes: a name that is not UTF-8 is sent as it is,
/// for the host to refuse, never rewritten into another name.
fn join(rel: &[u8], name: &CStr) -> Vec<u8> {
    let mut path = rel.to_vec();
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name.to_bytes());
    path
}

/// Regular files under `path`, never following links; a missing directory is empty.
pub fn scan(root: &Root, path: &str) -> Result<Vec<Entry>, String> {
    let base = match root.dir(path) {
        Ok(dir) => dir,
        Err(e) if e.is_missing() => return Ok(Vec::new()),
        Err(e) => return Err(refused("scan", path)(e)),
    };
    let mut files = Vec::new();
    for (rel, _, items) in tree(base) {
        for (name, stat) in &items {
            if beneath::is_file(stat) {
                files.push(entry(join(&rel, name), stat));
            }
        }
    }
    Ok(files)
}

/// Empties directory `path` below the root: every file, link and directory in it
/// goes, and no link is followed; a missing directory is empty already.
pub fn clear(root: &Root, path: &str) -> Result<(), String> {
    let base = match root.dir(path) {
        Ok(dir) => dir,
        Err(e) if e.is_missing() => return Ok(()),
        Err(e) => {
            // Code put a link or a file in the directory's place: that goes instead,
            // and the directory is made again, empty.
            let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
            let gone = CString::new(name).ok().and_then(|name| {
                let dir = root.dir(parent).ok()?;
                beneath::remove_in(&dir, &name, false).ok()
            });
            return match gone {
                Some(()) => root
                    .make_dirs(path)
                    .map(drop)
                    .map_err(refused("clear", path)),
                None => Err(refused("clear", path)(e)),
            };
        }
    };
    empty(base, path)
}

/// Removes everything in the open directory `base` (named `path` in messages),
/// following no link.
fn empty(base: OwnedFd, path: &str) -> Result<(), String> {
    // `tree` lists a directory before those below it: the deepest are emptied first.
    for (rel, dir, items) in tree(base).iter().rev() {
        for (name, stat) in items {
            match beneath::remove_in(dir, name, beneath::is_dir(stat)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let name = String::from_utf8_lossy(&join(rel, name)).into_owned();
                    return Err(format!("cannot clear {path}: {name}: {e}"));
                }
            }
        }
    }
    Ok(())
}

/// A tar of `path` below the root (a file, or a directory's contents), with regular
/// files and directories only: links are left out, never followed. Fails once the
/// archive would pass `max` bytes.
pub fn pack(root: &Root, path: &str, max: u64) -> Result<Vec<u8>, Failure> {
    let fail = |e: io::Error| format!("cannot pack `{path}`: {e}");
    let mut tar = tar::Builder::new(Vec::new());
    let mut total = 0u64;
    let mut add = |tar: &mut tar::Builder<Vec<u8>>,
                   name: &[u8],
                   stat: &beneath::Stat,
                   file: Option<File>|
     -> Result<(), String> {
        // A directory costs a header; a file its size plus a header and padding.
        total += match file {
            Some(_) => stat.st_size.max(0) as u64 + 1024,
            None => 512,
        };
        if total > max {
            return Err(format!(
                "cannot pack `{path}`: it holds more than the {max} bytes one copy may move"
            ));
        }
        let mut header = tar::Header::new_gnu();
        header.set_mode(stat.st_mode & 0o7777);
        header.set_mtime(stat.st_mtime.max(0) as u64);
        match file {
            Some(file) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(stat.st_size.max(0) as u64);
                // A file that changes size meanwhile must not break the archive.
                let mut data = Vec::new();
                file.take(stat.st_size.max(0) as u64)
                    .read_to_end(&mut data)
                    .map_err(fail)?;
                data.resize(stat.st_size.max(0) as usize, 0);
                tar.append_data(&mut header, bytes_path(name), data.as_slice())
            }
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                tar.append_data(&mut header, bytes_path(name), io::empty())
            }
        }
        .map_err(fail)
    };
    match root.dir(path) {
        Ok(base) => {
            for (rel, dir, items) in tree(base) {
                for (name, stat) in &items {
                    let full = join(&rel, name);
                    if beneath::is_dir(stat) {
                        add(&mut tar, &full, stat, None)?;
                    } else if beneath::is_file(stat) {
                        if let Ok(file) = beneath::file_in(&dir, name) {
                            add(&mut tar, &full, stat, Some(file))?;
                        }
                    }
                }
            }
        }
        Err(Refused::Io(e)) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            let file = root.read(path).map_err(failed("pack", path))?;
            let stat = beneath::stat(&file).map_err(fail)?;
            let name = Path::new(path).file_name().unwrap_or_default();
            add(&mut tar, name.as_bytes(), &stat, Some(file))?;
        }
        Err(e) => return Err(failed("pack", path)(e)),
    }
    Ok(tar.into_inner().map_err(fail)?)
}

/// A name in the file system's bytes as a path, whatever the bytes.
fn bytes_path(name: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(name))
}

/// Unpacks regular files and directories into `path`; anything else is refused.
pub fn unpack(root: &Root, path: &str, data: &[u8]) -> Result<(), String> {
    root.make_dirs(path).map_err(refused("create", path))?;
    let mut archive = tar::Archive::new(data);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("broken tar archive: {e}"))?;
        let name = entry
            .path()
            .map_err(|e| format!("broken tar archive: {e}"))?
            .into_owned();
        if name
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "refusing `{}`: it must stay inside `{path}`",
                name.display()
            ));
        }
        let target = Path::new(path).join(&name);
        let target = target.to_string_lossy();
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                root.make_dirs(&target)
                    .map_err(refused("create", &target))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut contents = Vec::new();
                entry
                    .read_to_end(&mut contents)
                    .map_err(|e| format!("broken tar archive: {e}"))?;
                let mode = entry.header().mode().unwrap_or(0o644);
                write_file(root, &target, &contents, Some(mode))?;
            }
            other => {
                return Err(format!(
                    "refusing `{}`: {other:?} entries (links, devices) are not copied",
                    name.display()
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sandlot-agent-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("output")).unwrap();
        dir
    }

    #[test]
    fn stat_make_remove_and_move_follow_no_link() {
        let dir = scratch("ops");
        let outside = scratch("ops-outside");
        fs::write(outside.join("kept.txt"), "kept").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        let root = Root::open(&dir).unwrap();
        write_file(&root, "a/b.txt", b"hello", None).unwrap();
        let file = stat(&root, "a/b.txt").unwrap();
        assert_eq!((file.path.as_slice(), file.size), (&b"b.txt"[..], 5));
        assert_eq!(file.mode & libc::S_IFMT, libc::S_IFREG);
        assert!(stat(&root, "").unwrap().is_dir);
        // A link is reported as a link, and nothing through it is reached.
        assert_eq!(
            stat(&root, "link").unwrap().mode & libc::S_IFMT,
            libc::S_IFLNK
        );
        assert!(stat(&root, "link/kept.txt").is_err());
        assert!(matches!(stat(&root, "nope"), Err(Failure::Missing(_))));
        make_dir(&root, "x/y/z").unwrap();
        make_dir(&root, "x/y/z").unwrap();
        assert!(stat(&root, "x/y/z").unwrap().is_dir);
        assert!(make_dir(&root, "link/new").is_err());
        assert!(!outside.join("new").exists());
        rename(&root, "a/b.txt", "x/y/c.txt").unwrap();
        assert_eq!(read_file(&root, "x/y/c.txt", 10).unwrap(), b"hello");
        assert!(matches!(
            rename(&root, "a/b.txt", "d"),
            Err(Failure::Missing(_))
        ));
        assert!(rename(&root, "x/y/c.txt", "link/c.txt").is_err());
        // A directory goes with everything in it; a link goes, never its target.
        remove(&root, "x").unwrap();
        assert!(matches!(stat(&root, "x"), Err(Failure::Missing(_))));
        remove(&root, "link").unwrap();
        assert_eq!(fs::read(outside.join("kept.txt")).unwrap(), b"kept");
        assert!(matches!(remove(&root, "x"), Err(Failure::Missing(_))));
        assert!(remove(&root, "").is_err());
        assert!(remove(&root, "../etc").is_err());
    }

    #[test]
    fn clearing_empties_a_directory_and_follows_no_link() {
        let dir = scratch("clear");
        let outside = scratch("clear-outside");
        fs::write(outside.join("kept.txt"), "kept").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("output/outside")).unwrap();
        let root = Root::open(&dir).unwrap();
        write_file(&root, "output/plot-001.png", b"png", None).unwrap();
        write_file(&root, "output/deep/er/data.csv", b"a,b", None).unwrap();
        write_file(&root, "elsewhere.txt", b"stays", None).unwrap();
        clear(&root, "output").unwrap();
        assert!(list(&root, "output").unwrap().is_empty());
        assert_eq!(read_file(&root, "elsewhere.txt", 10).unwrap(), b"stays");
        assert_eq!(fs::read(outside.join("kept.txt")).unwrap(), b"kept");
        clear(&root, "missing").unwrap();
        // A link in the directory's place goes, never what it points to, and the
        // directory is there again, empty.
        fs::remove_dir(dir.join("output")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("output")).unwrap();
        clear(&root, "output").unwrap();
        assert!(list(&root, "output").unwrap().is_empty());
        assert!(outside.join("kept.txt").exists());
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn links_and_parent_paths_are_refused() {
        let dir = scratch("links");
        std::os::unix::fs::symlink("/etc/passwd", dir.join("output/passwd")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("etc")).unwrap();
        let root = Root::open(&dir).unwrap();
        assert!(read_file(&root, "output/passwd", 1 << 20)
            .unwrap_err()
            .message()
            .contains("symbolic link"));
        assert!(read_file(&root, "etc/passwd", 1 << 20)
            .unwrap_err()
            .message()
            .contains("symbolic link"));
        assert!(read_file(&root, "../etc/passwd", 1 << 20)
            .unwrap_err()
            .message()
            .contains("inside the workspace"));
        // What names nothing is told apart, so the host can answer "not found".
        for missing in [
            read_file(&root, "nothing.txt", 10).unwrap_err(),
            list(&root, "no/dir").unwrap_err(),
            pack(&root, "nothing", 10).unwrap_err(),
        ] {
            assert!(matches!(missing, Failure::Missing(_)), "{missing:?}");
        }
        assert!(write_file(&root, "etc/evil", b"x", None).is_err());
        write_file(&root, "a/b/c.txt", b"hi", None).unwrap();
        assert_eq!(read_file(&root, "a/b/c.txt", 10).unwrap(), b"hi");
        assert!(read_file(&root, "a/b/c.txt", 1).is_err());
        let scanned = scan(&root, "").unwrap();
        assert_eq!(
            scanned
                .iter()
                .map(|e| e.path.as_slice())
                .collect::<Vec<_>>(),
            vec![b"a/b/c.txt"]
        );
        // A name that is not UTF-8 is listed in its own bytes, not rewritten.
        fs::write(dir.join(std::ffi::OsStr::from_bytes(b"a/b/caf\xe9")), "x").unwrap();
        let listed = list(&root, "a/b").unwrap();
        assert!(listed.iter().any(|e| e.path == b"caf\xe9"), "{listed:?}");
        fs::remove_file(dir.join(std::ffi::OsStr::from_bytes(b"a/b/caf\xe9"))).unwrap();
        assert!(scan(&root, "missing").unwrap().is_empty());
        // A tree goes out without its links and comes back in elsewhere, modes kept.
        fs::set_permissions(
            dir.join("a/b/c.txt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o751),
        )
        .unwrap();
        let archive = pack(&root, "", 1 << 20).unwrap();
        unpack(&root, "copy", &archive).unwrap();
        assert_eq!(read_file(&root, "copy/a/b/c.txt", 10).unwrap(), b"hi");
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.join("copy/a/b/c.txt"))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o751);
        assert!(fs::symlink_metadata(dir.join("copy/etc")).is_err());
        assert!(pack(&root, "a", 10)
            .unwrap_err()
            .message()
            .contains("more than"));
        // One file packs under its own name.
        let one = pack(&root, "a/b/c.txt", 1 << 20).unwrap();
        unpack(&root, "single", &one).unwrap();
        assert_eq!(read_file(&root, "single/c.txt", 10).unwrap(), b"hi");
        // An archive with a link in it is refused.
        let mut evil = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        evil.append_link(&mut header, "escape", "/etc").unwrap();
        let evil = evil.into_inner().unwrap();
        assert!(unpack(&root, "in", &evil).unwrap_err().contains("Symlink"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Code that lives between requests swaps a directory for a link to the outside as
    /// fast as it can; no request ever reads or writes outside the workspace.
    #[test]
    fn a_directory_swapped_for_a_link_never_leads_outside() {
        let dir = scratch("race");
        let outside = scratch("race-outside");
        fs::write(outside.join("f"), "OUTSIDE").unwrap();
        fs::create_dir_all(dir.join("d")).unwrap();
        fs::write(dir.join("d/f"), "inside").unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (dir, outside, stop) = (dir.clone(), outside.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = fs::rename(dir.join("d"), dir.join("real"));
                    let _ = std::os::unix::fs::symlink(&outside, dir.join("d"));
                    let _ = fs::remove_file(dir.join("d"));
                    if fs::rename(dir.join("real"), dir.join("d")).is_err() {
                        // A write made a fresh `d` while the real one was away.
                        let _ = fs::remove_dir_all(dir.join("d"));
                        let _ = fs::rename(dir.join("real"), dir.join("d"));
                    }
                }
            })
        };
        let root = Root::open(&dir).unwrap();
        let mut inside = 0;
        for _ in 0..3000 {
            if let Ok(data) = read_file(&root, "d/f", 100) {
                assert_eq!(data, b"inside");
                inside += 1;
            }
            let _ = write_file(&root, "d/new", b"w", None);
            if let Ok(archive) = pack(&root, "d", 1 << 20) {
                let mut archive = tar::Archive::new(archive.as_slice());
                for entry in archive.entries().unwrap() {
                    let mut data = String::new();
                    entry.unwrap().read_to_string(&mut data).unwrap();
                    assert_ne!(data, "OUTSIDE");
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(inside > 0, "the file was never readable at all");
        assert!(!outside.join("new").exists(), "a write went outside");
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }
}
