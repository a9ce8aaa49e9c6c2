//! The session table: the manager's shared state ([`Inner`]), finding a client's
//! session in it, ending one, and the shutdown that ends them all.

use super::admission::{memory_held, InFlight, Pending, REMEMBERED_GONE};
use super::entry::Entry;
use super::ids::{ClientId, SessionId};
use super::info::{Ended, SessionInfo};
use super::settings::ManagerSettings;
use super::stats::{Counters, ManagerStats};
use super::store::{PausedRecord, Store};
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::Policy;
use sandlot_core::secret::Masker;
use sandlot_core::service::Service;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

/// How many ended sessions are remembered, so that a late call on one says why it
/// ended instead of only that it is unknown.
pub(super) const REMEMBERED_ENDS: usize = 1024;

/// How long a shutdown waits for opens and closes in progress (a Kubernetes pod may
/// take its start timeout to come up, then to be deleted).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(300);

pub(super) struct Inner {
    pub(super) service: RwLock<Service>,
    pub(super) settings: ManagerSettings,
    pub(super) policy: Policy,
    pub(super) sessions: Mutex<HashMap<SessionId, Arc<Entry>>>,
    /// Opens and closes in progress; locked after `sessions` when both are.
    pub(super) pending: Mutex<Pending>,
    /// Signalled when `pending.in_flight` drops.
    pub(super) settled: Condvar,
    pub(super) ended: Mutex<VecDeque<(SessionId, ClientId, Ended)>>,
    pub(super) shut: AtomicBool,
    /// Set (and signalled) when the sweeper should stop.
    pub(super) sweeper: Arc<(Mutex<bool>, Condvar)>,
    pub(super) counters: Counters,
    /// Snapshots clients took, and paused sessions.
    pub(super) store: Store,
}

impl Inner {
    /// The state of a manager over `service`, and the sessions an earlier manager
    /// paused in its state directory, for it to take back.
    pub(super) fn new(
        service: Service,
        settings: ManagerSettings,
    ) -> Result<(Inner, Vec<PausedRecord>)> {
        let policy = settings
            .policy
            .clone()
            .or_else(|| service.sandlot().config().policy.clone())
            .unwrap_or_default();
        let (store, paused) = Store::open(
            settings.state_dir.as_deref(),
            settings.max_stored_bytes,
            settings.client_share(),
        )?;
        let inner = Inner {
            service: RwLock::new(service),
            settings,
            policy,
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            settled: Condvar::new(),
            ended: Mutex::new(VecDeque::new()),
            shut: AtomicBool::new(false),
            sweeper: Arc::new((Mutex::new(false), Condvar::new())),
            counters: Counters::default(),
            store,
        };
        Ok((inner, paused))
    }

    /// Runs `f` with the service.
    pub(super) fn with_service<T>(&self, f: impl FnOnce(&Service) -> T) -> T {
        f(&self.service.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The entry `id` of `client`, or why there is none.
    pub(super) fn entry(&self, client: &ClientId, id: &SessionId) -> Result<Arc<Entry>> {
        let found = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .filter(|e| e.client == *client)
            .cloned();
        if let Some(entry) = found {
            return Ok(entry);
        }
        let ended = self
            .ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(ended, owner, _)| ended == id && owner == client)
            .map(|(_, _, why)| *why);
        Err(Error::NoSuchSession {
            id: id.to_string(),
            reason: match ended {
                Some(why) => format!("it has ended: {why}"),
                None => "no session of this client has this id".into(),
            },
        })
    }

    /// The error for session `id` of `client`, which ended while a caller waited.
    pub(super) fn ended(&self, client: &ClientId, id: &SessionId) -> Error {
        self.entry(client, id)
            .err()
            .unwrap_or(Error::NoSuchSession {
                id: id.to_string(),
                reason: "it has ended".into(),
            })
    }

    /// The work of [`SessionManager::masker`](super::SessionManager::masker).
    pub(super) fn masker(&self, client: &ClientId, id: &SessionId) -> Result<Masker> {
        Ok(self.entry(client, id)?.masker.clone())
    }

    /// The work of [`SessionManager::close`](super::SessionManager::close).
    pub(super) fn close(&self, client: &ClientId, id: &SessionId) -> Result<()> {
        self.entry(client, id)?;
        self.end(id, Ended::Closed);
        Ok(())
    }

    /// The work of [`SessionManager::list`](super::SessionManager::list).
    pub(super) fn list(&self, client: &ClientId) -> Vec<SessionInfo> {
        let mut list: Vec<SessionInfo> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|e| e.client == *client)
            .map(|e| e.info(self.settings.idle_timeout))
            .collect();
        list.sort_by(|a, b| b.age_seconds.total_cmp(&a.age_seconds));
        list
    }

    /// The work of [`SessionManager::client_gone`](super::SessionManager::client_gone).
    pub(super) fn client_gone(&self, client: &ClientId) {
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.gone.len() == REMEMBERED_GONE {
                pending.gone.pop_front();
            }
            pending.gone.push_back(client.clone());
        }
        let ids: Vec<SessionId> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|e| e.client == *client)
            .map(|e| e.id.clone())
            .collect();
        for id in ids {
            self.end(&id, Ended::ClientGone);
        }
    }

    /// The work of [`SessionManager::stats`](super::SessionManager::stats).
    pub(super) fn stats(&self) -> ManagerStats {
        let c = &self.counters;
        let (open, memory_held) = {
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            (sessions.len(), memory_held(&sessions, &pending))
        };
        ManagerStats {
            open,
            opened: c.opened.load(Ordering::Relaxed),
            open_failures: c.open_failures.load(Ordering::Relaxed),
            closed: c.closed.load(Ordering::Relaxed),
            expired: c.expired.load(Ordering::Relaxed),
            runs: c.runs.load(Ordering::Relaxed),
            run_failures: c.run_failures.load(Ordering::Relaxed),
            run_seconds: c.run_micros.load(Ordering::Relaxed) as f64 / 1e6,
            tool_calls: c.tool_calls.load(Ordering::Relaxed),
            tool_call_failures: c.tool_call_failures.load(Ordering::Relaxed),
            memory_held,
            memory_budget: self.settings.budget(),
        }
    }

    pub(super) fn end(&self, id: &SessionId, why: Ended) -> bool {
        let (entry, _closing) = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let Some(entry) = sessions.remove(id) else {
                return false;
            };
            // Counted before the entry leaves the table, so a shutdown never misses it.
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .in_flight += 1;
            (
                entry,
                InFlight {
                    pending: &self.pending,
                    settled: &self.settled,
                    opening: None,
                    memory: 0,
                },
            )
        };
        {
            let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
            if ended.len() == REMEMBERED_ENDS {
                ended.pop_front();
            }
            ended.push_back((entry.id.clone(), entry.client.clone(), why));
        }
        let counter = match why {
            Ended::Idle | Ended::Lifetime => &self.counters.expired,
            _ => &self.counters.closed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // A client's close and the lifetime stop a run under way; a shutdown lets it
        // finish.
        entry.end(matches!(
            why,
            Ended::Closed | Ended::Lifetime | Ended::ClientGone
        ));
        self.store.unpause(&entry.id);
        tracing::info!(
            session = %entry.id,
            client = %entry.client,
            reason = %why,
            age_s = entry.opened.elapsed().as_secs(),
            "session closed"
        );
        true
    }

    pub(super) fn shutdown(&self) -> usize {
        self.shut.store(true, Ordering::SeqCst);
        {
            let (stop, wake) = &*self.sweeper;
            *stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
            wake.notify_all();
        }
        let ids: Vec<SessionId> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        // In parallel: each close waits for its session's run and removes a sandbox.
        std::thread::scope(|scope| {
            for id in &ids {
                scope.spawn(move || self.keep_for_restart(id) || self.end(id, Ended::Shutdown));
            }
        });
        // Opens and closes that started before, on other threads (a client that
        // went away, the sweeper): their sandboxes go before this returns.
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .settled
            .wait_timeout_while(pending, SHUTDOWN_WAIT, |p| p.in_flight > 0)
            .unwrap_or_else(|e| e.into_inner());
        ids.len()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
