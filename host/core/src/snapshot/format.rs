//! The snapshot file: a fixed header, tagged sections, and an end that seals them.
//!
//! ```text
//! "SANDLOT\x1a" | format version: u32 LE
//! section*      | tag: 4 bytes | length: u64 LE | payload
//! end           | "END." | 64: u64 LE | digest: 32 | signature: 32
//! ```
//!
//! The digest is SHA-256 over the header and, for each section in file order, its tag,
//! its length and the SHA-256 of its payload; the signature is HMAC-SHA-256 of the
//! digest with the host's [`SnapshotKey`]. Hashing each payload on its own lets the
//! writer stream a section of unknown length and fill its length in afterwards, and
//! lets a reader check one section again when it reads it back.

use super::key::{SnapshotKey, SnapshotTrust};
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};

/// What every snapshot file starts with.
pub(crate) const MAGIC: &[u8; 8] = b"SANDLOT\x1a";
/// The format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// More sections than this is not a snapshot this build made.
const MAX_SECTIONS: usize = 16;

/// What a section holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag(pub [u8; 4]);

impl Tag {
    /// The session's description (JSON).
    pub const MANIFEST: Tag = Tag(*b"MANI");
    /// The workspace's files (tar).
    pub const FILES: Tag = Tag(*b"FILE");
    /// The interpreter's state, in its backend's own form.
    pub const STATE: Tag = Tag(*b"STAT");
    /// Zeros, so that the next section's payload starts at an aligned offset.
    const PADDING: Tag = Tag(*b"PAD.");
    /// The seal.
    const END: Tag = Tag(*b"END.");
    const KNOWN: [Tag; 4] = [Tag::MANIFEST, Tag::FILES, Tag::STATE, Tag::PADDING];

    fn name(self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

pub(super) fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidSnapshot {
        reason: reason.into(),
    }
}

pub(super) fn io(context: &str, e: std::io::Error) -> Error {
    Error::Io {
        context: context.into(),
        source: e,
    }
}

/// Counts and hashes what passes through to the writer below.
struct Hashing<'a> {
    inner: &'a mut BufWriter<File>,
    hash: Option<Sha256>,
    written: u64,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(hash) = self.hash.as_mut() {
            hash.update(&buf[..n]);
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One section as the seal covers it.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub tag: Tag,
    /// Where its payload starts in the file.
    pub offset: u64,
    pub len: u64,
    pub digest: [u8; 32],
}

/// Writes a snapshot file section by section.
pub(crate) struct Writer {
    out: BufWriter<File>,
    at: u64,
    sections: Vec<Section>,
    /// Whether sections are hashed: not for a snapshot that never leaves the process
    /// (a fork's), whose seal then holds nothing.
    hashed: bool,
}

impl Writer {
    pub fn new(file: File, hashed: bool) -> Result<Writer> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(MAGIC)
            .and_then(|()| out.write_all(&FORMAT_VERSION.to_le_bytes()))
            .map_err(|e| io("cannot write the snapshot", e))?;
        Ok(Writer {
            out,
            at: (MAGIC.len() + 4) as u64,
            sections: Vec::new(),
            hashed,
        })
    }

    /// Pads so that the next section's payload starts at a multiple of `alignment`
    /// in the file (an interpreter's pages there can be mapped from it).
    pub fn align(&mut self, alignment: u64) -> Result<()> {
        let zeros = (alignment - (self.at + 24) % alignment) % alignment;
        self.section(Tag::PADDING, |out| {
            std::io::copy(&mut std::io::repeat(0).take(zeros), out)
                .map(|_| ())
                .map_err(|e| io("cannot write the snapshot", e))
        })
    }

    /// Writes a section whose payload `fill` streams.
    pub fn section<T>(
        &mut self,
        tag: Tag,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
    ) -> Result<T> {
        let start = self.at;
        self.out
            .write_all(&tag.0)
            .and_then(|()| self.out.write_all(&0u64.to_le_bytes()))
            .map_err(|e| io("cannot write the snapshot", e))?;
        let mut hashing = Hashing {
            inner: &mut self.out,
            hash: self.hashed.then(Sha256::new),
            written: 0,
        };
        let value = fill(&mut hashing)?;
        let Hashing { hash, written, .. } = hashing;
        // The length goes where its placeholder is.
        let patched = self.out.flush().and_then(|()| {
            let file = self.out.get_mut();
            file.seek(SeekFrom::Start(start + 4))?;
            file.write_all(&written.to_le_bytes())?;
            file.seek(SeekFrom::End(0)).map(|_| ())
        });
        patched.map_err(|e| io("cannot write the snapshot", e))?;
        self.sections.push(Section {
            tag,
            offset: start + 12,
            len: written,
            digest: hash.map_or([0; 32], |hash| hash.finalize().into()),
        });
        self.at = start + 12 + written;
        Ok(value)
    }

    /// Seals the file with `key` and hands it back, with its sections.
    pub fn finish(mut self, key: &SnapshotKey) -> Result<(File, Index)> {
        let digest = seal_digest(&self.sections);
        let signature = key.sign(&digest);
        self.out
            .write_all(&Tag::END.0)
            .and_then(|()| self.out.write_all(&64u64.to_le_bytes()))
            .and_then(|()| self.out.write_all(&digest))
            .and_then(|()| self.out.write_all(&signature))
            .and_then(|()| self.out.flush())
            .map_err(|e| io("cannot write the snapshot", e))?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| io("cannot write the snapshot", e.into_error()))?;
        Ok((
            file,
            Index {
                sections: self.sections,
                own: true,
            },
        ))
    }
}

/// The digest the seal signs.
fn seal_digest(sections: &[Section]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(MAGIC);
    hash.update(FORMAT_VERSION.to_le_bytes());
    for section in sections {
        hash.update(section.tag.0);
        hash.update(section.len.to_le_bytes());
        hash.update(section.digest);
    }
    hash.finalize().into()
}

/// The sections of a snapshot that was read whole and found intact.
#[derive(Debug, Clone)]
pub(crate) struct Index {
    pub sections: Vec<Section>,
    /// Whether this host's key signed it.
    pub own: bool,
}

impl Index {
    pub fn get(&self, tag: Tag) -> Option<&Section> {
        self.sections.iter().find(|s| s.tag == tag)
    }
}

/// The bytes being verified, and where they are copied.
struct Source<'a> {
    input: &'a mut dyn Read,
    copy: Option<&'a mut dyn Write>,
    at: u64,
}

impl Source<'_> {
    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let at = self.at;
        self.input.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => invalid(format!(
                "it is truncated: it ends inside {what}, after {at} bytes (a copy that was cut \
                 short, or a file still being written)"
            )),
            _ => io("cannot read the snapshot", e),
        })?;
        if let Some(copy) = self.copy.as_mut() {
            copy.write_all(buf)
                .map_err(|e| io("cannot copy the snapshot", e))?;
        }
        self.at += buf.len() as u64;
        Ok(())
    }
}

/// Reads what `input` holds to its end, copying it into `copy` as it goes, and checks
/// it is a whole, unaltered snapshot that `trust` accepts.
pub(crate) fn verify<'a>(
    input: &'a mut dyn Read,
    copy: Option<&'a mut dyn Write>,
    key: &SnapshotKey,
    trust: SnapshotTrust,
) -> Result<Index> {
    let mut source = Source { input, copy, at: 0 };
    let mut header = [0u8; 12];
    source.read(&mut header, "its header")?;
    if &header[..8] != MAGIC {
        return Err(invalid(
            "it is not a sandlot snapshot (it does not start with sandlot's mark)",
        ));
    }
    let version = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(invalid(format!(
            "it is of format version {version}, and this sandlot reads version \
             {FORMAT_VERSION}: restore it with the sandlot version that made it"
        )));
    }
    let mut sections: Vec<Section> = Vec::new();
    loop {
        let mut head = [0u8; 12];
        source.read(&mut head, "a section's header")?;
        let tag = Tag(head[..4].try_into().expect("4 bytes"));
        let len = u64::from_le_bytes(head[4..].try_into().expect("8 bytes"));
        if tag == Tag::END {
            if len != 64 {
                return Err(invalid("its seal is malformed (not 64 bytes)"));
            }
            let mut seal = [0u8; 64];
            source.read(&mut seal, "its seal")?;
            let digest: [u8; 32] = seal[..32].try_into().expect("32 bytes");
            let signature: [u8; 32] = seal[32..].try_into().expect("32 bytes");
            if seal_digest(&sections) != digest {
                return Err(invalid(
                    "it is corrupted: its contents do not match its checksum",
                ));
            }
            let own = key.verify(&digest, &signature);
            if !own && trust == SnapshotTrust::OwnKey {
                return Err(invalid(
                    "it is not signed with this host's snapshot key: it was made by another \
                     host, or forged. Give this host the key it was made with \
                     (`SnapshotKey`), or accept other hosts' intact snapshots \
                     (`SnapshotTrust::AnyIntact`)",
                ));
            }
            let mut rest = [0u8; 1];
            match source.input.read(&mut rest) {
                Ok(0) => {}
                Ok(_) => return Err(invalid("it has bytes after its end")),
                Err(e) => return Err(io("cannot read the snapshot", e)),
            }
            if sections.iter().all(|s| s.tag != Tag::MANIFEST) {
                return Err(invalid("it has no manifest"));
            }
            return Ok(Index { sections, own });
        }
        if !Tag::KNOWN.contains(&tag) {
            return Err(invalid(format!(
                "it has a section this sandlot does not know (`{}`): it is damaged, or made \
                 by a newer sandlot",
                tag.name().escape_debug()
            )));
        }
        if tag != Tag::PADDING && sections.iter().any(|s| s.tag == tag) {
            return Err(invalid(format!(
                "it has section `{}` twice",
                tag.name().escape_debug()
            )));
        }
        if sections.len() >= MAX_SECTIONS {
            return Err(invalid(format!("it has more than {MAX_SECTIONS} sections")));
        }
        let offset = source.at;
        let mut hash = Sha256::new();
        let mut left = len;
        let mut buf = vec![0u8; 1 << 16];
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            source.read(&mut buf[..n], "a section")?;
            hash.update(&buf[..n]);
            left -= n as u64;
        }
        sections.push(Section {
            tag,
            offset,
            len,
            digest: hash.finalize().into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(key: &SnapshotKey) -> Vec<u8> {
        let file = tempfile::tempfile().unwrap();
        let mut writer = Writer::new(file, true).unwrap();
        writer
            .section(Tag::STATE, |w| {
                w.write_all(&[9u8; 100_000]).map_err(|e| io("test", e))
            })
            .unwrap();
        writer
            .section(Tag::MANIFEST, |w| {
                w.write_all(b"{}").map_err(|e| io("test", e))
            })
            .unwrap();
        let (mut file, _) = writer.finish(key).unwrap();
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut bytes).unwrap();
        bytes
    }

    fn check(bytes: &[u8], key: &SnapshotKey, trust: SnapshotTrust) -> Result<Index> {
        verify(&mut &bytes[..], None, key, trust)
    }

    #[test]
    fn a_written_snapshot_reads_back_with_its_sections() {
        let key = SnapshotKey::from_bytes([1; 32]);
        let bytes = written(&key);
        let index = check(&bytes, &key, SnapshotTrust::OwnKey).unwrap();
        assert!(index.own);
        assert_eq!(index.get(Tag::STATE).unwrap().len, 100_000);
        let manifest = index.get(Tag::MANIFEST).unwrap();
        assert_eq!(
            &bytes[manifest.offset as usize..][..manifest.len as usize],
            b"{}"
        );
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let key = SnapshotKey::from_bytes([1; 32]);
        let bytes = written(&key);
        for at in (0..bytes.len()).step_by(997).chain([bytes.len() - 1]) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            // The signature's own bytes are only checked against a key.
            let error = check(&flipped, &key, SnapshotTrust::OwnKey).unwrap_err();
            assert!(
                matches!(error, Error::InvalidSnapshot { .. }),
                "{at}: {error}"
            );
            let error = check(&bytes[..at], &key, SnapshotTrust::AnyIntact).unwrap_err();
            assert!(
                error.to_string().contains("truncated") || at < 12,
                "{at}: {error}"
            );
        }
    }

    #[test]
    fn another_keys_snapshot_is_refused_unless_intact_ones_are_accepted() {
        let bytes = written(&SnapshotKey::from_bytes([1; 32]));
        let mine = SnapshotKey::from_bytes([2; 32]);
        let error = check(&bytes, &mine, SnapshotTrust::OwnKey).unwrap_err();
        assert!(
            error.to_string().contains("not signed with this host's"),
            "{error}"
        );
        let index = check(&bytes, &mine, SnapshotTrust::AnyIntact).unwrap();
        assert!(!index.own);
    }

    #[test]
    fn another_format_version_is_named() {
        let key = SnapshotKey::from_bytes([1; 32]);
        let mut bytes = written(&key);
        bytes[8] = 2;
        let error = check(&bytes, &key, SnapshotTrust::AnyIntact).unwrap_err();
        assert!(error.to_string().contains("format version 2"), "{error}");
        let error =
            check(b"PK\x03\x04 not a snapshot", &key, SnapshotTrust::AnyIntact).unwrap_err();
        assert!(
            error.to_string().contains("not a sandlot snapshot"),
            "{error}"
        );
    }
}
