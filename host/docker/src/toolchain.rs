//! What an image runs a language with: its Debian package database, read out of a
//! container that is created for it and never started.

use crate::backend::ContainerBackend;
use bollard::models::ContainerCreateBody;
use futures_util::StreamExt;
use sandlot_container::toolchain::{installed_packages, of_image, DPKG_STATUS};
use sandlot_core::backend::{owner, wait};
use sandlot_core::error::Result;
use sandlot_core::toolchain::Toolchain;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;

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
        let _ = crate::container::remove(&self.docker, self.runtime.handle(), created.id);
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
