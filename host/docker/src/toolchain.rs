//! What an image runs a language with: its Debian package database, read out of a
//! container that is created for it and never started.

use super::{sandbox, ContainerBackend};
use bollard::models::ContainerCreateBody;
use futures_util::StreamExt;
use sandlot_container::toolchain::{installed_packages, of_image, DPKG_STATUS};
use sandlot_core::backend::{owner, wait};
use sandlot_core::error::Result;
use sandlot_core::toolchain::Toolchain;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What images hold, as read: in memory by image reference, and on disk by image id
/// (an image is never changed, only replaced by one with another id), so that a
/// session pays for a look into its image once per machine, not once per process.
pub(super) struct Packages {
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
    pub(super) fn new(dir: Option<PathBuf>) -> Packages {
        Packages {
            dir,
            by_image: Mutex::new(HashMap::new()),
        }
    }

    /// What `image` holds, if known: without `id`, if the reference was checked
    /// lately; with it, if it still stands for that image.
    fn known(&self, image: &str, id: Option<&str>) -> Option<Arc<BTreeMap<String, String>>> {
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

    fn keep(&self, image: &str, id: &str, packages: Arc<BTreeMap<String, String>>) {
        let known = Known {
            id: id.to_string(),
            packages,
            checked: Instant::now(),
        };
        let mut by_image = self.by_image.lock().unwrap_or_else(|e| e.into_inner());
        by_image.insert(image.to_string(), known);
    }

    /// The file of image `id` (`sha256:…`: its letters and digits only).
    fn file(&self, id: &str) -> Option<PathBuf> {
        let name: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
        Some(self.dir.as_ref()?.join(format!("{name}.json")))
    }

    fn read(&self, id: &str) -> Option<BTreeMap<String, String>> {
        let bytes = std::fs::read(self.file(id)?).ok()?;
        // A file that does not parse is read from the image again, and rewritten.
        serde_json::from_slice(&bytes).ok()
    }

    /// Best effort: a cache that cannot be written costs a look next time, no more.
    fn write(&self, id: &str, packages: &BTreeMap<String, String>) {
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

/// The status file is some hundreds of KB in the largest image; past this it is not one.
const MAX_STATUS: u64 = 16 << 20;

impl ContainerBackend {
    /// What `image` runs `language` with; `None` if the image is not here, has no
    /// package database, or none of its packages is the language's interpreter.
    pub(super) fn image_toolchain(&self, language: &str, image: &str) -> Result<Option<Toolchain>> {
        if let Some(packages) = self.packages.known(image, None) {
            return Ok(of_image(language, image, &packages));
        }
        let docker = self.docker.clone();
        let name = image.to_string();
        let id = match wait(self.runtime.handle(), async move {
            docker.inspect_image(&name).await
        }) {
            Some(Ok(inspected)) => inspected.id.unwrap_or_else(|| image.to_string()),
            Some(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })) => return Ok(None),
            Some(Err(e)) => return Err(self.engine_error(format!("looking at {image}"), e)),
            None => return Err(self.engine_error(image, "the engine runtime stopped")),
        };
        let packages = match self.packages.known(image, Some(&id)) {
            Some(packages) => packages,
            None => {
                let packages = match self.packages.read(&id) {
                    Some(packages) => packages,
                    None => {
                        let packages = self.read_packages(image)?;
                        self.packages.write(&id, &packages);
                        packages
                    }
                };
                let packages = Arc::new(packages);
                self.packages.keep(image, &id, packages.clone());
                packages
            }
        };
        Ok(of_image(language, image, &packages))
    }

    /// The image's installed packages; none if it has no package database.
    fn read_packages(&self, image: &str) -> Result<BTreeMap<String, String>> {
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            // Never run: the engine only needs something to hold.
            cmd: Some(vec!["/nonexistent".to_string()]),
            network_disabled: Some(true),
            // Owned as a sandbox is: `gc` in another process leaves it alone while this
            // one lives, and reaps it if this one died before removing it.
            labels: Some(HashMap::from([
                ("sandlot".to_string(), "1".to_string()),
                ("sandlot.owner".to_string(), owner::owner_tag()),
            ])),
            ..Default::default()
        };
        let name = format!("sandlot-look-{}-{}", std::process::id(), unique());
        let created = self.create_named(&name, body)?;
        let docker = self.docker.clone();
        let container = created.id.clone();
        let archive = wait(self.runtime.handle(), async move {
            let options = bollard::query_parameters::DownloadFromContainerOptions {
                path: DPKG_STATUS.to_string(),
            };
            let mut stream = docker.download_from_container(&container, Some(options));
            let mut archive = Vec::new();
            while let Some(chunk) = stream.next().await {
                archive.extend_from_slice(&chunk?);
                if archive.len() as u64 > MAX_STATUS {
                    break;
                }
            }
            Ok::<_, bollard::errors::Error>(archive)
        });
        // Removed whatever the read did; a container left over is reaped by `gc`.
        let _ = sandbox::remove(&self.docker, self.runtime.handle(), created.id);
        let archive = match archive {
            Some(Ok(archive)) => archive,
            Some(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })) => return Ok(BTreeMap::new()),
            Some(Err(e)) => {
                return Err(self.engine_error(format!("reading {DPKG_STATUS} of {image}"), e))
            }
            None => return Err(self.engine_error(image, "the engine runtime stopped")),
        };
        let mut status = String::new();
        let mut entries = tar::Archive::new(archive.as_slice());
        if let Some(Ok(entry)) = entries.entries().ok().and_then(|mut e| e.next()) {
            // Not UTF-8 or cut short: what was read is what is known.
            let _ = entry.take(MAX_STATUS).read_to_string(&mut status);
        }
        Ok(installed_packages(&status))
    }
}

/// A number no other look of this process used.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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
