//! What a sandbox is told of its proxy: the variables that send code and installs
//! through it, and where the agent finds the host's socket.

use std::net::Ipv4Addr;

/// The address a listed name resolves to inside the sandbox: its own loopback,
/// where the agent relays ports 80 and 443 here.
pub const SANDBOX_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The port of the HTTP proxy inside the sandbox (`HTTP_PROXY`).
pub const PROXY_PORT: u16 = 3128;

/// The proxy's CA, PEM, in the directory of its socket ([`EgressProxy::write_trust`](super::EgressProxy::write_trust)).
pub const CA_FILE: &str = "ca.pem";

/// The host's roots and the proxy's CA, PEM, beside it.
pub const CA_BUNDLE_FILE: &str = "ca-bundle.pem";

/// The variables that point a TLS client at the bundle of roots it verifies with:
/// OpenSSL's (Python's `ssl`, curl, Ruby, R, PHP) and Go's, Python's `requests` and
/// pip, curl's own, git, and the AWS SDKs.
const BUNDLE_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
];

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
/// reached directly, the agent finds the host's socket (`proxy.sock` in
/// `socket_dir`, as the sandbox sees it) in `SANDLOT_EGRESS_SOCKET`, and TLS
/// clients trust the roots of [`CA_BUNDLE_FILE`] there.
pub fn sandbox_environment(socket_dir: &str) -> Vec<(String, String)> {
    let mut env = proxy_environment(PROXY_PORT);
    for name in BUNDLE_VARIABLES {
        env.push((name.to_string(), format!("{socket_dir}/{CA_BUNDLE_FILE}")));
    }
    // Node adds these to the roots it was built with, rather than replacing them.
    env.push((
        "NODE_EXTRA_CA_CERTS".to_string(),
        format!("{socket_dir}/{CA_FILE}"),
    ));
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
