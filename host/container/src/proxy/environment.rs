//! What a sandbox is told of its proxy: the variables that send code and installs
//! through it, and where the agent finds the host's socket.

use std::net::Ipv4Addr;

/// The address a listed name resolves to inside the sandbox: its own loopback,
/// where the agent relays ports 80 and 443 here.
pub const SANDBOX_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The port of the HTTP proxy inside the sandbox (`HTTP_PROXY`).
pub const PROXY_PORT: u16 = 3128;

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
