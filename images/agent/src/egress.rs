//! The sandbox's end of an egress allow-list. The container has no network, only its
//! loopback; on it the agent listens where code looks for a way out, and relays every
//! connection, as it is, to the host's proxy over a Unix socket the host mounted in:
//!
//! - 127.0.0.1:3128, the HTTP proxy `HTTP_PROXY` and `HTTPS_PROXY` name;
//! - 127.0.0.1:80 and :443, where a listed name resolves, for code that ignores the
//!   proxy variables;
//! - 127.0.0.1:53 (UDP), the DNS server `/etc/resolv.conf` names.
//!
//! The relay decides nothing: the host reads each connection and refuses what the
//! list does not hold, so code that replaced the relay would gain nothing.
//!
//! While the sandbox is frozen for an install, one more port relays: the install's
//! HTTP proxy ([`InstallProxy`]), whose connections the host lets out with the
//! install's token.

use sandlot_agent::{InstallProxy, InstallToken};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The environment variable that names the host's socket.
pub(crate) const SOCKET_VARIABLE: &str = "SANDLOT_EGRESS_SOCKET";

/// The relay's sockets, bound and not yet served: binding may need a capability
/// (ports below 1024) that the agent drops before it starts any thread.
pub(crate) struct Relays {
    socket: Arc<PathBuf>,
    streams: Vec<(TcpListener, &'static str)>,
    dns: Option<UdpSocket>,
}

/// Binds the relay to the socket in `SANDLOT_EGRESS_SOCKET`, if it is set. The proxy
/// port must be had; the others are a convenience, and a warning if taken.
pub(crate) fn bind_from_environment() -> io::Result<Option<Relays>> {
    let Some(socket) = std::env::var_os(SOCKET_VARIABLE) else {
        return Ok(None);
    };
    let proxy = TcpListener::bind((Ipv4Addr::LOCALHOST, 3128))
        .map_err(|e| io::Error::new(e.kind(), format!("egress proxy port 3128: {e}")))?;
    let mut streams = vec![(proxy, "proxy")];
    for (port, line) in [(80, "transparent 80"), (443, "transparent 443")] {
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(listener) => streams.push((listener, line)),
            Err(e) => eprintln!("sandlot-agent: egress port {port} not relayed: {e}"),
        }
    }
    let dns = UdpSocket::bind((Ipv4Addr::LOCALHOST, 53))
        .inspect_err(|e| eprintln!("sandlot-agent: DNS not relayed: {e}"))
        .ok();
    Ok(Some(Relays {
        socket: Arc::new(PathBuf::from(socket)),
        streams,
        dns,
    }))
}

impl Relays {
    /// Relays everything that arrives, each listener on a thread of its own.
    pub(crate) fn start(self) -> Egress {
        for (listener, line) in self.streams {
            relay_connections(listener, self.socket.clone(), line);
        }
        if let Some(udp) = self.dns {
            let socket = self.socket.clone();
            std::thread::spawn(move || relay_dns(&udp, &socket));
        }
        Egress {
            socket: self.socket,
            install: None,
        }
    }
}

/// The relays at work, and the install's proxy while an install goes on.
pub(crate) struct Egress {
    socket: Arc<PathBuf>,
    install: Option<InstallRelay>,
}

/// The install's proxy: its listener, and the connections it relays, so that
/// closing it cuts them.
struct InstallRelay {
    listener: Arc<TcpListener>,
    open: Arc<Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    closed: bool,
    next: u64,
    connections: HashMap<u64, TcpStream>,
}

impl Egress {
    /// Opens the install's proxy on a port of its own, with a fresh token. Called
    /// while every other process is stopped: nothing the code did can be waiting on
    /// a port that did not exist before.
    pub(crate) fn open_install(&mut self) -> io::Result<InstallProxy> {
        self.close_install();
        let token = InstallToken::random()?;
        let listener = Arc::new(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?);
        let port = listener.local_addr()?.port();
        let open = Arc::new(Mutex::new(Open::default()));
        let line: Arc<str> = format!("install {}", token.to_hex()).into();
        let (accepting, socket, registry) = (listener.clone(), self.socket.clone(), open.clone());
        std::thread::spawn(move || relay_installs(&accepting, &socket, &line, &registry));
        self.install = Some(InstallRelay { listener, open });
        Ok(InstallProxy { port, token })
    }

    /// Closes the install's proxy: its port takes no more connections and the ones
    /// it relays are cut. Nothing if none is open.
    pub(crate) fn close_install(&mut self) {
        let Some(relay) = self.install.take() else {
            return;
        };
        let mut open = relay.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.closed = true;
        for (_, connection) in open.connections.drain() {
            let _ = connection.shutdown(Shutdown::Both);
        }
        // Shutting a listening socket down wakes its accept with an error and
        // refuses what connects later; its descriptor goes with the thread.
        // SAFETY: shutdown(2) on a descriptor the listener owns.
        unsafe {
            libc::shutdown(relay.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

/// Relays the install's connections, each with the install's line, until the
/// proxy is closed.
fn relay_installs(
    listener: &TcpListener,
    socket: &Arc<PathBuf>,
    line: &Arc<str>,
    open: &Arc<Mutex<Open>>,
) {
    for client in listener.incoming() {
        let mut registry = open.lock().unwrap_or_else(PoisonError::into_inner);
        if registry.closed {
            return;
        }
        let Ok(client) = client else {
            drop(registry);
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let Ok(copy) = client.try_clone() else {
            continue;
        };
        let id = registry.next;
        registry.next += 1;
        registry.connections.insert(id, copy);
        drop(registry);
        let (socket, line, done) = (socket.clone(), line.clone(), open.clone());
        let forget = move |open: &Mutex<Open>| {
            let mut registry = open.lock().unwrap_or_else(PoisonError::into_inner);
            registry.connections.remove(&id);
        };
        let spawned = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let _ = relay(client, &socket, &line);
                forget(&done);
            });
        if spawned.is_err() {
            // The connection went with the closure; so goes its copy.
            forget(open);
        }
    }
}

fn relay_connections(listener: TcpListener, socket: Arc<PathBuf>, line: &'static str) {
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else {
                // Out of descriptors or threads: let the code's connections wait.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let socket = socket.clone();
            // A connection refused for want of a thread is no worse than one refused.
            let _ = std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || relay(client, &socket, line));
        }
    });
}

/// Copies one connection both ways until the host is done with it.
fn relay(client: TcpStream, socket: &Path, line: &str) -> io::Result<()> {
    let mut host = UnixStream::connect(socket)?;
    host.write_all(format!("{line}\n").as_bytes())?;
    let (mut from_client, mut to_host) = (client.try_clone()?, host.try_clone()?);
    let up = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(move || {
            let _ = io::copy(&mut from_client, &mut to_host);
            let _ = to_host.shutdown(Shutdown::Write);
        })?;
    let mut to_client = client;
    let _ = io::copy(&mut host, &mut to_client);
    // The host closed (the server did, or it refused): nothing more goes either way.
    let _ = to_client.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

/// Relays DNS queries, each with its two-byte length as over TCP, on one connection
/// to the host that is made again if it breaks.
fn relay_dns(udp: &UdpSocket, socket: &Path) {
    let mut host: Option<UnixStream> = None;
    let mut query = [0u8; 4096];
    loop {
        let Ok((n, from)) = udp.recv_from(&mut query) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        for _attempt in 0..2 {
            let stream = match host.as_mut() {
                Some(stream) => stream,
                None => match connect_dns(socket) {
                    Ok(stream) => host.insert(stream),
                    Err(_) => break,
                },
            };
            match exchange(stream, &query[..n]) {
                Ok(answer) => {
                    // The host answers nothing (an empty frame) to what is no query.
                    if !answer.is_empty() {
                        let _ = udp.send_to(&answer, from);
                    }
                    break;
                }
                Err(_) => host = None,
            }
        }
    }
}

fn connect_dns(socket: &Path) -> io::Result<UnixStream> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"dns\n")?;
    Ok(stream)
}

fn exchange(stream: &mut UnixStream, query: &[u8]) -> io::Result<Vec<u8>> {
    let length = u16::try_from(query.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut framed = length.to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed)?;
    let mut length = [0u8; 2];
    stream.read_exact(&mut length)?;
    let mut answer = vec![0; usize::from(u16::from_be_bytes(length))];
    stream.read_exact(&mut answer)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn the_install_proxy_relays_with_its_token_until_it_is_closed() {
        let socket =
            std::env::temp_dir().join(format!("sandlot-egress-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let host = UnixListener::bind(&socket).unwrap();
        let mut egress = Egress {
            socket: Arc::new(socket.clone()),
            install: None,
        };
        let first = egress.open_install().unwrap();
        let proxy = egress.open_install().unwrap();
        assert_ne!(
            first.token, proxy.token,
            "every install draws its own token"
        );
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, first.port)).is_err(),
            "the first install's port is closed"
        );

        let mut client = TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port)).unwrap();
        client
            .write_all(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
            .unwrap();
        let (mut relayed, _) = host.accept().unwrap();
        let expected = format!(
            "install {}\nCONNECT pypi.org:443 HTTP/1.1\r\n\r\n",
            proxy.token.to_hex()
        );
        let mut got = vec![0; expected.len()];
        relayed.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), expected);
        let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
        relayed.write_all(established).unwrap();
        let mut answer = vec![0; established.len()];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(answer, established);

        egress.close_install();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rest = Vec::new();
        assert!(
            client.read_to_end(&mut rest).is_ok(),
            "the connection was not cut"
        );
        assert!(rest.is_empty(), "{rest:?}");
        relayed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut upstream = Vec::new();
        relayed.read_to_end(&mut upstream).unwrap();
        assert!(upstream.is_empty(), "{upstream:?}");
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port)).is_err(),
            "a closed install proxy took a connection"
        );
        let _ = std::fs::remove_file(&socket);
    }
}
