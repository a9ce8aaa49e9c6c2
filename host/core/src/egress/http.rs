//! The head of an HTTP/1 request the sandbox sends to its proxy or to port 80: where
//! it wants to go (RFC 9112 §3.2), and the head rewritten for the server.

/// The most a request head may take.
pub const MAX_HEAD: usize = 16 * 1024;

/// Where a request wants to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`.
    Authority { host: String, port: u16 },
    /// `GET http://host:port/path`: a request to a proxy.
    Absolute {
        host: String,
        port: u16,
        path: String,
    },
    /// `GET /path`: a request to the server itself (the `Host` header names it).
    Origin { path: String },
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub target: Target,
    minor_version: u8,
    headers: Vec<(String, Vec<u8>)>,
    /// Bytes the head took; what follows is the body.
    pub length: usize,
}

/// What the bytes read so far hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// Not a whole head yet.
    Incomplete,
    /// Not a request this proxy takes, and why.
    Invalid(String),
    /// A whole head.
    Request(Request),
}

/// Reads the request head at the start of `bytes`.
pub fn read_head(bytes: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => {
            return Head::Invalid(format!("a request head longer than {MAX_HEAD} bytes"))
        }
        Ok(httparse::Status::Partial) => return Head::Incomplete,
        Err(e) => return Head::Invalid(format!("not an HTTP/1 request ({e})")),
    };
    let (Some(method), Some(path), Some(minor_version)) =
        (request.method, request.path, request.version)
    else {
        return Head::Invalid("an incomplete request line".into());
    };
    let target = if method == "CONNECT" {
        match authority(path, None) {
            Some((host, Some(port))) => Target::Authority { host, port },
            _ => return Head::Invalid(format!("CONNECT to `{path}`, not host:port")),
        }
    } else if path.starts_with('/') {
        Target::Origin {
            path: path.to_string(),
        }
    } else if let Some(rest) = strip_prefix_ignore_case(path, "http://") {
        let (authority_part, path) = match rest.find(['/', '?']) {
            Some(at) if rest.as_bytes()[at] == b'/' => (&rest[..at], rest[at..].to_string()),
            Some(at) => (&rest[..at], format!("/{}", &rest[at..])),
            None => (rest, "/".to_string()),
        };
        match authority(authority_part, Some(80)) {
            Some((host, Some(port))) => Target::Absolute { host, port, path },
            _ => return Head::Invalid(format!("a request for `{path}` names no host")),
        }
    } else if strip_prefix_ignore_case(path, "https://").is_some() {
        return Head::Invalid(
            "an https:// URL sent to the proxy as plain HTTP; clients send CONNECT for it".into(),
        );
    } else {
        return Head::Invalid(format!("a request for `{path}`"));
    };
    Head::Request(Request {
        method: method.to_string(),
        target,
        minor_version,
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        length,
    })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, with `default` as the port if none is
/// written. The host comes back lower-cased, an IPv6 address without brackets.
pub fn authority(text: &str, default: Option<u16>) -> Option<(String, Option<u16>)> {
    if text.contains('@') {
        return None;
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        match after {
            "" => (host, None),
            after => (host, Some(after.strip_prefix(':')?)),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() || host.contains(':') && !text.starts_with('[') {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok().filter(|p| *p != 0)?),
        None => default,
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    // `a..b` or `a..`: an empty label, which no name has (and a resolver and a
    // checker could read differently).
    if !text.starts_with('[') && host.split('.').any(str::is_empty) {
        return None;
    }
    Some((host, port))
}

impl Request {
    /// How many bytes of body follow the head: its `Content-Length`, or 0. A body
    /// framed any other way (`Transfer-Encoding`), or by two lengths, is refused: the
    /// proxy must know where the request ends, or a second one could follow it to the
    /// server unchecked.
    pub fn body_length(&self) -> Result<u64, String> {
        if self
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("transfer-encoding"))
        {
            return Err(
                "a request body with Transfer-Encoding is not relayed; send Content-Length".into(),
            );
        }
        let mut lengths = self
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .map(|(_, value)| {
                std::str::from_utf8(value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
            });
        match (lengths.next(), lengths.next()) {
            (None, _) => Ok(0),
            (Some(Some(length)), None) => Ok(length),
            _ => Err("a request with a malformed or repeated Content-Length".into()),
        }
    }

    /// Its headers in order, for the proxy to put a bound secret's value where the
    /// placeholder is ([`crate::secret::Injector`]).
    pub(crate) fn headers_mut(&mut self) -> &mut [(String, Vec<u8>)] {
        &mut self.headers
    }

    /// The host the `Host` header names, lower-cased, without its port.
    pub fn host_header(&self) -> Option<String> {
        let mut hosts = self
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("host"));
        let value = hosts.next()?;
        if hosts.next().is_some() {
            // Two Host headers: a server might read either one.
            return None;
        }
        let text = std::str::from_utf8(&value.1).ok()?.trim();
        authority(text, None).map(|(host, _)| host)
    }

    /// The head to send the server of a proxied request: the path alone on the
    /// request line, `Host` set to the target, the proxy's own headers dropped, and
    /// the connection closed after one answer (a second request on it would escape
    /// the check).
    pub fn for_server(&self, host: &str, port: u16, path: &str) -> Vec<u8> {
        self.rewritten(host, (port, 80), path, true)
    }

    /// The head to send a server the proxy reads every request to (through TLS it
    /// sees into): like [`Request::for_server`], but the connection stays as the
    /// client asked, each request on it read and checked in turn; port 443 goes
    /// unnamed in `Host`.
    pub fn for_server_kept(&self, host: &str, port: u16, path: &str) -> Vec<u8> {
        self.rewritten(host, (port, 443), path, false)
    }

    fn rewritten(
        &self,
        host: &str,
        (port, default): (u16, u16),
        path: &str,
        close: bool,
    ) -> Vec<u8> {
        let mut out = format!("{} {path} HTTP/1.{}\r\n", self.method, self.minor_version);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        if port == default {
            out.push_str(&format!("Host: {host}\r\n"));
        } else {
            out.push_str(&format!("Host: {host}:{port}\r\n"));
        }
        let mut out = out.into_bytes();
        for (name, value) in &self.headers {
            let dropped = ["host", "proxy-connection", "proxy-authorization"]
                .iter()
                .any(|d| name.eq_ignore_ascii_case(d))
                || (close && name.eq_ignore_ascii_case("connection"));
            if !dropped {
                out.extend(name.as_bytes());
                out.extend(b": ");
                out.extend(value);
                out.extend(b"\r\n");
            }
        }
        if close {
            out.extend(b"Connection: close\r\n");
        }
        out.extend(b"\r\n");
        out
    }
}

/// `text` with its `%XX` escapes decoded; `None` for a broken escape or bytes that
/// are not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(bytes: &[u8]) -> Request {
        match read_head(bytes) {
            Head::Request(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_connect_absolute_and_origin_targets() {
        let connect = request(b"CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
        assert_eq!(
            connect.target,
            Target::Authority {
                host: "pypi.org".into(),
                port: 443
            }
        );
        let v6 = request(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n");
        assert_eq!(
            v6.target,
            Target::Authority {
                host: "::1".into(),
                port: 8443
            }
        );
        let get = request(b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\nrest");
        assert_eq!(
            get.target,
            Target::Absolute {
                host: "example.com".into(),
                port: 80,
                path: "/a?b".into()
            }
        );
        assert_eq!(
            get.length + 4,
            b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\nrest".len()
        );
        let query = request(b"GET http://example.com:8080?x HTTP/1.0\r\n\r\n");
        assert_eq!(
            query.target,
            Target::Absolute {
                host: "example.com".into(),
                port: 8080,
                path: "/?x".into()
            }
        );
        let origin = request(b"GET / HTTP/1.1\r\nHost: Example.com:80\r\n\r\n");
        assert_eq!(origin.target, Target::Origin { path: "/".into() });
        assert_eq!(origin.host_header().as_deref(), Some("example.com"));
    }

    #[test]
    fn refuses_what_it_cannot_check() {
        for bad in [
            &b"CONNECT example.com HTTP/1.1\r\n\r\n"[..],
            b"CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            b"GET https://example.com/ HTTP/1.1\r\n\r\n",
            b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            b"GET http://:80/ HTTP/1.1\r\n\r\n",
            b"GET http://a..b/ HTTP/1.1\r\n\r\n",
            b"CONNECT a..:443 HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x00",
        ] {
            assert!(
                matches!(read_head(bad), Head::Invalid(_)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(read_head(b"GET / HTTP/1.1\r\nHo"), Head::Incomplete);
        let two_hosts = request(b"GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n");
        assert_eq!(two_hosts.host_header(), None);
    }

    #[test]
    fn a_body_is_framed_by_one_content_length_only() {
        let framed = |head: &str| request(head.as_bytes()).body_length();
        assert_eq!(framed("POST / HTTP/1.1\r\nHost: a\r\n\r\n"), Ok(0));
        assert_eq!(
            framed("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n"),
            Ok(12)
        );
        for bad in [
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1,1\r\n\r\n",
        ] {
            assert!(framed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_server_gets_an_origin_form_head_without_proxy_headers() {
        let get = request(
            b"GET http://example.com:8080/x HTTP/1.1\r\nHost: evil.net\r\nProxy-Authorization: a\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        );
        let head = String::from_utf8(get.for_server("example.com", 8080, "/x")).unwrap();
        assert_eq!(
            head,
            "GET /x HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_server_seen_through_tls_keeps_the_connection_the_client_asked_for() {
        let get = request(
            b"GET /x HTTP/1.1\r\nHost: api.example.com\r\nConnection: keep-alive\r\nProxy-Connection: x\r\n\r\n",
        );
        let head = String::from_utf8(get.for_server_kept("api.example.com", 443, "/x")).unwrap();
        assert_eq!(
            head,
            "GET /x HTTP/1.1\r\nHost: api.example.com\r\nConnection: keep-alive\r\n\r\n"
        );
        let head = String::from_utf8(get.for_server_kept("api.example.com", 8443, "/x")).unwrap();
        assert!(head.starts_with("GET /x HTTP/1.1\r\nHost: api.example.com:8443\r\n"));
    }
}
