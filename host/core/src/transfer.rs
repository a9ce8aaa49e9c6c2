//! Copying whole files and directories in and out of sandboxes, as tar archives. An
//! archive that comes out of a sandbox is untrusted: only regular files and
//! directories with plain relative names are unpacked, never a link, and nothing is
//! written outside the destination.

use crate::error::{Error, Result};
use crate::sandbox_path::SandboxPath;
use cap_std::fs::Dir;
use std::io::Read;
use std::path::{Component, Path};

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn too_large(what: &Path, max: u64) -> Error {
    Error::InvalidPath {
        path: what.display().to_string(),
        reason: format!("it holds more than the {max} bytes one copy may move"),
    }
}

/// A tar of the host file or directory `path` (a directory's contents, not the
/// directory itself). Links inside are left out; `path` itself must not be one.
pub fn pack(path: &Path, max: u64) -> Result<Vec<u8>> {
    sandlot_agent::pack(path, max).map_err(|e| Error::Io {
        context: format!("cannot copy {}", path.display()),
        source: e,
    })
}

/// A tar of `rel` below `root` (a file, or a directory's contents), links left out,
/// at most `max` bytes. Every file is opened through `root`, so nothing outside it is
/// ever read.
pub fn pack_dir(root: &Dir, rel: &Path, max: u64) -> Result<Vec<u8>> {
    let context = || format!("cannot copy `{}`", rel.display());
    let mut tar = tar::Builder::new(Vec::new());
    // What the archive will hold: a header per entry, a file's size and padding.
    let total = std::cell::Cell::new(0u64);
    let count = |bytes: u64| {
        total.set(total.get() + bytes);
        if total.get() > max {
            Err(too_large(rel, max))
        } else {
            Ok(())
        }
    };
    let add_file = |tar: &mut tar::Builder<Vec<u8>>, dir: &Dir, name: &Path, at: &Path| {
        let mut file = dir.open(at).map_err(io(context()))?;
        let meta = file.metadata().map_err(io(context()))?;
        count(meta.len() + 1024)?;
        let mut data = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut data).map_err(io(context()))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(meta_mode(&meta));
        header.set_cksum();
        tar.append_data(&mut header, name, data.as_slice())
            .map_err(io(context()))
    };
    let is_root = rel.as_os_str().is_empty();
    let meta = if is_root {
        None
    } else {
        match root.symlink_metadata(rel) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NoSuchFile {
                    path: rel.display().to_string(),
                })
            }
            Err(e) => return Err(io(context())(e)),
        }
    };
    match meta {
        Some(meta) if meta.is_file() => {
            let name = Path::new(rel.file_name().unwrap_or_default());
            add_file(&mut tar, root, name, rel)?;
        }
        Some(meta) if !meta.is_dir() => {
            return Err(Error::InvalidPath {
                path: rel.display().to_string(),
                reason: "it is neither a file nor a directory (links are not copied)".into(),
            })
        }
        _ => {
            let start = if is_root {
                root.try_clone().map_err(io(context()))?
            } else {
                root.open_dir(rel).map_err(io(context()))?
            };
            let mut stack = vec![(start, std::path::PathBuf::new())];
            while let Some((dir, prefix)) = stack.pop() {
                let mut entries: Vec<_> = dir.entries().map_err(io(context()))?.flatten().collect();
                entries.sort_by_key(|e| e.file_name());
                for entry in entries {
                    let name = prefix.join(entry.file_name());
                    let Ok(meta) = entry.metadata() else { continue };
                    if meta.is_dir() {
                        count(512)?;
                        let mut header = tar::Header::new_gnu();
                        header.set_entry_type(tar::EntryType::Directory);
                        header.set_size(0);
                        header.set_mode(0o755);
                        header.set_cksum();
                        tar.append_data(&mut header, &name, std::io::empty())
                            .map_err(io(context()))?;
                        stack.push((entry.open_dir().map_err(io(context()))?, name));
                    } else if meta.is_file() {
                        add_file(&mut tar, &dir, &name, Path::new(&entry.file_name()))?;
                    }
                }
            }
        }
    }
    tar.into_inner().map_err(io(context()))
}

fn meta_mode(meta: &cap_std::fs::Metadata) -> u32 {
    use cap_std::fs::PermissionsExt;
    meta.permissions().mode() & 0o777
}

/// What copying files out of a sandbox wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Copied {
    /// The files written, relative to the destination, in archive order.
    pub files: Vec<SandboxPath>,
    /// Files left out because their names cannot be represented (not UTF-8, a
    /// control character) or, once masked, stood for a file already written.
    pub refused: usize,
}

/// Unpacks `archive` into the host directory `dest` (created if missing), each file
/// through `admit`, which may rename it (mask a secret in its name) and change its
/// contents, or leave it out (`None`, counted as refused).
pub fn unpack(
    archive: &[u8],
    dest: &Path,
    admit: impl FnMut(SandboxPath, Vec<u8>) -> Option<(SandboxPath, Vec<u8>)>,
) -> Result<Copied> {
    std::fs::create_dir_all(dest).map_err(io(format!("cannot create {}", dest.display())))?;
    let dir = Dir::open_ambient_dir(dest, cap_std::ambient_authority())
        .map_err(io(format!("cannot open {}", dest.display())))?;
    unpack_into(archive, &dir, admit)
}

/// Unpacks `archive` into `dir` through its capability handle, so no name and no link
/// already in `dir` can lead outside it. Every name must be a [`SandboxPath`] (`./`
/// components aside): one with `..` or a root makes the archive an error, one that
/// cannot be represented is left out and counted. `admit` sees each file before it is
/// written, as for [`unpack`].
pub fn unpack_into(
    archive: &[u8],
    dir: &Dir,
    mut admit: impl FnMut(SandboxPath, Vec<u8>) -> Option<(SandboxPath, Vec<u8>)>,
) -> Result<Copied> {
    let mut copied = Copied::default();
    each_entry(archive, |entry| {
        match entry {
            Entry::Refused => copied.refused += 1,
            Entry::Directory(path) => path
                .create_dir_in(dir)
                .map_err(io(format!("cannot write `{path}`")))?,
            Entry::File { path, contents, .. } => {
                let Some((path, contents)) = admit(path, contents) else {
                    copied.refused += 1;
                    return Ok(());
                };
                if copied.files.contains(&path) {
                    copied.refused += 1;
                    return Ok(());
                }
                path.write_into(dir, &contents)
                    .map_err(io(format!("cannot write `{path}`")))?;
                copied.files.push(path);
            }
        }
        Ok(())
    })?;
    Ok(copied)
}

/// `archive` made again with each file as `admit` gives it back (renamed, changed, or
/// left out with `None`), directories and modes kept, under the rules of
/// [`unpack_into`]: a snapshot's files with the session's secrets taken out.
pub fn rewrite(
    archive: &[u8],
    mut admit: impl FnMut(SandboxPath, Vec<u8>) -> Option<(SandboxPath, Vec<u8>)>,
) -> Result<Vec<u8>> {
    let context = || "cannot rewrite the archive".to_string();
    let mut tar = tar::Builder::new(Vec::new());
    let mut names = std::collections::HashSet::new();
    each_entry(archive, |entry| {
        let (path, mode, contents, kind) = match entry {
            Entry::Refused => return Ok(()),
            Entry::Directory(path) => (path, 0o755, Vec::new(), tar::EntryType::Directory),
            Entry::File {
                path,
                mode,
                contents,
            } => match admit(path, contents) {
                Some((path, contents)) => (path, mode, contents, tar::EntryType::Regular),
                None => return Ok(()),
            },
        };
        if !names.insert(path.clone()) {
            return Ok(());
        }
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(contents.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        tar.append_data(&mut header, path.as_str(), contents.as_slice())
            .map_err(io(context()))
    })?;
    tar.into_inner().map_err(io(context()))
}

/// One entry of an archive from a sandbox, as [`each_entry`] reads it.
enum Entry {
    /// A file whose name cannot be represented.
    Refused,
    Directory(SandboxPath),
    File {
        path: SandboxPath,
        mode: u32,
        contents: Vec<u8>,
    },
}

/// Hands every entry of `archive` to `each`, in order. A name with `..` or a root, or
/// an entry that is neither a file nor a directory, makes the archive an error.
fn each_entry(archive: &[u8], mut each: impl FnMut(Entry) -> Result<()>) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let refuse = |name: &Path, why: &str| Error::InvalidPath {
        path: crate::sandbox_path::escape_controls(&name.to_string_lossy()).into_owned(),
        reason: why.to_string(),
    };
    let mut tar = tar::Archive::new(archive);
    let entries = tar.entries().map_err(io("not a tar archive".into()))?;
    for entry in entries {
        let mut entry = entry.map_err(io("broken tar archive".into()))?;
        let name = entry
            .path()
            .map_err(io("broken tar archive".into()))?
            .into_owned();
        if name
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(refuse(
                &name,
                "an archive entry must stay inside the destination",
            ));
        }
        let plain: Vec<&[u8]> = name
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(part.as_bytes()),
                _ => None,
            })
            .collect();
        if plain.is_empty() {
            continue;
        }
        let kind = entry.header().entry_type();
        let Ok(path) = SandboxPath::from_bytes(&plain.join(&b'/')) else {
            if kind.is_file() {
                each(Entry::Refused)?;
            }
            continue;
        };
        match kind {
            tar::EntryType::Directory => each(Entry::Directory(path))?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
                let mut contents = Vec::new();
                entry
                    .read_to_end(&mut contents)
                    .map_err(io("broken tar archive".into()))?;
                each(Entry::File {
                    path,
                    mode,
                    contents,
                })?;
            }
            other => {
                return Err(refuse(
                    &name,
                    &format!("{other:?} entries (links, devices) are not copied"),
                ))
            }
        }
    }
    Ok(())
}

/// Every file as it is, for [`unpack`] and [`unpack_into`].
pub fn as_is(path: SandboxPath, contents: Vec<u8>) -> Option<(SandboxPath, Vec<u8>)> {
    Some((path, contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_round_trips_without_its_links() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("a/b")).unwrap();
        std::fs::write(from.path().join("a/b/c.txt"), b"hi").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.path().join("a/passwd")).unwrap();
        let archive = pack(from.path(), 1 << 20).unwrap();
        let to = tempfile::tempdir().unwrap();
        assert_eq!(
            unpack(&archive, to.path(), as_is).unwrap().files,
            ["a/b/c.txt"]
        );
        assert_eq!(std::fs::read(to.path().join("a/b/c.txt")).unwrap(), b"hi");
        assert!(std::fs::symlink_metadata(to.path().join("a/passwd")).is_err());
        assert!(pack(from.path(), 100).is_err());

        // The same tree packed through a capability handle.
        let root = Dir::open_ambient_dir(from.path(), cap_std::ambient_authority()).unwrap();
        let archive = pack_dir(&root, Path::new(""), 1 << 20).unwrap();
        let again = tempfile::tempdir().unwrap();
        assert_eq!(
            unpack(&archive, again.path(), as_is).unwrap().files,
            ["a/b/c.txt"]
        );
        assert!(pack_dir(&root, Path::new("a/passwd"), 1 << 20).is_err());
        assert!(pack_dir(&root, Path::new(""), 100).is_err());
    }

    #[test]
    fn hostile_archives_write_nothing_outside() {
        let to = tempfile::tempdir().unwrap();
        let mut link = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        link.append_link(&mut header, "escape", "/etc").unwrap();
        let error = unpack(&link.into_inner().unwrap(), to.path(), as_is).unwrap_err();
        assert!(error.to_string().contains("Symlink"), "{error}");
        // A link already in the destination is not followed either.
        std::os::unix::fs::symlink("/tmp", to.path().join("out")).unwrap();
        let mut file = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        file.append_data(&mut header, "out/x", &b"x"[..]).unwrap();
        assert!(unpack(&file.into_inner().unwrap(), to.path(), as_is).is_err());
        assert!(!Path::new("/tmp/x").exists() || std::fs::read("/tmp/x").unwrap() != b"x");
    }

    #[test]
    fn a_rewritten_archive_keeps_modes_and_directories_and_takes_the_changes() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("bin/empty")).unwrap();
        std::fs::write(from.path().join("bin/run.sh"), b"echo KEY-1").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let executable = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(from.path().join("bin/run.sh"), executable).unwrap();
        std::fs::write(from.path().join("KEY-1.txt"), b"x").unwrap();
        std::fs::write(from.path().join("dropped"), b"y").unwrap();
        let archive = pack(from.path(), 1 << 20).unwrap();
        let rewritten = rewrite(&archive, |path, contents| {
            let contents = String::from_utf8(contents)
                .unwrap()
                .replace("KEY-1", "*****");
            let name = path.as_str().replace("KEY-1", "***");
            (name != "dropped").then(|| (SandboxPath::new(&name).unwrap(), contents.into_bytes()))
        })
        .unwrap();
        let to = tempfile::tempdir().unwrap();
        let copied = unpack(&rewritten, to.path(), as_is).unwrap();
        let mut files: Vec<&str> = copied.files.iter().map(|f| f.as_str()).collect();
        files.sort();
        assert_eq!(files, ["***.txt", "bin/run.sh"]);
        assert_eq!(
            std::fs::read(to.path().join("bin/run.sh")).unwrap(),
            b"echo *****"
        );
        assert!(to.path().join("bin/empty").is_dir());
        let mode = tar::Archive::new(rewritten.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap())
            .find(|e| e.path().unwrap().ends_with("run.sh"))
            .map(|e| e.header().mode().unwrap());
        assert_eq!(mode, Some(0o755));
    }

    #[test]
    fn names_are_checked_refused_and_renamed_never_rewritten() {
        use std::os::unix::ffi::OsStrExt;
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &[u8], data: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // Set the raw name: `append_data` would refuse the odd ones itself.
            header.as_old_mut().name[..name.len()].copy_from_slice(name);
            header.set_cksum();
            tar.append(&header, data).unwrap();
        };
        add(br"..\..\evil", b"1");
        add(b"a\nsandlot: forged", b"2");
        add(b"caf\xe9", b"3");
        add(b"SECRET-a", b"4");
        add(b"SECRET-b", b"5");
        add(b"./plain.txt", b"6");
        let archive = tar.into_inner().unwrap();
        let to = tempfile::tempdir().unwrap();
        let copied = unpack(&archive, to.path(), |path, bytes| {
            let name = path
                .as_str()
                .replace("SECRET-a", "***")
                .replace("SECRET-b", "***");
            Some((SandboxPath::new(&name).unwrap(), bytes))
        })
        .unwrap();
        assert_eq!(copied.files, [r"..\..\evil", "***", "plain.txt"]);
        assert_eq!(
            copied.refused, 3,
            "a control character, not UTF-8, a masked twin"
        );
        assert_eq!(std::fs::read(to.path().join(r"..\..\evil")).unwrap(), b"1");
        assert_eq!(std::fs::read(to.path().join("***")).unwrap(), b"4");
        let names: Vec<_> = std::fs::read_dir(to.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        assert_eq!(names.len(), 3, "nothing else was written: {names:?}");
    }
}
