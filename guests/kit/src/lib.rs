//! Shared pieces of sandlot's language handlers.
//!
//! A language handler is a WebAssembly component of the `language-handler` world in
//! `wit/v0.1.0`. It imports nothing, so this crate is `no_std`: the standard library
//! would pull in WASI imports (stderr for panic messages, the environment, ...) that a
//! handler must not have. Panics become traps, which the host reports with the plugin
//! file's name.
//!
//! Each handler crate implements [`Guest`] and calls [`export_handler!`]. Components of
//! other worlds (test fixtures) turn the `handler` feature off and keep only the
//! allocator, `cabi_realloc` and the panic handler.
#![no_std]

extern crate alloc;

mod component;

#[cfg(feature = "handler")]
wit_bindgen::generate!({
    path: "../../wit/v0.1.0",
    world: "language-handler",
    pub_export_macro: true,
    export_macro_name: "export_handler",
    default_bindings_module: "sandlot_handler_kit",
});

#[cfg(feature = "handler")]
pub use exports::sandlot::plugin::handler::{
    Command, Finding, Guest, LanguageInfo, Phase, PlanOptions, RunPlan as Plan, Severity,
    SourceFile,
};

#[cfg(feature = "handler")]
pub use helpers::*;

#[cfg(feature = "handler")]
pub use scan::{Interpolation, Literal, Quote, Scan, Syntax};

#[cfg(feature = "handler")]
mod helpers;

#[cfg(feature = "handler")]
pub mod scan;
