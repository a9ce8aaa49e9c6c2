//! Shared pieces of sandlot's language handlers, for plugin contract 0.2
//! (`wit/v0.2.0`): the one the built-in handlers are built for. Next to contract 0.1
//! (`guests/kit`, which out-of-tree handlers such as the Lua example use) it adds
//! kernels, `may-plot`, `plot-flush`, capabilities as a list and binary file contents.
//! The allocator and the helpers are the same source as the 0.1 kit's.
//!
//! A handler depends on this crate as `sandlot-handler-kit`, implements [`Guest`] and
//! calls [`export_handler!`]. It imports nothing, so the crate is `no_std`.
#![no_std]

extern crate alloc;

#[path = "../../kit/src/component.rs"]
mod component;

wit_bindgen::generate!({
    path: "../../wit/v0.2.0",
    world: "language-handler",
    pub_export_macro: true,
    export_macro_name: "export_handler",
    default_bindings_module: "sandlot_handler_kit",
});

pub use exports::sandlot::plugin::handler::{
    Capability, CellFraming, Command, Finding, Guest, KernelOptions, KernelSpec, LanguageInfo,
    Phase, PlanOptions, RunPlan as Plan, Severity, SourceFile,
};

pub use helpers::*;

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

#[path = "../../kit/src/helpers.rs"]
mod helpers;

/// Lexing source code for static analysis: where comments and strings are.
#[path = "../../kit/src/scan.rs"]
pub mod scan;

pub use scan::{Interpolation, Literal, Quote, Scan, Syntax};
