//! Calling a language handler: one fresh instance per call from a reused
//! [`InstancePre`](wasmtime::component::InstancePre), with a memory cap and a deadline,
//! and every answer checked before the host uses it.

mod analyze;
mod checks;
mod kernel;
mod language_handler;
mod limits;
mod plan;
#[cfg(test)]
mod tests;
mod versions;

pub(crate) use checks::{check_command, check_relative_path};
pub use language_handler::LanguageHandler;
pub use limits::HandlerLimits;
