//! Root filesystems, unpacked once from the tarballs the image recipes build (the
//! same bytes Docker and Podman import) and kept by content:
//!
//! ```text
//! <dir>/objects/<sha256 of the tar>/   the tree, read-only to every sandbox
//! <dir>/images/<recipe name>           "<recipe hash> <object>": the recipe's current tree
//! <dir>/staging/<owner stamp>-<random>/ a tree being unpacked
//! ```
//!
//! Unpacking makes the tree fit a jail: device nodes and FIFOs are left out (the jail
//! makes its own `/dev`), setuid and setgid bits are cleared, and the mount points a
//! read-only root cannot get later are made (`/workspace`, `/.sandlot`, the memory
//! cgroup), with an `/etc/hosts` that the tarball lacks.

use sandlot_container::recipe::Recipe;
use sandlot_core::error::{Error, Result};
use sha2::Digest;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What [`RootfsStore`] does to a tar while it unpacks it; a tree unpacked by another
/// version is unpacked again.
const UNPACK_FORMAT: &str = "u1";

/// The file in the tree the agent is mounted over.
pub(crate) const AGENT_MOUNT: &str = ".sandlot/agent";

/// A recipe's root filesystem, ready to be a sandbox's `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rootfs {
    /// The tree.
    pub path: PathBuf,
    /// SHA-256 of the tar it was unpacked from.
    pub digest: String,
    /// The hash of the recipe text it was built from.
    pub recipe_hash: String,
}

/// Where unpacked root filesystems are kept.
#[derive(Debug, Clone)]
pub struct RootfsStore {
    dir: PathBuf,
}

impl RootfsStore {
    /// The store in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> RootfsStore {
        RootfsStore { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tree last unpacked for `recipe`, if it is there, whatever recipe text made
    /// it (compare [`Rootfs::recipe_hash`] with the recipe's to tell it is current).
    pub fn find(&self, recipe: &Recipe) -> Option<Rootfs> {
        let index = std::fs::read_to_string(self.dir.join("images").join(&recipe.name)).ok()?;
        let mut fields = index.split_whitespace();
        let (recipe_hash, object) = (fields.next()?, fields.next()?);
        let path = self.dir.join("objects").join(object);
        let digest = object.strip_suffix(&format!("-{UNPACK_FORMAT}"))?;
        path.is_dir().then(|| Rootfs {
            digest: digest.to_string(),
            path,
            recipe_hash: recipe_hash.to_string(),
        })
    }

    /// Makes the store's directories, readable to every sandbox: what unpacking
    /// needs, checked before a tarball is built (minutes) for a store that cannot be
    /// written.
    pub fn prepare(&self) -> Result<()> {
        for sub in ["objects", "images", "staging"] {
            let dir = self.dir.join(sub);
            std::fs::create_dir_all(&dir).map_err(|e| {
                crate::dir::data_dir_error(format!("cannot create {}", dir.display()), e)
            })?;
        }
        // Every sandbox's user must get to the trees, whatever uid it runs as.
        set_mode(&self.dir, 0o755)?;
        set_mode(&self.dir.join("objects"), 0o755)
    }

    /// Unpacks `tar`, built from `recipe`, and makes it the recipe's tree. A tar
    /// unpacked before (same bytes) is not unpacked again.
    pub fn unpack(
        &self,
        recipe: &Recipe,
        tar: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Rootfs> {
        let io = |context: String| move |source| Error::Io { context, source };
        self.prepare()?;
        sweep_staging(&self.dir.join("staging"));
        let staging = tempfile::Builder::new()
            .prefix(&format!("{}-", sandlot_core::backend::owner::owner_stamp()))
            .tempdir_in(self.dir.join("staging"))
            .map_err(|e| crate::dir::data_dir_error("cannot make a staging directory".into(), e))?;
        progress(&format!(
            "unpacking {} into {}",
            tar.display(),
            self.dir.display()
        ));
        let file =
            std::fs::File::open(tar).map_err(io(format!("cannot open {}", tar.display())))?;
        let digest = unpack_into(file, staging.path()).map_err(|e| Error::ImageBuild {
            image: recipe.image.clone(),
            reason: format!("cannot unpack {}: {e}", tar.display()),
        })?;
        prepare_tree(staging.path())
            .map_err(io(format!("cannot prepare {}", staging.path().display())))?;
        let object = format!("{digest}-{UNPACK_FORMAT}");
        let path = self.dir.join("objects").join(&object);
        if path.is_dir() {
            progress("the same tree was unpacked before: kept that one");
        } else {
            let staged = staging.keep();
            std::fs::rename(&staged, &path)
                .map_err(io(format!("cannot keep {}", path.display())))?;
            set_mode(&path, 0o755)?;
        }
        // The index changes in one rename: a sandbox opening now sees the old tree or
        // the new one.
        let index = self.dir.join("images").join(&recipe.name);
        let partial = index.with_extension("partial");
        std::fs::write(&partial, format!("{} {object}\n", recipe.hash))
            .and_then(|()| std::fs::rename(&partial, &index))
            .map_err(io(format!("cannot write {}", index.display())))?;
        Ok(Rootfs {
            path,
            digest,
            recipe_hash: recipe.hash.clone(),
        })
    }

    /// Removes the trees no recipe's index names (an older unpack of a rebuilt
    /// recipe); returns what was removed. A sandbox already running on one keeps its
    /// mount: the kernel holds the files until it ends.
    pub fn prune(&self) -> Result<Vec<PathBuf>> {
        let named: Vec<String> = Recipe::all()
            .iter()
            .filter_map(|r| self.find(r))
            .filter_map(|r| r.path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        let mut removed = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.dir.join("objects")) else {
            return Ok(removed);
        };
        for entry in entries.flatten() {
            if !named.contains(&entry.file_name().to_string_lossy().into_owned()) {
                std::fs::remove_dir_all(entry.path()).map_err(|source| Error::Io {
                    context: format!("cannot remove {}", entry.path().display()),
                    source,
                })?;
                removed.push(entry.path());
            }
        }
        Ok(removed)
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        crate::dir::data_dir_error(format!("cannot set the mode of {}", path.display()), source)
    })
}

/// Removes staging directories whose unpacking process is gone.
fn sweep_staging(staging: &Path) {
    for dir in sandlot_core::backend::owner::left_by_the_gone(staging, "") {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Reads through to a hash of every byte.
struct Hashing<R> {
    inner: R,
    hash: sha2::Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// Unpacks the tar read from `from` into `dir`, without devices, FIFOs, setuid or
/// setgid bits; returns the SHA-256 of the tar. Owners are kept when this process can
/// give files away (it is root). No entry is written outside `dir`.
fn unpack_into(from: impl Read, dir: &Path) -> std::io::Result<String> {
    use tar::EntryType;
    let root = crate::spawn::is_root();
    let mut archive = tar::Archive::new(Hashing {
        inner: std::io::BufReader::with_capacity(1 << 20, from),
        hash: sha2::Sha256::new(),
    });
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(root);
    archive.set_preserve_mtime(true);
    archive.set_unpack_xattrs(false);
    // The jail mounts every tree nosuid and its sandboxes cannot gain privileges:
    // this is the third layer.
    archive.set_mask(0o6000);
    for entry in archive.entries()? {
        let mut entry = entry?;
        match entry.header().entry_type() {
            EntryType::Char | EntryType::Block | EntryType::Fifo => continue,
            _ => {}
        }
        if !entry.unpack_in(dir)? {
            let path = entry.path()?.display().to_string();
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the entry `{path}` points outside the tree"),
            ));
        }
    }
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())?;
    Ok(hex::encode(rest.hash.finalize()))
}

/// Makes what a read-only tree cannot get once it is a sandbox's root: the mount
/// points of the workspace, the agent, its egress socket and the memory cgroup, and
/// the files a Debian tarball leaves to its engine.
fn prepare_tree(tree: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for dir in [
        "workspace",
        "tmp",
        "proc",
        "dev",
        ".sandlot/egress",
        "sys/fs/cgroup/memory",
    ] {
        std::fs::create_dir_all(tree.join(dir))?;
    }
    std::fs::set_permissions(
        tree.join(".sandlot"),
        std::fs::Permissions::from_mode(0o755),
    )?;
    std::fs::write(tree.join(AGENT_MOUNT), b"")?;
    std::fs::write(
        tree.join("etc/hosts"),
        "127.0.0.1 localhost sandlot\n::1 localhost ip6-localhost ip6-loopback\n",
    )?;
    let resolv = tree.join("etc/resolv.conf");
    if std::fs::symlink_metadata(&resolv).is_err() {
        std::fs::write(&resolv, b"")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar with a file, a setuid file, a device node, a FIFO and a directory.
    fn sample() -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, mode: u32, data: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_mode(mode);
            header.set_size(data.len() as u64);
            header.set_uid(0);
            header.set_gid(0);
            header.set_cksum();
            tar.append_data(&mut header, path, data).unwrap();
        };
        add("./etc/", tar::EntryType::Directory, 0o755, b"");
        add(
            "./etc/os-release",
            tar::EntryType::Regular,
            0o644,
            b"debian\n",
        );
        add("./usr/bin/su", tar::EntryType::Regular, 0o4755, b"su");
        add("./usr/bin/wall", tar::EntryType::Regular, 0o2755, b"wall");
        add("./dev/null", tar::EntryType::Char, 0o666, b"");
        add("./run/initctl", tar::EntryType::Fifo, 0o600, b"");
        tar.into_inner().unwrap()
    }

    fn recipe() -> Recipe {
        Recipe::all()
            .into_iter()
            .find(|r| r.name == "python")
            .unwrap()
    }

    #[test]
    fn a_tree_has_no_devices_no_setuid_and_its_mount_points() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tar = dir.path().join("python.tar");
        std::fs::write(&tar, sample()).unwrap();
        let store = RootfsStore::at(dir.path().join("store"));
        assert_eq!(store.find(&recipe()), None);
        let rootfs = store.unpack(&recipe(), &tar, &mut |_| {}).unwrap();
        assert_eq!(rootfs.digest, hex::encode(sha2::Sha256::digest(sample())));
        let tree = &rootfs.path;
        let mode = |p: &str| {
            std::fs::metadata(tree.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("usr/bin/su"), 0o755);
        assert_eq!(mode("usr/bin/wall"), 0o755);
        assert_eq!(
            std::fs::read_to_string(tree.join("etc/os-release")).unwrap(),
            "debian\n"
        );
        assert!(!tree.join("dev/null").exists());
        assert!(!tree.join("run/initctl").exists());
        for made in [
            "workspace",
            ".sandlot/egress",
            "sys/fs/cgroup/memory",
            "proc",
        ] {
            assert!(tree.join(made).is_dir(), "{made}");
        }
        assert!(tree.join(AGENT_MOUNT).is_file());
        assert!(std::fs::read_to_string(tree.join("etc/hosts"))
            .unwrap()
            .contains("localhost"));
        assert_eq!(store.find(&recipe()), Some(rootfs.clone()));

        // The same bytes again: the same tree, nothing left in staging.
        let again = store.unpack(&recipe(), &tar, &mut |_| {}).unwrap();
        assert_eq!(again, rootfs);
        assert_eq!(
            std::fs::read_dir(store.dir().join("staging"))
                .unwrap()
                .count(),
            0
        );
        assert_eq!(store.prune().unwrap(), Vec::<PathBuf>::new());
    }

    #[test]
    fn an_entry_that_climbs_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(1);
        header.set_mode(0o644);
        // Written raw: the builder itself refuses such a path.
        header.as_gnu_mut().unwrap().name[..16].copy_from_slice(b"../../escaped.tx");
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend([b'x'].iter().chain([0u8; 511].iter()));
        bytes.extend([0u8; 1024]);
        let tar = dir.path().join("bad.tar");
        std::fs::write(&tar, bytes).unwrap();
        let store = RootfsStore::at(dir.path().join("store"));
        let error = store.unpack(&recipe(), &tar, &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains("cannot unpack"), "{error}");
        assert!(!dir.path().join("escaped.tx").exists());
        assert!(!dir.path().join("store/escaped.tx").exists());
        assert_eq!(store.find(&recipe()), None);
    }
}
