//! Secrets: values a run needs (an API key, a token) that must never come back out.
//! A secret reaches the sandbox as an environment variable, and every occurrence of
//! its value is replaced by [`MASK`] in what the session returns: stdout and stderr,
//! streamed or whole, the files a run made, and files read or copied out.
//!
//! ```no_run
//! # fn main() -> Result<(), sandlot::Error> {
//! let sandlot = sandlot::from_environment()?;
//! let mut session = sandlot
//!     .session("python")
//!     .secret("API_KEY", "sk-live-0123456789")?
//!     .open()?;
//! let run = session.run("import os; print(os.environ['API_KEY'])")?;
//! assert_eq!(run.stdout_text(), "***\n");
//! # Ok(())
//! # }
//! ```
//!
//! Masking matches the value's bytes. Code that transforms the value first (base64,
//! reversal, one character per line) gets it out unmasked: a secret given to
//! untrusted code is exposed to that code; masking keeps it out of logs, transcripts
//! and model context by accident, not against intent.
//!
//! A secret [bound to hosts](Secret::bound_to) never enters the sandbox: its variable
//! holds a placeholder, and the sandbox's egress proxy puts the value in only where
//! the [`Binding`] says, in requests to its hosts ([`Injector`]).

mod binding;
mod bytes;
mod injector;
mod named;
mod upstream_ca;

pub use binding::{Binding, Placement};
pub use injector::{Echo, Injector};
pub use named::{Secret, MIN_BOUND_LEN, MIN_LEN};
pub use upstream_ca::UpstreamCa;

use bytes::partial_suffix;
pub(crate) use bytes::replace_all;

use crate::error::{Error, Result};
use crate::sandbox_path::SandboxPath;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// What output goes through on its way out: the shape of `backend::Sink`, which this
/// module, below the backend contract, does not import.
type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// What replaces a secret's value.
pub const MASK: &str = "***";

/// Secrets by name as a client of a server sends them (`{"API_KEY": "..."}`). Its
/// `Debug` form shows the names only, so logging a request never shows a value.
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl SecretValues {
    /// Each one checked ([`Secret::new`]).
    pub fn secrets(&self) -> Result<Vec<Secret>> {
        self.0
            .iter()
            .map(|(name, value)| Secret::new(name, value))
            .collect()
    }
}

/// The secrets of a session, and the masking of what it returns.
#[derive(Clone, Debug, Default)]
pub(crate) struct Secrets {
    /// Longest value first, so one that contains another is masked whole.
    secrets: Arc<Vec<Secret>>,
    /// The bound ones, with this session's placeholders.
    injector: Arc<Injector>,
}

impl Secrets {
    /// The secrets, a placeholder made for each bound one; `upstream` is what the
    /// proxy trusts, beside the host's roots, to send them to.
    pub(crate) fn new(secrets: Vec<Secret>, upstream: UpstreamCa) -> Result<Secrets> {
        let injector = Injector::new(&secrets)?.trusting(upstream);
        Ok(Secrets {
            injector: Arc::new(injector),
            ..Secrets::masking(secrets)
        })
    }

    /// The secrets for masking only: no placeholder made, nothing for a proxy.
    fn masking(mut secrets: Vec<Secret>) -> Secrets {
        secrets.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
        Secrets {
            secrets: Arc::new(secrets),
            injector: Arc::default(),
        }
    }

    /// The bound secrets, for the sandbox's egress proxy.
    pub(crate) fn injector(&self) -> Arc<Injector> {
        self.injector.clone()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Their names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.secrets.iter().map(|s| s.name.clone()).collect()
    }

    /// The environment variables they are given as: a bound secret's holds its
    /// placeholder.
    pub(crate) fn env(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.secrets.iter().map(|s| {
            let value = match self.injector.placeholder(&s.name) {
                Some(placeholder) => placeholder.to_string(),
                None => s.value.clone(),
            };
            (s.name.clone(), value)
        })
    }

    /// `bytes` with every value replaced by [`MASK`]. When `cut` (the output was
    /// truncated), a value's beginning at the very end is masked too.
    pub(crate) fn mask(&self, bytes: Vec<u8>, cut: bool) -> Vec<u8> {
        if self.is_empty() {
            return bytes;
        }
        let held = if cut { self.partial_suffix(&bytes) } else { 0 };
        if held < MIN_LEN {
            return self.mask_whole(&bytes);
        }
        let mut masked = self.mask_whole(&bytes[..bytes.len() - held]);
        masked.extend_from_slice(MASK.as_bytes());
        masked
    }

    fn mask_whole(&self, bytes: &[u8]) -> Vec<u8> {
        self.mask_matching(bytes, |text, value| text.starts_with(value))
    }

    /// `text` with every value masked.
    pub(crate) fn mask_text(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        String::from_utf8_lossy(&self.mask_whole(text.as_bytes())).into_owned()
    }

    /// `text` with every value masked whatever the case of its ASCII letters: for
    /// names that travel through a channel that folds case (DNS, a TLS server name,
    /// an HTTP `Host`), where code can send a value in another case and the host may
    /// lower-case what it reports.
    pub(crate) fn mask_folded(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        let masked = self.mask_matching(text.as_bytes(), |text, value| {
            text.len() >= value.len() && text[..value.len()].eq_ignore_ascii_case(value)
        });
        String::from_utf8_lossy(&masked).into_owned()
    }

    /// `error`, or, when its message quotes a value, an [`Error::Masked`] with the
    /// value masked in the message.
    pub(crate) fn mask_error(&self, error: Error) -> Error {
        if self.is_empty() {
            return error;
        }
        let message = error.to_string();
        let masked = self.mask_text(&message);
        if masked == message {
            error
        } else {
            Error::Masked {
                message: masked,
                kind: error.kind(),
            }
        }
    }

    /// `path` with every value masked, or `None` if what is left is no
    /// [`SandboxPath`] any more: names that come back are masked like contents.
    pub(crate) fn mask_path(&self, path: &SandboxPath) -> Option<SandboxPath> {
        if self.is_empty() {
            return Some(path.clone());
        }
        SandboxPath::new(&self.mask_text(path.as_str())).ok()
    }

    fn mask_matching(&self, bytes: &[u8], matches: impl Fn(&[u8], &[u8]) -> bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        'scan: while i < bytes.len() {
            for secret in self.secrets.iter() {
                let value = secret.value.as_bytes();
                if matches(&bytes[i..], value) {
                    out.extend_from_slice(MASK.as_bytes());
                    i += value.len();
                    continue 'scan;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        out
    }

    /// The length of the longest end of `bytes` that is the beginning of a value
    /// (shorter than the value): bytes that must wait for what follows. Measured on
    /// the unmasked bytes, since a shorter value may begin a longer one.
    fn partial_suffix(&self, bytes: &[u8]) -> usize {
        partial_suffix(bytes, self.secrets.iter().map(|s| s.value.as_bytes()))
    }

    /// A sink that passes masked output on to `inner`, holding back a value's
    /// possible beginning until the next chunk shows whether it is one; and the
    /// handle that passes on what is held once the run is over.
    pub(crate) fn mask_sink(&self, inner: Sink) -> (Sink, StreamFlush) {
        let state = Arc::new(Mutex::new(Stream {
            inner,
            pending: Vec::new(),
            secrets: self.clone(),
        }));
        let writer = state.clone();
        let sink: Sink = Box::new(move |chunk: &[u8]| {
            if let Ok(mut stream) = writer.lock() {
                stream.push(chunk);
            }
        });
        (sink, StreamFlush(state))
    }
}

struct Stream {
    inner: Sink,
    pending: Vec<u8>,
    secrets: Secrets,
}

impl Stream {
    fn push(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        let held = self.secrets.partial_suffix(&self.pending);
        let ready = self.pending.len() - held;
        if ready > 0 {
            let masked = self.secrets.mask_whole(&self.pending[..ready]);
            (self.inner)(&masked);
            self.pending.drain(..ready);
        }
    }
}

impl Secrets {
    /// `bytes` with every value overwritten in place by `*`: what a snapshot carries
    /// out of the session. The length stays, so
    /// whatever holds the bytes (an interpreter's memory image, a pickle, a file)
    /// keeps its layout; the value is gone. A value is found in every form an
    /// interpreter keeps text in: UTF-8, and where it fits them Latin-1 (CPython's
    /// and QuickJS's one-byte strings), UTF-16 and UTF-32 (little-endian), each
    /// overwritten by `*` in its own form.
    pub(crate) fn scrub(&self, bytes: &mut [u8]) {
        self.scrub_starting_before(bytes, bytes.len());
    }

    /// [`Secrets::scrub`] of the values that start before `limit`: those after it
    /// may yet turn out to begin a longer value, which is scrubbed whole instead.
    fn scrub_starting_before(&self, bytes: &mut [u8], limit: usize) {
        for secret in self.secrets.iter() {
            for (needle, star) in encodings(&secret.value) {
                let finder = memchr::memmem::Finder::new(&needle);
                let mut from = 0;
                while let Some(at) = finder.find(&bytes[from..]) {
                    let start = from + at;
                    if start >= limit {
                        break;
                    }
                    for (i, byte) in bytes[start..start + needle.len()].iter_mut().enumerate() {
                        *byte = star[i % star.len()];
                    }
                    from = start + needle.len();
                }
            }
        }
    }

    /// The most bytes a value takes in any of the forms [`Secrets::scrub`] finds.
    fn longest_form(&self) -> usize {
        self.secrets
            .first()
            .map_or(0, |s| 4 * s.value.chars().count().max(s.value.len()))
    }

    /// A writer that passes everything on to `inner` with every value scrubbed
    /// ([`Secrets::scrub`]), a value split across writes included: it holds back
    /// the last bytes of each write that could begin one. [`Scrubbing::finish`]
    /// writes what it holds.
    pub(crate) fn scrubbing<'w>(&self, inner: &'w mut dyn std::io::Write) -> Scrubbing<'w> {
        Scrubbing {
            inner,
            held: Vec::new(),
            keep: self.longest_form().saturating_sub(1),
            secrets: self.clone(),
        }
    }
}

/// The forms `value` takes in an interpreter's memory, each with the bytes of a `*`
/// in that form.
fn encodings(value: &str) -> Vec<(Vec<u8>, &'static [u8])> {
    let mut forms: Vec<(Vec<u8>, &'static [u8])> = vec![(value.as_bytes().to_vec(), b"*")];
    if !value.is_ascii() && value.chars().all(|c| (c as u32) < 0x100) {
        forms.push((value.chars().map(|c| c as u8).collect(), b"*"));
    }
    let utf16: Vec<u8> = value.encode_utf16().flat_map(u16::to_le_bytes).collect();
    forms.push((utf16, b"*\0"));
    let utf32: Vec<u8> = value
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    forms.push((utf32, b"*\0\0\0"));
    forms
}

/// See [`Secrets::scrubbing`].
pub(crate) struct Scrubbing<'w> {
    inner: &'w mut dyn std::io::Write,
    /// Bytes not yet passed on: the end of what was written, which a value may
    /// continue into the next write.
    held: Vec<u8>,
    /// How many bytes to hold back: the longest value's length less one.
    keep: usize,
    secrets: Secrets,
}

/// Bytes scrubbed and passed on at once, at most: the hold-back is copied once per
/// write, so large writes cost one copy of the small end.
const SCRUB_CHUNK: usize = 1 << 20;

impl std::io::Write for Scrubbing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let taken = bytes.len().min(SCRUB_CHUNK);
        self.held.extend_from_slice(&bytes[..taken]);
        if self.held.len() > self.keep {
            // A value that starts in what goes out now ends within what is held.
            let ready = self.held.len() - self.keep;
            self.secrets.scrub_starting_before(&mut self.held, ready);
            self.inner.write_all(&self.held[..ready])?;
            self.held.drain(..ready);
        }
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Scrubbing<'_> {
    /// Writes what is held back; the end of the stream.
    pub(crate) fn finish(mut self) -> std::io::Result<()> {
        let mut rest = std::mem::take(&mut self.held);
        self.secrets.scrub(&mut rest);
        self.inner.write_all(&rest)
    }
}

/// What masks a session's secrets in whatever is handed on from it
/// ([`Session::masker`](crate::Session::masker)): for a server's own channels to a
/// client (events it builds, JSON it decodes from the output), which the session's
/// own masking cannot see. Cheap to clone; masks nothing without secrets.
///
/// ```no_run
/// # fn main() -> Result<(), sandlot::Error> {
/// let sandlot = sandlot::from_environment()?;
/// let session = sandlot
///     .session("python")
///     .secret("API_KEY", "sk-\"live\"-ünï")?
///     .open()?;
/// let masker = session.masker();
/// // A value the server decoded from JSON the code printed (`"sk-\"live\"-\u00fcn\u00ef"`).
/// let decoded = serde_json::json!({ "text": "key sk-\"live\"-ünï", "sk-\"live\"-ünï": 1 });
/// assert_eq!(masker.json(decoded), serde_json::json!({ "text": "key ***", "***": 1 }));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Masker(Secrets);

impl Masker {
    /// What masks `secrets`: a session's, as its request gave them.
    pub fn new(secrets: Vec<Secret>) -> Masker {
        Masker(Secrets::masking(secrets))
    }

    pub(crate) fn of(secrets: &Secrets) -> Masker {
        Masker(secrets.clone())
    }

    /// Whether it masks nothing (the session has no secrets).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `bytes` with every value replaced by `***`.
    pub fn bytes(&self, bytes: Vec<u8>) -> Vec<u8> {
        self.0.mask(bytes, false)
    }

    /// `text` with every value replaced by `***`.
    pub fn text(&self, text: &str) -> String {
        self.0.mask_text(text)
    }

    /// `value` with every value masked in its strings and its keys, at any depth, and
    /// a number whose digits hold a value made the masked string: what a client gets
    /// when it decodes the JSON, whatever escapes the text used.
    pub fn json(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.is_empty() {
            return value;
        }
        match value {
            Value::String(text) => Value::String(self.text(&text)),
            Value::Number(number) => {
                let digits = number.to_string();
                let masked = self.text(&digits);
                if masked == digits {
                    Value::Number(number)
                } else {
                    Value::String(masked)
                }
            }
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.json(v)).collect()),
            Value::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(key, v)| (self.text(&key), self.json(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// Passes on what a masking sink still holds (see [`Secrets::mask_sink`]).
pub(crate) struct StreamFlush(Arc<Mutex<Stream>>);

impl StreamFlush {
    /// `cut`: the output was truncated, so a value's beginning at the end is masked.
    pub(crate) fn flush(self, cut: bool) {
        if let Ok(mut stream) = self.0.lock() {
            let rest = std::mem::take(&mut stream.pending);
            if !rest.is_empty() {
                let masked = stream.secrets.mask(rest, cut);
                (stream.inner)(&masked);
            }
        }
    }
}

#[cfg(test)]
mod tests;
