//! One session in the manager's table ([`Entry`]): whose it is, what it was opened
//! with, where its state is ([`Slot`]), and the queue its calls take turns in.

use super::ask::Ask;
use super::ids::{ClientId, SessionId};
use super::info::SessionInfo;
use super::store::{self, PausedRecord};
use sandlot_core::backend::BackendName;
use sandlot_core::egress::RequestRules;
use sandlot_core::error::{Error, Result};
use sandlot_core::request::OpenRequest;
use sandlot_core::secret::Masker;
use sandlot_core::session::Session;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

pub(super) struct Entry {
    pub(super) id: SessionId,
    pub(super) client: ClientId,
    pub(super) language: String,
    pub(super) backend: BackendName,
    pub(super) runs_with: Option<String>,
    pub(super) persistent: bool,
    pub(super) opened: Instant,
    /// `opened` on the wall clock, which a record on disk keeps across a restart.
    pub(super) opened_wall: SystemTime,
    pub(super) last_used: Mutex<Instant>,
    /// What it was opened with: a resume opens its sandbox again with it.
    pub(super) request: OpenRequest,
    /// The request rules its client set since it opened
    /// ([`SessionManager::update_network`](super::SessionManager::update_network)),
    /// which a resume opens its sandbox with instead of the request's.
    pub(super) requests: Mutex<Option<RequestRules>>,
    /// What masks its secrets (the server's and its client's) in what the front
    /// ends build for its client.
    pub(super) masker: Masker,
    /// What its client asked, where the session was opened from an [`Ask`]: what a
    /// server after a restart rebuilds the request from. A session without one is
    /// not kept across a restart.
    pub(super) ask: Option<Ask>,
    /// Whether it may be paused: its backend captures the interpreter's memory, and
    /// no pause of it has failed.
    pub(super) pausable: AtomicBool,
    /// The most of the host's memory its sandbox may hold, live.
    pub(super) bound: AtomicU64,
    /// What of the memory budget it holds now: `bound` while its sandbox is live,
    /// nothing while it is paused.
    pub(super) memory: AtomicU64,
    /// Held for the length of a run, so runs of one session take turns.
    pub(super) session: Mutex<Slot>,
    /// Callers waiting for `session` or holding it: each holds a thread of the
    /// server's blocking pool while it waits, so they are capped ([`MAX_WAITING`]).
    pub(super) waiting: AtomicUsize,
    /// Set when the session is being ended: callers that get their turn after it
    /// find it ended instead of running first.
    pub(super) ending: AtomicBool,
    /// The interrupt of the run or command under way, which closing the session
    /// triggers.
    pub(super) running: Mutex<Option<sandlot_core::Interrupt>>,
}

/// The most callers one session has waiting for their turn (and the one whose turn
/// it is): more are refused. Runs of a session take turns and may each take the
/// server's whole time limit; without a cap one client's burst of requests to one
/// session would hold every thread of the blocking pool that all sessions share.
pub(super) const MAX_WAITING: usize = 8;

/// A caller's place in a session's queue, given back when dropped.
pub(super) struct Turn<'a>(&'a AtomicUsize);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a session's state is.
pub(super) enum Slot {
    /// In its sandbox (boxed: a session is large, and most slots of a busy server
    /// hold one anyway; the box keeps a paused one small).
    Live(Box<Session>),
    /// In the store, its sandbox released.
    Paused,
    /// Nowhere: it ended.
    Ended,
}

impl Entry {
    pub(super) fn info(&self, idle_timeout: Duration) -> SessionInfo {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        let paused = matches!(self.session.try_lock().as_deref(), Ok(Slot::Paused));
        SessionInfo {
            id: self.id.clone(),
            language: self.language.clone(),
            backend: self.backend.clone(),
            runs_with: self.runs_with.clone(),
            persistent: self.persistent,
            age_seconds: self.opened.elapsed().as_secs_f64(),
            idle_seconds: last.elapsed().as_secs_f64(),
            idle_timeout_seconds: idle_timeout.as_secs_f64(),
            paused,
        }
    }

    pub(super) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// When it was last used, on the wall clock.
    pub(super) fn last_used_wall(&self) -> SystemTime {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        SystemTime::now()
            .checked_sub(last.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// The record that lets a server after a restart resume it, if it can be.
    pub(super) fn record(&self) -> Option<PausedRecord> {
        let ask = self.ask.as_ref()?;
        Some(PausedRecord::new(
            store::Recorded {
                id: &self.id,
                client: &self.client,
                language: &self.language,
                backend: self.backend.as_str(),
                runs_with: self.runs_with.as_deref(),
            },
            self.opened_wall,
            self.last_used_wall(),
            ask,
        ))
    }

    /// A place in the session's queue, or the error that says it is full.
    pub(super) fn queue(&self) -> Result<Turn<'_>> {
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let turn = Turn(&self.waiting);
        if ahead >= MAX_WAITING {
            return Err(Error::SessionBusy {
                id: self.id.to_string(),
                waiting: ahead,
            });
        }
        Ok(turn)
    }

    /// Ends the session, after a run in progress finishes (a run ends by its timeout
    /// at the latest), or is interrupted first if `interrupt`; callers still waiting
    /// then find it ended.
    pub(super) fn end(&self, interrupt: bool) {
        self.ending.store(true, Ordering::Release);
        if interrupt {
            if let Some(running) = &*self.running.lock().unwrap_or_else(|e| e.into_inner()) {
                running.interrupt();
            }
        }
        let slot = std::mem::replace(
            &mut *self.session.lock().unwrap_or_else(|e| e.into_inner()),
            Slot::Ended,
        );
        drop(slot);
    }
}

/// `Instant::now()` less what has passed since `then` on the wall clock: the
/// instant of a time read back from disk.
pub(super) fn instant_of(then: SystemTime) -> Instant {
    let ago = SystemTime::now().duration_since(then).unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}
