//! Snapshots of sessions: taken into the store, restored and forked as new sessions;
//! and pausing, a session's state moved to the store until its next call.

use super::admission::{bound_of, within_budget, InFlight};
use super::ask::Ask;
use super::entry::{Entry, Slot};
use super::ids::{session_span, ClientId, SessionId};
use super::info::SessionInfo;
use super::store::{SnapshotInfo, StoredSnapshotId};
use super::table::Inner;
use sandlot_core::error::{Error, Result};
use sandlot_core::session::Session;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Inner {
    /// The work of [`SessionManager::snapshot`](super::SessionManager::snapshot).
    pub(super) fn snapshot(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        let span = session_span(client, id);
        let _entered = span.enter();
        let snapshot = self.in_session(client, id, Session::snapshot)?;
        let info = self.store.keep(client, &snapshot)?;
        tracing::info!(snapshot = %info.id, bytes = info.bytes, "snapshot taken");
        Ok(info)
    }

    /// The work of [`SessionManager::snapshot_files`](super::SessionManager::snapshot_files).
    pub(super) fn snapshot_files(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        let span = session_span(client, id);
        let _entered = span.enter();
        let snapshot = self.in_session(client, id, Session::snapshot_files)?;
        let info = self.store.keep(client, &snapshot)?;
        tracing::info!(snapshot = %info.id, bytes = info.bytes, "snapshot of files taken");
        Ok(info)
    }

    /// The work of [`SessionManager::restore`](super::SessionManager::restore).
    pub(super) fn restore(
        &self,
        client: &ClientId,
        snapshot: &StoredSnapshotId,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        let (path, info) = self.store.find(client, snapshot)?;
        let mut ask = ask.unwrap_or_default();
        if ask.language.is_empty() {
            ask.language = info.language.clone();
        } else if ask.language != info.language {
            let resolves = self.with_service(|service| {
                service
                    .sandlot()
                    .plugins()
                    .language(&ask.language)
                    .map(|handler| handler.info().id == info.language)
                    .unwrap_or(false)
            });
            if !resolves {
                return Err(Error::InvalidRequest {
                    reason: format!(
                        "snapshot {snapshot} is of a {} session, not {}: leave the language \
                         out, or name {}",
                        info.language, ask.language, info.language
                    ),
                });
            }
        }
        if info.memory && ask.backend.is_none() {
            ask.backend = Some(info.backend.clone());
        }
        let request = self.request_for(&ask)?;
        let started = Instant::now();
        let restored = (|| {
            self.check_open()?;
            self.check_allowed(&request)?;
            let slot = self.reserve(client, bound_of(&request))?;
            let session = {
                let service = self.service.read().unwrap_or_else(|e| e.into_inner());
                let snapshot = service.sandlot().open_snapshot(&path)?;
                let builder = service.builder_for(&request);
                drop(service);
                builder.restore(&snapshot)?
            };
            let info = self.admit(client, session, request, Some(ask))?;
            drop(slot);
            Ok(info)
        })();
        match &restored {
            Ok(session) => {
                tracing::info!(session = %session.id, %client, %snapshot, ms = started.elapsed().as_millis() as u64, "session restored");
                self.counters.opened.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(%client, %snapshot, %error, "session not restored");
                self.counters.open_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        restored
    }

    /// The work of [`SessionManager::fork`](super::SessionManager::fork).
    pub(super) fn fork(
        &self,
        client: &ClientId,
        id: &SessionId,
        count: usize,
    ) -> Result<Vec<SessionInfo>> {
        if count == 0 || count > self.settings.max_per_client {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "a fork makes 1 to {} sessions (this server's sessions per client), not \
                     {count}",
                    self.settings.max_per_client
                ),
            });
        }
        let span = session_span(client, id);
        let _entered = span.enter();
        self.check_open()?;
        let entry = self.entry(client, id)?;
        let slots = (0..count)
            .map(|_| self.reserve(client, entry.bound.load(Ordering::Relaxed)))
            .collect::<Result<Vec<_>>>()?;
        let started = Instant::now();
        let forks = self.in_session(client, id, |session| session.fork(count))?;
        let mut infos = Vec::with_capacity(count);
        // A fork that cannot be admitted ends with those after it (dropped, closed).
        for session in forks {
            infos.push(self.admit(client, session, entry.request.clone(), entry.ask.clone())?);
        }
        drop(slots);
        self.counters
            .opened
            .fetch_add(count as u64, Ordering::Relaxed);
        tracing::info!(
            count,
            ms = started.elapsed().as_millis() as u64,
            "session forked"
        );
        Ok(infos)
    }

    /// Takes the state of a paused session back into a sandbox, if what it may hold
    /// fits the memory budget.
    pub(super) fn resume(&self, entry: &Entry) -> Result<Session> {
        let bound = entry.bound.load(Ordering::Relaxed);
        let _held = {
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            within_budget(self.settings.budget(), &sessions, &pending, bound)?;
            pending.in_flight += 1;
            pending.memory = pending.memory.saturating_add(bound);
            InFlight {
                pending: &self.pending,
                settled: &self.settled,
                opening: None,
                memory: bound,
            }
        };
        let session = self.restore_paused(entry)?;
        let bound = session.memory_bound();
        entry.bound.store(bound, Ordering::Relaxed);
        entry.memory.store(bound, Ordering::Relaxed);
        Ok(session)
    }

    /// Takes the state of a paused session back into a sandbox.
    pub(super) fn restore_paused(&self, entry: &Entry) -> Result<Session> {
        let started = Instant::now();
        let path = self.store.paused_file(&entry.id);
        let session = {
            let service = self.service.read().unwrap_or_else(|e| e.into_inner());
            let snapshot = service.sandlot().open_snapshot(&path)?;
            let mut request = entry.request.clone();
            request.backend = snapshot.backend().into();
            if let Some(rules) = entry
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
            {
                request.policy.requests = rules;
            }
            let builder = service.builder_for(&request);
            drop(service);
            builder.restore(&snapshot)?
        };
        self.store.unpause(&entry.id);
        tracing::info!(session = %entry.id, client = %entry.client, ms = started.elapsed().as_millis() as u64, "session resumed");
        Ok(session)
    }

    /// Pauses `entry`: snapshots it into the store and releases its sandbox. With
    /// `wait`, after a run in progress; without, not at all if one is. `false` if it
    /// was not paused: not live, busy, or its backend cannot capture its memory.
    pub(super) fn pause(&self, entry: &Entry, wait: bool) -> Result<bool> {
        if !entry.pausable.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut slot = if wait {
            entry.session.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            match entry.session.try_lock() {
                Ok(slot) => slot,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            }
        };
        let Slot::Live(session) = &mut *slot else {
            return Ok(false);
        };
        let started = Instant::now();
        // The snapshot stays in the server's store and restores this session: its
        // secrets stay in it, as they are in the live session.
        let paused = session.snapshot_keeping_secrets().and_then(|snapshot| {
            let record = if self.store.lasting() {
                entry.record()
            } else {
                None
            };
            self.store
                .pause(&entry.id, &entry.client, &snapshot, record.as_ref())?;
            Ok(snapshot.len())
        });
        match paused {
            Ok(bytes) => {
                // The sandbox goes with the session, and what it held of the memory.
                *slot = Slot::Paused;
                entry.memory.store(0, Ordering::Relaxed);
                tracing::info!(session = %entry.id, client = %entry.client, bytes, ms = started.elapsed().as_millis() as u64, "session paused");
                Ok(true)
            }
            Err(error) => {
                // Not tried again: it stays open until its idle timeout.
                entry.pausable.store(false, Ordering::Relaxed);
                tracing::warn!(session = %entry.id, client = %entry.client, %error, "session not paused");
                Err(error)
            }
        }
    }

    /// At shutdown with a lasting store: keeps session `id` paused for the server
    /// after the restart, if it can be; `false` if it must be closed.
    pub(super) fn keep_for_restart(&self, id: &SessionId) -> bool {
        if !self.store.lasting() {
            return false;
        }
        let Some(entry) = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
        else {
            return false;
        };
        if entry.ask.is_none() {
            return false;
        }
        let paused = matches!(
            *entry.session.lock().unwrap_or_else(|e| e.into_inner()),
            Slot::Paused
        ) || self.pause(&entry, true).unwrap_or(false);
        if paused {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(id);
            tracing::info!(session = %id, client = %entry.client, "session kept paused for after the restart");
        }
        paused
    }
}
