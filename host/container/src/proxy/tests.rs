//! The proxy against real sockets: an echo server on loopback, connections as the
//! agent relays them.

use super::server::*;
use super::shared::*;
use sandlot_agent::InstallToken;
use sandlot_core::egress::tls::{self};
use sandlot_core::egress::{AllowList, Denial, DenyReason, Via};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::net::UnixStream;

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

/// A bound secret's value, as long as a real API token.
const VALUE: &str = "sk-live-0123456789abcdefghijklmn";

/// A server on loopback that keeps what each connection sent (until the sender has
/// been quiet for half a second) and answers with it; its port.
async fn recorder(received: Arc<std::sync::Mutex<Vec<String>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), stream.read_to_end(&mut got))
                        .await;
                let got = String::from_utf8_lossy(&got).into_owned();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{got}",
                    got.len()
                );
                received.lock().unwrap().push(got);
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

#[test]
fn a_bound_secret_goes_to_its_host_only_and_comes_back_as_its_placeholder() {
    use sandlot_core::secret::{Injector, Secret};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let allow =
        AllowList::try_from(vec!["localhost".to_string(), "127.0.0.1/32".to_string()]).unwrap();
    let proxy = EgressProxy::serve_with(listener, allow, Access::Listed, runtime.handle()).unwrap();
    let secret = Secret::new("TOKEN", VALUE)
        .unwrap()
        .bound_to("localhost".parse().unwrap())
        .unwrap();
    let secrets = Arc::new(Injector::new(&[secret]).unwrap());
    let placeholder = secrets.placeholder("TOKEN").unwrap().to_string();
    proxy.bind_secrets(secrets);
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    runtime.block_on(async {
        let port = recorder(received.clone()).await;
        let ask = |host: &str| {
            format!(
                "GET http://{host}:{port}/user HTTP/1.1\r\nHost: {host}\r\n\
                 Authorization: Bearer {placeholder}\r\nX-Copy: {placeholder}\r\n\r\n"
            )
        };

        // The bound host gets the value, in the header the binding names only; the
        // sandbox sees the server's echo of it as the placeholder.
        let got = exchange(&socket, "proxy", ask("localhost").as_bytes()).await;
        let sent = received.lock().unwrap().pop().unwrap();
        assert!(
            sent.contains(&format!("Authorization: Bearer {VALUE}\r\n")),
            "{sent}"
        );
        assert!(
            sent.contains(&format!("X-Copy: {placeholder}\r\n")),
            "{sent}"
        );
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
        assert!(!got.contains(VALUE), "{got}");
        assert!(
            got.contains(&format!("Authorization: Bearer {placeholder}")),
            "{got}"
        );

        // A host the list allows but the secret is not bound to gets the placeholder.
        let got = exchange(&socket, "proxy", ask("127.0.0.1").as_bytes()).await;
        let sent = received.lock().unwrap().pop().unwrap();
        assert!(!sent.contains(VALUE), "{sent}");
        assert!(sent.contains(&format!("Bearer {placeholder}")), "{sent}");
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");

        // Bound secrets are replaced whole: after a session without any, nothing.
        proxy.bind_secrets(Arc::new(Injector::default()));
        exchange(&socket, "proxy", ask("localhost").as_bytes()).await;
        let sent = received.lock().unwrap().pop().unwrap();
        assert!(!sent.contains(VALUE), "{sent}");
    });
}
