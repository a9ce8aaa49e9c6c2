//! A session's snapshots, and the sessions restored and forked from them.

use super::settings::Settings;
use super::state::Session;
use crate::backend::{Backend, BackendName, Capability, SandboxSpec};
use crate::error::{Error, Result};
use crate::plugin::LanguageHandler;
use crate::snapshot::{Manifest, SessionFacts, Snapshot, Tag};
use std::sync::Arc;

fn written(e: std::io::Error) -> Error {
    Error::Io {
        context: "cannot write the snapshot".into(),
        source: e,
    }
}

impl Session {
    /// Captures the session: its workspace's files and its interpreter's whole state
    /// (variables, functions, imports), to restore with
    /// [`Sandlot::restore`](crate::Sandlot::restore) in this process or another. Call it
    /// between runs. Where the backend cannot capture the interpreter's memory
    /// (without [`Capability::SnapshotMemory`]), a Python kernel's namespace is kept
    /// by serialisation instead ([`Snapshot::holds_namespace`]; what could not be
    /// kept is in [`Snapshot::unsaved`]); any other interpreter refuses, rather than
    /// capture less than the session holds: [`Session::snapshot_files`] takes the
    /// files alone.
    ///
    /// A snapshot leaves the session: every value of the session's secrets is
    /// overwritten in it by as many `*` (in the interpreter's memory, in the files'
    /// contents; in a file's name it is masked as `***`). A session restored from it
    /// gets its own secrets in its environment again; a variable that held a secret's
    /// value holds the stars. [`Session::snapshot_keeping_secrets`] keeps them, for
    /// a snapshot that never leaves whoever holds the secrets.
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        // Saving a kernel's variables runs code whose failure quotes its output.
        let captured = self.capture(Capture::EXPORTED);
        self.masked(captured)
    }

    /// Captures the workspace's files alone: a session restored from it starts a
    /// fresh interpreter over them. The session's secrets are taken out of it as
    /// [`Session::snapshot`] says.
    pub fn snapshot_files(&mut self) -> Result<Snapshot> {
        self.capture(Capture {
            memory: false,
            ..Capture::EXPORTED
        })
    }

    /// [`Session::snapshot`] with the session's secrets left in it, in the clear: for
    /// a snapshot that stays with whoever holds the secrets and restores the session
    /// as it was (a server pausing a session to disk), never for one handed to
    /// someone the secrets were kept from.
    pub fn snapshot_keeping_secrets(&mut self) -> Result<Snapshot> {
        let captured = self.capture(Capture {
            scrub: false,
            ..Capture::EXPORTED
        });
        self.masked(captured)
    }

    /// `n` new sessions, each with a copy of this one's state (as
    /// [`Session::snapshot`] captures it) and its settings: its policy, limits,
    /// environment, secrets and tools. What one does is seen by none of the others.
    pub fn fork(&mut self, n: usize) -> Result<Vec<Session>> {
        // A copy of the memory, or none: a namespace carried by serialisation is a
        // snapshot's fallback, not a fork's.
        if self.keeps_state() && !self.capabilities.has(Capability::SnapshotMemory) {
            return Err(Error::BackendCannot {
                backend: self.backend_name.to_string(),
                capability: Capability::SnapshotMemory,
                hint: "it cannot copy this interpreter's memory; `Session::snapshot` and \
                       restores (one per copy) carry its variables by serialisation"
                    .into(),
            });
        }
        // Never leaves the process: not hashed nor sealed, and whole where the backend
        // maps that in one piece (8.7 ms per child of 10 against 13.4–13.8 ms as the
        // changed pages alone, in one run of `benches/snapshot.rs`).
        let snapshot = self.capture(Capture {
            memory: true,
            sealed: false,
            whole: true,
            scrub: false,
        })?;
        (0..n)
            .map(|_| {
                Session::restore(
                    self.backend.clone(),
                    self.passed_over.clone(),
                    self.handler.clone(),
                    self.settings(),
                    &snapshot,
                )
            })
            .collect()
    }

    /// A snapshot of the whole session for this process alone (neither hashed nor
    /// sealed): a warm start's base. As its changed pages, not whole: the sessions
    /// that start from it go on to touch the data stack's scattered pages, which a
    /// restore then copies up front rather than faulting in one by one (a first
    /// data cell 23.0–25.6 ms against 26.9–28.8 ms whole, in one run; `print(1)`
    /// alone pays about 2 ms more for it).
    pub(crate) fn capture_base(&mut self) -> Result<Snapshot> {
        self.capture(Capture {
            memory: true,
            sealed: false,
            whole: false,
            scrub: false,
        })
    }

    /// Whether the session's interpreter keeps state between runs that a snapshot
    /// must hold.
    pub(super) fn keeps_state(&self) -> bool {
        !self.one_shot && self.capabilities.has(Capability::PersistentState)
    }

    /// A snapshot as `how` says.
    fn capture(&mut self, how: Capture) -> Result<Snapshot> {
        let Capture {
            memory,
            sealed,
            whole,
            scrub,
        } = how;
        let scrub = match scrub && !self.secrets.is_empty() {
            true => Some(self.secrets.clone()),
            false => None,
        };
        let keeps_state = memory && self.keeps_state();
        let memory = keeps_state && self.capabilities.has(Capability::SnapshotMemory);
        let namespace = keeps_state && !memory && self.keeps_namespace();
        if keeps_state && !memory && !namespace {
            return Err(Error::BackendCannot {
                backend: self.backend_name.to_string(),
                capability: Capability::SnapshotMemory,
                hint: "it cannot capture this interpreter's state (its variables would be \
                       lost); `Session::snapshot_files` takes the workspace's files alone"
                    .into(),
            });
        }
        let unsaved = match namespace {
            true => Some(self.save_namespace()?),
            false => None,
        };
        let key = match sealed {
            true => Some(self.snapshots.key()?.clone()),
            false => None,
        };
        let max = self.policy.workdir_size;
        let manifest = Manifest {
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            backend: self.backend_name.to_string(),
            language: self.handler.info().id.clone(),
            image: self.image.clone(),
            interpreter: None,
            namespace: unsaved,
            session: SessionFacts {
                installed: self.installed.clone(),
                plot_capture: self.plot_capture,
                used: self.used,
            },
        };
        let backend = self.backend_name.to_string();
        let sandbox = self.sandbox()?;
        let made = Snapshot::write(key.as_ref(), |writer| {
            let interpreter = if memory {
                writer.align(4096)?;
                let mut capture = |out: &mut dyn std::io::Write| match whole {
                    true => sandbox.capture_here(out),
                    false => sandbox.capture(out),
                };
                let state = writer.section(Tag::STATE, |out| match &scrub {
                    Some(secrets) => {
                        let mut scrubbing = secrets.scrubbing(out);
                        let state = capture(&mut scrubbing)?;
                        scrubbing.finish().map_err(written)?;
                        Ok(state)
                    }
                    None => capture(out),
                })?;
                Some(state.ok_or_else(|| Error::Runtime {
                    runtime: backend,
                    reason: "the backend says it captures interpreters, but captured none".into(),
                })?)
            } else {
                None
            };
            let mut files = sandbox.files().pack("", max)?;
            if let Some(secrets) = &scrub {
                files = crate::transfer::rewrite(&files, |path, mut contents| {
                    secrets.scrub(&mut contents);
                    Some((secrets.mask_path(&path)?, contents))
                })?;
            }
            writer.section(Tag::FILES, |out| out.write_all(&files).map_err(written))?;
            Ok(Manifest {
                interpreter,
                ..manifest
            })
        });
        if namespace {
            // The pickle is the snapshot's: the session's workspace is as it was.
            let _ = self.sandbox()?.files().remove(super::namespace::FILE);
        }
        self.masked(made)
    }

    /// The settings a fork of this session gets.
    fn settings(&self) -> Settings {
        Settings {
            limits: self.limits,
            policy: self.policy.clone(),
            env: self.env.clone(),
            secrets: self.secrets.clone(),
            libraries: self.libraries.clone(),
            kernel: self.kernel.clone(),
            one_shot: self.one_shot,
            earlier_output: self.earlier_output,
            preinstalled: Vec::new(),
            image: self.image.clone(),
            tools: self.tools.clone(),
            snapshots: self.snapshots.clone(),
            readers: self.readers.clone(),
        }
    }

    /// A session on `backend` with `settings`, holding what `snapshot` holds.
    pub(crate) fn restore(
        backend: Arc<dyn Backend>,
        passed_over: Vec<(BackendName, String)>,
        handler: LanguageHandler,
        settings: Settings,
        snapshot: &Snapshot,
    ) -> Result<Session> {
        let language = handler.info().id.clone();
        if snapshot.language() != language {
            return Err(Error::InvalidSnapshot {
                reason: format!(
                    "it is of a {} session, and this session is {language}",
                    snapshot.language()
                ),
            });
        }
        let manifest = snapshot.manifest();
        let spec = SandboxSpec::new(
            &language,
            &settings.image,
            &settings.policy,
            settings.limits.memory,
        )
        .with_kernel(settings.kernel.as_ref());
        let mut sandbox = match (&manifest.interpreter, snapshot.state()) {
            (Some(state), Some(mut bytes)) => {
                if backend.name() != manifest.backend.as_str() {
                    return Err(Error::InvalidSnapshot {
                        reason: format!(
                            "it holds the interpreter of the {} backend, which only that \
                             backend restores (this session is on {})",
                            manifest.backend,
                            backend.name()
                        ),
                    });
                }
                backend.restore(&spec, state, &mut bytes)?
            }
            _ => backend.open(&spec)?,
        };
        let files = snapshot.files(settings.policy.workdir_size)?;
        if !files.is_empty() {
            sandbox.files().unpack("", &files)?;
        }
        let memory = manifest.interpreter.is_some();
        let facts = manifest.session.clone();
        let mut session = Session::new(sandbox, backend, passed_over, handler, settings);
        if memory {
            session.installed = facts.installed;
            session.plot_capture = facts.plot_capture;
            session.used = facts.used;
        }
        // The output directory came back with the files: the first run scans it.
        session.output = None;
        if manifest.namespace.is_some() {
            if !session.keeps_namespace() {
                return Err(Error::InvalidSnapshot {
                    reason: format!(
                        "it holds the variables of a Python kernel, which this session \
                         ({} on {}) cannot take back; restore it on {}",
                        session.handler.info().id,
                        session.backend_name,
                        manifest.backend
                    ),
                });
            }
            let loaded = session.load_namespace();
            session.masked(loaded)?;
            session.used = true;
        }
        Ok(session)
    }
}

/// How [`Session::capture`] takes a snapshot.
#[derive(Clone, Copy)]
struct Capture {
    /// With the interpreter's state, where the session keeps one.
    memory: bool,
    /// Hashed and sealed with the session's key: it may leave the process.
    sealed: bool,
    /// In the form that restores fastest in this process (for a snapshot that never
    /// leaves it: [`Sandbox::capture_here`](crate::backend::Sandbox::capture_here)).
    whole: bool,
    /// With the session's secrets overwritten.
    scrub: bool,
}

impl Capture {
    /// What [`Session::snapshot`] takes: everything, sealed, without secrets.
    const EXPORTED: Capture = Capture {
        memory: true,
        sealed: true,
        whole: false,
        scrub: true,
    };
}
