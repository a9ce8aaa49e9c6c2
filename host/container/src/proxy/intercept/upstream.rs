//! The proxy's side towards a bound host: TLS verified against the host's roots
//! (the platform's store, which a TLS-inspecting gateway's CA is in where there is
//! one) and the roots the session added ([`UpstreamCa`]).

use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use sandlot_core::secret::UpstreamCa;
use std::sync::{Arc, OnceLock};

/// The host's roots, read once per process: the platform's store, or the file
/// `SSL_CERT_FILE` names.
fn host_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!("a root certificate of this host was not read: {error}");
        }
        found.certs
    })
}

/// How the proxy connects to a bound host: the host's roots and `extra`, HTTP/1.1.
pub(crate) fn client_config(
    extra: &UpstreamCa,
) -> Result<Arc<ClientConfig>, Box<dyn std::error::Error + Send + Sync>> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(host_roots().iter().cloned());
    let (added, ignored) = roots.add_parsable_certificates(
        extra
            .certificates()
            .iter()
            .map(|der| CertificateDer::from(der.clone())),
    );
    if ignored > 0 {
        return Err(format!(
            "{ignored} of the {} certificates trusted for upstreams is not a CA certificate \
             rustls can use ({added} were)",
            added + ignored
        )
        .into());
    }
    let mut config = ClientConfig::builder_with_provider(super::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The host's roots and `ca`, PEM: the bundle the sandbox's clients verify with. A
/// client that reads one file (OpenSSL's `SSL_CERT_FILE`, Python's `requests`, curl)
/// must find in it every root the sandbox's image trusts (sandlot's images hold the
/// host's bundle) and the proxy's CA.
pub(crate) fn bundle(ca: &str) -> String {
    static HOST: OnceLock<String> = OnceLock::new();
    let host = HOST.get_or_init(|| host_roots().iter().map(|der| pem(der)).collect());
    format!("{host}{ca}")
}

/// One certificate, PEM.
fn pem(der: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}
