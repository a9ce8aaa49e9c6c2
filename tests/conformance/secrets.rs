//! Secrets bound to hosts, as every backend with a network keeps them: out of the
//! sandbox, put in by its egress proxy, over plain HTTP and through TLS.

use super::{sandlot, support};
use sandlot::egress::RequestRules;
use sandlot::secret::{Secret, UpstreamCa};
use sandlot::{Network, Policy, Session, SessionBuilder};

/// A secret bound to a host never enters the sandbox: the code's variable holds a
/// placeholder as long as the value, the egress proxy puts the value into the header
/// the binding names in requests to that host only (a placeholder in the query or the
/// body stays one, to that host too), and what the host echoes back
/// reaches the code as the placeholder. The environment, `/proc` and every answer the
/// code can read hold no trace of the value (masking would have shown one as `***`).
/// Backends with no egress proxy of sandlot's refuse the allow-list ([`open_bound`]).
pub(crate) fn bound_secrets_reach_their_host_and_nothing_else(backend: &str) {
    let servers = support::EgressServers::start();
    let value = "sk-bound-0123456789abcdefghij";
    let secret = Secret::new("TOKEN", value)
        .unwrap()
        .bound_to("localhost".parse().unwrap())
        .unwrap();
    let Some(mut session) = open_bound(backend, &secret, None) else {
        return;
    };
    let code = format!(
        r#"import os, urllib.request
os.environ['no_proxy'] = os.environ['NO_PROXY'] = ''
token = os.environ['TOKEN']
def get(host, path, body=None):
    request = urllib.request.Request(
        'http://%s:{echo}%s' % (host, path), data=body,
        headers={{'Authorization': 'Bearer ' + token, 'X-Copy': token}})
    return urllib.request.urlopen(request, timeout=20).read().decode()
bound = get('localhost', '/bound')
unbound = get('127.0.0.1', '/unbound')
# Where the binding does not put it, the placeholder stays one, to the bound host too.
elsewhere = get('localhost', '/query?token=' + token, body=('body=' + token).encode())
seen = bound + unbound + elsewhere + repr(dict(os.environ))
seen += open('/proc/self/environ', 'rb').read().decode('latin-1')
print(len(token), token in bound, token in unbound)
print(token)
print(seen)
"#,
        echo = servers.echo,
    );
    let run = session.run(&code).unwrap();
    let stdout = run.stdout_text();
    assert_eq!(run.exit_code, 0, "{}", run.stderr_text());
    assert!(
        !stdout.contains(value) && !stdout.contains("***"),
        "{stdout}"
    );
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{} True True", value.len()).as_str())
    );
    let placeholder = lines.next().unwrap();
    assert_ne!(placeholder, value);
    let received = servers.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    let elsewhere = &received[2];
    assert!(
        elsewhere.starts_with(&format!("POST /query?token={placeholder} ")),
        "{elsewhere}"
    );
    assert!(
        elsewhere.ends_with(&format!("body={placeholder}")),
        "{elsewhere}"
    );
    assert!(
        elsewhere.contains(&format!("Bearer {value}")),
        "{elsewhere}"
    );
    let (bound, unbound) = (&received[0], &received[1]);
    assert!(bound.starts_with("GET /bound "), "{bound}");
    assert!(
        bound.contains(&format!("Authorization: Bearer {value}")),
        "{bound}"
    );
    assert!(bound.contains(&format!("X-Copy: {placeholder}")), "{bound}");
    assert!(unbound.starts_with("GET /unbound "), "{unbound}");
    assert!(!unbound.contains(value), "{unbound}");
    assert!(
        unbound.contains(&format!("Bearer {placeholder}")),
        "{unbound}"
    );
}

/// A session bound to `localhost` on `backend`, trusting `ca` for its upstreams if
/// given; `None` where the backend has no network to bind it on.
fn open_bound(backend: &str, secret: &Secret, ca: Option<&str>) -> Option<Session> {
    open_listed(backend, RequestRules::none(), ca, |builder| {
        builder.secrets(std::slice::from_ref(secret));
    })
}

/// A session on `backend` that may reach `localhost` and `127.0.0.1` alone, as
/// `requests` allow, trusting `ca` for the hosts the proxy sees through if given,
/// `configure`d further; `None` where the backend has no network to list them on
/// (it refuses an allow-list).
pub(crate) fn open_listed(
    backend: &str,
    requests: RequestRules,
    ca: Option<&str>,
    configure: impl FnOnce(&mut SessionBuilder),
) -> Option<Session> {
    let mut builder = sandlot().session("python");
    builder.backend(backend).policy(Policy {
        network: Network::AllowList,
        allow: "localhost 127.0.0.1/32".parse().unwrap(),
        requests,
        ..Policy::default()
    });
    if let Some(ca) = ca {
        builder.trust_upstream(&UpstreamCa::from_pem(ca).unwrap());
    }
    configure(&mut builder);
    match builder.open() {
        Ok(session) => Some(session),
        Err(error) => {
            assert!(
                backend.starts_with("wasm") || matches!(backend, "docker-tls" | "kubernetes"),
                "{backend}: {error}"
            );
            None
        }
    }
}

/// Python that opens HTTPS connections through the sandbox's proxy (`connect`), the
/// echo server's port being `port`.
fn tls_prelude(port: u16) -> String {
    format!(
        r#"import http.client, os, ssl, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
token = os.environ['TOKEN']
headers = {{'Authorization': 'Bearer ' + token}}
def connect(host, context=None):
    connection = http.client.HTTPSConnection(
        proxy.hostname, proxy.port, timeout=20, context=context or ssl.create_default_context())
    connection.set_tunnel(host, {port})
    return connection
"#
    )
}

/// Over TLS, the proxy sees into a connection to the host a secret is bound to, and
/// into no other: the code's client trusts the proxy's CA (the sandbox is pointed at
/// it), the proxy verifies the host against the CA the session trusts, and every
/// request on the kept-alive connection gets the value where the binding says,
/// while the answer echoed back carries the placeholder. A connection to an unbound
/// host is relayed untouched (the code meets the server's own certificate), and a
/// bound host the proxy cannot verify is sent nothing: the code is told why.
pub(crate) fn bound_secrets_go_through_tls_to_their_host_alone(backend: &str) {
    let servers = support::EgressServers::start();
    let value = "sk-tls-0123456789abcdefghijkl";
    let secret = Secret::new("TOKEN", value)
        .unwrap()
        .bound_to("localhost".parse().unwrap())
        .unwrap();
    let Some(mut session) = open_bound(backend, &secret, Some(&servers.ca)) else {
        return;
    };
    let code = tls_prelude(servers.echo_tls)
        + &r#"
bound = connect('localhost')
bound.request('GET', '/one', headers=headers)
one = bound.getresponse().read().decode()
bound.request('POST', '/two', body='x=' + token, headers=headers)
two = bound.getresponse().read().decode()
issuer = dict(field[0] for field in bound.sock.getpeercert()['issuer'])['commonName']
unverified = ssl.create_default_context()
unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
other = connect('127.0.0.1', unverified)
other.request('GET', '/three', headers=headers)
three = other.getresponse().read().decode()
own = b'sandlot test upstream CA' in other.sock.getpeercert(binary_form=True)
# In the bound host's connection, a request for another host is refused...
elsewhere = connect('localhost')
elsewhere.request('GET', '/host', headers=dict(headers, Host='127.0.0.1'))
host_refused = elsewhere.getresponse().status
# ...and so is a TLS hello naming another server (not on the list either).
import socket
raw = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
raw.sendall(b'CONNECT localhost:%d HTTP/1.1\r\nHost: localhost\r\n\r\n' % {port})
raw.recv(4096)
unchecked = ssl.create_default_context()
unchecked.check_hostname = False
try:
    wrapped = unchecked.wrap_socket(raw, server_hostname='elsewhere.test')
    wrapped.sendall(b'GET /sni HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ' + token.encode() + b'\r\n\r\n')
    sni_refused = wrapped.recv(100) == b''
except (OSError, ssl.SSLError):
    sni_refused = True
# Python's `requests`, as code calls an API: the proxy from the environment, the
# bundle the sandbox is pointed at (`REQUESTS_CA_BUNDLE`).
import requests
os.environ['no_proxy'] = os.environ['NO_PROXY'] = ''
with_requests = requests.post('https://localhost:%d/requests' % {port}, headers=headers,
                              data='y=' + token, timeout=20).text
print(token in one, token in two, token in three, own, host_refused, sni_refused,
      token in with_requests)
print(issuer)
print(token)
print(one + two + three)
"#
        .replace("{port}", &servers.echo_tls.to_string());
    let run = session.run(&code).unwrap();
    let stdout = run.stdout_text();
    assert_eq!(run.exit_code, 0, "{}", run.stderr_text());
    assert!(!stdout.contains(value), "{stdout}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("True True True True 403 True True"),
        "{stdout}"
    );
    assert!(
        lines.next().unwrap().starts_with("sandlot egress proxy"),
        "{stdout}"
    );
    let placeholder = lines.next().unwrap();
    let received = servers.received();
    assert_eq!(received.len(), 4, "{received:#?}");
    assert!(received[0].starts_with("GET /one "), "{received:#?}");
    let with_requests = &received[3];
    assert!(
        with_requests.starts_with("POST /requests ")
            && with_requests.contains(&format!("Authorization: Bearer {value}"))
            && with_requests.ends_with(&format!("y={placeholder}")),
        "{with_requests}"
    );
    assert!(received[1].starts_with("POST /two "), "{received:#?}");
    for kept_alive in &received[..2] {
        assert!(
            kept_alive.contains(&format!("Authorization: Bearer {value}")),
            "{kept_alive}"
        );
    }
    assert!(
        received[1].ends_with(&format!("x={placeholder}")),
        "{}",
        received[1]
    );
    let unbound = &received[2];
    assert!(unbound.starts_with("GET /three "), "{unbound}");
    assert!(
        unbound.contains(&format!("Bearer {placeholder}")) && !unbound.contains(value),
        "{unbound}"
    );
    let denials: Vec<String> = run.egress_denied.iter().map(ToString::to_string).collect();
    assert!(
        denials
            .iter()
            .any(|d| d.contains("secret is bound") && d.contains("`127.0.0.1`")),
        "{denials:#?}"
    );
    assert!(
        denials.iter().any(|d| d.contains("`elsewhere.test`")),
        "{denials:#?}"
    );
    session.close();

    let Some(mut session) = open_bound(backend, &secret, None) else {
        return;
    };
    let code = tls_prelude(servers.echo_tls)
        + r#"
bound = connect('localhost')
bound.request('GET', '/four', headers=headers)
answer = bound.getresponse()
print(answer.status, answer.read().decode())
"#;
    let run = session.run(&code).unwrap();
    let stdout = run.stdout_text();
    assert_eq!(run.exit_code, 0, "{}", run.stderr_text());
    assert!(
        stdout.starts_with("502 ") && stdout.contains("could not be verified"),
        "{stdout}"
    );
    assert_eq!(servers.received().len(), 4, "{:#?}", servers.received());
}
