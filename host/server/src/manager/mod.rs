//! Named sessions for long-lived front ends (the MCP server, the HTTP API): each owned
//! by a client, closed when it has been idle too long, when it reaches its maximum
//! lifetime, when its client goes away, or when the manager shuts down. The policy and
//! limits come from the server's configuration; a client may tighten them, never loosen
//! them.
//!
//! ```no_run
//! use sandlot::server::manager::{ClientId, ManagerSettings, SessionManager};
//! use sandlot::service::Service;
//! use sandlot::OpenRequest;
//! # fn main() -> Result<(), sandlot::Error> {
//! let manager = SessionManager::new(Service::from_environment(sandlot::providers())?, ManagerSettings::default())?;
//! let client = ClientId::new("agent-7");
//! let opened = manager.open(&client, OpenRequest::new("python"))?;
//! manager.run(&client, &opened.id, "x = 6 * 7", Default::default())?;
//! let run = manager.run(&client, &opened.id, "print(x)", Default::default())?;
//! assert_eq!(run.stdout_text(), "42\n");
//! manager.close(&client, &opened.id)?;
//! # Ok(())
//! # }
//! ```

mod admission;
mod ask;
mod entry;
mod ids;
mod info;
mod network;
mod open;
mod runs;
mod settings;
mod snapshots;
mod stats;
mod store;
mod sweep;
mod table;

pub use ask::{seconds, Ask};
pub use ids::{ClientId, SessionId};
pub use info::{Ended, SessionInfo};
pub use settings::ManagerSettings;
pub use stats::ManagerStats;
pub use store::{SnapshotInfo, StoredSnapshotId};

use sandlot_core::error::Result;
use sandlot_core::execution::Execution;
use sandlot_core::policy::Policy;
use sandlot_core::request::OpenRequest;
use sandlot_core::secret::Masker;
use sandlot_core::service::Service;
use sandlot_core::session::{NetworkUpdate, RunOptions, Session};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use table::Inner;

/// Named sessions shared by a server's connections. Cheap to clone; every clone is
/// the same manager. Its calls block (a run takes as long as the code runs): async
/// servers call them through `spawn_blocking`.
#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

impl fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionManager")
            .field("settings", &self.inner.settings)
            .field("open", &self.inner.sessions.lock().map(|s| s.len()).ok())
            .finish_non_exhaustive()
    }
}

impl SessionManager {
    /// A manager over `service`, with a background thread that closes expired
    /// sessions (and pauses idle ones, with [`ManagerSettings::pause_after`]). With
    /// a [`ManagerSettings::state_dir`], the sessions an earlier manager paused there
    /// are back, paused. Fails if the state directory cannot be made or read.
    pub fn new(service: Service, settings: ManagerSettings) -> Result<SessionManager> {
        let (inner, paused) = Inner::new(service, settings)?;
        let inner = Arc::new(inner);
        for record in paused {
            inner.adopt(record);
        }
        sweep::start(&inner);
        Ok(SessionManager { inner })
    }

    /// The settings in force.
    pub fn settings(&self) -> &ManagerSettings {
        &self.inner.settings
    }

    /// The policy every session gets unless its client asks for a stricter one.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Runs `f` with the service (for the languages, the configuration, ...).
    pub fn with_service<T>(&self, f: impl FnOnce(&Service) -> T) -> T {
        self.inner.with_service(f)
    }

    /// An [`OpenRequest`] for `language` with the server's policy and limits, for a
    /// client to tighten.
    pub fn request(&self, language: &str) -> OpenRequest {
        self.inner.request(language)
    }

    /// The [`OpenRequest`] for what a client asked, over the server's policy and
    /// limits: refused here if a number is not one, and by [`SessionManager::open`]
    /// if it loosens anything.
    pub fn request_for(&self, ask: &Ask) -> Result<OpenRequest> {
        self.inner.request_for(ask)
    }

    /// Opens a session for `client`. Refuses a policy or limits looser than the
    /// server's, and a client or a server at its session limit.
    pub fn open(&self, client: &ClientId, request: OpenRequest) -> Result<SessionInfo> {
        self.inner.open(client, request)
    }

    /// Opens the session `client` asked for ([`SessionManager::request_for`]). Unlike
    /// a session opened from a request, it can be resumed by a server after a
    /// restart, which rebuilds its request from the ask.
    pub fn open_asked(&self, client: &ClientId, ask: &Ask) -> Result<SessionInfo> {
        self.inner.open_asked(client, ask)
    }

    /// What masks the secrets of session `id` of `client` (the server's and the
    /// session's own) in what a front end builds for the client from its results:
    /// events, JSON decoded from the output. At once, whether a run is under way or
    /// the session is paused.
    pub fn masker(&self, client: &ClientId, id: &SessionId) -> Result<Masker> {
        self.inner.masker(client, id)
    }

    /// Runs `f` on session `id` of `client`, one call at a time per session.
    pub fn with_session<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        self.inner.with_session(client, id, f)
    }

    /// Runs `code` in session `id` of `client`. A time limit or an output cap of the
    /// run's own may be lower than the server's, never higher.
    pub fn run(
        &self,
        client: &ClientId,
        id: &SessionId,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        self.inner.run(client, id, code, options)
    }

    /// Runs a shell command line in session `id` of `client`, where its backend has a
    /// shell.
    pub fn run_command(
        &self,
        client: &ClientId,
        id: &SessionId,
        command_line: &str,
    ) -> Result<Execution> {
        self.run_command_with(client, id, command_line, RunOptions::default())
    }

    /// [`SessionManager::run_command`] with options: output as it comes, environment,
    /// working directory, an interrupt. Its time limit may be lower than the
    /// server's, never higher.
    pub fn run_command_with(
        &self,
        client: &ClientId,
        id: &SessionId,
        command_line: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        self.inner
            .run_command_with(client, id, command_line, options)
    }

    /// Opens a session, runs `code` once and closes it: for a client that needs no
    /// state. Counts against the client's sessions while it runs.
    pub fn run_once(
        &self,
        client: &ClientId,
        request: OpenRequest,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        self.inner.run_once(client, request, code, options)
    }

    /// Closes session `id` of `client`, waiting for a run in progress to finish.
    pub fn close(&self, client: &ClientId, id: &SessionId) -> Result<()> {
        self.inner.close(client, id)
    }

    /// Takes a snapshot of session `id` of `client` with its interpreter's memory
    /// (variables, imports, functions) and its files, and keeps it in the server's
    /// store. Refused on a backend that cannot capture the memory (see
    /// [`SessionManager::snapshot_files`]), and when the store is full.
    pub fn snapshot(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        self.inner.snapshot(client, id)
    }

    /// Takes a snapshot of the files of session `id` of `client` alone, on any
    /// backend, and keeps it in the server's store.
    pub fn snapshot_files(&self, client: &ClientId, id: &SessionId) -> Result<SnapshotInfo> {
        self.inner.snapshot_files(client, id)
    }

    /// Opens a session for `client` holding what its snapshot `snapshot` holds. The
    /// session gets what `ask` asks (its language must be the snapshot's, or empty),
    /// within the server's policy and limits as for any open: nothing in a snapshot
    /// loosens them. A snapshot with memory restores on the backend it was taken on.
    pub fn restore(
        &self,
        client: &ClientId,
        snapshot: &StoredSnapshotId,
        ask: Option<Ask>,
    ) -> Result<SessionInfo> {
        self.inner.restore(client, snapshot, ask)
    }

    /// `count` new sessions of `client`, each starting from what session `id` holds
    /// now (memory and files), each going its own way after. They count against the
    /// client's and the server's session limits; the source runs on.
    pub fn fork(
        &self,
        client: &ClientId,
        id: &SessionId,
        count: usize,
    ) -> Result<Vec<SessionInfo>> {
        self.inner.fork(client, id, count)
    }

    /// Room in the store for a snapshot on its way in, taken as its bytes arrive
    /// ([`Incoming::take`]) and given back when dropped: uploads under way share the
    /// store's room with what it holds, so together they cannot put more than it
    /// takes on the disk.
    pub fn incoming(&self, client: &ClientId) -> Incoming {
        Incoming {
            inner: self.inner.clone(),
            client: client.clone(),
            bytes: 0,
        }
    }

    /// Keeps, for `client`, a snapshot read from `input` (made by this server, or any
    /// intact one where the server's configuration trusts others').
    pub fn upload_snapshot(
        &self,
        client: &ClientId,
        input: &mut dyn std::io::Read,
    ) -> Result<SnapshotInfo> {
        let snapshot = self.with_service(|service| service.sandlot().read_snapshot(input))?;
        self.inner.store.keep(client, &snapshot)
    }

    /// The file of snapshot `id` of `client` (to send it), and what it holds.
    pub fn snapshot_file(
        &self,
        client: &ClientId,
        id: &StoredSnapshotId,
    ) -> Result<(PathBuf, SnapshotInfo)> {
        self.inner.store.find(client, id)
    }

    /// The snapshots `client` keeps in the server's store, newest first.
    pub fn snapshots(&self, client: &ClientId) -> Vec<SnapshotInfo> {
        self.inner.store.list(client)
    }

    /// Deletes snapshot `id` of `client`.
    pub fn delete_snapshot(&self, client: &ClientId, id: &StoredSnapshotId) -> Result<()> {
        self.inner.store.delete(client, id)
    }

    /// Whether snapshots and paused sessions outlive the process (a
    /// [`ManagerSettings::state_dir`] is set): its sessions can outlive their client's
    /// connection, and a restart.
    pub fn keeps_state(&self) -> bool {
        self.inner.store.lasting()
    }

    /// Keeps `contents` as record `key` of a front end (`kind`: `e2b` keeps its
    /// sandboxes) in the state directory, readable by its owner only, for the next
    /// server to take back with [`SessionManager::take_records`]. `Ok(false)` without
    /// a state directory. Keys and kinds are letters, digits and `-`.
    pub fn keep_record(&self, kind: &str, key: &str, contents: &[u8]) -> Result<bool> {
        self.inner.store.keep_record(kind, key, contents)
    }

    /// The records of `kind` an earlier server kept ([`SessionManager::keep_record`]),
    /// by key; they are removed from the state directory.
    pub fn take_records(&self, kind: &str) -> Vec<(String, Vec<u8>)> {
        self.inner.store.take_records(kind)
    }

    /// Bytes the store of snapshots and paused sessions holds now.
    pub fn stored_bytes(&self) -> u64 {
        self.inner.store.used()
    }

    /// Pauses session `id` of `client` now, as its idle time would: its state goes to
    /// the store and its sandbox is released; its next call resumes it. `false` if
    /// its backend cannot capture its memory (it stays open).
    pub fn pause(&self, client: &ClientId, id: &SessionId) -> Result<bool> {
        let entry = self.inner.entry(client, id)?;
        self.inner.pause(&entry, true)
    }

    /// Resumes session `id` of `client` now if it is paused (a call on it would), so
    /// that its next call finds it ready.
    pub fn resume(&self, client: &ClientId, id: &SessionId) -> Result<()> {
        self.inner.in_session(client, id, |_| Ok(()))
    }

    /// Changes the network of session `id` of `client` as `update` says, from its
    /// code's next request on ([`Session::update_network`]): refused
    /// ([`Error::NotAllowed`](sandlot_core::Error::NotAllowed)) if it would let
    /// through what the server's policy does not, and kept across a pause.
    pub fn update_network(
        &self,
        client: &ClientId,
        id: &SessionId,
        update: NetworkUpdate,
    ) -> Result<Policy> {
        self.inner.update_network(client, id, update)
    }

    /// The sessions `client` has open.
    pub fn list(&self, client: &ClientId) -> Vec<SessionInfo> {
        self.inner.list(client)
    }

    /// Closes every session of `client`, which has gone away, and any its opens in
    /// progress bring.
    pub fn client_gone(&self, client: &ClientId) {
        self.inner.client_gone(client)
    }

    /// Counters since the manager started.
    pub fn stats(&self) -> ManagerStats {
        self.inner.stats()
    }

    /// Refuses new sessions and closes every open one, each after its run in
    /// progress (bounded by the run's timeout). Returns how many were closed.
    pub fn shutdown(&self) -> usize {
        self.inner.shutdown()
    }
}

/// Room in the store held for a snapshot being received ([`SessionManager::incoming`]).
pub struct Incoming {
    inner: Arc<Inner>,
    client: ClientId,
    bytes: u64,
}

impl Incoming {
    /// Takes `bytes` more of the store's room, or says it is full
    /// ([`Error::StoreFull`](sandlot_core::Error::StoreFull)) or the client's share is ([`Error::StoreShareFull`](sandlot_core::Error::StoreShareFull)).
    pub fn take(&mut self, bytes: u64) -> Result<()> {
        self.inner.store.take_room(self.client.as_str(), bytes)?;
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.inner.store.release(self.client.as_str(), self.bytes);
    }
}
