//! Files a run created or changed in the sandbox's output directory.

use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file a run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// Path relative to the output directory, `/`-separated.
    pub path: String,
    /// Contents.
    #[serde(skip)]
    pub bytes: Vec<u8>,
    /// Size in bytes.
    pub size: u64,
    /// Media type guessed from the extension.
    pub mime: &'static str,
    /// Whether it is an image, such as a saved figure.
    pub is_plot: bool,
}

/// Bounds on what one run may hand back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Most files.
    pub max_files: usize,
    /// Most bytes in all.
    pub max_bytes: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        ArtifactLimits {
            max_files: 64,
            max_bytes: 64 << 20,
        }
    }
}

/// Size and modification time of every regular file under a directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot(HashMap<PathBuf, (u64, Option<SystemTime>)>);

impl Snapshot {
    /// Walks `root` without following symbolic links: a link the program made can
    /// point anywhere on the host, so links are never read.
    pub(crate) fn take(root: &Path) -> Snapshot {
        let mut files = HashMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(path);
                } else if meta.is_file() {
                    if let Ok(rel) = path.strip_prefix(root) {
                        files.insert(rel.to_path_buf(), (meta.len(), meta.modified().ok()));
                    }
                }
            }
        }
        Snapshot(files)
    }

    /// A snapshot from `(path, size, modification time)` triples, e.g. as a container
    /// agent reports them.
    pub(crate) fn from_entries(
        entries: impl IntoIterator<Item = (PathBuf, u64, Option<SystemTime>)>,
    ) -> Snapshot {
        Snapshot(
            entries
                .into_iter()
                .map(|(path, size, mtime)| (path, (size, mtime)))
                .collect(),
        )
    }

    /// The files new or changed since `before` below the host directory `root`, in
    /// path order, within `limits`. Returns them and whether any were left out.
    pub(crate) fn changed_since(
        &self,
        before: &Snapshot,
        root: &Path,
        limits: ArtifactLimits,
    ) -> (Vec<Artifact>, bool) {
        self.changed_since_with(before, limits, |rel, max| {
            let path = root.join(rel);
            // Re-check: the file may have been replaced by a link since the walk.
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if !meta.is_file() || meta.len() > max {
                return None;
            }
            std::fs::read(&path).ok().filter(|b| b.len() as u64 <= max)
        })
    }

    /// As [`Snapshot::changed_since`], reading each file with `read(path, most bytes)`,
    /// which returns `None` for a file that is gone, not regular, or larger.
    pub(crate) fn changed_since_with(
        &self,
        before: &Snapshot,
        limits: ArtifactLimits,
        mut read: impl FnMut(&Path, u64) -> Option<Vec<u8>>,
    ) -> (Vec<Artifact>, bool) {
        let mut paths: Vec<_> = self
            .0
            .iter()
            .filter(|(path, stat)| before.0.get(*path) != Some(stat))
            .map(|(path, (size, _))| (path.clone(), *size))
            .collect();
        paths.sort();
        let mut artifacts = Vec::new();
        let mut total = 0u64;
        let mut left_out = false;
        for (rel, size) in paths {
            if artifacts.len() == limits.max_files || total + size > limits.max_bytes {
                left_out = true;
                continue;
            }
            let Some(bytes) = read(&rel, limits.max_bytes - total) else {
                continue;
            };
            total += bytes.len() as u64;
            let name = rel.to_string_lossy().replace('\\', "/");
            let (mime, is_plot) = media_type(&name);
            artifacts.push(Artifact {
                path: name,
                size: bytes.len() as u64,
                bytes,
                mime,
                is_plot,
            });
        }
        (artifacts, left_out)
    }
}

/// Media type and whether it is an image, from the file name.
fn media_type(name: &str) -> (&'static str, bool) {
    let extension = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "png" => ("image/png", true),
        "jpg" | "jpeg" => ("image/jpeg", true),
        "gif" => ("image/gif", true),
        "svg" => ("image/svg+xml", true),
        "webp" => ("image/webp", true),
        "pdf" => ("application/pdf", false),
        "csv" => ("text/csv", false),
        "json" => ("application/json", false),
        "txt" | "log" | "md" => ("text/plain", false),
        "html" | "htm" => ("text/html", false),
        _ => ("application/octet-stream", false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_or_changed_regular_files_come_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.txt"), "same").unwrap();
        std::fs::write(dir.path().join("edit.csv"), "a").unwrap();
        let before = Snapshot::take(dir.path());
        std::fs::write(dir.path().join("edit.csv"), "a,b").unwrap();
        std::fs::create_dir(dir.path().join("figs")).unwrap();
        std::fs::write(dir.path().join("figs/plot.PNG"), b"\x89PNG").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("leak.txt")).unwrap();
        let (artifacts, left_out) = Snapshot::take(dir.path()).changed_since(
            &before,
            dir.path(),
            ArtifactLimits::default(),
        );
        let names: Vec<_> = artifacts
            .iter()
            .map(|a| (a.path.as_str(), a.is_plot))
            .collect();
        assert_eq!(names, [("edit.csv", false), ("figs/plot.PNG", true)]);
        assert_eq!(artifacts[0].bytes, b"a,b");
        assert!(!left_out);
    }

    #[test]
    fn limits_bound_count_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let before = Snapshot::take(dir.path());
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("{i}.bin")), vec![0u8; 100]).unwrap();
        }
        let limits = ArtifactLimits {
            max_files: 3,
            max_bytes: 250,
        };
        let (artifacts, left_out) =
            Snapshot::take(dir.path()).changed_since(&before, dir.path(), limits);
        assert_eq!(artifacts.len(), 2, "250 bytes hold two files of 100");
        assert!(left_out);
    }
}
