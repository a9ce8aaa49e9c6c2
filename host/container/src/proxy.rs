//! The host's end of a sandbox's egress: a Unix socket the sandbox's agent relays
//! every connection and DNS query to. Each starts with one line saying what it is:
//!
//! - `proxy`: an HTTP proxy connection (`CONNECT host:port`, or a plain request for
//!   `http://host/…`), from code that honours `HTTP_PROXY` and `HTTPS_PROXY`;
//! - `transparent 80` or `transparent 443`: a connection code made to a listed name
//!   directly (its DNS answer is the sandbox's loopback), read for its `Host` header
//!   or its TLS server name;
//! - `dns`: DNS queries, framed as over TCP (a two-byte length before each);
//! - `install TOKEN`: an HTTP proxy connection of a library install, which reaches
//!   any public destination while that install's token is admitted
//!   ([`EgressProxy::admit_install`]).
//!
//! The line, like everything else on the socket, comes from the sandbox and is
//! trusted for nothing: whatever a connection claims, it reaches only a listed name
//! or network.

use sandlot_agent::InstallToken;
use sandlot_core::egress::dns::{self, Message};
use sandlot_core::egress::http::{self, Head, Target};
use sandlot_core::egress::tls::{self, Hello};
use sandlot_core::egress::{is_public, AllowList, Denial, DenyReason, DomainName, Via};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// Connections one sandbox may have open through the proxy at once.
const MAX_CONNECTIONS: usize = 64;
/// Connections every sandbox of this process together may have open: each holds two
/// descriptors of the host process.
const MAX_CONNECTIONS_IN_ALL: usize = 1024;

fn permits() -> &'static Arc<tokio::sync::Semaphore> {
    static PERMITS: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS_IN_ALL)))
}
/// Denials kept for one run; a loop that is refused a million times reports the first.
const MAX_DENIALS: usize = 100;
/// How long the sandbox has to say where it wants to go.
const HEAD_DEADLINE: Duration = Duration::from_secs(30);
/// How long a name has to resolve and a server to accept.
const CONNECT_DEADLINE: Duration = Duration::from_secs(15);
/// The address a listed name resolves to inside the sandbox: its own loopback,
/// where the agent relays ports 80 and 443 here.
pub const SANDBOX_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// The port of the HTTP proxy inside the sandbox (`HTTP_PROXY`).
pub const PROXY_PORT: u16 = 3128;

/// What a proxy lets a sandbox's code through to. An engine that cannot give a
/// sandbox a network later (a network namespace is fixed when it is made) sends
/// everything through a proxy instead; its installs go out with a token of their own
/// ([`EgressProxy::admit_install`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Nothing, and nothing recorded as denied: the sandbox simply has no network.
    Closed,
    /// Any public destination: no loopback, private or link-local address, whatever
    /// a name resolves to.
    Public,
    /// What the allow-list holds.
    Listed,
}

/// The variables that name an HTTP proxy, for the code and for installs.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The environment that sends a sandbox's code through its proxy: the proxy
/// variables name the agent's relay, a server the code runs in its own sandbox is
/// reached directly, and the agent finds the host's socket (`proxy.sock` in
/// `socket_dir`, as the sandbox sees it) in `SANDLOT_EGRESS_SOCKET`.
pub fn sandbox_environment(socket_dir: &str) -> Vec<(String, String)> {
    let mut env = proxy_environment(PROXY_PORT);
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.to_string(), "localhost,127.0.0.1,::1".to_string()));
    }
    env.push((
        "SANDLOT_EGRESS_SOCKET".to_string(),
        format!("{socket_dir}/proxy.sock"),
    ));
    env
}

/// The proxy variables that send an install through the agent's install proxy
/// ([`sandlot_agent::InstallProxy`]) on `port` of the sandbox's loopback.
pub fn proxy_environment(port: u16) -> Vec<(String, String)> {
    let proxy = format!("http://{SANDBOX_ADDRESS}:{port}");
    PROXY_VARIABLES
        .iter()
        .map(|name| (name.to_string(), proxy.clone()))
        .collect()
}

/// A running egress proxy for one sandbox. Dropping it closes every connection it
/// relays.
pub struct EgressProxy {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    allow: AllowList,
    denials: Mutex<Vec<Denial>>,
    /// What the code's connections may reach.
    access: Access,
    /// The token of the install under way, if one is: its connections reach any
    /// public destination, and end when it changes.
    install: tokio::sync::watch::Sender<Option<InstallToken>>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("allow", &self.shared.allow)
            .field("access", &self.shared.access)
            .finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Serves the connections that arrive on `listener`, on `runtime`, letting
    /// through only what `allow` lists.
    pub fn serve(
        listener: std::os::unix::net::UnixListener,
        allow: AllowList,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<EgressProxy> {
        EgressProxy::serve_with(listener, allow, Access::Listed, runtime)
    }

    /// Serves the connections that arrive on `listener`, on `runtime`, letting the
    /// code's through to what `access` says; `allow` is what [`Access::Listed`]
    /// lets through.
    pub fn serve_with(
        listener: std::os::unix::net::UnixListener,
        allow: AllowList,
        access: Access,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<EgressProxy> {
        listener.set_nonblocking(true)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::UnixListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            allow,
            denials: Mutex::new(Vec::new()),
            access,
            install: tokio::sync::watch::Sender::new(None),
        });
        let task = runtime.spawn(accept(listener, shared.clone()));
        Ok(EgressProxy { shared, task })
    }

    /// From now on, lets connections that present `token` (the agent's install
    /// proxy, [`sandlot_agent::InstallProxy`]) through to any public destination,
    /// whatever the code may reach; `None` when the install is over. Either way the
    /// connections of the install before end: what an install opened does not
    /// outlive it, and its token opens nothing after it.
    pub fn admit_install(&self, token: Option<InstallToken>) {
        self.shared.install.send_replace(token);
    }

    /// [`EgressProxy::admit_install`] on a sandbox's proxy, for an engine's
    /// [`SandboxHandle::admit_install`](crate::SandboxHandle::admit_install): an
    /// agent that offered an install proxy where no egress proxy listens is an error
    /// (the sandbox is lost if the install cannot be ended).
    pub fn admit_install_on(
        proxy: Option<&EgressProxy>,
        token: Option<InstallToken>,
    ) -> sandlot_core::error::Result<()> {
        match proxy {
            Some(proxy) => {
                proxy.admit_install(token);
                Ok(())
            }
            None => Err(sandlot_core::error::Error::Agent {
                reason: "the agent offered an install proxy to a sandbox without an egress proxy"
                    .into(),
            }),
        }
    }

    /// What was refused since the last call, in the order it happened, each once.
    pub fn take_denials(&self) -> Vec<Denial> {
        std::mem::take(
            &mut *self
                .shared
                .denials
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        // The accept task owns every connection's task: aborting it ends them all.
        self.task.abort();
    }
}

async fn accept(listener: tokio::net::UnixListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    let mut install = shared.install.subscribe();
    loop {
        tokio::select! {
            // An install admitted is seen before its first connection is accepted.
            biased;
            // The code, stopped for the install, may have left connections that
            // hold the sandbox's slots (a first line never finished): they give
            // way to the install's.
            Ok(()) = install.changed() => {
                if install.borrow_and_update().is_some() {
                    connections.abort_all();
                }
            }
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => {
                match accepted {
                    Ok((stream, _)) => {
                        // Over the process's limit, the connection is refused at once.
                        let Ok(permit) = permits().clone().try_acquire_owned() else {
                            continue;
                        };
                        let shared = shared.clone();
                        connections.spawn(async move {
                            let _permit = permit;
                            if let Err(e) = serve(stream, &shared).await {
                                tracing::debug!("egress connection ended: {e}");
                            }
                        });
                    }
                    // Out of descriptors, say: wait rather than spin.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

type Io = std::io::Result<()>;

async fn serve(mut stream: UnixStream, shared: &Shared) -> Io {
    let line = tokio::time::timeout(HEAD_DEADLINE, read_line(&mut stream))
        .await
        .map_err(|_| timed_out())??;
    if let Some(presented) = line.strip_prefix("install ") {
        return serve_install(stream, shared, presented).await;
    }
    if shared.access == Access::Closed {
        // Code that asks the proxy is told why, and a lookup fails at once (rather
        // than when the resolver gives up); anything else just finds no way out.
        match line.as_str() {
            "proxy" => {
                respond(
                    &mut stream,
                    "403 Forbidden",
                    "sandlot: this sandbox has no network (only its library installs go out)\n",
                )
                .await?
            }
            "dns" => {
                let connection = Connection {
                    shared,
                    access: Access::Closed,
                };
                connection.dns(stream).await?
            }
            _ => {}
        }
        return Ok(());
    }
    let connection = Connection {
        shared,
        access: shared.access,
    };
    match line.as_str() {
        "proxy" => connection.proxy(stream).await,
        "transparent 80" => connection.transparent_http(stream).await,
        "transparent 443" => connection.transparent_tls(stream).await,
        "dns" => connection.dns(stream).await,
        _ => Ok(()),
    }
}

/// A connection of the agent's install proxy: a proxy connection to any public
/// destination if it presents the token of the install under way, until that
/// install is over; refused like the code's otherwise.
async fn serve_install(mut stream: UnixStream, shared: &Shared, presented: &str) -> Io {
    let mut install = shared.install.subscribe();
    let admitted = match (
        *install.borrow_and_update(),
        InstallToken::from_hex(presented),
    ) {
        (Some(current), Some(presented)) => current.matches(&presented),
        _ => false,
    };
    if !admitted {
        return respond(
            &mut stream,
            "403 Forbidden",
            "sandlot: no library install of this sandbox is under way\n",
        )
        .await;
    }
    let connection = Connection {
        shared,
        access: Access::Public,
    };
    tokio::select! {
        served = connection.proxy(stream) => served,
        // Any change ends the install this connection belonged to.
        _ = install.changed() => Ok(()),
    }
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "the sandbox said nothing")
}

/// One line of at most 64 bytes, read a byte at a time so nothing after it is taken.
async fn read_line(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    while line.len() < 64 {
        match stream.read_u8().await? {
            b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            byte => line.push(byte),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "no header line",
    ))
}

/// Reads more of the connection into `buf`; `false` at its end.
async fn read_more(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let n = tokio::time::timeout(HEAD_DEADLINE, stream.read(&mut chunk))
        .await
        .map_err(|_| timed_out())??;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Reads until a whole request head is in `buf`; `None` if the sandbox hung up or
/// sent no valid head (it was told why).
async fn request_head(
    stream: &mut UnixStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<http::Request>> {
    within(request_head_unbounded(stream, buf)).await
}

async fn request_head_unbounded(
    stream: &mut UnixStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<http::Request>> {
    loop {
        match http::read_head(buf) {
            Head::Request(request) => return Ok(Some(request)),
            Head::Invalid(why) => {
                respond(stream, "400 Bad Request", &format!("sandlot: {why}\n")).await?;
                return Ok(None);
            }
            Head::Incomplete => {
                if !read_more(stream, buf).await? {
                    return Ok(None);
                }
            }
        }
    }
}

/// Reads until the client hello at the start of `buf` is whole, or is not one.
async fn client_hello(stream: &mut UnixStream, buf: &mut Vec<u8>) -> std::io::Result<Hello> {
    loop {
        match tls::client_hello(buf) {
            Hello::Incomplete => {
                if !read_more(stream, buf).await? {
                    return Ok(Hello::Malformed);
                }
            }
            other => return Ok(other),
        }
    }
}

async fn respond(stream: &mut UnixStream, status: &str, body: &str) -> Io {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Why a destination was not reached.
enum Refusal {
    /// The allow-list refused it.
    Denied(Denial),
    /// It is allowed but did not answer.
    Failed(String),
}

impl Shared {
    fn deny(&self, host: &str, port: Option<u16>, via: Via, reason: DenyReason) -> Denial {
        let denial = Denial::new(host, port, via, reason);
        let mut denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
            denials.push(denial.clone());
        }
        denial
    }
}

/// One connection's view of the proxy: what it may reach is the proxy's [`Access`],
/// or the public internet for an install's connection.
struct Connection<'a> {
    shared: &'a Shared,
    access: Access,
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
            return Err(Refusal::Denied(self.shared.deny(
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
                    return Err(Refusal::Denied(self.shared.deny(
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
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = format!("{address}: {e}"),
                Err(_) => last = format!("{address}: no answer in {CONNECT_DEADLINE:?}"),
            }
        }
        Err(Refusal::Failed(format!(
            "cannot connect to {host}:{port} ({last})"
        )))
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

    async fn proxy(&self, mut stream: UnixStream) -> Io {
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
                let upstream = match self.open(host, *port, Via::Http).await {
                    Ok(upstream) => upstream,
                    Err(refusal) => return Self::refuse(&mut stream, refusal).await,
                };
                forward_request(stream, upstream, &request, (host, *port, path), body).await
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
        if first.is_empty() {
            let mut from_server = [0u8; 4096];
            tokio::select! {
                more = read_more(&mut stream, &mut first) => {
                    if !more? {
                        return Ok(());
                    }
                }
                // The server speaks first (SSH, SMTP): nothing to check.
                n = upstream.read(&mut from_server) => {
                    let n = n?;
                    stream.write_all(&from_server[..n]).await?;
                    return splice(stream, upstream, first).await;
                }
            }
        }
        if tls::client_hello(&first) != Hello::NotTls {
            match within(client_hello(&mut stream, &mut first)).await? {
                Hello::Complete(Some(name)) if name != host && !self.listed(&name) => {
                    self.shared.deny(
                        host,
                        Some(port),
                        Via::Tls,
                        DenyReason::ServerNameMismatch { server_name: name },
                    );
                    return Ok(());
                }
                Hello::Complete(_) => {}
                _ => return Ok(()),
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
                    let denial = self.shared.deny(
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
            let body = first.split_off(request.length);
            return forward_request(stream, upstream, &request, (host, port, &path), body).await;
        }
        splice(stream, upstream, first).await
    }

    /// A connection to port 80 of a listed name: the `Host` header says which.
    async fn transparent_http(&self, mut stream: UnixStream) -> Io {
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
        let upstream = match self.open(&host, 80, Via::Http).await {
            Ok(upstream) => upstream,
            Err(refusal) => return Self::refuse(&mut stream, refusal).await,
        };
        forward_request(stream, upstream, &request, (&host, 80, &path), body).await
    }

    /// A connection to port 443 of a listed name: the client hello says which.
    async fn transparent_tls(&self, mut stream: UnixStream) -> Io {
        let mut buf = Vec::new();
        let name = match within(client_hello(&mut stream, &mut buf)).await? {
            Hello::Complete(Some(name)) => name,
            Hello::Complete(None) => {
                self.shared.deny(
                    "(no server name)",
                    Some(443),
                    Via::Tls,
                    DenyReason::NoServerName,
                );
                return Ok(());
            }
            _ => return Ok(()),
        };
        match self.open(&name, 443, Via::Tls).await {
            Ok(upstream) => splice(stream, upstream, buf).await,
            // A TLS client gets no explanation it could read: the denial is reported.
            Err(_) => Ok(()),
        }
    }

    async fn dns(&self, mut stream: UnixStream) -> Io {
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
                        self.shared
                            .deny(&query.name, None, Via::Dns, DenyReason::NotListed);
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

/// Sends one plain HTTP request to `upstream`, its head rewritten for the server at
/// `target` and exactly its body after it, then relays the answer until the server
/// is done. Nothing more the client sends reaches the server: a second request on
/// the connection would not have been checked.
async fn forward_request(
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
    body.truncate(usize::try_from(length).unwrap_or(usize::MAX));
    let rest = length - body.len() as u64;
    let (client_read, mut client_write) = stream.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    server_write
        .write_all(&request.for_server(host, port, path))
        .await?;
    server_write.write_all(&body).await?;
    let activity = Activity::new();
    let mut body_rest = client_read.take(rest);
    let up = copy(&mut body_rest, &mut server_write, &activity, false);
    let down = copy(&mut server_read, &mut client_write, &activity, true);
    let (up, down) = idle_limited(async { tokio::join!(up, down) }, &activity).await?;
    up.and(down)
}

/// Relays both ways until both sides are done, `first` sent to the server before,
/// or until neither side said anything for [`IDLE`].
async fn splice(client: UnixStream, upstream: TcpStream, first: Vec<u8>) -> Io {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    server_write.write_all(&first).await?;
    let activity = Activity::new();
    let up = copy(&mut client_read, &mut server_write, &activity, true);
    let down = copy(&mut server_read, &mut client_write, &activity, true);
    let (up, down) = idle_limited(async { tokio::join!(up, down) }, &activity).await?;
    up.and(down)
}

/// How long a relayed connection may carry nothing either way.
const IDLE: Duration = Duration::from_secs(600);

/// When a relayed connection last carried a byte.
struct Activity {
    start: tokio::time::Instant,
    last: std::sync::atomic::AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: tokio::time::Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(std::sync::atomic::Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Runs `relay` until it ends or its connection has been idle for [`IDLE`].
async fn idle_limited<T>(
    relay: impl std::future::Future<Output = T>,
    activity: &Activity,
) -> std::io::Result<T> {
    tokio::pin!(relay);
    loop {
        tokio::select! {
            done = &mut relay => return Ok(done),
            () = tokio::time::sleep(IDLE / 10) => {
                if activity.idle() >= IDLE {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle"));
                }
            }
        }
    }
}

/// Copies until `from` ends, marking each chunk as activity; then shuts `to` down
/// for writing if `close`.
async fn copy(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    activity: &Activity,
    close: bool,
) -> Io {
    let mut buf = vec![0u8; 16 * 1024];
    let copied = loop {
        match from.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => {
                activity.touch();
                if let Err(e) = to.write_all(&buf[..n]).await {
                    break Err(e);
                }
            }
            Err(e) => break Err(e),
        }
    };
    if close {
        let _ = to.shutdown().await;
    }
    copied
}

/// Reads a head or a hello, as a whole within [`HEAD_DEADLINE`] (not only each read
/// of it: a byte every few seconds would hold a connection open for ever).
async fn within<T>(
    reading: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(HEAD_DEADLINE, reading)
        .await
        .map_err(|_| timed_out())?
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Serves a proxy for `allow` and an echo server on loopback (it answers each
    /// connection with `echo:` and everything it read, once the client is done
    /// sending), runs `test` with the proxy's socket and the server's port, and
    /// returns what the proxy refused.
    fn with_proxy<F>(allow: &[&str], test: impl FnOnce(std::path::PathBuf, u16) -> F) -> Vec<Denial>
    where
        F: std::future::Future<Output = ()>,
    {
        with_switched_proxy(allow, Access::Listed, |socket, port, _| test(socket, port))
    }

    /// [`with_proxy`], starting with `access`; `test` may switch it.
    fn with_switched_proxy<F>(
        allow: &[&str],
        access: Access,
        test: impl FnOnce(std::path::PathBuf, u16, Arc<EgressProxy>) -> F,
    ) -> Vec<Denial>
    where
        F: std::future::Future<Output = ()>,
    {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let allow =
            AllowList::try_from(allow.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let proxy =
            Arc::new(EgressProxy::serve_with(listener, allow, access, runtime.handle()).unwrap());
        let handle = proxy.clone();
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        let _ = tokio::time::timeout(
                            Duration::from_millis(500),
                            stream.read_to_end(&mut got),
                        )
                        .await;
                        let _ = stream.write_all(b"echo:").await;
                        let _ = stream.write_all(&got).await;
                    });
                }
            });
            test(socket, port, handle).await;
        });
        proxy.take_denials()
    }

    /// Sends `line` and `send` on a connection to the proxy, then reads all it says.
    async fn exchange(socket: &std::path::Path, line: &str, send: &[u8]) -> String {
        let mut stream = UnixStream::connect(socket).await.unwrap();
        stream
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        // A refusing proxy may hang up before the rest arrives (a broken pipe
        // here): what it said is what counts.
        let _ = stream.write_all(send).await;
        let _ = stream.shutdown().await;
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got)).await;
        String::from_utf8_lossy(&got).into_owned()
    }

    #[test]
    fn a_closed_proxy_refuses_everything_and_records_nothing() {
        let denials = with_switched_proxy(
            &["localhost", "127.0.0.1/32"],
            Access::Closed,
            |socket, port, _| async move {
                let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\nhello");
                let got = exchange(&socket, "proxy", request.as_bytes()).await;
                assert!(got.starts_with("HTTP/1.1 403"), "{got}");
                assert!(got.contains("no network"), "{got}");
                assert_eq!(
                    exchange(
                        &socket,
                        "transparent 80",
                        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    )
                    .await,
                    ""
                );
                // A lookup is answered at once: no such name.
                let mut stream = UnixStream::connect(&socket).await.unwrap();
                stream.write_all(b"dns\n").await.unwrap();
                stream.write_all(&dns_query("localhost")).await.unwrap();
                let mut length = [0u8; 2];
                tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut length))
                    .await
                    .expect("a lookup waited for an answer")
                    .unwrap();
                let mut answer = vec![0; usize::from(u16::from_be_bytes(length))];
                stream.read_exact(&mut answer).await.unwrap();
                assert_eq!(answer[3] & 0xf, 3, "{answer:?}");
            },
        );
        assert_eq!(denials, []);
    }

    #[test]
    fn an_install_goes_out_with_its_own_token_only_while_it_is_admitted() {
        let denials = with_switched_proxy(
            &["localhost", "127.0.0.1/32"],
            Access::Closed,
            |socket, port, proxy| async move {
                let token = InstallToken::random().unwrap();
                let install = format!("install {}", token.to_hex());
                let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
                let no_install = |got: &str| {
                    assert!(got.starts_with("HTTP/1.1 403"), "{got}");
                    assert!(got.contains("no library install"), "{got}");
                };
                no_install(&exchange(&socket, &install, request.as_bytes()).await);

                // Connections the code left half-said hold every slot of the
                // sandbox; they give way to the install.
                let mut held = Vec::new();
                for _ in 0..MAX_CONNECTIONS {
                    let mut stream = UnixStream::connect(&socket).await.unwrap();
                    stream.write_all(b"prox").await.unwrap();
                    held.push(stream);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                proxy.admit_install(Some(token));
                // Another token, or none that reads, is no install's.
                let other = format!("install {}", InstallToken::random().unwrap().to_hex());
                no_install(&exchange(&socket, &other, request.as_bytes()).await);
                no_install(&exchange(&socket, "install x", request.as_bytes()).await);
                // The code's own way out stays closed while the install's is open.
                let got = exchange(&socket, "proxy", request.as_bytes()).await;
                assert!(got.contains("no network"), "{got}");
                // The install reaches public destinations: loopback is not one, listed
                // or not, so this one is refused for its address.
                let got = exchange(&socket, &install, request.as_bytes()).await;
                assert!(got.starts_with("HTTP/1.1 403"), "{got}");
                assert!(got.contains("127.0.0.1"), "{got}");

                // An install's connection ends with the install, mid-request or not.
                let mut open = UnixStream::connect(&socket).await.unwrap();
                open.write_all(format!("{install}\nCONNECT ").as_bytes())
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                proxy.admit_install(None);
                let mut rest = Vec::new();
                let ended =
                    tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut rest)).await;
                assert!(ended.is_ok(), "the install's connection outlived it");
                assert_eq!(rest, b"");
                no_install(&exchange(&socket, &install, request.as_bytes()).await);

                // The next install's token is not the last one's.
                proxy.admit_install(Some(InstallToken::random().unwrap()));
                no_install(&exchange(&socket, &install, request.as_bytes()).await);
            },
        );
        let reasons: Vec<_> = denials.iter().map(|d| d.reason.clone()).collect();
        assert!(
            matches!(reasons[..], [DenyReason::PrivateAddress { .. }]),
            "{denials:?}"
        );
    }

    #[test]
    fn a_public_proxy_reaches_any_public_name_and_no_private_address() {
        let denials = with_switched_proxy(
            &["localhost", "127.0.0.1/32"],
            Access::Public,
            |socket, port, _| async move {
                // Listed or not, loopback is not public.
                let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
                let got = exchange(&socket, "proxy", request.as_bytes()).await;
                assert!(got.starts_with("HTTP/1.1 403"), "{got}");
                let request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
                let got = exchange(&socket, "proxy", request.as_bytes()).await;
                assert!(got.starts_with("HTTP/1.1 403"), "{got}");
            },
        );
        let reasons: Vec<_> = denials.iter().map(|d| d.reason.clone()).collect();
        assert!(
            matches!(
                reasons[..],
                [DenyReason::PrivateAddress { .. }, DenyReason::NotListed]
            ),
            "{denials:?}"
        );
    }

    #[test]
    fn connect_reaches_listed_destinations_only() {
        let denials = with_proxy(&["localhost", "127.0.0.1/32"], |socket, port| async move {
            let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\nhello");
            let got = exchange(&socket, "proxy", request.as_bytes()).await;
            assert!(got.starts_with("HTTP/1.1 200"), "{got}");
            assert!(got.ends_with("echo:hello"), "{got}");
            let request = format!("CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n");
            let got = exchange(&socket, "proxy", request.as_bytes()).await;
            assert!(got.starts_with("HTTP/1.1 403"), "{got}");
            let got = exchange(&socket, "proxy", b"CONNECT 127.1:80 HTTP/1.1\r\n\r\n").await;
            assert!(
                got.starts_with("HTTP/1.1 403"),
                "a name a resolver reads as 127.0.0.1: {got}"
            );
        });
        let hosts: Vec<_> = denials.iter().map(|d| (d.host.as_str(), d.via)).collect();
        assert_eq!(
            hosts,
            [("127.0.0.2", Via::Connect), ("127.1", Via::Connect)]
        );
    }

    #[test]
    fn a_listed_name_that_leads_to_a_private_address_needs_its_network() {
        let denials = with_proxy(&["localhost"], |socket, port| async move {
            let request = format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n");
            let got = exchange(&socket, "proxy", request.as_bytes()).await;
            assert!(got.starts_with("HTTP/1.1 403"), "{got}");
            assert!(got.contains("127.0.0.1"), "{got}");
        });
        assert!(matches!(
            &denials[0].reason,
            DenyReason::PrivateAddress { addresses } if addresses.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST))
        ));
    }

    #[test]
    fn plain_requests_reach_the_server_alone_and_in_origin_form() {
        with_proxy(&["localhost", "127.0.0.0/8"], |socket, port| async move {
            // A body of 4 bytes, then a second request that must not follow it.
            let request = format!(
                "POST http://localhost:{port}/p HTTP/1.1\r\nHost: evil.net\r\nContent-Length: 4\r\n\r\n\
                 bodyGET http://evil.net/ HTTP/1.1\r\nHost: evil.net\r\n\r\n"
            );
            let got = exchange(&socket, "proxy", request.as_bytes()).await;
            assert_eq!(
                got,
                format!(
                    "echo:POST /p HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: 4\r\n\
                     Connection: close\r\n\r\nbody"
                )
            );
            let chunked = format!(
                "POST http://localhost:{port}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            );
            let got = exchange(&socket, "proxy", chunked.as_bytes()).await;
            assert!(got.starts_with("HTTP/1.1 400"), "{got}");
        });
    }

    #[test]
    fn a_tunnel_to_a_listed_front_cannot_ask_for_another_server() {
        let denials = with_proxy(&["localhost", "127.0.0.1/32"], |socket, port| async move {
            let connect = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
            let mut request = connect.clone().into_bytes();
            request.extend(tls::sample_hello(Some("evil.net")));
            let got = exchange(&socket, "proxy", &request).await;
            assert_eq!(got, "HTTP/1.1 200 Connection established\r\n\r\n");

            let mut request = connect.clone().into_bytes();
            request.extend(tls::sample_hello(Some("localhost")));
            let got = exchange(&socket, "proxy", &request).await;
            assert!(got.contains("echo:"), "the hello went through: {got}");

            let request = format!("{connect}GET / HTTP/1.1\r\nHost: evil.net\r\n\r\n");
            let got = exchange(&socket, "proxy", request.as_bytes()).await;
            assert!(got.contains("HTTP/1.1 403"), "{got}");
            assert!(!got.contains("echo:"), "{got}");
        });
        let reasons: Vec<_> = denials.iter().map(|d| d.reason.clone()).collect();
        assert_eq!(
            reasons,
            [
                DenyReason::ServerNameMismatch {
                    server_name: "evil.net".into()
                },
                DenyReason::HostMismatch {
                    host_header: "evil.net".into()
                }
            ]
        );
    }

    /// A query for `name`'s A record, framed as the relay sends it.
    fn dns_query(name: &str) -> Vec<u8> {
        let mut q = vec![0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend(label.as_bytes());
        }
        q.extend([0, 0, 1, 0, 1]);
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend(q);
        framed
    }

    #[test]
    fn dns_answers_listed_names_only() {
        let denials = with_proxy(&["pypi.org"], |socket, _| async move {
            let mut both = dns_query("pypi.org");
            both.extend(dns_query("evil.net"));
            let mut stream = UnixStream::connect(&socket).await.unwrap();
            stream.write_all(b"dns\n").await.unwrap();
            stream.write_all(&both).await.unwrap();
            stream.shutdown().await.unwrap();
            let mut got = Vec::new();
            stream.read_to_end(&mut got).await.unwrap();
            let first = usize::from(u16::from_be_bytes([got[0], got[1]]));
            let allowed = &got[2..2 + first];
            assert_eq!(allowed[3] & 0xf, 0);
            assert!(allowed.ends_with(&[127, 0, 0, 1]));
            let denied = &got[4 + first..];
            assert_eq!(denied[3] & 0xf, 3);
        });
        let hosts: Vec<_> = denials.iter().map(|d| (d.host.as_str(), d.via)).collect();
        assert_eq!(hosts, [("evil.net", Via::Dns)]);
    }
}
