//! The sandbox a session holds: every call goes through the slot the pool can take
//! back, and dropping it returns the sandbox to be destroyed.

use super::state::{Lent, Shared};
use crate::artifact::FileScan;
use crate::backend::{Outcome, RunRequest, Sandbox, SandboxFiles};
use crate::error::{Error, Result};
use std::sync::Arc;

/// A sandbox lent to a session. Dropped, it goes back to the pool to be destroyed.
pub(super) struct Pooled {
    pub(super) lent: Lent,
    pub(super) name: String,
    pub(super) extra: bool,
    pub(super) shared: Arc<Shared>,
}

impl Pooled {
    fn with<T>(&mut self, f: impl FnOnce(&mut dyn Sandbox) -> Result<T>) -> Result<T> {
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        match lent.as_mut() {
            Some(sandbox) => f(sandbox.as_mut()),
            None => Err(Error::PoolClosed {
                backend: self.shared.inner.name().to_string(),
            }),
        }
    }
}

impl Sandbox for Pooled {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        match self.with(|sandbox| sandbox.run(request)) {
            Err(Error::PoolClosed { .. }) => Ok(Outcome::lost(
                "the pool was closed and took this session's sandbox",
            )),
            other => other,
        }
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        self
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn reset(&mut self) -> Result<()> {
        self.with(|sandbox| sandbox.reset())
    }

    fn bind_secrets(&mut self, secrets: Arc<crate::secret::Injector>) {
        // A pool closed under the session has taken the sandbox, and its proxy.
        let _ = self.with(|sandbox| {
            sandbox.bind_secrets(secrets);
            Ok(())
        });
    }

    fn set_request_rules(&mut self, rules: &crate::egress::RequestRules) -> Result<()> {
        self.with(|sandbox| sandbox.set_request_rules(rules))
    }
}

impl SandboxFiles for Pooled {
    fn write(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.with(|s| s.files().write(path, data))
    }
    fn read(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with(|s| s.files().read(path, max))
    }
    fn list(&mut self, path: &str) -> Result<Vec<crate::backend::DirEntry>> {
        self.with(|s| s.files().list(path))
    }
    fn scan(&mut self, path: &str) -> Result<FileScan> {
        self.with(|s| s.files().scan(path))
    }
    fn pack(&mut self, path: &str, max: u64) -> Result<Vec<u8>> {
        self.with(|s| s.files().pack(path, max))
    }
    fn unpack(&mut self, path: &str, archive: &[u8]) -> Result<()> {
        self.with(|s| s.files().unpack(path, archive))
    }
    fn clear(&mut self, path: &str) -> Result<()> {
        self.with(|s| s.files().clear(path))
    }
    fn stat(&mut self, path: &str) -> Result<crate::backend::FileInfo> {
        self.with(|s| s.files().stat(path))
    }
    fn make_dir(&mut self, path: &str) -> Result<bool> {
        self.with(|s| s.files().make_dir(path))
    }
    fn remove(&mut self, path: &str) -> Result<()> {
        self.with(|s| s.files().remove(path))
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.with(|s| s.files().rename(from, to))
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let taken = self.lent.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut state = self.shared.lock();
        state.in_use -= 1;
        if !self.extra {
            state.held -= 1;
        }
        drop(state);
        if let Some(sandbox) = taken {
            self.shared.destroy(sandbox);
        }
        // A slot is free: a waiter may open, the warmer may replace.
        self.shared.changed.notify_all();
    }
}
