//! Copying whole files and directories in and out of sandboxes, as tar archives. An
//! archive that comes out of a sandbox is untrusted: only regular files and
//! directories with plain relative names are unpacked, never a link, and nothing is
//! written outside the destination.

use crate::error::{Error, Result};
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
pub(crate) fn pack(path: &Path, max: u64) -> Result<Vec<u8>> {
    sandlot_agent::pack(path, max).map_err(|e| Error::Io {
        context: format!("cannot copy {}", path.display()),
        source: e,
    })
}

/// A tar of `rel` below `root` (a file, or a directory's contents), links left out,
/// at most `max` bytes. Every file is opened through `root`, so nothing outside it is
/// ever read.
pub(crate) fn pack_dir(root: &Dir, rel: &Path, max: u64) -> Result<Vec<u8>> {
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
        Some(root.symlink_metadata(rel).map_err(io(context()))?)
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

/// Unpacks `archive` into the host directory `dest` (created if missing). Returns the
/// files written, relative and `/`-separated.
pub(crate) fn unpack(archive: &[u8], dest: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dest).map_err(io(format!("cannot create {}", dest.display())))?;
    let dir = Dir::open_ambient_dir(dest, cap_std::ambient_authority())
        .map_err(io(format!("cannot open {}", dest.display())))?;
    unpack_into(archive, &dir)
}

/// Unpacks `archive` into `dir` through its capability handle, so no name and no link
/// already in `dir` can lead outside it. Returns the files written, relative and
/// `/`-separated.
pub(crate) fn unpack_into(archive: &[u8], dir: &Dir) -> Result<Vec<String>> {
    let refuse = |name: &Path, why: &str| Error::InvalidPath {
        path: name.display().to_string(),
        reason: why.to_string(),
    };
    let mut written = Vec::new();
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
        let context = format!("cannot write `{}`", name.display());
        match entry.header().entry_type() {
            tar::EntryType::Directory => dir.create_dir_all(&name).map_err(io(context))?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = name.parent().filter(|p| !p.as_os_str().is_empty()) {
                    dir.create_dir_all(parent).map_err(io(context.clone()))?;
                }
                let mut contents = Vec::new();
                entry
                    .read_to_end(&mut contents)
                    .map_err(io("broken tar archive".into()))?;
                dir.write(&name, &contents).map_err(io(context))?;
                written.push(name.to_string_lossy().replace('\\', "/"));
            }
            other => {
                return Err(refuse(
                    &name,
                    &format!("{other:?} entries (links, devices) are not copied"),
                ))
            }
        }
    }
    Ok(written)
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
        assert_eq!(unpack(&archive, to.path()).unwrap(), ["a/b/c.txt"]);
        assert_eq!(std::fs::read(to.path().join("a/b/c.txt")).unwrap(), b"hi");
        assert!(std::fs::symlink_metadata(to.path().join("a/passwd")).is_err());
        assert!(pack(from.path(), 100).is_err());

        // The same tree packed through a capability handle.
        let root = Dir::open_ambient_dir(from.path(), cap_std::ambient_authority()).unwrap();
        let archive = pack_dir(&root, Path::new(""), 1 << 20).unwrap();
        let again = tempfile::tempdir().unwrap();
        assert_eq!(unpack(&archive, again.path()).unwrap(), ["a/b/c.txt"]);
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
        let error = unpack(&link.into_inner().unwrap(), to.path()).unwrap_err();
        assert!(error.to_string().contains("Symlink"), "{error}");
        // A link already in the destination is not followed either.
        std::os::unix::fs::symlink("/tmp", to.path().join("out")).unwrap();
        let mut file = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        file.append_data(&mut header, "out/x", &b"x"[..]).unwrap();
        assert!(unpack(&file.into_inner().unwrap(), to.path()).is_err());
        assert!(!Path::new("/tmp/x").exists() || std::fs::read("/tmp/x").unwrap() != b"x");
    }
}
