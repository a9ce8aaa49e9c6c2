//! Opening a session: the request for what a client asked, the server's limits and
//! policy checked, a slot reserved, the sandbox opened and admitted to the table;
//! and the sessions an earlier server paused, taken back.

use super::admission::{bound_of, within_budget, InFlight};
use super::ask::{seconds, Ask};
use super::entry::{instant_of, Entry, Slot};
use super::ids::{ClientId, SessionId};
use super::info::SessionInfo;
use super::store::{self, PausedRecord};
use super::table::Inner;
use sandlot_core::backend::BackendName;
use sandlot_core::error::{Error, Result};
use sandlot_core::request::OpenRequest;
use sandlot_core::secret::Masker;
use sandlot_core::session::Session;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

impl Inner {
    /// Takes back a session an earlier manager paused, if this one's policy and
    /// limits still allow what its client asked; else its state is removed.
    pub(super) fn adopt(&self, record: PausedRecord) {
        let id = SessionId::from(record.id.clone());
        let ask = Ask::from(record.ask.clone());
        let adopted = self
            .request_for(&ask)
            .and_then(|request| self.check_allowed(&request).map(|()| request))
            .and_then(|request| Ok((request, BackendName::new(record.backend.clone())?)));
        let (request, backend) = match adopted {
            Ok(adopted) => adopted,
            Err(error) => {
                tracing::warn!(session = %id, %error, "paused session dropped: this server no longer allows it");
                self.store.unpause(&id);
                return;
            }
        };
        let opened_wall = store::from_unix(record.opened_unix);
        let bound = bound_of(&request);
        let entry = Arc::new(Entry {
            id: id.clone(),
            client: ClientId::new(record.client),
            language: record.language,
            backend,
            runs_with: record.runs_with,
            persistent: true,
            opened: instant_of(opened_wall),
            opened_wall,
            last_used: Mutex::new(instant_of(store::from_unix(record.last_used_unix))),
            masker: Masker::new(request.secrets.clone()),
            request,
            ask: Some(ask),
            pausable: AtomicBool::new(true),
            // Paused: it holds nothing until it resumes, and its backend says then.
            bound: AtomicU64::new(bound),
            memory: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            ending: AtomicBool::new(false),
            requests: Mutex::new(None),
            running: Mutex::new(None),
            session: Mutex::new(Slot::Paused),
        });
        tracing::info!(session = %id, client = %entry.client, "paused session taken back");
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry);
    }

    /// The work of [`SessionManager::request`](super::SessionManager::request).
    pub(super) fn request(&self, language: &str) -> OpenRequest {
        let mut request = OpenRequest::new(language);
        request.policy = self.policy.clone();
        request.limits = self.settings.limits;
        request.secrets = self.settings.secrets.clone();
        request.upstream_ca = self.settings.upstream_ca.clone();
        request.tools = self.settings.tools.clone();
        request
    }

    /// The work of [`SessionManager::request_for`](super::SessionManager::request_for).
    pub(super) fn request_for(&self, ask: &Ask) -> Result<OpenRequest> {
        let mut request = self.request(&ask.language);
        request.libraries = ask.libraries.clone();
        if let Some(backend) = &ask.backend {
            request.backend = backend.as_str().into();
        }
        if let Some(network) = ask.network {
            request.policy.network = network;
        }
        if let Some(timeout) = seconds("timeout_seconds", ask.timeout_seconds)? {
            request.limits.timeout = timeout;
        }
        if let Some(mb) = ask.memory_mb {
            if mb == 0 {
                return Err(Error::InvalidRequest {
                    reason: "memory_mb must be at least 1".into(),
                });
            }
            request.limits.memory =
                usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        }
        for secret in ask.secrets.secrets()? {
            request.secrets.retain(|s| s.name() != secret.name());
            request.secrets.push(secret);
        }
        Ok(request)
    }

    /// The work of [`SessionManager::open`](super::SessionManager::open).
    pub(super) fn open(&self, client: &ClientId, request: OpenRequest) -> Result<SessionInfo> {
        self.open_with(client, request, None)
    }

    /// The work of [`SessionManager::open_asked`](super::SessionManager::open_asked).
    pub(super) fn open_asked(&self, client: &ClientId, ask: &Ask) -> Result<SessionInfo> {
        let request = self.request_for(ask)?;
        self.open_with(client, request, Some(ask.clone()))
    }

    pub(super) fn open_with(
        &self,
        client: &ClientId,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        let language = request.language.clone();
        let started = Instant::now();
        let opened = self.open_inner(client, request, ask);
        let counter = match &opened {
            Ok(info) => {
                tracing::info!(
                    session = %info.id,
                    %client,
                    language = %info.language,
                    backend = %info.backend,
                    ms = started.elapsed().as_millis() as u64,
                    "session opened"
                );
                &self.counters.opened
            }
            Err(error) => {
                tracing::warn!(%client, %language, %error, "session not opened");
                &self.counters.open_failures
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        opened
    }

    pub(super) fn open_inner(
        &self,
        client: &ClientId,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        self.check_open()?;
        self.check_allowed(&request)?;
        // The slot is taken before the slow open, so that concurrent opens cannot
        // together pass a limit; a shutdown waits for it.
        let slot = self.reserve(client, bound_of(&request))?;
        let session = self.open_session(&request)?;
        let info = self.admit(client, session, request, ask)?;
        drop(slot);
        Ok(info)
    }

    /// Makes `session`, opened in a slot of `client`, one of the manager's, if it
    /// enforces the server's policy.
    pub(super) fn admit(
        &self,
        client: &ClientId,
        session: Session,
        request: OpenRequest,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        // The server's policy would be a label nobody enforces there.
        let gaps: Vec<String> = session
            .unenforced()
            .iter()
            .filter(|field| !self.settings.accept_unenforced.contains(field))
            .filter(|field| {
                **field != sandlot_core::PolicyField::Network
                    || request.policy.network != sandlot_core::Network::On
            })
            .map(ToString::to_string)
            .collect();
        if !gaps.is_empty() {
            let network = if gaps.iter().any(|g| g == "network") {
                " (network policy: network is not `on`)"
            } else {
                ""
            };
            return Err(Error::BackendUnsuitable {
                backend: session.backend().to_string(),
                language: session.language().to_string(),
                reason: format!(
                    "it cannot enforce this server's policy here: {}{network}; choose another \
                     backend, or start the server with --accept-unenforced {}",
                    gaps.join(", "),
                    gaps.join(",")
                ),
            });
        }
        let bound = session.memory_bound();
        let capabilities = session.capabilities();
        let persistent = capabilities.has(sandlot_core::Capability::PersistentState);
        let pausable = persistent
            && !request.one_shot
            && capabilities.has(sandlot_core::Capability::SnapshotMemory);
        let entry = Arc::new(Entry {
            id: SessionId::fresh(),
            client: client.clone(),
            language: session.language().to_string(),
            backend: session.backend().clone(),
            runs_with: session.toolchain().map(ToString::to_string),
            persistent,
            opened: Instant::now(),
            opened_wall: SystemTime::now(),
            last_used: Mutex::new(Instant::now()),
            masker: Masker::new(request.secrets.clone()),
            request,
            ask,
            pausable: AtomicBool::new(pausable),
            bound: AtomicU64::new(bound),
            memory: AtomicU64::new(bound),
            waiting: AtomicUsize::new(0),
            ending: AtomicBool::new(false),
            requests: Mutex::new(None),
            running: Mutex::new(None),
            session: Mutex::new(Slot::Live(Box::new(session))),
        });
        {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let gone = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .gone
                .contains(client);
            let refusal = if gone {
                Some(Error::SessionEnded {
                    reason: "its client went away while it opened".into(),
                })
            } else {
                self.check_open().err()
            };
            if let Some(e) = refusal {
                drop(sessions);
                entry.end(false);
                return Err(e);
            }
            sessions.insert(entry.id.clone(), entry.clone());
        }
        Ok(entry.info(self.settings.idle_timeout))
    }

    /// Takes a slot for an open of `client`, or says which limit is reached.
    pub(super) fn reserve(&self, client: &ClientId, memory: u64) -> Result<InFlight<'_>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let settings = &self.settings;
        let opening_mine = pending.opening.get(client).copied().unwrap_or(0);
        let opening_all: usize = pending.opening.values().sum();
        let mine = sessions.values().filter(|e| e.client == *client).count() + opening_mine;
        if mine >= settings.max_per_client {
            return Err(Error::TooManySessions {
                scope: format!("client {client}"),
                limit: settings.max_per_client,
            });
        }
        if sessions.len() + opening_all >= settings.max_sessions {
            return Err(Error::TooManySessions {
                scope: "this server".into(),
                limit: settings.max_sessions,
            });
        }
        within_budget(self.settings.budget(), &sessions, &pending, memory)?;
        // A client that opens again is back.
        pending.gone.retain(|c| c != client);
        *pending.opening.entry(client.clone()).or_default() += 1;
        pending.in_flight += 1;
        pending.memory = pending.memory.saturating_add(memory);
        Ok(InFlight {
            pending: &self.pending,
            settled: &self.settled,
            opening: Some(client.clone()),
            memory,
        })
    }

    pub(super) fn open_session(&self, request: &OpenRequest) -> Result<Session> {
        let prepared = self
            .service
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_prepared(request)?;
        if !prepared {
            // Installing a runtime changes the service: the one slow step that takes
            // it for itself (once per runtime).
            self.service
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .prepare(request, |_| {})?;
        }
        // The builder has its own handle to the backends: the service is not held
        // while the sandbox starts, which can take a Kubernetes start timeout.
        let builder = self
            .service
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .builder_for(request);
        builder.open()
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.shut.load(Ordering::SeqCst) {
            return Err(Error::ManagerClosed);
        }
        Ok(())
    }

    pub(super) fn check_allowed(&self, request: &OpenRequest) -> Result<()> {
        let mut looser: Vec<String> = request
            .policy
            .looser_than(&self.policy)
            .iter()
            .map(|field| format!("policy.{field}"))
            .collect();
        looser.extend(
            request
                .limits
                .looser_than(&self.settings.limits)
                .iter()
                .map(|name| format!("limits.{name}")),
        );
        if looser.is_empty() {
            Ok(())
        } else {
            Err(Error::NotAllowed { fields: looser })
        }
    }
}
