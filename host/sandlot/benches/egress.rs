//! What seeing through TLS to put a bound secret in costs, beside relaying the same
//! HTTPS untouched: the egress proxy of one sandbox in this process, an HTTPS server
//! on loopback with a CA of its own, a client speaking to the proxy's socket as the
//! sandbox's agent relays it (`CONNECT`, then TLS).
//!
//! - a request and its answer on a kept-alive connection (the added latency);
//! - the first request of a new connection, to a host whose certificate the proxy
//!   has minted already, and to a host it has not (a proxy made for each: its CA
//!   made before the clock starts, the leaf minted within);
//! - a 100 MB download.
//!
//! `cargo bench -p sandlot --features docker --bench egress`

// criterion's macros make undocumented items.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use sandlot::container::proxy::{Access, EgressProxy, CA_FILE};
use sandlot::egress::AllowList;
use sandlot::secret::{Injector, Secret, UpstreamCa};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

const VALUE: &str = "sk-bench-0123456789abcdefghij";
const BIG: usize = 100 << 20;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA's PEM, and a server configuration for `localhost` it signed.
fn upstream_identity() -> (String, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca_pem, Arc::new(config))
}

/// Reads one answer (a head with `Content-Length`, then its body) and returns the
/// body's length.
async fn answer(stream: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> usize {
    let mut chunk = vec![0u8; 64 << 10];
    let (end, length) = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().unwrap())
                .unwrap();
            break (end + 4, length);
        }
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the connection ended before an answer");
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut have = buf.len() - end;
    buf.clear();
    while have < length {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the connection ended in a body");
        have += n;
    }
    length
}

/// An HTTPS server on loopback: `GET /big` answers [`BIG`] bytes, anything else two;
/// kept alive. Its port.
async fn server(config: Arc<rustls::ServerConfig>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // As servers do: an answer's head and body, written apart, must not wait
            // on each other's acknowledgement.
            stream.set_nodelay(true).unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let big = buf.starts_with(b"GET /big ");
                    buf.clear();
                    let length = if big { BIG } else { 2 };
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n");
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let block = vec![b'x'; 64 << 10];
                    let mut left = length;
                    while left > 0 {
                        let n = left.min(block.len());
                        if stream.write_all(&block[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                    // What TLS kept back goes out now, not with the next answer.
                    if stream.flush().await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// One sandbox's proxy for `localhost`: with `TOKEN` bound to it (the upstream's CA
/// trusted) if `bound`. The proxy, its socket, the client's TLS configuration (the
/// proxy's CA when bound, else the upstream's) and the placeholder.
struct Proxy {
    _proxy: EgressProxy,
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    client: Arc<rustls::ClientConfig>,
    token: String,
}

impl Proxy {
    fn start(runtime: &tokio::runtime::Handle, upstream_ca: &str, bound: bool) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let allow =
            AllowList::try_from(vec!["localhost".to_string(), "127.0.0.1/32".to_string()]).unwrap();
        let proxy = EgressProxy::serve_with(listener, allow, Access::Listed, runtime).unwrap();
        proxy.write_trust(dir.path()).unwrap();
        let (trusted, token) = if bound {
            let secret = Secret::new("TOKEN", VALUE)
                .unwrap()
                .bound_to("localhost".parse().unwrap())
                .unwrap();
            let secrets = Injector::new(&[secret])
                .unwrap()
                .trusting(UpstreamCa::from_pem(upstream_ca).unwrap());
            let token = secrets.placeholder("TOKEN").unwrap().to_string();
            proxy.bind_secrets(Arc::new(secrets));
            (
                std::fs::read_to_string(dir.path().join(CA_FILE)).unwrap(),
                token,
            )
        } else {
            (upstream_ca.to_string(), VALUE.to_string())
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(
            UpstreamCa::from_pem(&trusted)
                .unwrap()
                .certificates()
                .iter()
                .map(|der| CertificateDer::from(der.clone())),
        );
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Proxy {
            _proxy: proxy,
            _dir: dir,
            socket,
            client: Arc::new(client),
            token,
        }
    }

    /// A TLS connection to `localhost:port` through the proxy.
    async fn connect(&self, port: u16) -> impl AsyncRead + AsyncWrite + Unpin {
        let mut stream = UnixStream::connect(&self.socket).await.unwrap();
        let connect =
            format!("proxy\nCONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        stream.write_all(connect.as_bytes()).await.unwrap();
        let mut established = Vec::new();
        while !established.ends_with(b"\r\n\r\n") {
            established.push(stream.read_u8().await.unwrap());
        }
        tokio_rustls::TlsConnector::from(self.client.clone())
            .connect(ServerName::try_from("localhost").unwrap(), stream)
            .await
            .unwrap()
    }

    /// One request for `path` and its whole answer; the answer's length.
    async fn get(&self, tls: &mut (impl AsyncRead + AsyncWrite + Unpin), path: &str) -> usize {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\r\n",
            self.token
        );
        tls.write_all(request.as_bytes()).await.unwrap();
        tls.flush().await.unwrap();
        answer(tls, &mut Vec::new()).await
    }
}

fn egress(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (ca, config) = upstream_identity();
    let port = runtime.block_on(server(config));
    let mut group = c.benchmark_group("egress https");
    for (name, bound) in [("relayed", false), ("intercepted", true)] {
        let proxy = Proxy::start(runtime.handle(), &ca, bound);
        let mut tls = runtime.block_on(proxy.connect(port));
        group.bench_function(
            format!("{name}: a request on a kept-alive connection"),
            |b| b.iter(|| runtime.block_on(proxy.get(&mut tls, "/small"))),
        );
        group.bench_function(
            format!("{name}: the first request of a new connection"),
            |b| {
                b.iter(|| {
                    runtime.block_on(async {
                        let mut tls = proxy.connect(port).await;
                        proxy.get(&mut tls, "/small").await
                    })
                })
            },
        );
    }
    group.bench_function(
        "intercepted: the first request to a host not seen yet",
        |b| {
            b.iter_custom(|iterations| {
                let mut spent = Duration::ZERO;
                for _ in 0..iterations {
                    let proxy = Proxy::start(runtime.handle(), &ca, true);
                    let start = Instant::now();
                    runtime.block_on(async {
                        let mut tls = proxy.connect(port).await;
                        proxy.get(&mut tls, "/small").await
                    });
                    spent += start.elapsed();
                }
                spent
            })
        },
    );
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(BIG as u64));
    for (name, bound) in [("relayed", false), ("intercepted", true)] {
        let proxy = Proxy::start(runtime.handle(), &ca, bound);
        let mut tls = runtime.block_on(proxy.connect(port));
        group.bench_function(format!("{name}: a 100 MB download"), |b| {
            b.iter(|| assert_eq!(runtime.block_on(proxy.get(&mut tls, "/big")), BIG))
        });
    }
    group.finish();
}

criterion_group!(benches, egress);
criterion_main!(benches);
