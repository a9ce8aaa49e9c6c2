//! Files a run created or changed in the sandbox's output directory.

use crate::sandbox_path::SandboxPath;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

/// A file a run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// Path relative to the output directory. It came from the sandbox: write it to
    /// the host with [`Artifact::write_into`] (or [`crate::Execution::write_artifacts`]),
    /// never by joining it to a host path yourself.
    pub path: SandboxPath,
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

impl Artifact {
    /// An artifact named `path` holding `bytes`, its media type from the name.
    pub fn new(path: SandboxPath, bytes: Vec<u8>) -> Artifact {
        let (mime, is_plot) = media_type(path.as_str());
        Artifact {
            size: bytes.len() as u64,
            path,
            bytes,
            mime,
            is_plot,
        }
    }

    /// Writes the file below `dir` (its directories made on the way) through the
    /// directory's capability handle: nothing outside `dir` can be reached, by the
    /// name or by a link already in `dir`.
    pub fn write_into(&self, dir: &cap_std::fs::Dir) -> std::io::Result<()> {
        self.path.write_into(dir, &self.bytes)
    }
}

/// What happens to the files earlier runs of a session left in its output directory.
/// Either way a run returns only the files it created or changed, so a plot comes
/// back once, in the run that made it.
///
/// ```no_run
/// # fn main() -> Result<(), sandlot::Error> {
/// # let sandlot = sandlot::from_environment()?;
/// use sandlot::EarlierOutput;
/// let mut session = sandlot.session("python").earlier_output(EarlierOutput::Clear).open()?;
/// session.run("open('output/a.txt', 'w').write('a')")?;
/// let listed = session.run("import os\nprint(os.listdir('output'))")?;
/// assert_eq!(listed.stdout_text(), "[]\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EarlierOutput {
    /// They stay, for later code to read (the default).
    #[default]
    Keep,
    /// The output directory is emptied before each run, so it holds only that run's
    /// files.
    Clear,
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

/// One regular file of a sandbox, as a scan reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// Path relative to the scanned directory.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, if known.
    pub modified: Option<SystemTime>,
}

/// Size and modification time of every regular file under a directory: what a
/// backend's [`scan`](crate::backend::SandboxFiles::scan) reports, so the session can
/// tell which files a run created or changed.
///
/// ```
/// use sandlot::backend::{FileStat, FileScan};
/// let scan = FileScan::from_stats([FileStat { path: "plot.png".into(), size: 3, modified: None }]);
/// assert_eq!(scan.len(), 1);
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileScan(HashMap<PathBuf, (u64, Option<SystemTime>)>);

impl FileScan {
    /// A scan of these files.
    pub fn from_stats(files: impl IntoIterator<Item = FileStat>) -> FileScan {
        FileScan(
            files
                .into_iter()
                .map(|f| (f.path, (f.size, f.modified)))
                .collect(),
        )
    }

    /// The files it found, in no particular order: what a backend hands across a
    /// process boundary to rebuild the scan there with [`FileScan::from_stats`].
    pub fn stats(&self) -> impl Iterator<Item = FileStat> + '_ {
        self.0.iter().map(|(path, &(size, modified))| FileStat {
            path: path.clone(),
            size,
            modified,
        })
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no file.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The files new or changed since `before`, in path order, within `limits`, read
    /// with `read(path, most bytes)`, which returns `None` for a file that is gone,
    /// not regular, or larger. A file whose name is no [`SandboxPath`] is neither read
    /// nor returned: it is counted in [`Collected::refused`].
    pub(crate) fn changed_since_with(
        &self,
        before: &FileScan,
        limits: ArtifactLimits,
        mut read: impl FnMut(&SandboxPath, u64) -> Option<Vec<u8>>,
    ) -> Collected {
        let mut collected = Collected::default();
        let mut paths: Vec<_> = self
            .0
            .iter()
            .filter(|(path, stat)| before.0.get(*path) != Some(stat))
            .filter_map(|(path, (size, _))| match SandboxPath::from_path(path) {
                Ok(path) => Some((path, *size)),
                Err(_) => {
                    collected.refused += 1;
                    None
                }
            })
            .collect();
        paths.sort();
        let mut total = 0u64;
        for (rel, size) in paths {
            if collected.artifacts.len() == limits.max_files || total + size > limits.max_bytes {
                collected.left_out = true;
                continue;
            }
            let Some(bytes) = read(&rel, limits.max_bytes - total) else {
                continue;
            };
            total += bytes.len() as u64;
            collected.artifacts.push(Artifact::new(rel, bytes));
        }
        collected
    }
}

/// What [`FileScan::changed_since_with`] found.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// The files, in path order.
    pub(crate) artifacts: Vec<Artifact>,
    /// Whether the limits left some out.
    pub(crate) left_out: bool,
    /// How many were left out because their names cannot be represented.
    pub(crate) refused: usize,
}

/// The media type of a file, from its name's extension.
#[doc(hidden)]
pub fn mime_of(name: &str) -> &'static str {
    media_type(name).0
}

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

    fn stat(path: &str, size: u64, secs: u64) -> FileStat {
        FileStat {
            path: path.into(),
            size,
            modified: Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)),
        }
    }

    #[test]
    fn only_new_or_changed_files_come_back() {
        let before = FileScan::from_stats([stat("old.txt", 4, 1), stat("edit.csv", 1, 1)]);
        let after = FileScan::from_stats([
            stat("old.txt", 4, 1),
            stat("edit.csv", 3, 2),
            stat("figs/plot.PNG", 4, 2),
        ]);
        let found = after.changed_since_with(&before, ArtifactLimits::default(), |rel, _| {
            Some(rel.as_str().as_bytes()[..3].to_vec())
        });
        let names: Vec<_> = found
            .artifacts
            .iter()
            .map(|a| (a.path.as_str(), a.is_plot))
            .collect();
        assert_eq!(names, [("edit.csv", false), ("figs/plot.PNG", true)]);
        assert_eq!(found.artifacts[0].bytes, b"edi");
        assert!(!found.left_out);
        assert_eq!(found.refused, 0);
    }

    #[test]
    fn names_that_cannot_be_shown_are_refused_and_counted() {
        use std::os::unix::ffi::OsStrExt;
        let odd = |bytes: &[u8]| FileStat {
            path: std::ffi::OsStr::from_bytes(bytes).into(),
            size: 1,
            modified: None,
        };
        let after = FileScan::from_stats([
            odd(b"a\nsandlot: forged"),
            odd(b"caf\xe9.txt"),
            odd(b"x\x1b[31m.png"),
            odd(br"..\..\evil.txt"),
        ]);
        let mut read = Vec::new();
        let found =
            after.changed_since_with(&FileScan::default(), ArtifactLimits::default(), |rel, _| {
                read.push(rel.clone());
                Some(b"x".to_vec())
            });
        assert_eq!(found.refused, 3);
        assert_eq!(
            read,
            [r"..\..\evil.txt"],
            "only the representable name is read"
        );
        assert_eq!(found.artifacts[0].path.to_string(), r"..\\..\\evil.txt");
    }

    #[test]
    fn limits_bound_count_and_bytes() {
        let after = FileScan::from_stats((0..5).map(|i| stat(&format!("{i}.bin"), 100, 1)));
        let limits = ArtifactLimits {
            max_files: 3,
            max_bytes: 250,
        };
        let found =
            after.changed_since_with(&FileScan::default(), limits, |_, _| Some(vec![0; 100]));
        assert_eq!(found.artifacts.len(), 2, "250 bytes hold two files of 100");
        assert!(found.left_out);
    }
}
