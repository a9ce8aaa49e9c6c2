//! Packing a file or directory of the host's own file system as a tar archive, for
//! sandlot-core's copies into a sandbox. Apart from the protocol: no message uses it,
//! and the agent packs below its root with its own `files` module.

use std::io;

/// A tar archive of the file or directory at `path` (for a directory, its contents),
/// with regular files and directories only: links are left out, never followed.
/// Fails once the archive would pass `max` bytes.
pub fn pack(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    use std::fs;
    let meta = fs::symlink_metadata(path)?;
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    let mut total = 0u64;
    let mut add = |tar: &mut tar::Builder<Vec<u8>>,
                   full: &std::path::Path,
                   name: &std::path::Path,
                   meta: &fs::Metadata| {
        // A directory costs a header; a file its size plus a header and padding.
        total += if meta.is_dir() {
            512
        } else {
            meta.len() + 1024
        };
        if total > max {
            return Err(io::Error::other(format!(
                "it holds more than the {max} bytes one copy may move"
            )));
        }
        if meta.is_dir() {
            tar.append_dir(name, full)
        } else {
            tar.append_path_with_name(full, name)
        }
    };
    if meta.is_file() {
        let name = std::path::PathBuf::from(path.file_name().unwrap_or_default());
        add(&mut tar, path, &name, &meta)?;
    } else if meta.is_dir() {
        let mut stack = vec![path.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let mut items: Vec<_> = fs::read_dir(&dir)?.flatten().collect();
            items.sort_by_key(|i| i.file_name());
            for item in items {
                let full = item.path();
                let Ok(meta) = fs::symlink_metadata(&full) else {
                    continue;
                };
                let name = full.strip_prefix(path).unwrap_or(&full).to_path_buf();
                if meta.is_dir() {
                    add(&mut tar, &full, &name, &meta)?;
                    stack.push(full);
                } else if meta.is_file() {
                    add(&mut tar, &full, &name, &meta)?;
                }
            }
        }
    } else {
        return Err(io::Error::other(
            "it is neither a file nor a directory (links are not copied)",
        ));
    }
    tar.into_inner()
}
