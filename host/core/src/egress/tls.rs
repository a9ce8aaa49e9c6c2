//! The server name a TLS client asks for, read from its client hello before a byte is
//! passed on (RFC 8446 §4.1.2, RFC 6066 §3).

/// What the first bytes of a connection say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// Not a TLS handshake at all.
    NotTls,
    /// A TLS handshake, but the hello is not whole yet: read more.
    Incomplete,
    /// A TLS handshake that breaks the format.
    Malformed,
    /// A whole client hello, with the server name it carries, if any.
    Complete(Option<String>),
}

/// The most a hello may take before it is called malformed (a real one is a few
/// hundred bytes, a few kilobytes with post-quantum key shares).
pub const MAX_HELLO: usize = 32 * 1024;

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_NAME: u16 = 0;
/// Encrypted Client Hello: the server name that counts is encrypted, so the hello
/// cannot be checked.
const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
const HOST_NAME: u8 = 0;

/// Reads the client hello at the start of `bytes`.
pub fn client_hello(bytes: &[u8]) -> Hello {
    if bytes.is_empty() {
        return Hello::Incomplete;
    }
    if bytes[0] != HANDSHAKE {
        return Hello::NotTls;
    }
    // The hello may be split over several handshake records: join their payloads.
    let mut handshake = Vec::new();
    let mut rest = bytes;
    loop {
        if rest.len() < 5 {
            return incomplete(bytes);
        }
        if rest[0] != HANDSHAKE || rest[1] != 3 {
            return Hello::Malformed;
        }
        let length = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if length == 0 {
            return Hello::Malformed;
        }
        let Some(fragment) = rest.get(5..5 + length) else {
            return incomplete(bytes);
        };
        handshake.extend_from_slice(fragment);
        rest = &rest[5 + length..];
        if handshake.len() >= 4 {
            if handshake[0] != CLIENT_HELLO {
                return Hello::Malformed;
            }
            let body = u32::from_be_bytes([0, handshake[1], handshake[2], handshake[3]]) as usize;
            if body > MAX_HELLO {
                return Hello::Malformed;
            }
            if handshake.len() >= 4 + body {
                return match server_name(&handshake[4..4 + body]) {
                    Some(name) => Hello::Complete(name),
                    None => Hello::Malformed,
                };
            }
        }
    }
}

fn incomplete(bytes: &[u8]) -> Hello {
    if bytes.len() > MAX_HELLO {
        Hello::Malformed
    } else {
        Hello::Incomplete
    }
}

/// A cursor over a hello's body; every read checks its bounds.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn vector8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    fn vector16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// The server name in a client hello's body: `None` if the body is malformed,
/// `Some(None)` if it names no server.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut hello = Reader(body);
    hello.take(2 + 32)?; // legacy version, random
    hello.vector8()?; // legacy session id
    hello.vector16()?; // cipher suites
    hello.vector8()?; // compression methods
    if hello.0.is_empty() {
        return Some(None);
    }
    let mut extensions = Reader(hello.vector16()?);
    let mut found = None;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vector16()?;
        if kind == ENCRYPTED_CLIENT_HELLO {
            return None;
        }
        if kind != SERVER_NAME {
            continue;
        }
        // Two server-name extensions would let a checker and a server disagree.
        if found.is_some() {
            return None;
        }
        let mut names = Reader(Reader(data).vector16()?);
        let mut name = None;
        while !names.0.is_empty() {
            let kind = names.u8()?;
            let value = names.vector16()?;
            if kind == HOST_NAME {
                if name.is_some() {
                    return None;
                }
                let text = std::str::from_utf8(value).ok()?;
                if text.is_empty() || !text.is_ascii() {
                    return None;
                }
                name = Some(text.to_ascii_lowercase());
            }
        }
        found = Some(name);
    }
    Some(found.flatten())
}

/// A minimal client hello naming `name` (or no server), in one record: what the
/// tests of this parser and of the proxy that reads with it send.
pub fn sample_hello(name: Option<&str>) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7; 32]);
    body.push(0); // session id
    body.extend([0, 2, 0x13, 0x01]); // one cipher suite
    body.extend([1, 0]); // null compression
    let mut extensions = Vec::new();
    if let Some(name) = name {
        let mut list = vec![HOST_NAME];
        list.extend((name.len() as u16).to_be_bytes());
        list.extend(name.as_bytes());
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        extensions.extend(SERVER_NAME.to_be_bytes());
        extensions.extend((data.len() as u16).to_be_bytes());
        extensions.extend(data);
    }
    // Another extension after it (supported versions).
    extensions.extend([0, 43, 0, 3, 2, 3, 4]);
    body.extend((extensions.len() as u16).to_be_bytes());
    body.extend(extensions);
    let mut handshake = vec![CLIENT_HELLO];
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![HANDSHAKE, 3, 1];
    record.extend((handshake.len() as u16).to_be_bytes());
    record.extend(handshake);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(name: Option<&str>) -> Vec<u8> {
        sample_hello(name)
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            client_hello(&hello(Some("PyPI.org"))),
            Hello::Complete(Some("pypi.org".into()))
        );
        assert_eq!(client_hello(&hello(None)), Hello::Complete(None));
    }

    #[test]
    fn waits_for_a_hello_cut_anywhere() {
        let whole = hello(Some("example.com"));
        for cut in 0..whole.len() {
            assert_eq!(
                client_hello(&whole[..cut]),
                Hello::Incomplete,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn joins_a_hello_split_over_records() {
        let whole = hello(Some("example.com"));
        let handshake = &whole[5..];
        let (a, b) = handshake.split_at(20);
        let mut split = Vec::new();
        for part in [a, b] {
            split.extend([HANDSHAKE, 3, 1]);
            split.extend((part.len() as u16).to_be_bytes());
            split.extend(part);
        }
        assert_eq!(
            client_hello(&split),
            Hello::Complete(Some("example.com".into()))
        );
    }

    #[test]
    fn other_protocols_and_broken_hellos_are_told_apart() {
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(client_hello(b"SSH-2.0-OpenSSH"), Hello::NotTls);
        let mut bad = hello(Some("example.com"));
        bad[5] = 2; // a server hello
        assert_eq!(client_hello(&bad), Hello::Malformed);
        let mut empty = vec![HANDSHAKE, 3, 1, 0, 0];
        empty.extend([0; 8]);
        assert_eq!(client_hello(&empty), Hello::Malformed);
        let mut ech = hello(Some("listed.example"));
        let at = ech.len() - 7;
        ech[at..at + 2].copy_from_slice(&ENCRYPTED_CLIENT_HELLO.to_be_bytes());
        assert_eq!(
            client_hello(&ech),
            Hello::Malformed,
            "ECH hides the real name"
        );
        let huge = vec![HANDSHAKE, 3, 1, 0, 4, CLIENT_HELLO, 0xff, 0xff, 0xff];
        assert_eq!(client_hello(&huge), Hello::Malformed);
    }
}
