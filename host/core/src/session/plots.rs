//! Figures: the handler's plot prelude, installed in the interpreter before the first
//! code that may plot, and its flush after each run. Only interpreters need them.

use super::state::Session;
use crate::backend::{RunRequest, Workload};
use crate::error::Result;
use crate::layout::Layout;
use std::time::Duration;

impl Session {
    /// Runs the handler's plot prelude in the interpreter, so figures land in the
    /// output directory.
    pub(super) fn install_plot_capture(&mut self, env: &[(String, String)]) -> Result<()> {
        // A run whose files are not collected: the next run looks for itself.
        self.output = None;
        let Some(prelude) = self.handler.plot_prelude(&Layout.output_dir())? else {
            self.plot_capture = true;
            return Ok(());
        };
        self.host_code(
            &prelude,
            env,
            (Duration::from_secs(60), 64 << 10),
            "the plot prelude",
        )?;
        self.plot_capture = true;
        Ok(())
    }

    /// Saves figures the run left open, as a program's exit would, with the
    /// handler's `plot-flush` code.
    pub(super) fn flush_plots(&mut self, env: &[(String, String)]) {
        if !self.plot_capture {
            return;
        }
        if self.plot_flush.is_none() {
            let flush = self.handler.plot_flush(&Layout.output_dir()).ok().flatten();
            self.plot_flush = Some(flush);
        }
        let Some(Some(flush)) = &self.plot_flush else {
            return;
        };
        let flush = flush.clone();
        if let Some(sandbox) = self.sandbox.as_mut() {
            let _ = sandbox.run(RunRequest {
                env,
                max_output: 64 << 10,
                ..RunRequest::new(Workload::Code(&flush))
            });
        }
    }
}
