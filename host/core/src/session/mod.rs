//! Sessions: a sandbox for one language, to run code in as often as you like, getting
//! back what it printed, how it ended and the files it made.
//!
//! A session does the same on every backend: it asks the language handler for the
//! analysis and applies the policy's gate, asks for the plan (for backends that run
//! plans) or installs the plot prelude (for interpreters), hands the run to the
//! backend's sandbox, and collects the artifacts.
//!
//! ```no_run
//! # fn main() -> Result<(), sandlot::Error> {
//! let sandlot = sandlot::from_environment()?;
//! let mut session = sandlot.session("python").open()?;
//! let first = session.run("x = 6 * 7")?;
//! assert!(first.success());
//! let second = session.run("print(x)")?;
//! assert_eq!(second.stdout_text(), "42\n");
//! session.close();
//! # Ok(())
//! # }
//! ```

mod async_session;
mod check;
mod execute;
mod files;
pub(crate) mod gate;
mod limits;
mod namespace;
mod network;
mod options;
mod plots;
mod run;
mod settings;
mod snapshot;
mod state;
pub(crate) mod warm;

#[cfg(test)]
mod tests;

pub use async_session::AsyncSession;
pub use limits::Limits;
pub use network::NetworkUpdate;
pub use options::RunOptions;
pub(crate) use settings::Settings;
pub use state::Session;
