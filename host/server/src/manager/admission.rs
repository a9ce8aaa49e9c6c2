//! Admission: what opens, restores, forks and resumes in progress hold
//! ([`Pending`], [`InFlight`]), and the memory budget they are held to.

use super::entry::Entry;
use super::ids::{ClientId, SessionId};
use sandlot_core::error::{Error, Result};
use sandlot_core::request::OpenRequest;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

/// What is on its way in or out.
#[derive(Default)]
pub(super) struct Pending {
    /// Opens in progress per client: they count against the limits.
    pub(super) opening: HashMap<ClientId, usize>,
    /// Opens and closes in progress, which a shutdown waits for.
    pub(super) in_flight: usize,
    /// Bytes of the memory budget that opens, restores, forks and resumes in progress
    /// hold.
    pub(super) memory: u64,
    /// Clients that went away: an open of theirs that ends after is closed at once.
    pub(super) gone: VecDeque<ClientId>,
}

/// How many gone clients are remembered.
pub(super) const REMEMBERED_GONE: usize = 4096;

/// What the open `sessions` and the opens in progress (`pending`) may hold of the
/// host's memory.
pub(super) fn memory_held(sessions: &HashMap<SessionId, Arc<Entry>>, pending: &Pending) -> u64 {
    sessions
        .values()
        .map(|e| e.memory.load(Ordering::Relaxed))
        .fold(pending.memory, u64::saturating_add)
}

/// What a session of `request` may hold of the host's memory before its backend is
/// known: its memory limit and its workspace, as on the backend that counts most.
pub(super) fn bound_of(request: &OpenRequest) -> u64 {
    match request.limits.memory {
        0 => u64::MAX,
        memory => (memory as u64).saturating_add(request.policy.workdir_size),
    }
}

/// Whether `memory` more bytes fit `budget` beside what the open sessions
/// (`sessions`) and the opens in progress (`pending`) hold.
pub(super) fn within_budget(
    budget: u64,
    sessions: &HashMap<SessionId, Arc<Entry>>,
    pending: &Pending,
    memory: u64,
) -> Result<()> {
    let held = memory_held(sessions, pending);
    if held.saturating_add(memory) > budget {
        return Err(Error::MemoryBudget {
            needed: memory,
            held,
            budget,
        });
    }
    Ok(())
}

/// One open or close in progress; its end is counted when it drops.
pub(super) struct InFlight<'a> {
    pub(super) pending: &'a Mutex<Pending>,
    /// Signalled when it ends.
    pub(super) settled: &'a Condvar,
    pub(super) opening: Option<ClientId>,
    /// Bytes of the memory budget it holds until the session it opens is counted.
    pub(super) memory: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = &self.opening {
            if let Some(count) = pending.opening.get_mut(client) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    pending.opening.remove(client);
                }
            }
        }
        pending.in_flight = pending.in_flight.saturating_sub(1);
        pending.memory = pending.memory.saturating_sub(self.memory);
        self.settled.notify_all();
    }
}
