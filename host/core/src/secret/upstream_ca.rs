//! [`UpstreamCa`]: a certificate authority the egress proxy trusts, beside the
//! host's own roots, when it sees through TLS to a host a secret is bound to.

use crate::error::{Error, Result};
use base64::Engine as _;
use std::fmt;

/// Certificates (DER) the egress proxy trusts as roots for the upstreams whose TLS it
/// opens to put a bound secret in ([`super::Injector`]), besides the host's: the CA
/// of an internal API, or of a test server. A server whose certificate chains to
/// neither is not sent the secret: the request is answered `502` by the proxy.
///
/// ```
/// use sandlot_core::secret::UpstreamCa;
/// let error = UpstreamCa::from_pem("not a certificate").unwrap_err();
/// assert!(error.to_string().contains("BEGIN CERTIFICATE"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamCa {
    certificates: Vec<Vec<u8>>,
}

impl fmt::Debug for UpstreamCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UpstreamCa({} certificates)", self.certificates.len())
    }
}

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

impl UpstreamCa {
    /// Every certificate of a PEM bundle; one at least, each whole and in base64,
    /// or [`Error::InvalidSecret`] says what is wrong with it.
    pub fn from_pem(pem: &str) -> Result<UpstreamCa> {
        let invalid = |reason: String| Error::InvalidSecret {
            name: "(upstream CA)".into(),
            reason,
        };
        let mut certificates = Vec::new();
        let mut rest = pem;
        while let Some(start) = rest.find(BEGIN) {
            let body = &rest[start + BEGIN.len()..];
            let end = body.find(END).ok_or_else(|| {
                invalid(format!(
                    "certificate {} has no `{END}`",
                    certificates.len() + 1
                ))
            })?;
            let text: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
            let der = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| {
                    invalid(format!(
                        "certificate {} is not base64: {e}",
                        certificates.len() + 1
                    ))
                })?;
            // A DER certificate is one SEQUENCE.
            if der.first() != Some(&0x30) {
                return Err(invalid(format!(
                    "certificate {} is not a DER certificate",
                    certificates.len() + 1
                )));
            }
            certificates.push(der);
            rest = &body[end + END.len()..];
        }
        if certificates.is_empty() {
            return Err(invalid(format!(
                "no certificate in it: a PEM bundle holds `{BEGIN}` blocks"
            )));
        }
        Ok(UpstreamCa { certificates })
    }

    /// The certificates, DER.
    pub fn certificates(&self) -> &[Vec<u8>] {
        &self.certificates
    }

    /// Nothing trusted beyond the host's roots.
    pub fn is_empty(&self) -> bool {
        self.certificates.is_empty()
    }

    /// Both sets of certificates.
    pub(crate) fn and(mut self, other: &UpstreamCa) -> UpstreamCa {
        for certificate in &other.certificates {
            if !self.certificates.contains(certificate) {
                self.certificates.push(certificate.clone());
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_gives_each_certificate_and_a_broken_one_is_named() {
        let one = format!("{BEGIN}\nMAMCAQE=\n{END}\n");
        let two = format!("junk\n{one}{BEGIN}\nMAQCAgIC\n{END}");
        let ca = UpstreamCa::from_pem(&two).unwrap();
        assert_eq!(
            ca.certificates(),
            &[vec![0x30, 3, 2, 1, 1], vec![0x30, 4, 2, 2, 2, 2]]
        );
        let error = UpstreamCa::from_pem(&format!("{one}{BEGIN}\n!!\n{END}")).unwrap_err();
        assert!(
            error.to_string().contains("certificate 2 is not base64"),
            "{error}"
        );
        let error = UpstreamCa::from_pem(&format!("{BEGIN}\nMAMCAQE=\n")).unwrap_err();
        assert!(error.to_string().contains("has no"), "{error}");
    }
}
