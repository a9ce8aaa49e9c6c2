//! Secrets bound to hosts: the sandbox's variable holds a placeholder, and the egress
//! proxy puts the value in its place only in requests to the hosts the secret is bound
//! to, only where the binding says ([`Placement`]); see [`super::Injector`].

use crate::egress::AllowList;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Where a bound secret goes in a request to one of its hosts. Anywhere else in the
/// request (another header, the body, the URL), the placeholder stays a placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Placement {
    /// An `Authorization` header of the Bearer scheme (`Bearer <placeholder>`): what
    /// most HTTP APIs take.
    #[default]
    Bearer,
    /// The credentials of an `Authorization` header of the Basic scheme
    /// (`user:<placeholder>`, base64): what Git over HTTPS and package registries take.
    Basic,
    /// The value of the header of this name (`X-Api-Key`), compared without case.
    Header(String),
    /// The value of the query parameter of this name. Only where asked: servers and
    /// proxies keep URLs in their logs.
    Query(String),
}

/// Headers whose value says how the request is framed or routed: a secret replaced in
/// them would change where the request goes or where it ends, not who sends it.
const FRAMING_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
];

impl FromStr for Placement {
    type Err = String;

    /// `bearer`, `basic`, `header:NAME` or `query:NAME`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind.trim(), Some(name.trim())),
            None => (text.trim(), None),
        };
        match (kind.to_ascii_lowercase().as_str(), name) {
            ("bearer", None) => Ok(Placement::Bearer),
            ("basic", None) => Ok(Placement::Basic),
            ("header", Some(name)) => {
                let token = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !token {
                    return Err(format!("`{name}` is not an HTTP header name"));
                }
                let lower = name.to_ascii_lowercase();
                if FRAMING_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
                    return Err(format!(
                        "`{name}` says where a request goes or ends, not who sends it: \
                         a secret cannot be placed in it"
                    ));
                }
                Ok(Placement::Header(name.to_string()))
            }
            ("query", Some(name)) => {
                if name.is_empty() || name.contains(['&', '=', '#', '?', ' ', '%', '+']) {
                    return Err(format!("`{name}` is not a query parameter name"));
                }
                Ok(Placement::Query(name.to_string()))
            }
            _ => Err(format!(
                "`{text}` is not a placement: bearer, basic, header:NAME or query:NAME"
            )),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Bearer => f.write_str("bearer"),
            Placement::Basic => f.write_str("basic"),
            Placement::Header(name) => write!(f, "header:{name}"),
            Placement::Query(name) => write!(f, "query:{name}"),
        }
    }
}

/// The hosts a secret may go to, and where in a request it goes.
///
/// ```
/// use sandlot::secret::{Binding, Placement};
///
/// let binding = Binding::new("api.github.com".parse().unwrap(), Placement::Bearer);
/// assert!(binding.covers("API.GitHub.com"));
/// assert!(!binding.covers("github.com.evil.example"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    hosts: AllowList,
    placement: Placement,
}

impl Binding {
    /// A binding to `hosts` (names, `*.` wildcards, addresses or networks, as an
    /// allow-list writes them), placed as `placement` says.
    pub fn new(hosts: AllowList, placement: Placement) -> Binding {
        Binding { hosts, placement }
    }

    /// The hosts the secret may go to.
    pub fn hosts(&self) -> &AllowList {
        &self.hosts
    }

    /// Where in a request it goes.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Whether a request to `host` (a name or an address, as the proxy connects to
    /// it) may carry the secret.
    pub fn covers(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match host.parse::<IpAddr>() {
            Ok(address) => self.hosts.allows_address(address),
            Err(_) => self.hosts.allows_name(host),
        }
    }
}

impl FromStr for Binding {
    type Err = String;

    /// `HOSTS` or `HOSTS@PLACEMENT`: hosts separated by commas, the placement as
    /// [`Placement`] reads it (Bearer when none is written).
    ///
    /// ```
    /// use sandlot::secret::{Binding, Placement};
    ///
    /// let binding: Binding = "api.example.com,*.example.net@header:X-Api-Key".parse().unwrap();
    /// assert_eq!(binding.placement(), &Placement::Header("X-Api-Key".into()));
    /// assert!(binding.covers("eu.example.net"));
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (hosts, placement) = match text.rsplit_once('@') {
            Some((hosts, placement)) => (hosts, placement.parse()?),
            None => (text, Placement::Bearer),
        };
        let hosts: AllowList = hosts.parse().map_err(|e| format!("{e}"))?;
        if hosts.is_empty() {
            return Err("a binding names at least one host".into());
        }
        Ok(Binding::new(hosts, placement))
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self.hosts.entries().iter().map(|e| e.to_string()).collect();
        write!(f, "{}@{}", hosts.join(","), self.placement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_read_back_as_written() {
        for text in ["bearer", "basic", "header:X-Api-Key", "query:key"] {
            let placement: Placement = text.parse().unwrap();
            assert_eq!(placement.to_string(), text);
        }
        assert_eq!("BEARER".parse::<Placement>(), Ok(Placement::Bearer));
    }

    #[test]
    fn a_placement_that_would_change_where_a_request_goes_is_refused() {
        for text in [
            "header:Host",
            "header:content-length",
            "header:Transfer-Encoding",
            "header:Proxy-Authorization",
            "header:",
            "header:two words",
            "query:a=b",
            "query:",
            "cookie",
            "bearer:x",
        ] {
            assert!(text.parse::<Placement>().is_err(), "{text} was accepted");
        }
    }

    #[test]
    fn a_binding_covers_its_hosts_only() {
        let binding: Binding = "api.example.com,*.example.net,192.0.2.0/24@basic"
            .parse()
            .unwrap();
        assert_eq!(binding.placement(), &Placement::Basic);
        assert!(binding.covers("api.example.com"));
        assert!(binding.covers("api.example.com."));
        assert!(binding.covers("a.b.example.net"));
        assert!(binding.covers("192.0.2.9"));
        assert!(!binding.covers("example.net"));
        assert!(!binding.covers("api.example.com.evil.test"));
        assert!(!binding.covers("198.51.100.1"));
        assert_eq!(
            binding.to_string(),
            "api.example.com,*.example.net,192.0.2.0/24@basic"
        );
        assert!("@bearer".parse::<Binding>().is_err());
    }
}
