//! Seeing through TLS against real sockets: an HTTPS server on loopback with a CA of
//! its own, a client that trusts the proxy's CA alone, connections as the agent
//! relays them.

use super::super::Access;
use super::super::EgressProxy;
use super::provider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use sandlot_core::egress::AllowList;
use sandlot_core::secret::{Injector, Secret, UpstreamCa};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

const VALUE: &str = "sk-intercepted-0123456789abcdef";

/// A CA made for the test, and the server configuration of a certificate for
/// `localhost` it signed: the CA's PEM and the configuration.
fn upstream_identity() -> (String, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test upstream CA");
    let ca_certificate = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca_certificate.pem(), Arc::new(config))
}

/// Reads one HTTP/1.1 message (a head with `Content-Length`, and its body) from
/// `stream`; `None` at its end.
async fn message(stream: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let whole = String::from_utf8_lossy(&buf[..end + 4 + length]).into_owned();
            buf.drain(..end + 4 + length);
            return Some(whole);
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// An HTTPS server on loopback that answers every request of a kept-alive
/// connection with the request itself, and keeps each; its port.
async fn echo_server(config: Arc<rustls::ServerConfig>, received: Arc<Mutex<Vec<String>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, received) = (acceptor.clone(), received.clone());
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut buf = Vec::new();
                while let Some(request) = message(&mut stream, &mut buf).await {
                    received.lock().unwrap().push(request.clone());
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{request}",
                        request.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err()
                        || stream.flush().await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A proxy for `localhost` with `TOKEN` bound to it, trusting the test CA for it if
/// `trusted`, and the echo server's configuration and what it receives.
struct Rig {
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    proxy: EgressProxy,
    socket: std::path::PathBuf,
    placeholder: String,
    proxy_ca: String,
    server: Arc<rustls::ServerConfig>,
    received: Arc<Mutex<Vec<String>>>,
}

impl Rig {
    fn new(trusted: bool) -> Rig {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (ca, server) = upstream_identity();
        let upstream = match trusted {
            true => UpstreamCa::from_pem(&ca).unwrap(),
            false => UpstreamCa::default(),
        };
        let socket = dir.path().join("proxy.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let allow =
            AllowList::try_from(vec!["localhost".to_string(), "127.0.0.1/32".to_string()]).unwrap();
        let proxy =
            EgressProxy::serve_with(listener, allow, Access::Listed, runtime.handle()).unwrap();
        let secret = Secret::new("TOKEN", VALUE)
            .unwrap()
            .bound_to("localhost".parse().unwrap())
            .unwrap();
        let secrets = Injector::new(&[secret]).unwrap().trusting(upstream);
        let placeholder = secrets.placeholder("TOKEN").unwrap().to_string();
        proxy.bind_secrets(Arc::new(secrets));
        proxy.write_trust(dir.path()).unwrap();
        let proxy_ca = std::fs::read_to_string(dir.path().join(super::super::CA_FILE)).unwrap();
        let bundle =
            std::fs::read_to_string(dir.path().join(super::super::CA_BUNDLE_FILE)).unwrap();
        assert!(
            bundle.ends_with(&proxy_ca),
            "the bundle ends with the proxy's CA"
        );
        Rig {
            runtime,
            _dir: dir,
            proxy,
            socket,
            placeholder,
            proxy_ca,
            server,
            received: Default::default(),
        }
    }

    /// Runs `test` with the echo server started, given its port.
    fn run<F: std::future::Future>(&self, test: impl FnOnce(u16) -> F) -> F::Output {
        self.runtime.block_on(async {
            let port = echo_server(self.server.clone(), self.received.clone()).await;
            test(port).await
        })
    }

    /// A TLS connection to the echo server at `port` through the proxy.
    async fn connect(&self, port: u16) -> impl AsyncRead + AsyncWrite + Unpin {
        through_proxy(&self.socket, port, &self.proxy_ca).await
    }

    /// What the echo server received so far.
    fn received(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

/// A TLS connection to `localhost:port` through the proxy at `socket`, the client
/// trusting `ca` alone.
async fn through_proxy(
    socket: &std::path::Path,
    port: u16,
    ca: &str,
) -> impl AsyncRead + AsyncWrite + Unpin {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    let connect = format!("proxy\nCONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut established = Vec::new();
    while !established.ends_with(b"\r\n\r\n") {
        established.push(stream.read_u8().await.unwrap());
    }
    assert!(established.starts_with(b"HTTP/1.1 200"));
    let mut roots = rustls::RootCertStore::empty();
    let ca = UpstreamCa::from_pem(ca).unwrap();
    roots.add_parsable_certificates(
        ca.certificates()
            .iter()
            .map(|der| CertificateDer::from(der.clone())),
    );
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), stream)
        .await
        .expect("the client trusts the proxy's CA for the bound host")
}

#[test]
fn a_bound_host_is_seen_through_every_request_of_a_kept_alive_connection() {
    let rig = &Rig::new(true);
    let placeholder = &rig.placeholder;
    rig.run(|port| async move {
        let mut tls = rig.connect(port).await;
        let mut buf = Vec::new();
        for (i, body) in ["", "x=PLACEHOLDER"].iter().enumerate() {
            let body = body.replace("PLACEHOLDER", placeholder);
            let request = format!(
                "POST /{i} HTTP/1.1\r\nHost: localhost:{port}\r\nAuthorization: Bearer \
                 {placeholder}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            tls.write_all(request.as_bytes()).await.unwrap();
            let answer = message(&mut tls, &mut buf).await.unwrap();
            assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
            assert!(!answer.contains(VALUE), "{answer}");
            assert!(
                answer.contains(&format!("Bearer {placeholder}")),
                "{answer}"
            );
        }
        let received = rig.received();
        assert_eq!(
            received.len(),
            2,
            "one connection, two requests: {received:#?}"
        );
        for (i, request) in received.iter().enumerate() {
            assert!(request.starts_with(&format!("POST /{i} ")), "{request}");
            assert!(
                request.contains(&format!("Authorization: Bearer {VALUE}\r\n")),
                "{request}"
            );
        }
        assert!(
            received[1].ends_with(&format!("x={placeholder}")),
            "{}",
            received[1]
        );
    });
}

#[test]
fn a_bound_host_that_does_not_verify_is_sent_nothing() {
    // The proxy trusts the host's roots only: the test CA is not among them.
    let rig = &Rig::new(false);
    let placeholder = &rig.placeholder;
    rig.run(|port| async move {
        let mut tls = rig.connect(port).await;
        let request = format!(
            "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {placeholder}\r\n\r\n"
        );
        // The proxy may answer (and hang up) before the request is read.
        let _ = tls.write_all(request.as_bytes()).await;
        let mut answer = String::new();
        let _ = tls.read_to_string(&mut answer).await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("could not be verified"), "{answer}");
        assert!(rig.received().is_empty());
    });
}

#[test]
fn each_host_gets_its_own_certificate_from_the_one_ca() {
    let authority = super::Authority::new().unwrap();
    let one = authority.server_config("api.example.com").unwrap();
    assert!(Arc::ptr_eq(
        &one,
        &authority.server_config("api.example.com").unwrap()
    ));
    assert!(!Arc::ptr_eq(
        &one,
        &authority.server_config("10.0.0.1").unwrap()
    ));
    assert!(authority.pem().starts_with("-----BEGIN CERTIFICATE-----"));
}

#[test]
fn rules_that_change_end_the_connections_checked_against_the_old_ones() {
    let rig = &Rig::new(true);
    let proxy = &rig.proxy;
    proxy.set_request_rules(["GET localhost/a/**"].try_into().unwrap());
    rig.run(|port| async move {
        let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n");
        let mut buf = Vec::new();
        let mut kept = rig.connect(port).await;
        kept.write_all(get("/a/1").as_bytes()).await.unwrap();
        let answer = message(&mut kept, &mut buf).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        proxy.set_request_rules(["GET localhost/b/**"].try_into().unwrap());
        // The connection the old rules let through is gone, its next request
        // with it.
        let _ = kept.write_all(get("/a/2").as_bytes()).await;
        assert_eq!(message(&mut kept, &mut buf).await, None);
        for (path, status) in [("/b/1", "200"), ("/a/3", "403")] {
            let mut fresh = rig.connect(port).await;
            fresh.write_all(get(path).as_bytes()).await.unwrap();
            let answer = message(&mut fresh, &mut Vec::new()).await.unwrap();
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}")),
                "{path}: {answer}"
            );
        }
        let received: Vec<String> = rig
            .received()
            .iter()
            .map(|r| r.lines().next().unwrap_or_default().to_string())
            .collect();
        assert_eq!(received, ["GET /a/1 HTTP/1.1", "GET /b/1 HTTP/1.1"]);
    });
    assert!(proxy
        .take_denials()
        .iter()
        .any(|d| d.to_string().contains("`GET /a/3`")));
}

#[test]
fn a_large_answer_through_tls_arrives_whole_on_a_kept_alive_connection() {
    let rig = &Rig::new(true);
    rig.run(|port| async move {
        let mut tls = rig.connect(port).await;
        let mut buf = Vec::new();
        // Megabytes each way: more than a socket takes at once, so TLS holds some
        // back at every turn, the last of it too.
        let body = "x".repeat(2 << 20);
        for i in 0..2 {
            let request = format!(
                "POST /{i} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            tls.write_all(request.as_bytes()).await.unwrap();
            tls.flush().await.unwrap();
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(60),
                message(&mut tls, &mut buf),
            )
            .await
            .expect("the whole answer comes, not all but its tail")
            .unwrap();
            assert!(answer.ends_with(&body), "answer {i} is cut short");
        }
    });
    assert_eq!(rig.received().len(), 2);
}
