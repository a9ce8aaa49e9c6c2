//! Laying out a run: the plan of files and commands, library installs, and plot
//! capture. What a session asks of the handler before every run, checked alike.

use super::checks::check_relative_path;
use super::language_handler::LanguageHandler;
use super::versions::{call_plan, convert_command, since_0_2, Guest, Version};
use crate::error::Result;
use crate::language::{Command, LanguageCapability, Phase, Plan, PlanOptions, SourceFile};
use sandlot_wit::v0_1_0::handler::exports::sandlot::plugin::handler as wit1;
use sandlot_wit::v0_2_0::handler::exports::sandlot::plugin::handler as wit2;
use sandlot_wit::v0_3_0::handler::exports::sandlot::plugin::handler as wit3;

impl LanguageHandler {
    /// Lays out a run of `code`: files to write and commands to run, including library
    /// installation. Every path is checked to stay inside the working directory.
    ///
    /// ```
    /// # fn main() -> Result<(), sandlot::Error> {
    /// let host = sandlot::PluginHost::builder().no_cache().load()?;
    /// let python = host.language("py")?;
    /// let plan = python.plan("print('hi')", &[], &sandlot::PlanOptions::default())?;
    /// assert_eq!(plan.commands.last().unwrap().argv[0], "python3");
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan(&self, code: &str, libraries: &[String], options: &PlanOptions) -> Result<Plan> {
        let (files, commands) = self
            .call("plan", code.len(), |guest, store| {
                Ok(match guest {
                    Guest::V0_1(h) => call_plan!(wit1, h, store, code, libraries, options),
                    Guest::V0_2(h) => call_plan!(wit2, h, store, code, libraries, options),
                    Guest::V0_3(h) => call_plan!(wit3, h, store, code, libraries, options),
                })
            })?
            .map_err(|message| self.refused("plan", message))?;
        for file in &files {
            check_relative_path(&file.path).map_err(|reason| self.invalid("plan", reason))?;
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = files.iter().find(|f| !seen.insert(f.path.as_str())) {
            return Err(self.invalid("plan", format!("file `{}` is written twice", dup.path)));
        }
        let commands = self.checked("plan", commands)?;
        if !commands.iter().any(|c| c.phase == Phase::Run) {
            return Err(self.invalid("plan", "the plan has no `run` command".into()));
        }
        // The host reads the names too, whatever the handler made of them: a
        // handler's own check is its author's, and an installer takes far more than
        // names ([`crate::library`]).
        crate::library::check(&self.info.id, libraries)?;
        Ok(Plan { files, commands })
    }

    /// Whether `libraries` are registry names of the language's installer
    /// ([`crate::library`]), where the handler installs libraries at all (one that
    /// does not refuses them with its own reason when asked).
    pub fn check_libraries(&self, libraries: &[String]) -> Result<()> {
        let installs = self
            .info
            .capabilities
            .contains(&crate::language::LanguageCapability::InstallLibraries);
        match installs {
            true => crate::library::check(&self.info.id, libraries),
            false => Ok(()),
        }
    }

    /// Commands that install `libraries` into a sandbox whose working directory is
    /// `workdir`. A handler that installs nothing refuses with its reason; otherwise
    /// a library that is no registry name of the language's installer is
    /// [`Error::InvalidLibrary`](crate::Error::InvalidLibrary), whatever the handler
    /// made of it.
    pub fn install(&self, libraries: &[String], workdir: &str) -> Result<Vec<Command>> {
        let commands = self
            .call("install", 0, |guest, store| {
                Ok(match guest {
                    Guest::V0_1(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit1, c))
                            .collect::<Vec<_>>()
                    }),
                    Guest::V0_2(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit2, c))
                            .collect::<Vec<_>>()
                    }),
                    Guest::V0_3(h) => h.call_install(store, libraries, workdir)?.map(|c| {
                        c.into_iter()
                            .map(|c| convert_command!(wit3, c))
                            .collect::<Vec<_>>()
                    }),
                })
            })?
            .map_err(|message| self.refused("install", message))?;
        crate::library::check(&self.info.id, libraries)?;
        self.checked("install", commands)
    }

    /// Code that makes the language's plotting libraries save figures into
    /// `output_dir`, if the language has any.
    pub fn plot_prelude(&self, output_dir: &str) -> Result<Option<String>> {
        self.call("plot-prelude", 0, |guest, store| match guest {
            Guest::V0_1(h) => h.call_plot_prelude(store, output_dir),
            Guest::V0_2(h) => h.call_plot_prelude(store, output_dir),
            Guest::V0_3(h) => h.call_plot_prelude(store, output_dir),
        })
    }

    /// Code that saves the figures a run left open into `output_dir`, if the
    /// language's prelude needs it. Handlers of contract 0.1 have none.
    pub fn plot_flush(&self, output_dir: &str) -> Result<Option<String>> {
        since_0_2!(self, "plot-flush", None, |h, store, _wit| h
            .call_plot_flush(store, output_dir))
    }

    /// Whether `code` may draw a figure. Handlers of contract 0.1 cannot say, so the
    /// host looks for words of plotting libraries instead.
    pub fn may_plot(&self, code: &str) -> Result<bool> {
        if !self.info.has(LanguageCapability::CapturePlots) {
            return Ok(false);
        }
        since_0_2!(
            self,
            "may-plot",
            code.len(),
            mentions_plotting(code),
            |h, store, _wit| h.call_may_plot(store, code)
        )
    }
}

/// Whether `code` may draw a figure, directly or through a library (`df.plot()`,
/// seaborn, ggplot2...), for handlers that cannot say. A miss only means left-open
/// figures are not saved for that run; figures saved explicitly into the output
/// directory always come back.
fn mentions_plotting(code: &str) -> bool {
    [
        "plot",
        "plt",
        "matplotlib",
        "seaborn",
        "figure",
        "hist",
        "png(",
    ]
    .iter()
    .any(|word| code.contains(word))
}
