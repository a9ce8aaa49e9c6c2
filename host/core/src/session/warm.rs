//! Warm starts: a session whose backend captures interpreters begins from a base
//! snapshot in which its language's data stack is already imported, instead of a
//! fresh interpreter that imports it on the first cell (about 670 ms for pandas and
//! matplotlib on wasm; a restore is a few milliseconds).
//!
//! A base is made once per process and backend, in the background, the first time a
//! session could use one (or at once by [`SessionBuilder::warm_up`](crate::SessionBuilder::warm_up)),
//! by a session of its own: no environment, secrets, tools or files of any client's,
//! the default policy. Its cell imports into the interpreter's module cache and
//! leaves no name behind, so a warm session's namespace is a fresh one's; only its
//! `sys.modules` shows the difference. A session uses a base only where nothing
//! about it could differ: not a one-shot session, no pool on its backend, memory
//! enough for the base, and no restriction of its policy naming a module the base
//! imported. The restore applies the session's own policy, limits, environment,
//! secrets and tools, as any restore does.

use crate::snapshot::Snapshot;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What a base of `language` runs: the cell, and the top-level modules it imports.
pub(crate) fn cell(language: &str) -> Option<(&'static str, &'static [&'static str])> {
    match language {
        "python" => Some((
            "import numpy, pandas, matplotlib, matplotlib.pyplot\n\
             del numpy, pandas, matplotlib",
            &["numpy", "pandas", "matplotlib"],
        )),
        _ => None,
    }
}

/// A base, by what it is made for.
enum Base {
    /// A thread is making it.
    Making,
    Ready(Arc<Snapshot>),
    /// It could not be made (said once, in the log); sessions start fresh.
    Failed,
}

/// The bases of one [`Sandlot`](crate::Sandlot) and its clones.
#[derive(Default)]
pub(crate) struct WarmStarts {
    on: AtomicBool,
    bases: Mutex<HashMap<String, Base>>,
}

impl std::fmt::Debug for WarmStarts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmStarts")
            .field("on", &self.on())
            .finish_non_exhaustive()
    }
}

/// What [`WarmStarts::claim`] found.
pub(crate) enum Claim {
    /// A base to restore.
    Ready(Arc<Snapshot>),
    /// None yet: the caller is to make it.
    Make,
    /// None, and none to make now.
    Wait,
}

impl WarmStarts {
    pub(crate) fn new(on: bool) -> WarmStarts {
        WarmStarts {
            on: AtomicBool::new(on),
            bases: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
        if !on {
            // The bases' memory goes with them.
            self.bases.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// The base for `key`, or whether the caller is to make it (then marked as being
    /// made, so that one caller does).
    pub(crate) fn claim(&self, key: &str) -> Claim {
        let mut bases = self.bases.lock().unwrap_or_else(|e| e.into_inner());
        match bases.get(key) {
            Some(Base::Ready(base)) => Claim::Ready(base.clone()),
            Some(Base::Making | Base::Failed) => Claim::Wait,
            None => {
                bases.insert(key.to_string(), Base::Making);
                Claim::Make
            }
        }
    }

    /// The base for `key` is made, or could not be.
    pub(crate) fn made(&self, key: &str, base: Option<Arc<Snapshot>>) {
        let base = match base {
            Some(base) => Base::Ready(base),
            None => Base::Failed,
        };
        self.bases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), base);
    }

    /// Forgets the base for `key` (it no longer restores: the runtime changed), so
    /// that the next session makes another.
    pub(crate) fn forget(&self, key: &str) {
        self.bases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}
