//! The egress proxy's side of bound secrets ([`super::Binding`]): each has a
//! placeholder, made for the session, that its variable holds inside the sandbox; the
//! proxy replaces the placeholder with the value in a request to a bound host, where
//! the binding says, and the value with the placeholder in what comes back.
//!
//! A placeholder has its value's length, so no replacement changes the length of
//! anything: a response's `Content-Length` and chunk sizes, a Basic credential's
//! base64, stay right. The code can learn the length of a bound value, nothing more.

use super::binding::{Binding, Placement};
use super::bytes::{partial_suffix, replace_all};
use super::named::Secret;
use super::upstream_ca::UpstreamCa;
use crate::egress::http::Request;
use crate::error::{Error, Result};
use base64::Engine as _;
use std::fmt;

/// One bound secret as the proxy holds it.
#[derive(Clone)]
struct Held {
    name: String,
    value: String,
    placeholder: String,
    binding: Binding,
    /// What finds `value` in an answer, made once: every chunk of every answer
    /// from a bound host is searched.
    finder: memchr::memmem::Finder<'static>,
}

/// The bound secrets of one session, as its egress proxy applies them. Its `Debug`
/// form shows the names only.
#[derive(Clone, Default)]
pub struct Injector {
    held: Vec<Held>,
    upstream: UpstreamCa,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.held.iter().map(|h| &h.name))
            .finish()
    }
}

/// A placeholder of `len` characters from the URL-safe base64 alphabet: safe, as it
/// is, in a header, a Bearer token, Basic credentials and a query string.
fn make_placeholder(len: usize) -> std::io::Result<String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 63)]))
        .collect())
}

impl Injector {
    /// The bound ones of `secrets` (the others are not its business), each with a
    /// placeholder made now: a session makes one injector, so each session's
    /// placeholders are its own.
    pub fn new(secrets: &[Secret]) -> Result<Injector> {
        let mut held = Vec::new();
        for secret in secrets {
            let Some(binding) = &secret.binding else {
                continue;
            };
            let placeholder = make_placeholder(secret.value.len()).map_err(|e| Error::Io {
                context: "making a secret's placeholder".into(),
                source: e,
            })?;
            held.push(Held {
                name: secret.name.clone(),
                value: secret.value.clone(),
                placeholder,
                binding: binding.clone(),
                finder: memchr::memmem::Finder::new(secret.value.as_bytes()).into_owned(),
            });
        }
        // Longest value first: one that contains another is replaced whole.
        held.sort_by_key(|h| std::cmp::Reverse(h.value.len()));
        Ok(Injector {
            held,
            upstream: UpstreamCa::default(),
        })
    }

    /// The same, its values sent over TLS to an upstream whose certificate chains to
    /// `upstream` as well as to one the host trusts.
    pub fn trusting(self, upstream: UpstreamCa) -> Injector {
        Injector { upstream, ..self }
    }

    /// The roots trusted beside the host's for a bound host ([`Injector::trusting`]).
    pub fn upstream_ca(&self) -> &UpstreamCa {
        &self.upstream
    }

    /// The placeholder the sandbox holds for the bound secret `name`.
    pub fn placeholder(&self, name: &str) -> Option<&str> {
        self.held
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.placeholder.as_str())
    }

    /// No secret is bound to any host.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether a secret is bound to `host`: the proxy must read requests to it (and
    /// see through TLS to do so) instead of relaying them untouched.
    pub fn binds(&self, host: &str) -> bool {
        self.held.iter().any(|h| h.binding.covers(host))
    }

    /// Puts the value of each secret bound to `host` into `request` where its
    /// placeholder is, in the place its binding names; returns the names of the
    /// secrets put in. `path` is the request's path and query, rewritten for a
    /// [`Placement::Query`]. A placeholder anywhere else stays as it is.
    pub fn inject(&self, host: &str, request: &mut Request, path: &mut String) -> Vec<String> {
        let mut injected = Vec::new();
        for held in self.held.iter().filter(|h| h.binding.covers(host)) {
            let done = match held.binding.placement() {
                Placement::Bearer => {
                    in_headers(request, "authorization", |value| bearer(value, held))
                }
                Placement::Basic => {
                    in_headers(request, "authorization", |value| basic(value, held))
                }
                Placement::Header(name) => in_headers(request, name, |value| {
                    let replaced =
                        replace_all(value, held.placeholder.as_bytes(), held.value.as_bytes());
                    (replaced != value).then_some(replaced)
                }),
                Placement::Query(name) => query(path, name, held),
            };
            if done {
                injected.push(held.name.clone());
            }
        }
        injected
    }

    /// What replaces values with their placeholders in a stream coming back from an
    /// upstream, a value split across chunks included.
    pub fn echo(&self) -> Echo<'_> {
        Echo {
            injector: self,
            pending: Vec::new(),
        }
    }

    /// The length of the longest end of `bytes` that begins a value (shorter than
    /// it): bytes that must wait for the next chunk.
    fn partial_suffix(&self, bytes: &[u8]) -> usize {
        partial_suffix(bytes, self.held.iter().map(|h| h.value.as_bytes()))
    }

    /// Every value in `bytes` overwritten by its placeholder, in place.
    fn hide(&self, bytes: &mut [u8]) {
        for held in &self.held {
            let mut from = 0;
            while let Some(at) = held.finder.find(&bytes[from..]) {
                let start = from + at;
                bytes[start..start + held.value.len()].copy_from_slice(held.placeholder.as_bytes());
                from = start + held.value.len();
            }
        }
    }
}

/// Rewrites each header named `name` with `rewrite` (which answers `None` to leave
/// it); whether one was rewritten.
fn in_headers(
    request: &mut Request,
    name: &str,
    mut rewrite: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> bool {
    let mut done = false;
    for (header, value) in request.headers_mut() {
        if header.eq_ignore_ascii_case(name) {
            if let Some(new) = rewrite(value.as_slice()) {
                *value = new;
                done = true;
            }
        }
    }
    done
}

/// `Bearer <placeholder>` (the scheme in any case) as `Bearer <value>`.
fn bearer(value: &[u8], held: &Held) -> Option<Vec<u8>> {
    let (scheme, token) = split_scheme(value)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || token != held.placeholder.as_bytes() {
        return None;
    }
    Some([b"Bearer ", held.value.as_bytes()].concat())
}

/// `Basic base64(user:password)` with the placeholder anywhere in the credentials.
fn basic(value: &[u8], held: &Held) -> Option<Vec<u8>> {
    let (scheme, token) = split_scheme(value)?;
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let credentials = engine.decode(token).ok()?;
    let replaced = replace_all(
        &credentials,
        held.placeholder.as_bytes(),
        held.value.as_bytes(),
    );
    if replaced == credentials {
        return None;
    }
    Some(format!("Basic {}", engine.encode(replaced)).into_bytes())
}

/// A credential's scheme and what follows it, white space around trimmed.
fn split_scheme(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let value = value.trim_ascii();
    let at = value.iter().position(|b| *b == b' ')?;
    Some((&value[..at], value[at + 1..].trim_ascii()))
}

/// The query parameter `name` whose value is the placeholder given the value,
/// percent-encoded; whether one was.
fn query(path: &mut String, name: &str, held: &Held) -> bool {
    let (before, fragment) = match path.find('#') {
        Some(at) => path.split_at(at),
        None => (path.as_str(), ""),
    };
    let Some((route, query)) = before.split_once('?') else {
        return false;
    };
    let mut done = false;
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if key == name && value == held.placeholder => {
                done = true;
                format!("{key}={}", percent_encode(&held.value))
            }
            _ => pair.to_string(),
        })
        .collect();
    if done {
        *path = format!("{route}?{}{fragment}", pairs.join("&"));
    }
    done
}

/// `text` with every byte but RFC 3986's unreserved ones percent-encoded.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// See [`Injector::echo`].
pub struct Echo<'a> {
    injector: &'a Injector,
    pending: Vec<u8>,
}

impl Echo<'_> {
    /// The part of what has arrived so far that can be passed on, every value in it
    /// replaced by its placeholder; the possible beginning of a value is held back
    /// until the next chunk shows whether it is one.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.injector.is_empty() {
            return chunk.to_vec();
        }
        self.pending.extend_from_slice(chunk);
        self.injector.hide(&mut self.pending);
        let held = self.injector.partial_suffix(&self.pending);
        let ready = self.pending.len() - held;
        // The few bytes held back move; the chunk passed on does not.
        let rest = self.pending.split_off(ready);
        std::mem::replace(&mut self.pending, rest)
    }

    /// What is still held back: the end of the stream.
    pub fn finish(mut self) -> Vec<u8> {
        self.injector.hide(&mut self.pending);
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests;
