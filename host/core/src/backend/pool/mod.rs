//! Pools of pre-warmed sandboxes: sessions start at once, and state never passes from
//! one session to the next.
//!
//! A [`Pool`] wraps any [`Backend`](crate::backend::Backend) and is one itself, so a
//! pooled session takes the same code path as any other:
//! [`crate::SandlotBuilder::pool`] puts a pool in place of a backend, and every session
//! opened on that backend name draws from it. Sandboxes are kept per
//! [`SandboxSpec`](crate::backend::SandboxSpec) (language, image, policy, memory,
//! kernel): the key. A key is kept warm once [`Pool::warm`] names it, or once a session
//! first opens it.
//!
//! **One sandbox per session.** A sandbox handed out is never handed out again: when
//! its session ends, the sandbox is destroyed on a thread of the pool (never on the
//! caller's time), and a fresh one is warmed to replace it. Warming opens the sandbox
//! and, where the spec has a kernel, starts it with an empty cell, so the first run of
//! a pooled session is as fast as a later one.
//!
//! ```no_run
//! use sandlot::backend::pool::{Exhausted, PoolOptions};
//! use std::time::Duration;
//! # fn main() -> Result<(), sandlot::Error> {
//! let plugins = sandlot::PluginHost::builder().load()?;
//! let sandlot = sandlot::builder(plugins)
//!     .pool("docker", PoolOptions {
//!         min_idle: 2,
//!         max_size: 4,
//!         when_exhausted: Exhausted::Wait,
//!         acquire_timeout: Duration::from_secs(10),
//!         ..PoolOptions::default()
//!     })
//!     .build()?;
//! sandlot.session("python").backend("docker").warm()?;
//! let mut session = sandlot.session("python").backend("docker").open()?;
//! assert_eq!(session.run("print(1)")?.stdout_text(), "1\n");
//! # Ok(())
//! # }
//! ```

mod checkout;
mod close;
mod handle;
mod key;
mod lent;
mod state;
mod stats;
mod warm;

pub use crate::pool_options::{Exhausted, PoolOptions};
pub use handle::Pool;
pub use key::Preinstall;
pub use stats::PoolStats;
