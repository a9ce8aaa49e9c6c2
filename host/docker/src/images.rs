//! Container images built without a registry: a root filesystem made by `mmdebstrap`
//! from the machine's own Debian sources, imported into the engine with a label that
//! records which recipe made it.
//!
//! The recipes are `sandlot_container::recipe` (`host/container/recipes/*.toml`), built into the binary:
//!
//! ```toml
//! # Python 3 with pip and venv.
//! image = "sandlot/python:latest"
//! languages = ["python"]
//! packages = ["python3", "python3-pip", "python3-venv"]
//! ```

use crate::backend::ContainerBackend;
use bollard::models::{ContainerConfig, ContainerCreateBody};
use bollard::query_parameters::{
    CommitContainerOptions, CreateImageOptions, ListImagesOptions, RemoveImageOptions,
};
use futures_util::StreamExt;
pub use sandlot_container::recipe::{Recipe, RECIPE_VARIABLE};
use sandlot_core::backend::wait;
use sandlot_core::error::{Error, Result};
use sha2::Digest;
use std::io::Read;
use std::path::Path;

/// The variable in an agent variant's environment that names the image it was made
/// from: a variant of an image since rebuilt is made again.
const VARIANT_BASE_VARIABLE: &str = "SANDLOT_AGENT_BASE";

/// How long an engine may take to import an image's root filesystem: a request of its
/// own, far past the client's 120 s for every other call. Podman took more than 120 s
/// for the 400 MB Python image on a 2-core machine busy building, and the image build
/// failed.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// An image in the engine that sandlot built or that a language is set to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// Reference, e.g. `sandlot/python:latest`.
    pub reference: String,
    /// Size in bytes.
    pub size: u64,
    /// The recipe it was built from, if it matches a current recipe.
    pub recipe: Option<String>,
    /// Whether it was built from the current text of its recipe.
    pub current: bool,
}

/// `reference` without the registry Podman qualifies local names with
/// (`docker.io/sandlot/python:latest` for an import).
fn short_name(reference: &str) -> &str {
    ["localhost/", "docker.io/"]
        .iter()
        .find_map(|prefix| reference.strip_prefix(prefix))
        .unwrap_or(reference)
}

impl ContainerBackend {
    /// The images whose name starts with `sandlot/` (but for the recipes' agent
    /// variants), and whether each is up to date.
    pub fn images(&self) -> Result<Vec<ImageInfo>> {
        let docker = self.docker.clone();
        let summaries = wait(self.runtime.handle(), async move {
            docker
                .list_images(Some(ListImagesOptions {
                    all: false,
                    ..Default::default()
                }))
                .await
        })
        .ok_or_else(|| self.engine_error("listing images", "the engine runtime stopped"))?
        .map_err(|e| self.engine_error("listing images", e))?;
        let recipes = Recipe::all();
        let mut images = Vec::new();
        for summary in summaries {
            for reference in &summary.repo_tags {
                let short = short_name(reference);
                // Agent variants are part of their recipe's image, made with it
                // (those of other agent versions included: the next build removes them).
                let variant = recipes
                    .iter()
                    .any(|r| sandlot_container::is_variant(&r.image, short));
                if !short.starts_with("sandlot/") || variant {
                    continue;
                }
                let recipe = recipes.iter().find(|r| r.image == short);
                let built_from = match recipe {
                    Some(_) => self.recipe_of(reference)?,
                    None => None,
                };
                images.push(ImageInfo {
                    reference: short.to_string(),
                    size: summary.size.max(0) as u64,
                    recipe: recipe.map(|r| r.name.clone()),
                    current: recipe.is_some_and(|r| built_from.as_deref() == Some(r.hash.as_str())),
                });
            }
        }
        images.sort_by(|a, b| a.reference.cmp(&b.reference));
        Ok(images)
    }

    /// Whether the engine holds `reference` (an engine that does not answer holds
    /// nothing).
    pub(crate) fn has_image(&self, reference: &str) -> bool {
        let docker = self.docker.clone();
        let name = reference.to_string();
        wait(self.runtime.handle(), async move {
            docker.inspect_image(&name).await
        })
        .is_some_and(|inspect| inspect.is_ok())
    }

    /// The recipe hash an image was built from, from its environment.
    fn recipe_of(&self, reference: &str) -> Result<Option<String>> {
        let docker = self.docker.clone();
        let name = reference.to_string();
        let inspect = wait(self.runtime.handle(), async move {
            docker.inspect_image(&name).await
        })
        .ok_or_else(|| self.engine_error("inspecting an image", "the engine runtime stopped"))?
        .map_err(|e| self.engine_error(format!("inspecting {reference}"), e))?;
        let prefix = format!("{RECIPE_VARIABLE}=");
        Ok(inspect
            .config
            .and_then(|c| c.env)
            .unwrap_or_default()
            .iter()
            .find_map(|v| v.strip_prefix(&prefix).map(str::to_string)))
    }

    /// Builds `recipe`'s image: its root filesystem (kept in `cache_dir` and reused, so
    /// a second engine imports the same bytes), then an import with the recipe label.
    /// `progress` sees one line at a time.
    pub fn build_image(
        &self,
        recipe: &Recipe,
        cache_dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let tar = recipe.rootfs_tar(cache_dir, progress)?;
        progress(&format!(
            "importing into {} as {}",
            self.engine.name(),
            recipe.image
        ));
        self.import(&tar, recipe)?;
        progress(&format!("built {}", recipe.image));
        Ok(())
    }

    /// Puts the agent's own image ([`sandlot_container::image`]) into the engine
    /// unless it is there: what a Kubernetes node running on this engine starts its
    /// pods' init containers from. Returns the reference, and whether it was loaded
    /// now.
    pub fn load_agent_image(&self) -> Result<(String, bool)> {
        let reference = sandlot_container::image();
        let docker = self.docker.clone();
        let name = reference.clone();
        let present = wait(self.runtime.handle(), async move {
            docker.inspect_image(&name).await
        })
        .ok_or_else(|| self.engine_error("inspecting an image", "the engine runtime stopped"))?;
        if present.is_ok() {
            return Ok((reference, false));
        }
        let archive = sandlot_container::archive("sandlot-agent")?;
        let options = CreateImageOptions {
            from_src: Some("-".into()),
            // The tag goes with the repository: Podman 4.3's import ignores `tag`.
            repo: Some(reference.clone()),
            ..Default::default()
        };
        let docker = self.docker.clone();
        wait(self.runtime.handle(), async move {
            let mut stream = docker.create_image(
                Some(options),
                Some(bollard::body_full(archive.into())),
                None,
            );
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        })
        .ok_or_else(|| self.engine_error("importing an image", "the engine runtime stopped"))?
        .map_err(|e| self.engine_error(format!("importing {reference}"), e))?;
        Ok((reference, true))
    }

    /// Makes `base` with the agent inside ([`sandlot_container::variant`]) unless
    /// the engine has it, made from this very `base`: what the Kubernetes backend
    /// starts pods of sandlot's own images from when the node runs on this engine.
    /// Returns the reference, and whether it was made now.
    pub fn load_agent_variant(&self, base: &str) -> Result<(String, bool)> {
        let reference = sandlot_container::variant(base);
        let base_id = {
            let docker = self.docker.clone();
            let base = base.to_string();
            self.wait(&format!("inspecting {base}"), async move {
                docker.inspect_image(&base).await
            })?
            .id
            .unwrap_or_default()
        };
        let marker = format!("{VARIANT_BASE_VARIABLE}={base_id}");
        let existing = {
            let docker = self.docker.clone();
            let name = reference.clone();
            wait(self.runtime.handle(), async move {
                docker.inspect_image(&name).await
            })
        };
        if let Some(Ok(existing)) = existing {
            let env = existing.config.and_then(|c| c.env).unwrap_or_default();
            if env.contains(&marker) {
                self.remove_other_variants(base, &reference);
                return Ok((reference, false));
            }
        }
        // A container that never starts, holding the agent, committed as the image.
        // Unlabelled: the image would keep its labels, and so would every container
        // made from it, which `sandlot gc` would then take for its own.
        // Named after the variant: one left by a build that was killed is removed
        // here, by the next build of the same variant.
        let name = format!(
            "sandlot-variant-{}",
            &hex::encode(sha2::Sha256::digest(reference.as_bytes()))[..16]
        );
        crate::container::remove(&self.docker, self.runtime.handle(), name.clone())
            .ok_or_else(|| self.engine_error("removing a container", "the engine runtime stopped"))?
            .map_err(|e| self.engine_error(format!("removing container {name}"), e))?;
        self.create_named(
            &name,
            ContainerCreateBody {
                image: Some(base.to_string()),
                cmd: Some(vec![sandlot_container::BAKED_PATH.to_string()]),
                ..Default::default()
            },
        )?;
        let made = self.fill_and_commit(&name, &reference, &marker);
        let removed = crate::container::remove(&self.docker, self.runtime.handle(), name.clone())
            .ok_or_else(|| self.engine_error("removing a container", "the engine runtime stopped"))?
            .map_err(|e| self.engine_error(format!("removing container {name}"), e));
        made.and(removed)?;
        self.remove_other_variants(base, &reference);
        Ok((reference, true))
    }

    /// Removes the variants of `base` made for other versions of the agent, which
    /// would otherwise pile up with every upgrade. One that a container still uses
    /// stays (the engine refuses), to go at a later build.
    fn remove_other_variants(&self, base: &str, current: &str) {
        let docker = self.docker.clone();
        let Some(Ok(summaries)) = wait(self.runtime.handle(), async move {
            docker.list_images(None::<ListImagesOptions>).await
        }) else {
            return;
        };
        let stale: Vec<String> = summaries
            .iter()
            .flat_map(|s| s.repo_tags.iter())
            .filter(|reference| {
                let short = short_name(reference);
                short != current && sandlot_container::is_variant(base, short)
            })
            .cloned()
            .collect();
        for reference in stale {
            let docker = self.docker.clone();
            let _ = wait(self.runtime.handle(), async move {
                docker
                    .remove_image(&reference, None::<RemoveImageOptions>, None)
                    .await
            });
        }
    }

    fn fill_and_commit(&self, container: &str, reference: &str, marker: &str) -> Result<()> {
        let archive =
            sandlot_container::archive(sandlot_container::BAKED_PATH.trim_start_matches('/'))?;
        self.upload(container, "/", archive, "copying the agent into the image")?;
        let (repository, tag) = reference
            .rsplit_once(':')
            .expect("a variant reference has a tag");
        let options = CommitContainerOptions {
            container: Some(container.to_string()),
            repo: Some(repository.to_string()),
            tag: Some(tag.to_string()),
            pause: false,
            ..Default::default()
        };
        // The engine keeps the base's configuration and adds this variable.
        let config = ContainerConfig {
            env: Some(vec![marker.to_string()]),
            ..Default::default()
        };
        let docker = self.docker.clone();
        self.wait(&format!("committing {reference}"), async move {
            docker.commit_container(options, config).await
        })?;
        Ok(())
    }

    fn import(&self, tar: &Path, recipe: &Recipe) -> Result<()> {
        let file = std::fs::File::open(tar).map_err(|e| Error::Io {
            context: format!("cannot open {}", tar.display()),
            source: e,
        })?;
        let chunks = futures_util::stream::unfold(file, |mut file| async move {
            let mut buf = vec![0u8; 1 << 20];
            match file.read(&mut buf) {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(bytes::Bytes::from(buf)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let (repo, tag) = recipe
            .image
            .rsplit_once(':')
            .unwrap_or((recipe.image.as_str(), "latest"));
        let options = CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(repo.into()),
            tag: Some(tag.into()),
            // Containers get PATH, LANG and HOME from the backend, so the image needs
            // no other configuration.
            changes: vec![format!("ENV {RECIPE_VARIABLE}={}", recipe.hash)],
            ..Default::default()
        };
        let docker = self.docker.clone().with_timeout(IMPORT_TIMEOUT);
        let result = wait(self.runtime.handle(), async move {
            let mut stream =
                docker.create_image(Some(options), Some(bollard::body_try_stream(chunks)), None);
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        });
        result
            .ok_or_else(|| self.engine_error("importing an image", "the engine runtime stopped"))?
            .map_err(|e| self.engine_error(format!("importing {}", recipe.image), e))
    }

    /// Pulls `reference` from its registry, reporting progress line by line.
    pub fn pull_image(&self, reference: &str, progress: &mut dyn FnMut(&str)) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel::<std::result::Result<String, String>>();
        let docker = self.docker.clone();
        let options = CreateImageOptions {
            from_image: Some(reference.into()),
            ..Default::default()
        };
        self.runtime.spawn(async move {
            let mut stream = docker.create_image(Some(options), None, None);
            while let Some(item) = stream.next().await {
                let message = item
                    .map(|info| {
                        let fraction =
                            info.progress_detail
                                .and_then(|p| match (p.current, p.total) {
                                    (Some(current), Some(total)) if total > 0 => {
                                        Some(format!("{}%", current * 100 / total))
                                    }
                                    _ => None,
                                });
                        [info.id, info.status, fraction]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .map_err(|e| e.to_string());
                let failed = message.is_err();
                if tx.send(message).is_err() || failed {
                    return;
                }
            }
        });
        for message in rx {
            match message {
                Ok(line) => progress(&line),
                Err(reason) => {
                    return Err(self.engine_error(format!("pulling {reference}"), reason));
                }
            }
        }
        Ok(())
    }
}

pub use sandlot_container::recipe::default_rootfs_cache;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_are_found_by_name_or_language() {
        assert_eq!(Recipe::select(&["java".into()]).unwrap()[0].name, "jvm");
        assert!(Recipe::select(&["cobol".into()])
            .unwrap_err()
            .to_string()
            .contains("recipes: `python`"));
    }
}
