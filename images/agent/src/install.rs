//! The install's own way out while the sandbox is frozen: its proxy and the secret its
//! connections show the host. A room of its own because the host's egress proxy and
//! the agent's relay both hold it, apart from any message that carries it.

use std::io::{self, Read};

/// The way out an install gets while the sandbox is frozen, where the agent relays
/// the sandbox's egress: an HTTP proxy on `127.0.0.1:port`, listening only from the
/// moment every other process stopped, whose connections the agent hands the host
/// with `token`.
///
/// Why a way of its own: the relays the code uses stay open while it is frozen, and
/// what the code queued in them before it stopped (a connection in a listener's
/// backlog, a request in a socket's buffer) would reach the host while the install
/// has the network. The host lets a connection out to the public internet only
/// with the token of the install under way, which no process of the code could
/// have seen: it was drawn after they all stopped, and is void when they go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstallProxy {
    /// The port on the sandbox's loopback.
    pub port: u16,
    /// What the agent's connections present to the host.
    pub token: InstallToken,
}

/// A secret of 128 random bits that one install's connections present to the host;
/// see [`InstallProxy`]. Its `Debug` form does not show it.
///
/// ```
/// use sandlot_agent::InstallToken;
///
/// let token = InstallToken::random().unwrap();
/// assert_eq!(InstallToken::from_hex(&token.to_hex()), Some(token));
/// assert_eq!(InstallToken::from_hex("not a token"), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InstallToken(pub(super) [u8; 16]);

impl InstallToken {
    /// A token from the kernel's random source.
    pub fn random() -> io::Result<InstallToken> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read /dev/urandom: {e}")))?;
        Ok(InstallToken(bytes))
    }

    /// The token in 32 lowercase hex digits, as the agent sends it to the host.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The token that [`InstallToken::to_hex`] wrote; `None` for anything else.
    pub fn from_hex(text: &str) -> Option<InstallToken> {
        let digits = text.as_bytes();
        if digits.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            if !pair.bytes().all(|d| d.is_ascii_hexdigit()) {
                return None;
            }
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(InstallToken(bytes))
    }

    /// Whether `other` is this token, in a time that does not depend on where they
    /// differ.
    pub fn matches(&self, other: &InstallToken) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl std::fmt::Debug for InstallToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstallToken(…)")
    }
}
