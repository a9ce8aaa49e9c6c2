//! Frames, and the primitive values inside them, each length checked against what
//! is there. Kept apart from the messages because every message, either way, goes
//! through these few checks: a hostile reply must fail here, never panic.

use crate::messages::ToolChannel;
use std::io::{self, Read, Write};

/// Largest frame either side accepts.
pub const MAX_FRAME: usize = 256 << 20;

/// A frame that does not decode.
pub(super) fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed agent frame: {what}"),
    )
}

/// Reads one frame: its tag and body.
pub fn read_frame(reader: &mut impl Read) -> io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(malformed("length out of range"));
    }
    let mut tag = [0u8; 1];
    reader.read_exact(&mut tag)?;
    let mut body = vec![0u8; len - 1];
    reader.read_exact(&mut body)?;
    Ok((tag[0], body))
}

pub(super) struct Encoder(Vec<u8>);

impl Encoder {
    pub(super) fn new(tag: u8) -> Self {
        Encoder(vec![0, 0, 0, 0, tag])
    }
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    pub(super) fn strings(&mut self, v: &[String]) -> &mut Self {
        self.u32(v.len() as u32);
        for s in v {
            self.bytes(s.as_bytes());
        }
        self
    }
    pub(super) fn pairs(&mut self, v: &[(String, String)]) -> &mut Self {
        self.u32(v.len() as u32);
        for (k, v) in v {
            self.bytes(k.as_bytes()).bytes(v.as_bytes());
        }
        self
    }
    pub(super) fn tools(&mut self, v: &Option<ToolChannel>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(t) => self.u8(1).u64(t.max_request).u32(t.max_connections),
        }
    }
    pub(super) fn write_to(&mut self, writer: &mut impl Write) -> io::Result<()> {
        let len = self.0.len() - 4;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the agent protocol allows",
            ));
        }
        self.0[..4].copy_from_slice(&(len as u32).to_le_bytes());
        writer.write_all(&self.0)?;
        writer.flush()
    }
}

pub(super) struct Decoder<'a>(pub(super) &'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(malformed("body too short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn bool(&mut self) -> io::Result<bool> {
        Ok(self.u8()? != 0)
    }
    pub(super) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(super) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(super) fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    pub(super) fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| malformed("string is not UTF-8"))
    }
    /// A count of items each at least `min_size` bytes long, checked against what is left.
    pub(super) fn count(&mut self, min_size: usize) -> io::Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.0.len() {
            return Err(malformed("count larger than the body"));
        }
        Ok(n)
    }
    pub(super) fn strings(&mut self) -> io::Result<Vec<String>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.string()).collect()
    }
    pub(super) fn pairs(&mut self) -> io::Result<Vec<(String, String)>> {
        let n = self.count(8)?;
        (0..n)
            .map(|_| Ok((self.string()?, self.string()?)))
            .collect()
    }
    pub(super) fn tools(&mut self) -> io::Result<Option<ToolChannel>> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(ToolChannel {
                max_request: self.u64()?,
                max_connections: self.u32()?,
            }),
            _ => return Err(malformed("tools is neither absent nor present")),
        })
    }
    pub(super) fn end(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(malformed("trailing bytes"))
        }
    }
}
