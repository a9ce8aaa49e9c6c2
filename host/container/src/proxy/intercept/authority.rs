//! [`Authority`]: the certificate authority one proxy makes for itself, which its
//! sandbox trusts and no one else does, and the certificates it mints for the hosts
//! whose TLS the proxy opens.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Hosts whose certificate one proxy keeps: a sandbox that reaches more than this
/// many bound hosts mints them again.
const MAX_LEAVES: usize = 256;

/// A CA made when the proxy starts: its key never leaves this process's memory, and
/// goes with the proxy.
pub(crate) struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    certificate: CertificateDer<'static>,
    pem: String,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new CA, its key made now.
    pub(crate) fn new() -> Result<Authority, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            "sandlot egress proxy (one sandbox's own CA)",
        );
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "sandlot");
        let certificate = params.self_signed(&key)?;
        Ok(Authority {
            pem: certificate.pem(),
            certificate: certificate.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate, PEM: what the sandbox is told to trust.
    pub(crate) fn pem(&self) -> &str {
        &self.pem
    }

    /// How the proxy answers a TLS client that connected to `host`: with a
    /// certificate for it signed by this CA, made on first use and kept, offering
    /// HTTP/1.1 (the proxy reads requests one by one).
    pub(crate) fn server_config(
        &self,
        host: &str,
    ) -> Result<Arc<ServerConfig>, Box<dyn std::error::Error + Send + Sync>> {
        if let Some(config) = self.leaves().get(host) {
            return Ok(config.clone());
        }
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = params.signed_by(&key, &self.issuer)?;
        let chain = vec![leaf.der().clone(), self.certificate.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let mut leaves = self.leaves();
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.to_string(), config.clone());
        Ok(config)
    }

    fn leaves(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ServerConfig>>> {
        self.leaves.lock().unwrap_or_else(|e| e.into_inner())
    }
}
