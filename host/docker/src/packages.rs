//! What images hold, by their Debian package database: kept by image, in memory and on
//! disk, so that a look into an image is paid once per machine.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What images hold, as read: in memory by image reference, and on disk by image id
/// (an image is never changed, only replaced by one with another id), so that a
/// session pays for a look into its image once per machine, not once per process.
pub(crate) struct Packages {
    dir: Option<PathBuf>,
    by_image: Mutex<HashMap<String, Known>>,
}

struct Known {
    id: String,
    packages: Arc<BTreeMap<String, String>>,
    /// When the reference was last seen to stand for `id`.
    checked: Instant,
}

/// How long a reference is taken to stand for the image it stood for, unasked: a
/// session opened in that time asks the engine nothing more.
const RECHECK: Duration = Duration::from_secs(60);

impl Packages {
    pub(crate) fn new(dir: Option<PathBuf>) -> Packages {
        Packages {
            dir,
            by_image: Mutex::new(HashMap::new()),
        }
    }

    /// What `image` holds, if known: without `id`, if the reference was checked
    /// lately; with it, if it still stands for that image.
    pub(crate) fn known(
        &self,
        image: &str,
        id: Option<&str>,
    ) -> Option<Arc<BTreeMap<String, String>>> {
        let mut known = self.by_image.lock().unwrap_or_else(|e| e.into_inner());
        let entry = known.get_mut(image)?;
        match id {
            None if entry.checked.elapsed() < RECHECK => Some(entry.packages.clone()),
            Some(id) if id == entry.id => {
                entry.checked = Instant::now();
                Some(entry.packages.clone())
            }
            _ => None,
        }
    }

    pub(crate) fn keep(&self, image: &str, id: &str, packages: Arc<BTreeMap<String, String>>) {
        let known = Known {
            id: id.to_string(),
            packages,
            checked: Instant::now(),
        };
        let mut by_image = self.by_image.lock().unwrap_or_else(|e| e.into_inner());
        by_image.insert(image.to_string(), known);
    }

    /// The file of image `id` (`sha256:…`: its letters and digits only).
    pub(crate) fn file(&self, id: &str) -> Option<PathBuf> {
        let name: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
        Some(self.dir.as_ref()?.join(format!("{name}.json")))
    }

    pub(crate) fn read(&self, id: &str) -> Option<BTreeMap<String, String>> {
        let bytes = std::fs::read(self.file(id)?).ok()?;
        // A file that does not parse is read from the image again, and rewritten.
        serde_json::from_slice(&bytes).ok()
    }

    /// Best effort: a cache that cannot be written costs a look next time, no more.
    pub(crate) fn write(&self, id: &str, packages: &BTreeMap<String, String>) {
        let (Some(dir), Some(file)) = (self.dir.as_ref(), self.file(id)) else {
            return;
        };
        let Ok(json) = serde_json::to_vec(packages) else {
            return;
        };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        // Whole or not at all: another process may read it meanwhile.
        if let Ok(mut temp) = tempfile::NamedTempFile::new_in(dir) {
            if temp.write_all(&json).is_ok() {
                let _ = temp.persist(file);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packages() -> BTreeMap<String, String> {
        BTreeMap::from([("python3.11".to_string(), "3.11.2-6".to_string())])
    }

    #[test]
    fn a_reference_is_trusted_until_it_stands_for_another_image() {
        let cache = Packages::new(None);
        assert!(cache.known("sandlot/python:latest", None).is_none());
        cache.keep("sandlot/python:latest", "sha256:aa", Arc::new(packages()));
        assert!(cache.known("sandlot/python:latest", None).is_some());
        assert!(cache
            .known("sandlot/python:latest", Some("sha256:aa"))
            .is_some());
        // Rebuilt under the same name: read again.
        assert!(cache
            .known("sandlot/python:latest", Some("sha256:bb"))
            .is_none());
        assert!(cache.known("sandlot/node:latest", None).is_none());
    }

    #[test]
    fn the_disk_keeps_an_image_for_the_next_process_and_a_bad_file_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Packages::new(Some(dir.path().join("image-packages")));
        assert_eq!(cache.read("sha256:aa"), None);
        cache.write("sha256:aa", &packages());
        let next = Packages::new(Some(dir.path().join("image-packages")));
        assert_eq!(next.read("sha256:aa"), Some(packages()));
        std::fs::write(next.file("sha256:aa").unwrap(), b"{not json").unwrap();
        assert_eq!(next.read("sha256:aa"), None);
        // A cache that cannot be written costs nothing but the next look.
        Packages::new(None).write("sha256:aa", &packages());
    }
}
