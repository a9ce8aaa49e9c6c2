//! The entry point of the library: loaded language handlers and the backends, by name.
//!
//! [`Sandlot`] holds them (each backend in a slot of its own, made on first use),
//! [`SandlotBuilder`] makes one, [`choice`](Sandlot::choose) picks the backend of a
//! session, and [`SessionBuilder`] opens the session.

mod builder;
mod choice;
mod sandlot;
mod session_builder;
mod slot;

pub use builder::SandlotBuilder;
pub use choice::Chosen;
pub use sandlot::Sandlot;
pub use session_builder::SessionBuilder;
