//! What the kits of contract 0.2 and later share, next to the helpers of every kit:
//! handlers without plots or kernels, and kernel specs. Each kit includes this file,
//! so the types are its own contract version's.

use crate::{CellFraming, KernelSpec};
use alloc::string::String;
use alloc::vec::Vec;

/// The exports of a handler whose language has no plotting support: `plot-prelude`,
/// `plot-flush` and `may-plot`, answering "none". Use it inside `impl Guest for ...`.
#[macro_export]
macro_rules! no_plots {
    () => {
        fn plot_prelude(_output_dir: String) -> Option<String> {
            None
        }

        fn plot_flush(_output_dir: String) -> Option<String> {
            None
        }

        fn may_plot(_code: String) -> bool {
            false
        }
    };
}

/// The exports of a handler whose language has no plotting support and no kernel
/// (each run is a program of its own): [`no_plots!`] and `kernel` answering "none".
/// Use it inside `impl Guest for ...`.
#[macro_export]
macro_rules! no_plots_no_kernel {
    () => {
        $crate::no_plots!();

        fn kernel(_options: KernelOptions) -> Option<KernelSpec> {
            None
        }
    };
}

/// A kernel started as `argv` (an argument `{driver}` stands for the driver file's
/// path), whose `driver` source is written to `driver_name`, with extra `env`, speaking
/// the `sandlot-cell` framing.
pub fn kernel_spec(
    driver: &str,
    driver_name: &str,
    argv: &[&str],
    env: Vec<(String, String)>,
) -> KernelSpec {
    KernelSpec {
        driver: driver.into(),
        driver_name: driver_name.into(),
        argv: argv.iter().map(|a| (*a).into()).collect(),
        env,
        framing: CellFraming::SandlotCell,
    }
}
