//! Where a [`SessionManager`](super::SessionManager) keeps the snapshots its clients
//! take and the sessions it pauses: a directory with a limit on the bytes it holds.
//! With a state directory configured both survive a restart of the server; without
//! one they live in a private temporary directory, gone with the server.
//!
//! Layout (directories 0700, files 0600: the files hold what the sessions held,
//! secrets included):
//!
//! ```text
//! STATE/snapshots/snap-….snap   a client's snapshot
//! STATE/snapshots/snap-….json   whose it is, and what it holds
//! STATE/paused/s-….snap         a paused session's snapshot
//! STATE/paused/s-….json         the session: its client, its ask, its times
//! ```

use super::ask::Ask;
use super::ids::{ClientId, SessionId};
use sandlot_core::error::{Error, Result};
use sandlot_core::snapshot::Snapshot;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The version of the records this module writes; others are set aside.
const RECORD_VERSION: u32 = 1;

/// A stored snapshot's name as clients pass it back: `snap-` and 32 hexadecimal
/// digits, from randomly keyed hashes, so that one client cannot guess another's.
/// Not core's [`SnapshotId`](sandlot_core::snapshot::SnapshotId), which tells apart
/// the snapshot values of one process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct StoredSnapshotId(String);

impl StoredSnapshotId {
    fn fresh() -> StoredSnapshotId {
        let (a, b) = (
            sandlot_core::backend::owner::sandbox_id(),
            sandlot_core::backend::owner::sandbox_id(),
        );
        StoredSnapshotId(format!("snap-{a}{b}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` has an id's shape: nothing else is ever made a path.
    fn well_formed(text: &str) -> bool {
        well_formed(text, "snap-")
    }
}

impl fmt::Display for StoredSnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for StoredSnapshotId {
    fn from(id: &str) -> StoredSnapshotId {
        StoredSnapshotId(id.to_string())
    }
}

impl From<String> for StoredSnapshotId {
    fn from(id: String) -> StoredSnapshotId {
        StoredSnapshotId(id)
    }
}

/// `prefix` and 32 lowercase hexadecimal digits.
fn well_formed(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A stored snapshot, as its client sees it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[non_exhaustive]
pub struct SnapshotInfo {
    /// The name to pass back.
    #[schemars(with = "String")]
    pub id: StoredSnapshotId,
    /// The language id of the session it was taken of.
    pub language: String,
    /// The backend that session ran on.
    pub backend: String,
    /// Whether it holds the interpreter's memory (variables, imports), not only the
    /// files.
    pub memory: bool,
    /// Whether it holds the session's variables: in the memory, or (a Python kernel
    /// in a container) by serialisation.
    #[serde(default)]
    pub variables: bool,
    /// The variables that could not be serialised: a restored session lacks them.
    #[serde(default)]
    pub unsaved: Vec<String>,
    /// Its size in bytes.
    pub bytes: u64,
    /// When it was taken, in seconds since the Unix epoch.
    pub created_unix: f64,
}

impl<'de> Deserialize<'de> for StoredSnapshotId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if StoredSnapshotId::well_formed(&text) {
            Ok(StoredSnapshotId(text))
        } else {
            Err(serde::de::Error::custom(format!(
                "`{text}` is not a snapshot id"
            )))
        }
    }
}

/// What the store keeps of a client's snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotRecord {
    version: u32,
    client: String,
    info: SnapshotInfo,
}

/// What the store keeps of a paused session, to resume it after a restart.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct PausedRecord {
    version: u32,
    pub(super) id: String,
    pub(super) client: String,
    pub(super) language: String,
    pub(super) backend: String,
    pub(super) runs_with: Option<String>,
    pub(super) opened_unix: f64,
    pub(super) last_used_unix: f64,
    pub(super) ask: AskRecord,
}

impl fmt::Debug for PausedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PausedRecord")
            .field("id", &self.id)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// A session as a [`PausedRecord`] holds it.
pub(super) struct Recorded<'a> {
    pub(super) id: &'a SessionId,
    pub(super) client: &'a ClientId,
    pub(super) language: &'a str,
    pub(super) backend: &'a str,
    pub(super) runs_with: Option<&'a str>,
}

impl PausedRecord {
    pub(super) fn new(
        session: Recorded<'_>,
        opened: SystemTime,
        last_used: SystemTime,
        ask: &Ask,
    ) -> PausedRecord {
        PausedRecord {
            version: RECORD_VERSION,
            id: session.id.as_str().to_string(),
            client: session.client.as_str().to_string(),
            language: session.language.to_string(),
            backend: session.backend.to_string(),
            runs_with: session.runs_with.map(str::to_string),
            opened_unix: unix(opened),
            last_used_unix: unix(last_used),
            ask: AskRecord::from(ask),
        }
    }
}

/// An [`Ask`] as the store writes it: the secrets' values included, which the
/// session needs back (the record is as private as the snapshot beside it, which
/// may hold them anyway).
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct AskRecord {
    language: String,
    backend: Option<String>,
    libraries: Vec<String>,
    network: Option<sandlot_core::Network>,
    timeout_seconds: Option<f64>,
    memory_mb: Option<u64>,
    secrets: BTreeMap<String, String>,
}

impl From<&Ask> for AskRecord {
    fn from(ask: &Ask) -> AskRecord {
        AskRecord {
            language: ask.language.clone(),
            backend: ask.backend.clone(),
            libraries: ask.libraries.clone(),
            network: ask.network,
            timeout_seconds: ask.timeout_seconds,
            memory_mb: ask.memory_mb,
            secrets: ask.secrets.0.clone(),
        }
    }
}

impl From<AskRecord> for Ask {
    fn from(record: AskRecord) -> Ask {
        Ask {
            language: record.language,
            backend: record.backend,
            libraries: record.libraries,
            network: record.network,
            timeout_seconds: record.timeout_seconds,
            memory_mb: record.memory_mb,
            secrets: sandlot_core::secret::SecretValues(record.secrets),
        }
    }
}

/// Seconds since the Unix epoch.
pub(super) fn unix(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The time `seconds` after the Unix epoch (the epoch for nonsense).
pub(super) fn from_unix(seconds: f64) -> SystemTime {
    if (0.0..1e12).contains(&seconds) {
        UNIX_EPOCH + Duration::from_secs_f64(seconds)
    } else {
        UNIX_EPOCH
    }
}

/// The snapshots and paused sessions of a manager, on disk.
pub(super) struct Store {
    root: PathBuf,
    /// The private directory when no state directory is configured: removed with the
    /// store.
    _temporary: Option<tempfile::TempDir>,
    /// Whether it outlives the process.
    lasting: bool,
    limit: u64,
    /// Most bytes one client's snapshots, paused sessions and uploads may take.
    share: u64,
    held: Mutex<Held>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.root)
            .field("lasting", &self.lasting)
            .field("limit", &self.limit)
            .field("share", &self.share)
            .finish_non_exhaustive()
    }
}

/// What is on disk now.
#[derive(Default)]
struct Held {
    /// Bytes of every snapshot file, and of those being written.
    bytes: u64,
    /// The same, per client.
    by_client: HashMap<String, u64>,
    snapshots: HashMap<StoredSnapshotId, SnapshotRecord>,
    /// Paused sessions, whose they are and the size of their snapshot.
    paused: HashMap<SessionId, (String, u64)>,
}

impl Held {
    /// Takes `bytes` off what `client` holds.
    fn free(&mut self, client: &str, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Some(held) = self.by_client.get_mut(client) {
            *held = held.saturating_sub(bytes);
            if *held == 0 {
                self.by_client.remove(client);
            }
        }
    }
}

fn io(what: String, e: std::io::Error) -> Error {
    Error::Io {
        context: what,
        source: e,
    }
}

/// Makes `dir` (and its parents) and keeps it to its owner.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(dir).map_err(|e| io(format!("cannot make {}", dir.display()), e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| io(format!("cannot keep {} private", dir.display()), e))
}

/// Writes `contents` to `path` through a temporary name, readable by the owner only.
fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let partial = path.with_extension("partial");
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&partial, path)
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(&partial);
        io(format!("cannot write {}", path.display()), e)
    })
}

/// Saves `snapshot` at `path` through a temporary name, readable by the owner only.
fn save_private(snapshot: &Snapshot, path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let partial = path.with_extension("partial");
    let saved = (|| {
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)
            .map_err(|e| io(format!("cannot write {}", partial.display()), e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        snapshot.write_to(&mut out)?;
        let file = out.into_inner().map_err(|e| {
            io(
                format!("cannot write {}", partial.display()),
                e.into_error(),
            )
        })?;
        file.sync_all()
            .map_err(|e| io(format!("cannot write {}", partial.display()), e))?;
        fs::rename(&partial, path).map_err(|e| io(format!("cannot write {}", path.display()), e))
    })();
    if saved.is_err() {
        let _ = fs::remove_file(&partial);
    }
    saved
}

/// Bytes reserved in the store for a file being written; given back if it is not
/// kept.
struct Reservation<'a> {
    store: &'a Store,
    client: &'a str,
    bytes: u64,
}

impl Reservation<'_> {
    fn keep(mut self) {
        self.bytes = 0;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.store.release(self.client, self.bytes);
        }
    }
}

impl Store {
    /// The store in `state` (made if missing), or in a private temporary directory;
    /// at most `limit` bytes, `share` of them per client. Returns the paused sessions
    /// found in `state`; records that cannot be read are removed, with a warning.
    pub(super) fn open(
        state: Option<&Path>,
        limit: u64,
        share: u64,
    ) -> Result<(Store, Vec<PausedRecord>)> {
        let (root, temporary) = match state {
            Some(dir) => (dir.to_path_buf(), None),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("sandlot-store-")
                    .tempdir()
                    .map_err(|e| io("cannot make the snapshot store".into(), e))?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        private_dir(&root)?;
        private_dir(&root.join("snapshots"))?;
        private_dir(&root.join("paused"))?;
        let store = Store {
            root,
            lasting: temporary.is_none(),
            _temporary: temporary,
            limit,
            share,
            held: Mutex::new(Held::default()),
        };
        let paused = store.load()?;
        Ok((store, paused))
    }

    /// Whether what it holds outlives the process.
    pub(super) fn lasting(&self) -> bool {
        self.lasting
    }

    /// Keeps record `key` of `kind` (a front end's own, beside the sessions: E2B's
    /// sandboxes), readable by the owner only. `Ok(false)` when nothing outlives the
    /// process.
    pub(super) fn keep_record(&self, kind: &str, key: &str, contents: &[u8]) -> Result<bool> {
        if !self.lasting {
            return Ok(false);
        }
        let plain = |name: &str| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if !plain(kind) || !plain(key) {
            return Err(io(
                format!("cannot keep record {kind}/{key}"),
                std::io::ErrorKind::InvalidInput.into(),
            ));
        }
        let dir = self.root.join("records").join(kind);
        private_dir(&self.root.join("records"))?;
        private_dir(&dir)?;
        write_private(&dir.join(format!("{key}.json")), contents)?;
        Ok(true)
    }

    /// Takes back the records of `kind` an earlier process kept, removing them.
    pub(super) fn take_records(&self, kind: &str) -> Vec<(String, Vec<u8>)> {
        let dir = self.root.join("records").join(kind);
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if let (Some(key), Ok(contents)) = (name.strip_suffix(".json"), fs::read(&path)) {
                records.push((key.to_string(), contents));
            }
            let _ = fs::remove_file(&path);
        }
        records
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes held now.
    pub(super) fn used(&self) -> u64 {
        self.held().bytes
    }

    /// Reads what an earlier server left: snapshots, paused sessions. Leftovers of a
    /// write that did not finish, and files without their record, are removed.
    fn load(&self) -> Result<Vec<PausedRecord>> {
        let mut held = self.held();
        let mut paused = Vec::new();
        for (kind, prefix) in [("snapshots", "snap-"), ("paused", "s-")] {
            let dir = self.root.join(kind);
            let entries =
                fs::read_dir(&dir).map_err(|e| io(format!("cannot read {}", dir.display()), e))?;
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(stem) = name.strip_suffix(".json") else {
                    // A snapshot is read with its record; anything else is a leftover.
                    let kept = name
                        .strip_suffix(".snap")
                        .is_some_and(|stem| dir.join(format!("{stem}.json")).exists());
                    if !kept {
                        let _ = fs::remove_file(&path);
                    }
                    continue;
                };
                let snap = dir.join(format!("{stem}.snap"));
                let size = fs::metadata(&snap).map(|m| m.len());
                let read = fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| {
                        if !well_formed(stem, prefix) {
                            return Err("not a name this store gives".to_string());
                        }
                        let size = size.as_ref().map_err(|e| format!("its snapshot: {e}"))?;
                        if kind == "snapshots" {
                            let record: SnapshotRecord =
                                serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                            if record.version != RECORD_VERSION || record.info.id.as_str() != stem {
                                return Err("a record of another version or name".into());
                            }
                            *held.by_client.entry(record.client.clone()).or_default() += *size;
                            held.snapshots.insert(record.info.id.clone(), record);
                        } else {
                            let record: PausedRecord =
                                serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                            if record.version != RECORD_VERSION || record.id != stem {
                                return Err("a record of another version or name".into());
                            }
                            *held.by_client.entry(record.client.clone()).or_default() += *size;
                            held.paused
                                .insert(SessionId::from(stem), (record.client.clone(), *size));
                            paused.push(record);
                        }
                        Ok(*size)
                    });
                match read {
                    Ok(size) => held.bytes += size,
                    Err(why) => {
                        tracing::warn!(record = %path.display(), %why, "state record set aside");
                        let _ = fs::remove_file(&path);
                        let _ = fs::remove_file(&snap);
                    }
                }
            }
        }
        Ok(paused)
    }

    /// Takes `bytes` more of the store's room for `client`, or says it is full;
    /// given back with [`Store::release`].
    pub(super) fn take_room(&self, client: &str, bytes: u64) -> Result<()> {
        self.reserve(client, bytes).map(Reservation::keep)
    }

    /// Gives back `bytes` of `client` taken with [`Store::take_room`].
    pub(super) fn release(&self, client: &str, bytes: u64) {
        self.held().free(client, bytes);
    }

    /// Bytes `client` holds now.
    #[cfg(test)]
    fn used_by(&self, client: &str) -> u64 {
        self.held().by_client.get(client).copied().unwrap_or(0)
    }

    /// Takes `bytes` of the store's room for `client`, or says it is full: the
    /// store's, or the client's share of it. One client that fills its share leaves
    /// the rest to the others.
    fn reserve<'a>(&'a self, client: &'a str, bytes: u64) -> Result<Reservation<'a>> {
        let mut held = self.held();
        let mine = held.by_client.get(client).copied().unwrap_or(0);
        if mine.saturating_add(bytes) > self.share {
            return Err(Error::StoreShareFull {
                needed: bytes,
                used: mine,
                share: self.share,
            });
        }
        if held.bytes.saturating_add(bytes) > self.limit {
            return Err(Error::StoreFull {
                needed: bytes,
                used: held.bytes,
                limit: self.limit,
            });
        }
        held.bytes += bytes;
        *held.by_client.entry(client.to_string()).or_default() += bytes;
        Ok(Reservation {
            store: self,
            client,
            bytes,
        })
    }

    fn snapshot_path(&self, id: &StoredSnapshotId, extension: &str) -> PathBuf {
        self.root
            .join("snapshots")
            .join(format!("{}.{extension}", id.as_str()))
    }

    fn paused_path(&self, id: &SessionId, extension: &str) -> PathBuf {
        self.root
            .join("paused")
            .join(format!("{}.{extension}", id.as_str()))
    }

    /// Keeps `snapshot` for `client`.
    pub(super) fn keep(&self, client: &ClientId, snapshot: &Snapshot) -> Result<SnapshotInfo> {
        let reservation = self.reserve(client.as_str(), snapshot.len())?;
        let info = SnapshotInfo {
            id: StoredSnapshotId::fresh(),
            language: snapshot.language().to_string(),
            backend: snapshot.backend().to_string(),
            memory: snapshot.holds_memory(),
            variables: snapshot.holds_memory() || snapshot.holds_namespace(),
            unsaved: snapshot.unsaved().to_vec(),
            bytes: snapshot.len(),
            created_unix: unix(snapshot.created()),
        };
        let record = SnapshotRecord {
            version: RECORD_VERSION,
            client: client.as_str().to_string(),
            info: info.clone(),
        };
        let (snap, json) = (
            self.snapshot_path(&info.id, "snap"),
            self.snapshot_path(&info.id, "json"),
        );
        save_private(snapshot, &snap)?;
        let recorded = serde_json::to_vec(&record)
            .map_err(|e| io("cannot record a snapshot".into(), std::io::Error::other(e)))
            .and_then(|bytes| write_private(&json, &bytes));
        if let Err(e) = recorded {
            let _ = fs::remove_file(&snap);
            return Err(e);
        }
        reservation.keep();
        self.held().snapshots.insert(info.id.clone(), record);
        Ok(info)
    }

    /// Snapshot `id` of `client`: its file and what it holds.
    pub(super) fn find(
        &self,
        client: &ClientId,
        id: &StoredSnapshotId,
    ) -> Result<(PathBuf, SnapshotInfo)> {
        let held = self.held();
        let record = held
            .snapshots
            .get(id)
            .filter(|r| r.client == client.as_str())
            .ok_or_else(|| Error::NoSuchSnapshot {
                id: id.to_string(),
                reason: "no snapshot of this client has this id".into(),
            })?;
        Ok((self.snapshot_path(id, "snap"), record.info.clone()))
    }

    /// The snapshots of `client`, newest first.
    pub(super) fn list(&self, client: &ClientId) -> Vec<SnapshotInfo> {
        let mut list: Vec<SnapshotInfo> = self
            .held()
            .snapshots
            .values()
            .filter(|r| r.client == client.as_str())
            .map(|r| r.info.clone())
            .collect();
        list.sort_by(|a, b| b.created_unix.total_cmp(&a.created_unix));
        list
    }

    /// Deletes snapshot `id` of `client`.
    pub(super) fn delete(&self, client: &ClientId, id: &StoredSnapshotId) -> Result<()> {
        self.find(client, id)?;
        let mut held = self.held();
        if let Some(record) = held.snapshots.remove(id) {
            held.free(&record.client, record.info.bytes);
            let _ = fs::remove_file(self.snapshot_path(id, "json"));
            let _ = fs::remove_file(self.snapshot_path(id, "snap"));
        }
        Ok(())
    }

    /// Keeps the snapshot of paused session `id` of `client`, with `record` when the
    /// session can be resumed by another process.
    pub(super) fn pause(
        &self,
        id: &SessionId,
        client: &ClientId,
        snapshot: &Snapshot,
        record: Option<&PausedRecord>,
    ) -> Result<()> {
        let reservation = self.reserve(client.as_str(), snapshot.len())?;
        let (snap, json) = (self.paused_path(id, "snap"), self.paused_path(id, "json"));
        save_private(snapshot, &snap)?;
        if let Some(record) = record {
            let recorded = serde_json::to_vec(record)
                .map_err(|e| io("cannot record a session".into(), std::io::Error::other(e)))
                .and_then(|bytes| write_private(&json, &bytes));
            if let Err(e) = recorded {
                let _ = fs::remove_file(&snap);
                return Err(e);
            }
        }
        reservation.keep();
        self.held()
            .paused
            .insert(id.clone(), (client.as_str().to_string(), snapshot.len()));
        Ok(())
    }

    /// The snapshot file of paused session `id`.
    pub(super) fn paused_file(&self, id: &SessionId) -> PathBuf {
        self.paused_path(id, "snap")
    }

    /// Forgets paused session `id`: it resumed, or ended. Nothing if it was not
    /// paused.
    pub(super) fn unpause(&self, id: &SessionId) {
        let mut held = self.held();
        if let Some((client, bytes)) = held.paused.remove(id) {
            held.free(&client, bytes);
            let _ = fs::remove_file(self.paused_path(id, "json"));
            let _ = fs::remove_file(self.paused_path(id, "snap"));
        }
    }
}

#[cfg(test)]
mod tests;
