//! The handler's kernel for interactive sessions: asked of the plugin once per pair
//! of directories and kept, since every session of the language asks the same.

use super::checks::check_kernel;
use super::language_handler::LanguageHandler;
use super::versions::{since_0_2, Guest, Version};
use crate::error::Result;
use crate::language::{KernelSpec, LanguageCapability};
use sandlot_wit::v0_2_0::handler::exports::sandlot::plugin::handler as wit2;
use sandlot_wit::v0_3_0::handler::exports::sandlot::plugin::handler as wit3;

/// How many distinct `kernel` answers a handler keeps (hosts ask with one pair).
const KERNEL_ANSWERS: usize = 8;

impl LanguageHandler {
    /// The language's kernel for a sandbox whose working directory is `workdir` and
    /// output directory `output_dir`, or `None` when each run is a separate program.
    pub fn kernel(&self, workdir: &str, output_dir: &str) -> Result<Option<KernelSpec>> {
        if !self.info.has(LanguageCapability::Interactive) {
            return Ok(None);
        }
        let key = (workdir.to_string(), output_dir.to_string());
        let answers = || self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, spec)) = answers().iter().find(|(asked, _)| *asked == key) {
            return Ok(spec.clone());
        }
        let spec = self.ask_kernel(workdir, output_dir)?;
        let mut kept = answers();
        if kept.len() == KERNEL_ANSWERS {
            kept.remove(0);
        }
        kept.push((key, spec.clone()));
        Ok(spec)
    }

    /// [`LanguageHandler::kernel`], asked of the plugin.
    fn ask_kernel(&self, workdir: &str, output_dir: &str) -> Result<Option<KernelSpec>> {
        let spec = since_0_2!(self, "kernel", None, |h, store, wit| {
            let options = wit::KernelOptions {
                workdir: workdir.to_string(),
                output_dir: output_dir.to_string(),
            };
            h.call_kernel(store, &options).map(|spec| {
                spec.map(|spec| {
                    let wit::CellFraming::SandlotCell = spec.framing;
                    KernelSpec {
                        driver: spec.driver,
                        driver_name: spec.driver_name,
                        argv: spec.argv,
                        env: spec.env,
                    }
                })
            })
        })?;
        let Some(spec) = spec else {
            return Ok(None);
        };
        check_kernel(&spec).map_err(|reason| self.invalid("kernel", reason))?;
        Ok(Some(spec))
    }
}
