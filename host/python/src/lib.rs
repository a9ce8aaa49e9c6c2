//! `sandlot._native`: the Rust host of sandlot as a CPython extension module. The
//! Python package (`python/sandlot`) wraps it; Python users import `sandlot`, never
//! this module.
//!
//! Every call that waits for a sandbox releases the GIL, so other Python threads (an
//! asyncio loop's executor among them) go on meanwhile; on the main thread a run
//! still answers Ctrl-C, which interrupts it as the CLI's REPL does.

mod blocking;
mod convert;
mod entry;
mod errors;
mod execution;
mod options;
mod policy;
mod session;
mod tools;

use pyo3::prelude::*;

/// The native half of the `sandlot` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<entry::Sandlot>()?;
    m.add_class::<session::Session>()?;
    m.add_class::<execution::Execution>()?;
    m.add_class::<execution::File>()?;
    m.add_class::<execution::Finding>()?;
    m.add_class::<policy::Policy>()?;
    m.add_class::<session::Interrupt>()?;
    m.add_function(wrap_pyfunction!(entry::_close_all, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
