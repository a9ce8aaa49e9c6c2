//! Copying whole files and directories between the host and a sandbox, as tar
//! archives. An archive that comes out of a sandbox is untrusted: only regular files
//! and directories with plain relative names are unpacked, never a link, and nothing
//! is written outside the destination.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::{Component, Path};

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// A tar of the host file or directory `path` (a directory's contents, not the
/// directory itself). Links inside are left out; `path` itself must not be one.
pub(crate) fn pack(path: &Path, max: u64) -> Result<Vec<u8>> {
    sandlot_agent::pack(path, max)
        .map_err(|e| Error::InvalidInput(format!("cannot copy {}: {e}", path.display())))
}

/// Unpacks `archive` into the host directory `dest` (created if missing) through a
/// capability handle, so no name and no link already in `dest` can lead outside it.
/// Returns the files written, relative and `/`-separated.
pub(crate) fn unpack(archive: &[u8], dest: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dest).map_err(io(format!("cannot create {}", dest.display())))?;
    let dir = cap_std::fs::Dir::open_ambient_dir(dest, cap_std::ambient_authority())
        .map_err(io(format!("cannot open {}", dest.display())))?;
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
        let context = format!("cannot write {}", dest.join(&name).display());
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
