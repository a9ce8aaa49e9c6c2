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

use crate::backend::Sink;
use crate::error::{Error, Result};
use crate::sandbox_path::SandboxPath;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// What replaces a secret's value.
pub const MASK: &str = "***";

/// The shortest value accepted: masking a shorter one would garble ordinary output.
pub const MIN_LEN: usize = 4;

/// A named secret value. Its `Debug` form shows the name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    name: String,
    value: String,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// A secret for the environment variable `name`. The name must be a valid
    /// variable name and the value at least [`MIN_LEN`] bytes, without NUL.
    pub fn new(name: &str, value: &str) -> Result<Secret> {
        let invalid = |reason: String| Error::InvalidSecret {
            name: name.to_string(),
            reason,
        };
        let valid_name = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err(invalid(
                "a secret's name is an environment variable name: letters, digits and _, \
                 not starting with a digit"
                    .into(),
            ));
        }
        if value.len() < MIN_LEN {
            return Err(invalid(format!(
                "the value has {} bytes; secrets need at least {MIN_LEN}, or masking them \
                 would garble ordinary output",
                value.len()
            )));
        }
        if value.contains('\0') {
            return Err(invalid("the value contains a NUL byte".into()));
        }
        Ok(Secret {
            name: name.to_string(),
            value: value.to_string(),
        })
    }

    /// The environment variable it is given as.
    pub fn name(&self) -> &str {
        &self.name
    }
}

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
}

impl Secrets {
    pub(crate) fn new(mut secrets: Vec<Secret>) -> Secrets {
        secrets.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
        Secrets {
            secrets: Arc::new(secrets),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Their names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.secrets.iter().map(|s| s.name.clone()).collect()
    }

    /// The environment variables they are given as.
    pub(crate) fn env(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.secrets
            .iter()
            .map(|s| (s.name.clone(), s.value.clone()))
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
        let longest = self.secrets.first().map_or(0, |s| s.value.len());
        (1..longest.min(bytes.len() + 1))
            .rev()
            .find(|&n| {
                let tail = &bytes[bytes.len() - n..];
                self.secrets
                    .iter()
                    .any(|s| s.value.len() > n && s.value.as_bytes().starts_with(tail))
            })
            .unwrap_or(0)
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
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        Secrets::new(vec![
            Secret::new("KEY", "sk-live-1234").unwrap(),
            Secret::new("LONG", "sk-live-1234-extended").unwrap(),
        ])
    }

    #[test]
    fn every_occurrence_is_masked_and_the_longer_value_wins() {
        let out = secrets().mask(b"a sk-live-1234 b sk-live-1234-extended c".to_vec(), false);
        assert_eq!(String::from_utf8(out).unwrap(), "a *** b *** c");
    }

    #[test]
    fn a_value_split_across_chunks_is_still_masked_when_streamed() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let (mut sink, flush) = secrets().mask_sink(Box::new(move |b: &[u8]| {
            into.lock().unwrap().extend_from_slice(b)
        }));
        for chunk in [
            "key: sk-li",
            "ve-1",
            "234\nnext sk-",
            "live-1234-ext",
            "ended\nend sk-l",
        ] {
            sink(chunk.as_bytes());
        }
        drop(sink);
        flush.flush(false);
        let seen = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        assert_eq!(seen, "key: ***\nnext ***\nend sk-l");
    }

    #[test]
    fn names_are_masked_and_folded_channels_in_any_case() {
        let secrets = Secrets::new(vec![Secret::new("TOKEN", "OpSecret42").unwrap()]);
        let path = SandboxPath::new("output/OpSecret42.txt").unwrap();
        assert_eq!(secrets.mask_path(&path).unwrap(), "output/***.txt");
        assert_eq!(secrets.mask_text("x OpSecret42 y"), "x *** y");
        assert_eq!(
            secrets.mask_text("opsecret42"),
            "opsecret42",
            "bytes match exactly"
        );
        assert_eq!(secrets.mask_folded("opsecret42.evil.net"), "***.evil.net");
        assert_eq!(secrets.mask_folded("OPSECRET42.Evil.Net"), "***.Evil.Net");
    }

    #[test]
    fn an_error_that_quotes_a_value_is_masked_and_others_are_kept() {
        let secrets = Secrets::new(vec![Secret::new("TOKEN", "OpSecret42").unwrap()]);
        let quoting = Error::Runtime {
            runtime: "cpython".into(),
            reason: "setting the environment failed: OpSecret42".into(),
        };
        let masked = secrets.mask_error(quoting);
        assert!(matches!(masked, Error::Masked { .. }), "{masked:?}");
        assert!(masked.to_string().ends_with("failed: ***"), "{masked}");
        let plain = secrets.mask_error(Error::ManagerClosed);
        assert!(matches!(plain, Error::ManagerClosed));
    }

    #[test]
    fn a_truncated_output_does_not_end_in_a_values_beginning() {
        let out = secrets().mask(b"leaked: sk-live-12".to_vec(), true);
        assert_eq!(String::from_utf8(out).unwrap(), "leaked: ***");
    }

    #[test]
    fn bad_secrets_are_refused_with_the_reason() {
        let short = Secret::new("PIN", "123").unwrap_err().to_string();
        assert!(
            short.contains("PIN") && short.contains("at least 4"),
            "{short}"
        );
        let name = Secret::new("1BAD NAME", "long enough")
            .unwrap_err()
            .to_string();
        assert!(name.contains("environment variable name"), "{name}");
        let debug = format!("{:?}", Secret::new("KEY", "hunter2hunter2").unwrap());
        assert!(!debug.contains("hunter2"), "{debug}");
    }
}
