//! Seeing through TLS to a host a secret is bound to or request rules name, and
//! nowhere else: the proxy
//! answers the sandbox's TLS with a certificate its own CA ([`Authority`]) signs
//! for that host, opens TLS to the host itself, verified for real ([`upstream`]),
//! and reads the requests between, one by one ([`exchange`]), to put the secret in.
//! Every other connection is relayed as it comes, its TLS untouched.

mod authority;
mod bound;
mod exchange;
mod rewound;
#[cfg(test)]
mod tests;
mod upstream;

pub(crate) use authority::Authority;
pub(crate) use bound::Bound;
pub(crate) use upstream::bundle;

use super::head::{respond, within, Io};
use super::shared::Shared;
use rewound::Rewound;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use std::sync::{Arc, OnceLock};
use tokio::net::{TcpStream, UnixStream};

/// The one cryptography both sides use (ring, as the rest of sandlot's TLS).
fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// What a proxy sees through TLS with: what its connections share (its CA, the
/// request rules as they are now, where what it refuses is recorded), and the
/// secrets bound when the connection was read.
pub(super) struct Interceptor<'a> {
    pub(super) shared: &'a Shared,
    pub(super) bound: Arc<Bound>,
}

/// Serves a connection the sandbox made to `host:port`, a host a secret is bound
/// to: `first` is what the client sent so far (its hello), `upstream` the
/// connection to the host. A host whose certificate does not verify is sent
/// nothing: the client is answered `502` and told why.
pub(super) async fn intercept(
    Interceptor { shared, bound }: Interceptor<'_>,
    client: UnixStream,
    first: Vec<u8>,
    upstream: TcpStream,
    (host, port): (&str, u16),
) -> Io {
    let leaf = match shared.authority.server_config(host) {
        Ok(leaf) => leaf,
        Err(error) => {
            tracing::warn!("no certificate could be made for {host}: {error}");
            return Ok(());
        }
    };
    let verified = match (bound.upstream(), ServerName::try_from(host.to_string())) {
        (Ok(config), Ok(name)) => {
            within(tokio_rustls::TlsConnector::from(config).connect(name, upstream))
                .await
                .map_err(|e| e.to_string())
        }
        (Err(why), _) => Err(why),
        (_, Err(e)) => Err(e.to_string()),
    };
    let mut client =
        within(tokio_rustls::TlsAcceptor::from(leaf).accept(Rewound::new(first, client))).await?;
    match verified {
        Ok(upstream) => exchange::exchange(shared, client, upstream, (host, port), &bound).await,
        Err(why) => {
            let body = format!(
                "sandlot: {host}:{port} could not be verified, so the secret bound to it was \
                 not sent ({why}); if it uses a CA of its own, trust it for upstreams\n"
            );
            respond(&mut client, "502 Bad Gateway", &body).await
        }
    }
}
