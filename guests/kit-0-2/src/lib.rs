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

#[path = "../../kit/src/since_0_2.rs"]
mod since_0_2;

pub use since_0_2::kernel_spec;

#[path = "../../kit/src/helpers.rs"]
mod helpers;

/// Lexing source code for static analysis: where comments and strings are.
#[path = "../../kit/src/scan.rs"]
pub mod scan;

pub use scan::{Interpolation, Literal, Quote, Scan, Syntax};
