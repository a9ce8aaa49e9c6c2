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
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A proxy for `localhost` with `TOKEN` bound to it, trusting `upstream` for it;
/// the proxy, its socket, the placeholder and the proxy's CA (PEM).
fn bound_proxy(
    runtime: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    upstream: UpstreamCa,
) -> (EgressProxy, std::path::PathBuf, String, String) {
    let socket = dir.join("proxy.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let allow =
        AllowList::try_from(vec!["localhost".to_string(), "127.0.0.1/32".to_string()]).unwrap();
    let proxy = EgressProxy::serve_with(listener, allow, Access::Listed, runtime.handle()).unwrap();
    let secret = Secret::new("TOKEN", VALUE)
        .unwrap()
        .bound_to("localhost".parse().unwrap())
        .unwrap();
    let secrets = Injector::new(&[secret]).unwrap().trusting(upstream);
    let placeholder = secrets.placeholder("TOKEN").unwrap().to_string();
    proxy.bind_secrets(Arc::new(secrets));
    proxy.write_trust(dir).unwrap();
    let ca = std::fs::read_to_string(dir.join(super::super::CA_FILE)).unwrap();
    let bundle = std::fs::read_to_string(dir.join(super::super::CA_BUNDLE_FILE)).unwrap();
    assert!(bundle.ends_with(&ca), "the bundle ends with the proxy's CA");
    (proxy, socket, placeholder, ca)
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
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ca, server) = upstream_identity();
    let (_proxy, socket, placeholder, proxy_ca) =
        bound_proxy(&runtime, dir.path(), UpstreamCa::from_pem(&ca).unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    runtime.block_on(async {
        let port = echo_server(server, received.clone()).await;
        let mut tls = through_proxy(&socket, port, &proxy_ca).await;
        let mut buf = Vec::new();
        for (i, body) in ["", "x=PLACEHOLDER"].iter().enumerate() {
            let body = body.replace("PLACEHOLDER", &placeholder);
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
        let received = received.lock().unwrap().clone();
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
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_, server) = upstream_identity();
    // The proxy trusts the host's roots only: the test CA is not among them.
    let (_proxy, socket, placeholder, proxy_ca) =
        bound_proxy(&runtime, dir.path(), UpstreamCa::default());
    let received = Arc::new(Mutex::new(Vec::new()));
    runtime.block_on(async {
        let port = echo_server(server, received.clone()).await;
        let mut tls = through_proxy(&socket, port, &proxy_ca).await;
        let request = format!(
            "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {placeholder}\r\n\r\n"
        );
        // The proxy may answer (and hang up) before the request is read.
        let _ = tls.write_all(request.as_bytes()).await;
        let mut answer = String::new();
        let _ = tls.read_to_string(&mut answer).await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("could not be verified"), "{answer}");
        assert!(received.lock().unwrap().is_empty());
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
