//! Where sandlot keeps its files on the host, and where a sandbox keeps its own.
//!
//! [`Dirs`] resolves every host directory in one documented order, used alike by the
//! CLI, [`Config`] and [`SandlotBuilder::from_environment`](crate::SandlotBuilder::from_environment),
//! so no two parts of sandlot can disagree about a cache. For each directory the first
//! of these that is set wins:
//!
//! | directory | flag | environment | `sandlot.toml` | default |
//! | --- | --- | --- | --- | --- |
//! | compiled components (handlers and runtimes alike) | `--cache-dir`, `--no-cache` | `SANDLOT_CACHE_DIR` | `cache_dir` | `$XDG_CACHE_HOME/sandlot/components` |
//! | installed runtimes | `--runtimes-dir` | `SANDLOT_RUNTIMES_DIR` | `runtimes_dir` | `$XDG_DATA_HOME/sandlot/runtimes` |
//! | plugin directories (all are used, later ones take precedence) | `--plugin-dir` | `SANDLOT_PLUGIN_DIR` (`:`-separated) | `plugin_dirs` | `$XDG_CONFIG_HOME/sandlot/plugins` if it exists |
//!
//! `XDG_*` variables count only when they hold absolute paths, as the XDG spec asks;
//! otherwise `$HOME/.cache`, `$HOME/.local/share` and `$HOME/.config` stand in.
//!
//! [`crate::layout::Layout`] is the other half: the paths every sandbox has, whatever
//! backend runs it.
//!
//! ```
//! use sandlot::dirs::{Dirs, Origin, Overrides};
//! let config = sandlot::Config::default();
//! let env = |name: &str| match name {
//!     "HOME" => Some("/home/ada".to_string()),
//!     "SANDLOT_CACHE_DIR" => Some("/var/cache/sandlot".to_string()),
//!     _ => None,
//! };
//! let dirs = Dirs::resolve_with(&config, &Overrides::default(), env);
//! assert_eq!(dirs.cache.value.as_deref(), Some(std::path::Path::new("/var/cache/sandlot")));
//! assert_eq!(dirs.cache.origin, Origin::Environment("SANDLOT_CACHE_DIR"));
//! assert!(dirs.runtimes.value.ends_with(".local/share/sandlot/runtimes"));
//! ```

use crate::config::Config;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "name")]
#[non_exhaustive]
pub enum Origin {
    /// A command-line flag or an explicit setting in the API.
    Flag,
    /// An environment variable.
    Environment(&'static str),
    /// A key of the configuration file.
    ConfigFile(PathBuf),
    /// Built-in default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => f.write_str("command line"),
            Origin::Environment(name) => write!(f, "${name}"),
            Origin::ConfigFile(path) => write!(f, "{}", path.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A resolved value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved<T> {
    /// The value in force.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

/// A plugin directory to load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginDir {
    /// The directory.
    pub path: PathBuf,
    /// Whether a missing directory is an error (everything a user names) or is
    /// skipped (the default directory).
    pub required: bool,
    /// Where it was named.
    pub origin: Origin,
}

/// What the caller says explicitly, ahead of the environment and the configuration
/// file: the CLI's global flags, or an embedding application's own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Cache compiled components here.
    pub cache_dir: Option<PathBuf>,
    /// Cache nothing on disk (wins over every cache directory).
    pub no_cache: bool,
    /// Look for runtimes here.
    pub runtimes_dir: Option<PathBuf>,
    /// More plugin directories, of the highest precedence, in order.
    pub plugin_dirs: Vec<PathBuf>,
}

/// Every host directory sandlot uses, resolved once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dirs {
    /// Compiled components of handlers and runtimes; `None` caches nothing on disk.
    pub cache: Resolved<Option<PathBuf>>,
    /// Installed WebAssembly runtimes, one folder each.
    pub runtimes: Resolved<PathBuf>,
    /// Plugin directories, lowest precedence first.
    pub plugins: Vec<PluginDir>,
}

impl Dirs {
    /// Resolves every directory from `overrides`, the process environment and
    /// `config`, in the order the [module documentation](self) gives.
    pub fn resolve(config: &Config, overrides: &Overrides) -> Dirs {
        Dirs::resolve_with(config, overrides, |name| std::env::var(name).ok())
    }

    /// [`Dirs::resolve`] with `env` looking up environment variables.
    pub fn resolve_with(
        config: &Config,
        overrides: &Overrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Dirs {
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        let file = || {
            config
                .path
                .clone()
                .map_or(Origin::Default, Origin::ConfigFile)
        };
        let xdg = |var: &str, fallback: &str| -> Option<PathBuf> {
            env(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| env("HOME").map(|home| Path::new(&home).join(fallback)))
        };

        let cache = if overrides.no_cache {
            Resolved {
                value: None,
                origin: Origin::Flag,
            }
        } else if let Some(dir) = &overrides.cache_dir {
            Resolved {
                value: Some(dir.clone()),
                origin: Origin::Flag,
            }
        } else if let Some(dir) = env("SANDLOT_CACHE_DIR") {
            Resolved {
                value: Some(dir.into()),
                origin: Origin::Environment("SANDLOT_CACHE_DIR"),
            }
        } else if let Some(dir) = &config.cache_dir {
            Resolved {
                value: Some(dir.clone()),
                origin: file(),
            }
        } else {
            Resolved {
                value: xdg("XDG_CACHE_HOME", ".cache").map(|d| d.join("sandlot/components")),
                origin: Origin::Default,
            }
        };

        let runtimes = if let Some(dir) = &overrides.runtimes_dir {
            Resolved {
                value: dir.clone(),
                origin: Origin::Flag,
            }
        } else if let Some(dir) = env("SANDLOT_RUNTIMES_DIR") {
            Resolved {
                value: dir.into(),
                origin: Origin::Environment("SANDLOT_RUNTIMES_DIR"),
            }
        } else if let Some(dir) = &config.runtimes_dir {
            Resolved {
                value: dir.clone(),
                origin: file(),
            }
        } else {
            Resolved {
                // Without a home there is no per-user place; a relative folder is
                // still better than refusing to run.
                value: xdg("XDG_DATA_HOME", ".local/share")
                    .unwrap_or_else(|| PathBuf::from(".sandlot"))
                    .join("sandlot/runtimes"),
                origin: Origin::Default,
            }
        };

        let mut plugins = Vec::new();
        if let Some(home) = xdg("XDG_CONFIG_HOME", ".config") {
            plugins.push(PluginDir {
                path: home.join("sandlot/plugins"),
                required: false,
                origin: Origin::Default,
            });
        }
        plugins.extend(config.plugin_dirs.iter().map(|dir| PluginDir {
            path: dir.clone(),
            required: true,
            origin: file(),
        }));
        if let Some(dirs) = env("SANDLOT_PLUGIN_DIR") {
            plugins.extend(
                dirs.split(':')
                    .filter(|d| !d.is_empty())
                    .map(|dir| PluginDir {
                        path: dir.into(),
                        required: true,
                        origin: Origin::Environment("SANDLOT_PLUGIN_DIR"),
                    }),
            );
        }
        plugins.extend(overrides.plugin_dirs.iter().map(|dir| PluginDir {
            path: dir.clone(),
            required: true,
            origin: Origin::Flag,
        }));

        Dirs {
            cache,
            runtimes,
            plugins,
        }
    }

    /// The directory of compiled components, if caching is on.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.value.as_deref()
    }

    /// The runtimes directory.
    pub fn runtimes_dir(&self) -> &Path {
        &self.runtimes.value
    }
}

/// `$XDG_CACHE_HOME/sandlot` (or `~/.cache/sandlot`; the temporary directory when
/// there is no home): where sandlot keeps what it can always rebuild, such as the
/// container agent and the root filesystems of images.
pub fn user_cache() -> PathBuf {
    user_dir("XDG_CACHE_HOME", ".cache")
}

/// `$XDG_DATA_HOME/sandlot` (or `~/.local/share/sandlot`; the temporary directory when
/// there is no home): where sandlot keeps what it made and would take long to make
/// again, such as the native backend's unpacked root filesystems.
pub fn user_data() -> PathBuf {
    user_dir("XDG_DATA_HOME", ".local/share")
}

/// `$variable/sandlot`, else `$HOME/<under_home>/sandlot`, else the temp dir's.
fn user_dir(variable: &str, under_home: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(under_home)))
        .unwrap_or_else(std::env::temp_dir)
        .join("sandlot")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn config_with_cache() -> Config {
        Config::parse(
            "cache_dir = \"cache\"\nruntimes_dir = \"rt\"\nplugin_dirs = [\"p\"]\n",
            Path::new("/etc/sandlot/sandlot.toml"),
        )
        .unwrap()
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file_which_beats_defaults() {
        let config = config_with_cache();
        let home = env(&[("HOME", "/home/u")]);
        let dirs = Dirs::resolve_with(&config, &Overrides::default(), &home);
        assert_eq!(dirs.cache_dir(), Some(Path::new("/etc/sandlot/cache")));
        assert_eq!(dirs.runtimes_dir(), Path::new("/etc/sandlot/rt"));

        let both = env(&[
            ("HOME", "/home/u"),
            ("SANDLOT_CACHE_DIR", "/env/cache"),
            ("SANDLOT_RUNTIMES_DIR", "/env/rt"),
        ]);
        let dirs = Dirs::resolve_with(&config, &Overrides::default(), &both);
        assert_eq!(dirs.cache_dir(), Some(Path::new("/env/cache")));
        assert_eq!(dirs.runtimes_dir(), Path::new("/env/rt"));

        let flags = Overrides {
            cache_dir: Some("/flag/cache".into()),
            runtimes_dir: Some("/flag/rt".into()),
            ..Overrides::default()
        };
        let dirs = Dirs::resolve_with(&config, &flags, &both);
        assert_eq!(dirs.cache_dir(), Some(Path::new("/flag/cache")));
        assert_eq!(dirs.runtimes_dir(), Path::new("/flag/rt"));
        let off = Overrides {
            no_cache: true,
            ..flags
        };
        assert_eq!(Dirs::resolve_with(&config, &off, &both).cache_dir(), None);

        let dirs = Dirs::resolve_with(&Config::default(), &Overrides::default(), &home);
        assert_eq!(
            dirs.cache_dir(),
            Some(Path::new("/home/u/.cache/sandlot/components"))
        );
        assert_eq!(
            dirs.runtimes_dir(),
            Path::new("/home/u/.local/share/sandlot/runtimes")
        );
    }

    #[test]
    fn plugin_dirs_come_in_increasing_precedence() {
        let config = config_with_cache();
        let overrides = Overrides {
            plugin_dirs: vec!["/flag".into()],
            ..Overrides::default()
        };
        let env = env(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "relative/ignored"),
            ("SANDLOT_PLUGIN_DIR", "/e1::/e2"),
        ]);
        let dirs = Dirs::resolve_with(&config, &overrides, env);
        let paths: Vec<_> = dirs
            .plugins
            .iter()
            .map(|d| (d.path.to_str().unwrap(), d.required))
            .collect();
        assert_eq!(
            paths,
            [
                ("/home/u/.config/sandlot/plugins", false),
                ("/etc/sandlot/p", true),
                ("/e1", true),
                ("/e2", true),
                ("/flag", true),
            ]
        );
    }
}
