//! The backend's workers as a pool: which worker a sandbox opens in, when one is
//! started or started again, and what `sandlot doctor` says of them.

use super::limits::RETRY;
use super::options::WorkerOptions;
use super::process::Process;
use super::remote::{out_of_turn, RemoteSandbox};
use super::wire::messages::{Call, Reply, Spec};
use super::wire::shared::WorkerConfig;
use crate::backend::{Remote, WasmBackend};
use sandlot_core::backend::{Sandbox, SandboxSpec};
use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::{InterpreterState, StateReader};
use sandlot_core::sync::lock;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The backend's workers: started on first use, each placed sandbox on the one with
/// the fewest, and started again when one has ended.
pub(crate) struct Workers {
    options: WorkerOptions,
    config: WorkerConfig,
    slots: Mutex<Vec<Option<Arc<Process>>>>,
    /// The last start that failed, and why: opens in the next [`RETRY`] say so at once
    /// rather than each waiting for a worker that will not come.
    failed: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl WasmBackend {
    /// The same backend with its sandboxes in worker processes (see
    /// [`crate::worker`]): sessions on several threads then scale with the cores
    /// instead of waiting for each other in this process's address space.
    pub fn in_workers(mut self, options: WorkerOptions) -> WasmBackend {
        let (runtimes_dir, components, cache_dir) = self.found_in.clone();
        self.remote = Some(Box::new(Workers::new(
            options,
            runtimes_dir,
            components,
            cache_dir,
        )));
        self
    }
}

impl Remote for Workers {
    fn open(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<Box<dyn Sandbox>> {
        Ok(Box::new(Workers::open(self, spec, restore)?))
    }

    fn pids(&self) -> Vec<u32> {
        Workers::pids(self)
    }

    fn check(&self) -> sandlot_core::backend::Check {
        Workers::check(self)
    }
}

impl Workers {
    fn new(
        options: WorkerOptions,
        runtimes_dir: PathBuf,
        components: Vec<PathBuf>,
        cache_dir: Option<PathBuf>,
    ) -> Workers {
        Workers {
            slots: Mutex::new(vec![None; options.count]),
            failed: Mutex::new(None),
            options,
            config: WorkerConfig {
                runtimes_dir,
                components,
                cache_dir,
            },
        }
    }

    /// A sandbox for `spec` in a worker: fresh, or restored from `restore`.
    pub(crate) fn open(
        &self,
        spec: &SandboxSpec<'_>,
        restore: Option<(&InterpreterState, &mut StateReader<'_>)>,
    ) -> Result<RemoteSandbox> {
        let wire_spec = Spec {
            language: spec.language.to_string(),
            memory: spec.memory as u64,
            workdir_size: spec.policy.workdir_size,
        };
        let restore = match restore {
            None => None,
            Some((state, bytes)) => {
                let state = serde_json::to_string(state).map_err(|e| Error::InvalidSnapshot {
                    reason: format!("its interpreter state does not encode: {e}"),
                })?;
                // The snapshot's file is read-write here; the worker gets a description
                // of it that cannot write, so no worker changes what other sandboxes
                // restore from it.
                let (file, offset) = bytes.file();
                let call = Call::Restore {
                    spec: wire_spec.clone(),
                    state,
                    offset: offset + bytes.position(),
                    len: bytes.len() - bytes.position(),
                    snapshot: bytes.snapshot().map(|id| id.raw()),
                };
                Some((call, read_only(file)?))
            }
        };
        let process = self.pick()?;
        let opened = match restore {
            None => process.call(Call::Open { spec: wire_spec }, None),
            Some((call, file)) => process.call(call, Some(&file)),
        };
        let reply = opened.and_then(|sent| process.finish(sent, |_| {}));
        let (sandbox, name) = match reply {
            Ok(Reply::Opened { sandbox, name }) => (sandbox, name),
            other => {
                process.load.fetch_sub(1, Ordering::SeqCst);
                return Err(match other {
                    Ok(other) => out_of_turn(&other),
                    Err(e) => e,
                });
            }
        };
        Ok(RemoteSandbox {
            process,
            sandbox,
            name,
            memory: spec.memory as u64,
        })
    }

    /// The process ids of the live workers.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let slots = lock(&self.slots);
        slots
            .iter()
            .flatten()
            .filter(|process| process.ended().is_none())
            .map(|process| process.pid)
            .collect()
    }

    /// What `sandlot doctor` says of the workers: whether one starts and answers.
    pub(crate) fn check(&self) -> sandlot_core::backend::Check {
        use sandlot_core::backend::Check;
        let program = self
            .options
            .program
            .clone()
            .or_else(|| std::env::current_exe().ok());
        let program = program.map_or_else(|| "this program".into(), |p| p.display().to_string());
        match self.pick() {
            Ok(process) => {
                process.load.fetch_sub(1, Ordering::SeqCst);
                Check::ok(
                    "workers",
                    format!(
                        "sandboxes run in {} worker processes of {program}{}",
                        self.options.count,
                        if self.options.pin {
                            ", each kept to one core"
                        } else {
                            ""
                        }
                    ),
                )
            }
            Err(e) => Check::gap(
                "workers",
                format!("no worker starts: {e}"),
                "set [wasm] worker_program in sandlot.toml to the sandlot binary, or \
                 [wasm] workers = 0 to keep sandboxes in this process",
            ),
        }
    }

    /// The live worker with the fewest sandboxes, started if a slot has none, with
    /// one more sandbox counted against it (the caller's to give back if its open
    /// fails).
    fn pick(&self) -> Result<Arc<Process>> {
        let least = {
            let mut slots = lock(&self.slots);
            for slot in slots.iter_mut() {
                if slot
                    .as_ref()
                    .is_some_and(|process| process.ended().is_some())
                {
                    *slot = None;
                }
            }
            let least = slots
                .iter()
                .enumerate()
                .min_by_key(|(_, slot)| {
                    slot.as_ref()
                        .map_or(0, |process| process.load.load(Ordering::SeqCst))
                })
                .map(|(at, _)| at)
                .unwrap_or(0);
            if let Some(process) = &slots[least] {
                // Counted from now, not once it has opened: opens under way at the
                // same time spread over the workers.
                process.load.fetch_add(1, Ordering::SeqCst);
                return Ok(process.clone());
            }
            least
        };
        // Started without the lock: a slow or failing start holds up no other open.
        {
            let failed = lock(&self.failed);
            if let Some((when, why)) = &*failed {
                if when.elapsed() < RETRY {
                    return Err(Error::Io {
                        context: why.clone(),
                        source: std::io::Error::other("no worker (tried again shortly)"),
                    });
                }
            }
        }
        let started = match Process::start(&self.options, &self.config, least) {
            Ok(process) => process,
            Err(e) => {
                *lock(&self.failed) = Some((Instant::now(), e.to_string()));
                return Err(e);
            }
        };
        let mut slots = lock(&self.slots);
        // Another open may have started one for the slot meanwhile: it is used, and
        // this one goes as it drops.
        let process = slots[least].get_or_insert(started).clone();
        process.load.fetch_add(1, Ordering::SeqCst);
        Ok(process)
    }
}

/// A new read-only description of the file `file` is open on (`/proc/self/fd`, which
/// reaches an unlinked file too).
pub(super) fn read_only(file: &std::fs::File) -> Result<std::fs::File> {
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
    std::fs::File::open(&path).map_err(|e| Error::Io {
        context: format!("cannot open the snapshot read-only for a wasm worker ({path})"),
        source: e,
    })
}
