//! Shared pieces of sandlot's language handlers, for plugin contract 0.3
//! (`wit/v0.3.0`): the one the built-in handlers are built for. Next to contract 0.2
//! (`guests/kit-0-2`, which the Perl example uses) its `analyze` receives the modules
//! and calls the user's policy restricts; [`restrict`] finds them. The allocator and
//! the helpers are the same source as the older kits'.
//!
//! A handler depends on this crate as `sandlot-handler-kit`, implements [`Guest`] and
//! calls [`export_handler!`]. It imports nothing, so the crate is `no_std`.
#![no_std]

extern crate alloc;

#[path = "../../kit/src/component.rs"]
mod component;

wit_bindgen::generate!({
    path: "../../wit/v0.3.0",
    world: "language-handler",
    pub_export_macro: true,
    export_macro_name: "export_handler",
    default_bindings_module: "sandlot_handler_kit",
});

pub use exports::sandlot::plugin::handler::{
    Capability, CellFraming, Command, Finding, Guest, KernelOptions, KernelSpec, LanguageInfo,
    Phase, PlanOptions, Restriction, RestrictionKind, RunPlan as Plan, Severity, SourceFile,
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

/// Restricted modules and calls: finding them under the names code binds them to.
pub mod restrict;

pub use restrict::{analyze_restricted, Binding, Language};
