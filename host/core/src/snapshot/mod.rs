//! Snapshots of sessions: a session's workspace and, where its backend captures it,
//! its interpreter's whole state, in one sealed file that restores in this process,
//! another one, or on another machine with the same runtime.
//!
//! ```no_run
//! # fn main() -> sandlot::Result<()> {
//! let sandlot = sandlot::from_environment()?;
//! let mut session = sandlot.session("python").backend("wasm").open()?;
//! session.run("rows = [1, 2, 3]")?;
//! let snapshot = session.snapshot()?;
//! snapshot.save("session.snap".as_ref())?;
//!
//! // Later, anywhere this host's snapshot key is:
//! let snapshot = sandlot.open_snapshot("session.snap".as_ref())?;
//! let mut again = sandlot.restore(&snapshot)?;
//! assert_eq!(again.run("print(sum(rows))")?.stdout_text(), "6\n");
//! # Ok(()) }
//! ```
//!
//! What is kept: the workspace's files (links left out) always; the interpreter's
//! memory where the backend has [`Capability::SnapshotMemory`](crate::Capability).
//! Files the code held open are not: they read as closed after a restore. A snapshot
//! holds everything the interpreter held, the secrets its runs were given included:
//! keep it as you keep them. The restoring side's policy and limits apply, whatever
//! the snapshot was made under.

mod format;
mod key;

pub use format::FORMAT_VERSION;
pub use key::{SnapshotKey, SnapshotTrust};

use crate::error::{Error, Result};
use format::{invalid, io, Index, Section};
pub(crate) use format::{Tag, Writer};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// The runtime an interpreter's state belongs to: its state restores only into the
/// very same runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeIdentity {
    /// The runtime's name (`cpython`).
    pub id: String,
    /// SHA-256 of the runtime's code, in hex.
    pub digest: String,
}

/// How much memory an interpreter had, and how much of it differed from a fresh one's
/// (what a snapshot stores).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFacts {
    /// The memory's length in bytes.
    pub size: u64,
    /// The bytes of it that differed from a fresh interpreter's, in whole pages.
    pub changed: u64,
}

/// What a backend says of the interpreter state it wrote into a snapshot, for itself
/// to restore it from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterpreterState {
    /// Whose state it is.
    pub runtime: RuntimeIdentity,
    /// Its memory.
    pub memory: MemoryFacts,
    /// The backend's own description of it (its form, the interpreter's settings).
    pub detail: serde_json::Value,
}

/// What the session was beyond its sandbox, as far as a restored one takes it over.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SessionFacts {
    /// Libraries installed into the interpreter's reach.
    pub installed: Vec<String>,
    /// Whether the handler's plot prelude ran in the interpreter.
    pub plot_capture: bool,
    /// Whether code ran in the interpreter.
    pub used: bool,
}

/// What a snapshot says about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub created: u64,
    pub backend: String,
    pub language: String,
    pub image: String,
    pub interpreter: Option<InterpreterState>,
    /// The namespace kept by serialisation (in the files), where the memory was not:
    /// the names that could not be kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Vec<String>>,
    pub session: SessionFacts,
}

/// A captured session: sealed, checked, and kept in a private temporary file (never
/// wholly in memory), gone when dropped. Made by [`Session::snapshot`](crate::Session::snapshot),
/// read by [`Sandlot::open_snapshot`](crate::Sandlot::open_snapshot) and
/// [`Sandlot::read_snapshot`](crate::Sandlot::read_snapshot), restored by
/// [`Sandlot::restore`](crate::Sandlot::restore).
pub struct Snapshot {
    file: File,
    index: Index,
    manifest: Manifest,
    len: u64,
    id: SnapshotId,
}

/// Names one [`Snapshot`] value among all this process has made or read: a backend
/// may keep what it learns from restoring it under this name. Two reads of the same
/// bytes are two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SnapshotId(u64);

impl SnapshotId {
    fn next() -> SnapshotId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        SnapshotId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// The number behind the name, for a backend that hands a restore to another
    /// process; that process names the snapshot with [`SnapshotId::from_raw`].
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The name [`SnapshotId::raw`] gave, in a process that makes no snapshots of its
    /// own (a backend's worker), so that names from the one process that sent them
    /// never collide.
    pub fn from_raw(raw: u64) -> SnapshotId {
        SnapshotId(raw)
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("backend", &self.manifest.backend)
            .field("language", &self.manifest.language)
            .field("memory", &self.holds_memory())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The largest manifest a snapshot may have.
const MAX_MANIFEST: u64 = 1 << 20;

impl Snapshot {
    /// Writes a snapshot: `fill` writes its sections and returns its manifest. Sealed
    /// with `key`; with none, not hashed either, for a snapshot that never leaves the
    /// process (a fork's: its bytes would not read back).
    pub(crate) fn write(
        key: Option<&SnapshotKey>,
        fill: impl FnOnce(&mut Writer) -> Result<Manifest>,
    ) -> Result<Snapshot> {
        let file = tempfile::tempfile().map_err(|e| io("cannot make the snapshot's file", e))?;
        let mut writer = Writer::new(file, key.is_some())?;
        let manifest = fill(&mut writer)?;
        writer.section(Tag::MANIFEST, |w| {
            serde_json::to_writer(w, &manifest)
                .map_err(|e| io("cannot write the snapshot", std::io::Error::other(e)))
        })?;
        let unsealed = SnapshotKey::from_bytes([0; 32]);
        let (file, mut index) = writer.finish(key.unwrap_or(&unsealed))?;
        index.own = key.is_some();
        let len = file
            .metadata()
            .map_err(|e| io("cannot read the snapshot", e))?
            .len();
        Ok(Snapshot {
            file,
            index,
            manifest,
            len,
            id: SnapshotId::next(),
        })
    }

    /// Reads a snapshot from `input` to its end, into a private temporary file, and
    /// checks it whole: its format, its checksum, and (with [`SnapshotTrust::OwnKey`])
    /// that `key` signed it. Nothing of it is used before all of it is checked.
    pub fn read(input: &mut dyn Read, key: &SnapshotKey, trust: SnapshotTrust) -> Result<Snapshot> {
        let mut file =
            tempfile::tempfile().map_err(|e| io("cannot make the snapshot's file", e))?;
        let index = {
            let mut copy = std::io::BufWriter::with_capacity(1 << 20, &mut file);
            let index = format::verify(input, Some(&mut copy), key, trust)?;
            copy.flush()
                .map_err(|e| io("cannot copy the snapshot", e))?;
            index
        };
        let len = file
            .metadata()
            .map_err(|e| io("cannot read the snapshot", e))?
            .len();
        let manifest_section = index
            .get(Tag::MANIFEST)
            .ok_or_else(|| invalid("it has no manifest"))?;
        if manifest_section.len > MAX_MANIFEST {
            return Err(invalid("its manifest is larger than 1 MiB"));
        }
        let text = section_bytes(&file, manifest_section)?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| invalid(format!("its manifest is malformed: {e}")))?;
        if manifest.interpreter.is_some() != index.get(Tag::STATE).is_some() {
            return Err(invalid(
                "its manifest and its sections disagree about the interpreter's state",
            ));
        }
        Ok(Snapshot {
            file,
            index,
            manifest,
            len,
            id: SnapshotId::next(),
        })
    }

    /// [`Snapshot::read`] of a file.
    pub fn open(path: &Path, key: &SnapshotKey, trust: SnapshotTrust) -> Result<Snapshot> {
        let mut file = File::open(path).map_err(|e| Error::Io {
            context: format!("cannot open the snapshot `{}`", path.display()),
            source: e,
        })?;
        Snapshot::read(&mut file, key, trust)
    }

    /// [`Snapshot::read`] of bytes.
    pub fn from_bytes(bytes: &[u8], key: &SnapshotKey, trust: SnapshotTrust) -> Result<Snapshot> {
        Snapshot::read(&mut &bytes[..], key, trust)
    }

    /// Writes the snapshot, as it was sealed, to `out`; returns its length.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<u64> {
        let mut file = &self.file;
        std::io::Seek::rewind(&mut file).map_err(|e| io("cannot read the snapshot", e))?;
        std::io::copy(&mut file, out).map_err(|e| io("cannot write the snapshot out", e))
    }

    /// Saves the snapshot at `path` (readable by its owner only), replacing what is
    /// there only once it is whole.
    pub fn save(&self, path: &Path) -> Result<()> {
        let context = || format!("cannot save the snapshot at `{}`", path.display());
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut temp = tempfile::Builder::new()
            .prefix(".sandlot-snapshot")
            .tempfile_in(dir)
            .map_err(|e| Error::Io {
                context: context(),
                source: e,
            })?;
        self.write_to(temp.as_file_mut())?;
        temp.as_file().sync_all().map_err(|e| Error::Io {
            context: context(),
            source: e,
        })?;
        temp.persist(path).map_err(|e| Error::Io {
            context: context(),
            source: e.error,
        })?;
        Ok(())
    }

    /// The snapshot's bytes, as [`Snapshot::write_to`] writes them (for a small one).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.len as usize);
        self.write_to(&mut bytes)?;
        Ok(bytes)
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a snapshot has at least its header and manifest.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The backend it was taken on.
    pub fn backend(&self) -> &str {
        &self.manifest.backend
    }

    /// The session's language.
    pub fn language(&self) -> &str {
        &self.manifest.language
    }

    /// The image the sandbox ran, where its backend runs images.
    pub fn image(&self) -> &str {
        &self.manifest.image
    }

    /// The runtime whose state it holds, if it holds the interpreter's.
    pub fn runtime(&self) -> Option<&RuntimeIdentity> {
        self.manifest.interpreter.as_ref().map(|i| &i.runtime)
    }

    /// The interpreter's memory, if it holds it: its length, and how much of it the
    /// snapshot stores.
    pub fn memory(&self) -> Option<MemoryFacts> {
        self.manifest.interpreter.as_ref().map(|i| i.memory)
    }

    /// Whether it holds the interpreter's variables by serialisation (a Python
    /// kernel on a backend that cannot capture its memory: containers, native).
    /// [`Snapshot::unsaved`] names those it could not keep.
    pub fn holds_namespace(&self) -> bool {
        self.manifest.namespace.is_some()
    }

    /// The variables of a namespace snapshot that could not be kept (an open file,
    /// a generator, ...): a restored session lacks them. Empty for the others.
    pub fn unsaved(&self) -> &[String] {
        self.manifest.namespace.as_deref().unwrap_or_default()
    }

    /// Whether it holds the interpreter's memory (variables, functions, imports), not
    /// only the workspace's files.
    pub fn holds_memory(&self) -> bool {
        self.manifest.interpreter.is_some()
    }

    /// When it was taken.
    pub fn created(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.manifest.created)
    }

    /// Whether this host's key signed it (a snapshot accepted with
    /// [`SnapshotTrust::AnyIntact`] may not be).
    pub fn signed_here(&self) -> bool {
        self.index.own
    }

    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The workspace's files (a tar), if at most `max` bytes.
    pub(crate) fn files(&self, max: u64) -> Result<Vec<u8>> {
        let Some(section) = self.index.get(Tag::FILES) else {
            return Ok(Vec::new());
        };
        if section.len > max {
            return Err(invalid(format!(
                "its files take {} bytes, more than this session's workspace may hold ({max})",
                section.len
            )));
        }
        section_bytes(&self.file, section)
    }

    /// A reader of the interpreter's state, for its backend to restore from.
    pub(crate) fn state(&self) -> Option<StateReader<'_>> {
        self.index.get(Tag::STATE).map(|section| StateReader {
            file: &self.file,
            section: section.clone(),
            at: 0,
            snapshot: Some(self.id),
        })
    }
}

/// A snapshot's interpreter state, for its backend to restore from: read it in order,
/// or map its pages straight from the file ([`StateReader::file`]).
///
/// The file is the snapshot's private, unlinked copy, checked whole when the snapshot
/// was read and never written since: nothing but this process reaches it, so its
/// pages are not hashed again here.
pub struct StateReader<'a> {
    file: &'a File,
    section: Section,
    at: u64,
    /// `None` for a section read by the snapshot itself.
    snapshot: Option<SnapshotId>,
}

impl Read for StateReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.section.len - self.at;
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let n = read_at(self.file, &mut buf[..n], self.section.offset + self.at)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.at += n as u64;
        Ok(n)
    }
}

impl<'a> StateReader<'a> {
    /// A reader of the `len` bytes of state at `offset` in `file`, for a backend's
    /// worker process that was handed the snapshot's file by the process that read it
    /// (the file must never change while it is read or mapped).
    pub fn in_file(
        file: &'a File,
        offset: u64,
        len: u64,
        snapshot: Option<SnapshotId>,
    ) -> StateReader<'a> {
        StateReader {
            file,
            section: Section {
                tag: Tag::STATE,
                offset,
                len,
                digest: [0; 32],
            },
            at: 0,
            snapshot,
        }
    }

    /// The file the state lies in, and where in it the state starts: a backend may
    /// map its pages (privately: the file must never change) instead of reading them.
    pub fn file(&self) -> (&File, u64) {
        (self.file, self.section.offset)
    }

    /// The snapshot the state belongs to.
    pub fn snapshot(&self) -> Option<SnapshotId> {
        self.snapshot
    }

    /// The state's length in bytes.
    pub fn len(&self) -> u64 {
        self.section.len
    }

    /// Whether the state is empty.
    pub fn is_empty(&self) -> bool {
        self.section.len == 0
    }

    /// How far it has been read.
    pub fn position(&self) -> u64 {
        self.at
    }
}

/// A section's payload, read whole by position: restores of one snapshot on several
/// threads share its file, so nothing moves its offset.
fn section_bytes(file: &File, section: &Section) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(section.len as usize);
    StateReader {
        file,
        section: section.clone(),
        at: 0,
        snapshot: None,
    }
    .read_to_end(&mut bytes)
    .map_err(|e| io("cannot read the snapshot", e))?;
    Ok(bytes)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// A host's snapshot key and trust, the key read or made on first use.
#[derive(Debug)]
pub(crate) struct Keeper {
    configured: Option<SnapshotKey>,
    path: PathBuf,
    loaded: OnceLock<SnapshotKey>,
    pub(crate) trust: SnapshotTrust,
}

impl Keeper {
    pub(crate) fn new(configured: Option<SnapshotKey>, trust: SnapshotTrust) -> Keeper {
        Keeper {
            configured,
            path: crate::dirs::user_data().join("snapshot.key"),
            loaded: OnceLock::new(),
            trust,
        }
    }

    /// The key: the one configured, else the one in the data directory, made there
    /// on first use.
    pub(crate) fn key(&self) -> Result<&SnapshotKey> {
        if let Some(key) = &self.configured {
            return Ok(key);
        }
        if let Some(key) = self.loaded.get() {
            return Ok(key);
        }
        let key = SnapshotKey::load_or_create(&self.path)?;
        Ok(self.loaded.get_or_init(|| key))
    }
}
