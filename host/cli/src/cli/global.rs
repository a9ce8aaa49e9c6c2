//! The flags every command takes (`--config`, `--plugin-dir`, the cache and runtime
//! directories, `--quiet`) and what they resolve to.

use anyhow::Result;
use clap::Args;
use sandlot::plugin::{PluginHost, PluginStatus};
use sandlot::Config;
use std::path::PathBuf;

#[derive(Args)]
pub(crate) struct Global {
    /// Configuration file (default: $SANDLOT_CONFIG, ./sandlot.toml, then
    /// $XDG_CONFIG_HOME/sandlot/sandlot.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Also load plugins from DIR; takes precedence over every other plugin source.
    /// Repeatable.
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Cache compiled components in DIR (default: $SANDLOT_CACHE_DIR, the config's
    /// cache_dir, then $XDG_CACHE_HOME/sandlot/components).
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Compile plugins in memory; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Say nothing on stderr but errors and warnings: no progress, no notes.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    /// Look for WebAssembly runtimes in DIR (default: $SANDLOT_RUNTIMES_DIR, the
    /// config's runtimes_dir, then $XDG_DATA_HOME/sandlot/runtimes).
    #[arg(long, global = true, value_name = "DIR")]
    runtimes_dir: Option<PathBuf>,
}

impl Global {
    /// The configuration file in force.
    pub(crate) fn config(&self) -> Result<Config> {
        Ok(Config::discover(self.config.as_deref())?)
    }

    /// What the flags say, ahead of the environment and the configuration file.
    pub(crate) fn overrides(&self) -> sandlot::dirs::Overrides {
        sandlot::dirs::Overrides {
            cache_dir: self.cache_dir.clone(),
            no_cache: self.no_cache,
            runtimes_dir: self.runtimes_dir.clone(),
            plugin_dirs: self.plugin_dirs.clone(),
        }
    }

    /// Every directory, resolved as the library resolves them.
    pub(crate) fn dirs(&self) -> Result<sandlot::dirs::Dirs> {
        Ok(sandlot::dirs::Dirs::resolve(
            &self.config()?,
            &self.overrides(),
        ))
    }

    /// The plugins; with `notes`, tells on stderr which failed and which replaced a
    /// built-in.
    pub(crate) fn plugins(&self, notes: bool) -> Result<PluginHost> {
        let host = sandlot::PluginHostBuilder::from_dirs(&self.dirs()?).load()?;
        if notes {
            plugin_notes(&host);
        }
        Ok(host)
    }
}

/// Tells on stderr which plugins failed and which replaced a built-in.
pub(crate) fn plugin_notes(host: &PluginHost) {
    for report in host.reports() {
        match &report.status {
            PluginStatus::Active {
                replaces: Some(old),
            } => note!(
                "note: {} replaces {old} for language `{}`",
                report.source,
                report.language.as_deref().unwrap_or("?")
            ),
            PluginStatus::Failed(error) => eprintln!("warning: {error} (skipped)"),
            _ => {}
        }
    }
}
