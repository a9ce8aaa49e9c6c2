//! One connection of the code or of an install: where it asks to go, checked
//! against the list, and relayed there or refused.

use super::environment::SANDBOX_ADDRESS;
use super::head::{client_hello, read_more, request_head, respond, within, Io};
use super::intercept::{intercept, Bound, Interceptor};
use super::relay::{copy, copy_back, idle_limited, splice, Activity};
use super::shared::{Access, Shared};

use sandlot_core::egress::dns::{self, Message};
use sandlot_core::egress::http::{self, Target};
use sandlot_core::egress::tls::{self, Hello};
use sandlot_core::egress::{is_public, Denial, DenyReason, DomainName, Via};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// How long a name has to resolve and a server to accept.
const CONNECT_DEADLINE: Duration = Duration::from_secs(15);

/// Why a destination was not reached.
enum Refusal {
    /// The allow-list refused it.
    Denied(Denial),
    /// It is allowed but did not answer.
    Failed(String),
}

/// One connection's view of the proxy: what it may reach is the proxy's [`Access`],
/// or the public internet for an install's connection.
pub(super) struct Connection<'a> {
    pub(super) shared: &'a Shared,
    pub(super) access: Access,
}

impl Connection<'_> {
    /// Whether `host`, a name or an address, may be reached now: on the list, or
    /// public while the proxy is open to any. A name must be a well-formed DNS name
    /// as well: a resolver would read `1.2.3.4 x.listed.com` or `127.1` otherwise
    /// than the list does.
    fn listed(&self, host: &str) -> bool {
        match (host.parse::<IpAddr>(), self.access) {
            (_, Access::Closed) => false,
            (Ok(address), Access::Public) => self.reachable(address),
            (Ok(address), _) => self.shared.allow.allows_address(address),
            (Err(_), _) => host.parse::<DomainName>().is_ok() && self.name_listed(host),
        }
    }

    /// Whether a name may lead to `address` now: a public one, or one the list holds.
    /// Installs (the proxy open to any public destination, whatever the list says)
    /// may also reach the documentation ranges: they route nowhere on the
    /// internet, so where a network uses them (a TLS-inspecting gateway answering
    /// every name with 203.0.113.x) they lead out of it, never into the host's own.
    fn reachable(&self, address: IpAddr) -> bool {
        match self.access {
            Access::Closed => false,
            Access::Public => is_public(address) || is_documentation(address),
            Access::Listed => is_public(address) || self.shared.allow.allows_address(address),
        }
    }

    /// Whether the name `name` may be looked up and reached now.
    fn name_listed(&self, name: &str) -> bool {
        match self.access {
            Access::Closed => false,
            Access::Public => true,
            Access::Listed => self.shared.allow.allows_name(name),
        }
    }

    /// Connects to `host:port` if the list allows it.
    async fn open(&self, host: &str, port: u16, via: Via) -> Result<TcpStream, Refusal> {
        if !self.listed(host) {
            return Err(Refusal::Denied(self.shared.denials.deny(
                host,
                Some(port),
                via,
                DenyReason::NotListed,
            )));
        }
        let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(address) => vec![SocketAddr::new(address, port)],
            Err(_) => {
                let found =
                    tokio::time::timeout(CONNECT_DEADLINE, tokio::net::lookup_host((host, port)))
                        .await
                        .map_err(|_| Refusal::Failed(format!("`{host}` did not resolve in time")))?
                        .map_err(|e| Refusal::Failed(format!("`{host}` does not resolve: {e}")))?;
                let found: Vec<SocketAddr> = found.collect();
                let reachable: Vec<SocketAddr> = found
                    .iter()
                    .copied()
                    .filter(|a| self.reachable(a.ip()))
                    .collect();
                if reachable.is_empty() {
                    let mut addresses: Vec<IpAddr> = found.iter().map(SocketAddr::ip).collect();
                    addresses.dedup();
                    return Err(Refusal::Denied(self.shared.denials.deny(
                        host,
                        Some(port),
                        via,
                        DenyReason::PrivateAddress { addresses },
                    )));
                }
                reachable
            }
        };
        let mut last = String::from("no address");
        for address in addresses {
            match tokio::time::timeout(CONNECT_DEADLINE, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    // A request's head and body, or an answer's pieces, are written
                    // as they come: none waits on the last one's acknowledgement.
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = format!("{address}: {e}"),
                Err(_) => last = format!("{address}: no answer in {CONNECT_DEADLINE:?}"),
            }
        }
        Err(Refusal::Failed(format!(
            "cannot connect to {host}:{port} ({last})"
        )))
    }

    /// What sees through TLS to a bound host with `bound`, the secrets the
    /// connection was checked against.
    fn interceptor(&self, bound: Arc<Bound>) -> Interceptor<'_> {
        Interceptor {
            shared: self.shared,
            bound,
        }
    }

    /// The denial, recorded, of a plain HTTP request for `path` on `host:port` that
    /// the request rules refuse; `None` if they let it go.
    fn ruled_out(
        &self,
        request: &http::Request,
        (host, port): (&str, u16),
        path: &str,
    ) -> Option<Denial> {
        let bound = self.shared.secrets();
        self.shared
            .denials
            .rule_out(&bound.rules, request, (host, port), path, Via::Http)
    }

    /// Tells an HTTP client why its request went nowhere.
    async fn refuse(stream: &mut UnixStream, refusal: Refusal) -> Io {
        match refusal {
            Refusal::Denied(denial) => {
                respond(
                    stream,
                    "403 Forbidden",
                    &format!("sandlot: egress to {denial}\n"),
                )
                .await
            }
            Refusal::Failed(why) => {
                respond(stream, "502 Bad Gateway", &format!("sandlot: {why}\n")).await
            }
        }
    }

    pub(super) async fn proxy(&self, mut stream: UnixStream) -> Io {
        let mut buf = Vec::new();
        let Some(request) = request_head(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        let body = buf.split_off(request.length);
        match &request.target {
            Target::Authority { host, port } => {
                let upstream = match self.open(host, *port, Via::Connect).await {
                    Ok(upstream) => upstream,
                    Err(refusal) => return Self::refuse(&mut stream, refusal).await,
                };
                stream
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await?;
                self.tunnel(stream, upstream, body, host, *port).await
            }
            Target::Absolute { host, port, path } => {
                if let Some(denial) = self.ruled_out(&request, (host, *port), path) {
                    return Self::refuse(&mut stream, Refusal::Denied(denial)).await;
                }
                let upstream = match self.open(host, *port, Via::Http).await {
                    Ok(upstream) => upstream,
                    Err(refusal) => return Self::refuse(&mut stream, refusal).await,
                };
                self.forward_request(stream, upstream, &request, (host, *port, path), body)
                    .await
            }
            Target::Origin { .. } => {
                respond(
                    &mut stream,
                    "400 Bad Request",
                    "sandlot: a request to the proxy needs an absolute URL (http://host/path)\n",
                )
                .await
            }
        }
    }

    /// A `CONNECT` tunnel. If the client speaks first, what it says is checked
    /// against the destination it connected to, since a listed front (a CDN) would
    /// otherwise serve any site behind it: a TLS hello must name that destination or
    /// another listed one, and a plain HTTP request's `Host` too; such a request is
    /// relayed alone, like one sent to the proxy.
    async fn tunnel(
        &self,
        mut stream: UnixStream,
        mut upstream: TcpStream,
        mut first: Vec<u8>,
        host: &str,
        port: u16,
    ) -> Io {
        let bound = self.shared.secrets();
        if first.is_empty() {
            let mut from_server = [0u8; 4096];
            tokio::select! {
                more = read_more(&mut stream, &mut first) => {
                    if !more? {
                        return Ok(());
                    }
                }
                // The server speaks first (SSH, SMTP): nothing to check, unless
                // its requests must be read.
                n = upstream.read(&mut from_server), if !bound.rules.governs(host) => {
                    let n = n?;
                    stream.write_all(&from_server[..n]).await?;
                    return splice(stream, upstream, first).await;
                }
            }
        }
        if tls::client_hello(&first) != Hello::NotTls {
            let name = match within(client_hello(&mut stream, &mut first)).await? {
                Hello::Complete(Some(name)) if name != host && !self.listed(&name) => {
                    self.shared.denials.deny(
                        host,
                        Some(port),
                        Via::Tls,
                        DenyReason::ServerNameMismatch { server_name: name },
                    );
                    return Ok(());
                }
                Hello::Complete(name) => name,
                _ => return Ok(()),
            };
            if bound.sees_through(host) {
                // Seen through, the connection must be to the host it names: the
                // secret is put in, and the rules checked, for that host alone.
                if let Some(name) = name.filter(|name| !name.eq_ignore_ascii_case(host)) {
                    self.shared.denials.deny(
                        host,
                        Some(port),
                        Via::Tls,
                        DenyReason::BoundElsewhere { named: name },
                    );
                    return Ok(());
                }
                return intercept(
                    self.interceptor(bound),
                    stream,
                    first,
                    upstream,
                    (host, port),
                )
                .await;
            }
        } else if looks_like_http(&first) {
            let Some(request) = request_head(&mut stream, &mut first).await? else {
                return Ok(());
            };
            let path = match &request.target {
                Target::Origin { path } | Target::Absolute { path, .. } => path.clone(),
                Target::Authority { .. } => return Ok(()),
            };
            match request.host_header() {
                Some(named) if named == host || self.listed(&named) => {}
                named => {
                    let denial = self.shared.denials.deny(
                        host,
                        Some(port),
                        Via::Http,
                        DenyReason::HostMismatch {
                            host_header: named.unwrap_or_default(),
                        },
                    );
                    return Self::refuse(&mut stream, Refusal::Denied(denial)).await;
                }
            }
            if let Some(denial) = self.ruled_out(&request, (host, port), &path) {
                return Self::refuse(&mut stream, Refusal::Denied(denial)).await;
            }
            let body = first.split_off(request.length);
            return self
                .forward_request(stream, upstream, &request, (host, port, &path), body)
                .await;
        } else if bound.rules.governs(host) {
            // What is neither TLS nor HTTP/1 cannot be checked against the rules.
            self.shared.denials.deny(
                host,
                Some(port),
                Via::Connect,
                DenyReason::Request {
                    method: String::new(),
                    path: String::new(),
                    rule: None,
                    unreadable: Some(
                        "request rules confine this host, and the connection speaks \
                         neither HTTP/1 nor TLS, so its requests cannot be checked"
                            .into(),
                    ),
                },
            );
            return Ok(());
        }
        splice(stream, upstream, first).await
    }

    /// A connection to port 80 of a listed name: the `Host` header says which.
    pub(super) async fn transparent_http(&self, mut stream: UnixStream) -> Io {
        let mut buf = Vec::new();
        let Some(request) = request_head(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        let body = buf.split_off(request.length);
        let (host, path) = match &request.target {
            Target::Origin { path } => match request.host_header() {
                Some(host) => (host, path.clone()),
                None => {
                    return respond(
                        &mut stream,
                        "400 Bad Request",
                        "sandlot: a request without one Host header cannot be checked\n",
                    )
                    .await
                }
            },
            Target::Absolute { host, path, .. } => (host.clone(), path.clone()),
            Target::Authority { .. } => {
                return respond(
                    &mut stream,
                    "400 Bad Request",
                    "sandlot: CONNECT goes to the proxy port\n",
                )
                .await
            }
        };
        // Refused before any connection is made: the host learns nothing of it.
        if let Some(denial) = self.ruled_out(&request, (&host, 80), &path) {
            return Self::refuse(&mut stream, Refusal::Denied(denial)).await;
        }
        let upstream = match self.open(&host, 80, Via::Http).await {
            Ok(upstream) => upstream,
            Err(refusal) => return Self::refuse(&mut stream, refusal).await,
        };
        self.forward_request(stream, upstream, &request, (&host, 80, &path), body)
            .await
    }

    /// A connection to port 443 of a listed name: the client hello says which.
    pub(super) async fn transparent_tls(&self, mut stream: UnixStream) -> Io {
        let mut buf = Vec::new();
        let name = match within(client_hello(&mut stream, &mut buf)).await? {
            Hello::Complete(Some(name)) => name,
            Hello::Complete(None) => {
                self.shared.denials.deny(
                    "(no server name)",
                    Some(443),
                    Via::Tls,
                    DenyReason::NoServerName,
                );
                return Ok(());
            }
            _ => return Ok(()),
        };
        let bound = self.shared.secrets();
        match self.open(&name, 443, Via::Tls).await {
            Ok(upstream) if bound.sees_through(&name) => {
                intercept(self.interceptor(bound), stream, buf, upstream, (&name, 443)).await
            }
            Ok(upstream) => splice(stream, upstream, buf).await,
            // A TLS client gets no explanation it could read: the denial is reported.
            Err(_) => Ok(()),
        }
    }

    /// Sends one plain HTTP request to `upstream`, its head rewritten for the server
    /// at `target` (the secrets bound to that host put in where their placeholders
    /// are) and exactly its body after it, then relays the answer (those values
    /// hidden again) until the server is done. Nothing more the client sends reaches
    /// the server: a second request on the connection would not have been checked.
    /// The request rules were checked by the caller, before it opened `upstream` if it could.
    async fn forward_request(
        &self,
        mut stream: UnixStream,
        upstream: TcpStream,
        request: &http::Request,
        (host, port, path): (&str, u16, &str),
        mut body: Vec<u8>,
    ) -> Io {
        let length = match request.body_length() {
            Ok(length) => length,
            Err(why) => {
                return respond(&mut stream, "400 Bad Request", &format!("sandlot: {why}\n")).await
            }
        };
        let bound = self.shared.secrets();
        body.truncate(usize::try_from(length).unwrap_or(usize::MAX));
        let rest = length - body.len() as u64;
        let secrets = &bound.injector;
        let head = if secrets.binds(host) {
            let mut request = request.clone();
            let mut path = path.to_string();
            secrets.inject(host, &mut request, &mut path);
            request.for_server(host, port, &path)
        } else {
            request.for_server(host, port, path)
        };
        let (client_read, mut client_write) = stream.into_split();
        let (mut server_read, mut server_write) = upstream.into_split();
        server_write.write_all(&head).await?;
        server_write.write_all(&body).await?;
        let activity = Activity::new();
        let mut body_rest = client_read.take(rest);
        let up = copy(&mut body_rest, &mut server_write, &activity, false);
        let down = copy_back(&mut server_read, &mut client_write, &activity, secrets);
        let (up, down) = idle_limited(async { tokio::join!(up, down) }, &activity).await?;
        up.and(down)
    }

    pub(super) async fn dns(&self, mut stream: UnixStream) -> Io {
        loop {
            let length = match stream.read_u16().await {
                Ok(length) => usize::from(length),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            };
            let mut message = vec![0; length];
            stream.read_exact(&mut message).await?;
            let reply = match dns::read(&message) {
                Message::Query(query) => {
                    let listed = self.name_listed(&query.name);
                    // A sandbox with no network is refused everything, and nothing
                    // of it is news.
                    if !listed && self.access != Access::Closed {
                        self.shared.denials.deny(
                            &query.name,
                            None,
                            Via::Dns,
                            DenyReason::NotListed,
                        );
                    }
                    dns::answer(&query, listed, SANDBOX_ADDRESS)
                }
                Message::Refuse(reply) => reply,
                // An empty frame: the relay waits for an answer to every message.
                Message::Drop => Vec::new(),
            };
            let length = u16::try_from(reply.len()).unwrap_or(u16::MAX);
            stream.write_u16(length).await?;
            stream.write_all(&reply).await?;
        }
    }
}

/// Whether `address` is in a range set aside for documentation (RFC 5737, RFC 3849).
fn is_documentation(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_documentation(),
        IpAddr::V6(v6) => v6.segments()[..2] == [0x2001, 0x0db8],
    }
}

/// Whether `bytes` start like an HTTP/1 request line: a method in capitals, a space.
fn looks_like_http(bytes: &[u8]) -> bool {
    let method = bytes.iter().take_while(|b| b.is_ascii_uppercase()).count();
    (3..=10).contains(&method) && bytes.get(method) == Some(&b' ')
}
