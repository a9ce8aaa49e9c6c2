//! Image recipes: the `recipes/*.toml` files of this crate, built into it.
//! Each names an image, the languages it serves, the Debian packages in it and,
//! optionally, files of those packages to leave out; the Docker backend builds images
//! from them, and the Kubernetes backend knows by them which images carry the agent
//! already.
//!
//! ```toml
//! # Python 3 with pip and venv.
//! image = "sandlot/python:latest"
//! languages = ["python"]
//! packages = ["python3", "python3-pip", "python3-venv"]
//! exclude = ["/usr/lib/python3/dist-packages/*-nspkg.pth"]
//! ```

use sandlot_core::error::{Error, Result};
use serde::Deserialize;
use sha2::Digest;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The recipes shipped with sandlot: (file name, contents).
const RECIPES: &[(&str, &str)] = &[
    ("python", include_str!("../recipes/python.toml")),
    ("node", include_str!("../recipes/node.toml")),
    ("jvm", include_str!("../recipes/jvm.toml")),
    ("cpp", include_str!("../recipes/cpp.toml")),
    ("go", include_str!("../recipes/go.toml")),
    ("r", include_str!("../recipes/r.toml")),
    ("ruby", include_str!("../recipes/ruby.toml")),
    ("polyglot", include_str!("../recipes/polyglot.toml")),
];

/// The variable in an image's environment that ties it to the recipe text it was built
/// from. (An environment variable rather than a label: Podman's import API applies only
/// one `changes` instruction, and reads `ENV A=1 B=2` as one variable.)
pub const RECIPE_VARIABLE: &str = "SANDLOT_RECIPE";

/// How to build one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// Short name, e.g. `python`.
    pub name: String,
    /// Description, from the recipe's first comment line.
    pub description: String,
    /// The image reference it produces, e.g. `sandlot/python:latest`.
    pub image: String,
    /// Language ids it serves.
    pub languages: Vec<String>,
    /// Debian packages installed into it.
    pub packages: Vec<String>,
    /// Files of those packages dpkg does not install (`path-exclude` globs).
    pub exclude: Vec<String>,
    /// SHA-256 of the recipe text; an image whose label differs is out of date.
    pub hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    image: String,
    languages: Vec<String>,
    packages: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

impl Recipe {
    /// Every built-in recipe.
    pub fn all() -> Vec<Recipe> {
        RECIPES
            .iter()
            .map(|(name, text)| {
                let file: RecipeFile = toml::from_str(text).expect("built-in recipes parse");
                Recipe {
                    name: name.to_string(),
                    description: text
                        .lines()
                        .next()
                        .and_then(|l| l.strip_prefix("# "))
                        .unwrap_or_default()
                        .to_string(),
                    image: file.image,
                    languages: file.languages,
                    packages: file.packages,
                    exclude: file.exclude,
                    hash: hex::encode(sha2::Sha256::digest(text.as_bytes())),
                }
            })
            .collect()
    }

    /// The recipes named by `wanted` (recipe names or language ids, e.g. `jvm` or
    /// `java`); all of them when `wanted` is empty.
    pub fn select(wanted: &[String]) -> Result<Vec<Recipe>> {
        let all = Recipe::all();
        if wanted.is_empty() {
            return Ok(all);
        }
        let mut chosen: Vec<Recipe> = Vec::new();
        for want in wanted {
            let recipe = all
                .iter()
                .find(|r| &r.name == want)
                .or_else(|| all.iter().find(|r| r.languages.contains(want)))
                .ok_or_else(|| Error::UnknownRecipe {
                    name: want.clone(),
                    known: all.iter().map(|r| r.name.clone()).collect(),
                })?;
            if !chosen.contains(recipe) {
                chosen.push(recipe.clone());
            }
        }
        Ok(chosen)
    }

    /// The `mmdebstrap` command that writes this image's root filesystem to `tar`.
    ///
    /// It names no mirror, so apt's own sources on this machine are used; the host's CA
    /// bundle is copied in so that installs work behind a TLS-inspecting proxy; user
    /// `sandlot` (uid 1000) owns nothing but exists for programs that look themselves up.
    pub fn mmdebstrap(&self, tar: &Path) -> Command {
        let mut command = Command::new("mmdebstrap");
        command
            .arg("--variant=apt")
            .arg("--format=tar")
            .arg(format!("--include=ca-certificates,{}", self.packages.join(",")))
            .args([
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                // Some postinst scripts (the JDK's) expect this directory.
                "--setup-hook=mkdir -p \"$1\"/usr/share/man/man1",
                "--customize-hook=cp /etc/ssl/certs/ca-certificates.crt \"$1\"/etc/ssl/certs/ca-certificates.crt",
                "--customize-hook=echo \"sandlot:x:1000:1000:sandlot:/workspace:/bin/sh\" >> \"$1\"/etc/passwd; echo \"sandlot:x:1000:\" >> \"$1\"/etc/group",
                "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/*",
            ])
            .args(
                self.exclude
                    .iter()
                    .map(|glob| format!("--dpkgopt=path-exclude={glob}")),
            )
            .arg("bookworm")
            .arg(tar);
        command
    }

    /// This recipe's root filesystem as a tar, built with `mmdebstrap` into
    /// `cache_dir` unless it is there already, so that every engine (Docker, Podman,
    /// the native backend) starts from the same bytes. `progress` sees one line at a
    /// time.
    ///
    /// Processes building the same tarball at once take turns (a lock file beside it):
    /// the second finds it built, so `images build` for several engines can run side by
    /// side, each importing what the other has just built.
    pub fn rootfs_tar(&self, cache_dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<PathBuf> {
        let recipe = self;
        let io = |context: String| move |e| Error::Io { context, source: e };
        std::fs::create_dir_all(cache_dir)
            .map_err(io(format!("cannot create {}", cache_dir.display())))?;
        let stem = format!("{}-{}", recipe.name, &recipe.hash[..16]);
        let tar = cache_dir.join(format!("{stem}.tar"));
        let lock_path = cache_dir.join(format!("{stem}.lock"));
        let lock = std::fs::File::create(&lock_path)
            .map_err(io(format!("cannot create {}", lock_path.display())))?;
        // Held until this function returns, built or failed.
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                progress(&format!(
                    "waiting for another sandlot building {}",
                    tar.display()
                ));
                lock.lock()
                    .map_err(io(format!("cannot lock {}", lock_path.display())))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(io(format!("cannot lock {}", lock_path.display()))(e))
            }
        }
        if tar.is_file() {
            progress(&format!("reusing root filesystem {}", tar.display()));
        } else {
            let partial = tar.with_extension("partial");
            progress(&format!(
                "building the root filesystem with mmdebstrap: {}",
                recipe.packages.join(" ")
            ));
            let mut child = recipe
                .mmdebstrap(&partial)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| Error::ImageBuild {
                    image: recipe.image.clone(),
                    reason: format!(
                        "cannot run mmdebstrap ({e}); install it with `apt-get install mmdebstrap`"
                    ),
                })?;
            let stdout = child.stdout.take();
            let chatter = std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut out) = stdout {
                    let _ = out.read_to_string(&mut text);
                }
                text
            });
            let mut last = Vec::new();
            if let Some(stderr) = child.stderr.take() {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(|l| l.ok())
                {
                    progress(&line);
                    last.push(line);
                    if last.len() > 20 {
                        last.remove(0);
                    }
                }
            }
            let status = child.wait().map_err(io("waiting for mmdebstrap".into()))?;
            let _ = chatter.join();
            if !status.success() {
                let _ = std::fs::remove_file(&partial);
                return Err(Error::ImageBuild {
                    image: recipe.image.clone(),
                    reason: format!("mmdebstrap failed ({status}): {}", last.join("\n")),
                });
            }
            std::fs::rename(&partial, &tar)
                .map_err(io(format!("cannot keep {}", tar.display())))?;
        }
        Ok(tar)
    }
}

/// Where root filesystems are kept between builds.
pub fn default_rootfs_cache() -> PathBuf {
    sandlot_core::dirs::user_cache().join("rootfs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_build_of_the_same_tarball_waits_and_reuses_it() {
        let cache = tempfile::tempdir().unwrap();
        let recipe = Recipe::select(&["python".into()]).unwrap().remove(0);
        let stem = format!("{}-{}", recipe.name, &recipe.hash[..16]);
        // Another builder holds the lock while it writes the tarball.
        let held = std::fs::File::create(cache.path().join(format!("{stem}.lock"))).unwrap();
        held.lock().unwrap();
        let dir = cache.path().to_path_buf();
        let second = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let tar = recipe.rootfs_tar(&dir, &mut |l| lines.push(l.to_string()));
            (tar, lines)
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let tar = cache.path().join(format!("{stem}.tar"));
        std::fs::write(&tar, b"a root filesystem").unwrap();
        held.unlock().unwrap();
        let (built, lines) = second.join().unwrap();
        assert_eq!(built.unwrap(), tar, "it reuses the other builder's tarball");
        assert!(
            lines[0].starts_with("waiting for another sandlot"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("reusing root filesystem"), "{lines:?}");
    }
}
