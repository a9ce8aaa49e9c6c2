//! The library's error type.

mod classify;
mod kind;
mod messages;
mod plugin_source;
mod variants;

#[cfg(test)]
mod tests;

pub use kind::ErrorKind;
pub use plugin_source::PluginSource;
pub use variants::{Error, Result};
