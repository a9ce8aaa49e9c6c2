//! Egress allow-lists: which destinations a container sandbox may reach when its
//! policy's network is [`Network::AllowList`](crate::Network::AllowList), and what was
//! refused.
//!
//! The sandbox itself has no network, only its loopback interface. Its agent relays
//! connections made to a proxy on that loopback (and DNS queries) over a Unix socket
//! to the host, where the proxy (`sandlot_container::proxy`) decides: the name in an HTTP request, a `CONNECT` and a
//! TLS client hello must be on the list, and a name must not lead to a private
//! address the list does not name. Nothing inside the sandbox can widen it.
//!
//! ```
//! use sandlot::egress::AllowList;
//! let allow: AllowList = ["pypi.org", "*.pythonhosted.org", "10.1.0.0/16"].try_into()?;
//! assert!(allow.allows_name("pypi.org"));
//! assert!(allow.allows_name("files.pythonhosted.org"));
//! assert!(!allow.allows_name("pythonhosted.org"));
//! assert!(allow.allows_address("10.1.2.3".parse().unwrap()));
//! # Ok::<(), sandlot::egress::InvalidDestination>(())
//! ```

#[doc(hidden)]
pub mod dns;
#[doc(hidden)]
pub mod http;
mod rules;
#[doc(hidden)]
pub mod tls;

pub use rules::{InvalidRule, RequestRule, RequestRules, RuleAction, Ruling};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A DNS name, lower-cased, without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainName(String);

impl DomainName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` is this name or a name below it.
    fn is_or_contains(&self, name: &str) -> bool {
        name == self.0
            || name
                .strip_suffix(self.0.as_str())
                .is_some_and(|head| head.ends_with('.'))
    }
}

impl FromStr for DomainName {
    type Err = InvalidDestination;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |why: &str| InvalidDestination {
            entry: text.to_string(),
            reason: why.to_string(),
        };
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        if name.is_empty() || name.len() > 253 {
            return Err(invalid("a name has 1 to 253 characters"));
        }
        if !name.is_ascii() {
            return Err(invalid(
                "write an internationalized name in its ASCII (xn--) form",
            ));
        }
        for label in name.split('.') {
            let fine = (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-');
            if !fine {
                return Err(invalid(
                    "each dot-separated label has 1 to 63 letters, digits, `-` or `_`, \
                     and neither starts nor ends with `-`",
                ));
            }
        }
        // `127.1`, `0x7f.1` or `2130706433` is an address to a resolver, not a name.
        let last = name.rsplit('.').next().unwrap_or_default();
        if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
            return Err(invalid(
                "this reads as an IPv4 address to a resolver; write an address as a.b.c.d",
            ));
        }
        Ok(DomainName(name))
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of an [`AllowList`], as written: `example.com`, `*.example.com`,
/// `10.0.0.0/8` or `192.0.2.7`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Destination {
    /// Exactly this name.
    Domain(DomainName),
    /// Every name below this one, not the name itself (`*.example.com`).
    Subdomains(DomainName),
    /// Addresses in this network: connections to them by address, and names that
    /// resolve into it although it is private (see [`AllowList`]).
    Network(IpNet),
}

impl FromStr for Destination {
    type Err = InvalidDestination;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if let Ok(net) = text.parse::<IpNet>() {
            return Ok(Destination::Network(net.trunc()));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Ok(Destination::Network(IpNet::from(address)));
        }
        if text.contains('/') || text.contains(':') {
            return Err(InvalidDestination {
                entry: text.to_string(),
                reason: "neither a network (`10.0.0.0/8`), an address nor a name; ports are \
                         not part of an entry: a listed name may be reached on any port"
                    .to_string(),
            });
        }
        match text.strip_prefix("*.") {
            Some(parent) => parent.parse().map(Destination::Subdomains),
            None if text.contains('*') => Err(InvalidDestination {
                entry: text.to_string(),
                reason: "a wildcard is allowed only as the whole first label: `*.example.com`"
                    .to_string(),
            }),
            None => text.parse().map(Destination::Domain),
        }
        .map_err(|e| InvalidDestination {
            entry: text.to_string(),
            ..e
        })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Domain(name) => write!(f, "{name}"),
            Destination::Subdomains(name) => write!(f, "*.{name}"),
            Destination::Network(net) if net.prefix_len() == net.max_prefix_len() => {
                write!(f, "{}", net.addr())
            }
            Destination::Network(net) => write!(f, "{net}"),
        }
    }
}

/// An allow-list entry that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{entry}` is not an allow-list entry: {reason}")]
pub struct InvalidDestination {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The destinations a sandbox may reach: names (exact or `*.` wildcards) and networks.
///
/// A name on the list is reached on any port, wherever it resolves, except that an
/// address which is not public ([`is_public`]: loopback, private, link-local, shared,
/// unique-local, benchmarking, 6to4, Teredo) is reached only if a listed network holds
/// it: a name someone else controls must not lead into the host's own networks. A
/// listed network is taken as written: `0.0.0.0/0` holds the host's loopback too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList(Vec<Destination>);

impl AllowList {
    /// The list with nothing on it: every destination is refused.
    pub fn empty() -> AllowList {
        AllowList(Vec::new())
    }

    /// Its entries, in the order written.
    pub fn entries(&self) -> &[Destination] {
        &self.0
    }

    /// Whether the list has no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the DNS name `name` is on the list (case and a trailing dot do not
    /// matter). An address written as a name is not: see [`AllowList::allows_address`].
    pub fn allows_name(&self, name: &str) -> bool {
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        self.0.iter().any(|entry| match entry {
            Destination::Domain(domain) => domain.as_str() == name,
            Destination::Subdomains(parent) => {
                name != parent.as_str() && parent.is_or_contains(&name)
            }
            Destination::Network(_) => false,
        })
    }

    /// Whether a listed network holds `address`.
    pub fn allows_address(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|entry| match entry {
            Destination::Network(net) => net.contains(&address),
            _ => false,
        })
    }

    /// Whether everything this list allows, `base` allows too: a server lets a client
    /// narrow its list, never widen it.
    pub fn within(&self, base: &AllowList) -> bool {
        self.0.iter().all(|entry| match entry {
            Destination::Domain(name) => base.allows_name(name.as_str()),
            Destination::Subdomains(parent) => base.0.iter().any(|theirs| match theirs {
                Destination::Subdomains(wider) => wider.is_or_contains(parent.as_str()),
                _ => false,
            }),
            Destination::Network(net) => base.0.iter().any(|theirs| match theirs {
                Destination::Network(wider) => wider.contains(net),
                _ => false,
            }),
        })
    }
}

impl AllowList {
    /// The list of `entries`, each parsed as a [`Destination`].
    fn parse_entries<S: AsRef<str>>(
        entries: impl IntoIterator<Item = S>,
    ) -> Result<Self, InvalidDestination> {
        entries
            .into_iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<Vec<_>, _>>()
            .map(AllowList)
    }
}

impl FromStr for AllowList {
    type Err = InvalidDestination;

    /// Entries separated by commas or white space.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        AllowList::parse_entries(
            text.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|entry| !entry.is_empty()),
        )
    }
}

impl<S: AsRef<str>, const N: usize> TryFrom<[S; N]> for AllowList {
    type Error = InvalidDestination;

    fn try_from(entries: [S; N]) -> Result<Self, Self::Error> {
        AllowList::parse_entries(entries)
    }
}

impl From<Vec<Destination>> for AllowList {
    fn from(entries: Vec<Destination>) -> Self {
        AllowList(entries)
    }
}

impl TryFrom<Vec<String>> for AllowList {
    type Error = InvalidDestination;

    fn try_from(entries: Vec<String>) -> Result<Self, Self::Error> {
        AllowList::parse_entries(entries)
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, entry) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{entry}")?;
        }
        Ok(())
    }
}

impl Serialize for AllowList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(ToString::to_string))
    }
}

impl<'de> Deserialize<'de> for AllowList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Vec::<String>::deserialize(deserializer)?;
        AllowList::try_from(entries).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for AllowList {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AllowList".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = <Vec<String>>::json_schema(generator);
        schema.insert(
            "description".into(),
            "Names (`example.com`, `*.example.com`), addresses and networks \
             (`10.0.0.0/8`) the sandbox may reach."
                .into(),
        );
        schema
    }
}

/// An IPv4 address mapped into IPv6 (or written IPv4-compatible, `::a.b.c.d`) is the
/// IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6)
            if v6.segments()[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() =>
        {
            v6.to_ipv4().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6))
        }
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Whether `address` belongs to the public internet. Everything else (the host's
/// loopback, private and link-local networks, cloud metadata services, multicast)
/// needs a listed network.
pub fn is_public(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || (a == 192 && b == 88 && v4.octets()[2] == 99)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            // Only global unicast (2000::/3), less the ranges that are documentation
            // or lead into IPv4 (Teredo, 6to4) where the list cannot follow.
            let [first, second, ..] = v6.segments();
            (first & 0xe000) == 0x2000
                && !(first == 0x2001 && (second == 0x0db8 || second == 0))
                && first != 0x2002
        }
    }
}

/// A connection or lookup the allow-list refused, as [`crate::Execution::egress_denied`]
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Denial {
    /// The name or address the code asked for.
    pub host: String,
    /// The port, for connections (not for DNS lookups).
    pub port: Option<u16>,
    /// How the code asked.
    pub via: Via,
    /// Why it was refused.
    pub reason: DenyReason,
}

impl Denial {
    /// A refusal of `host` (and `port`, for a connection), asked for `via`, for `reason`.
    pub fn new(host: &str, port: Option<u16>, via: Via, reason: DenyReason) -> Denial {
        Denial {
            host: host.to_string(),
            port,
            via,
            reason,
        }
    }

    /// The same denial with `mask` applied to every name in it that the code chose:
    /// the host, a TLS server name, a `Host` header.
    pub(crate) fn masked(self, mask: impl Fn(&str) -> String) -> Denial {
        let reason = match self.reason {
            DenyReason::ServerNameMismatch { server_name } => DenyReason::ServerNameMismatch {
                server_name: mask(&server_name),
            },
            DenyReason::HostMismatch { host_header } => DenyReason::HostMismatch {
                host_header: mask(&host_header),
            },
            DenyReason::BoundElsewhere { named } => DenyReason::BoundElsewhere {
                named: mask(&named),
            },
            DenyReason::Request {
                method,
                path,
                rule,
                unreadable,
            } => DenyReason::Request {
                method: mask(&method),
                path: mask(&path),
                rule,
                unreadable: unreadable.map(|why| mask(&why)),
            },
            other => other,
        };
        Denial {
            host: mask(&self.host),
            reason,
            ..self
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) if self.host.contains(':') => write!(f, "[{}]:{port}", self.host)?,
            Some(port) => write!(f, "{}:{port}", self.host)?,
            None => write!(f, "{}", self.host)?,
        }
        write!(f, " ({}): {}", self.via, self.reason)
    }
}

/// How code tried to reach a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Via {
    /// A DNS lookup.
    Dns,
    /// A plain HTTP request through the proxy (`HTTP_PROXY`).
    Http,
    /// A `CONNECT` through the proxy (`HTTPS_PROXY`).
    Connect,
    /// A TLS connection: its client hello named the server.
    Tls,
    /// A request the proxy read through TLS, to a host whose requests it checks.
    Https,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Dns => "dns",
            Via::Http => "http",
            Via::Connect => "connect",
            Via::Tls => "tls",
            Via::Https => "https",
        })
    }
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DenyReason {
    /// Neither the name nor the address is on the list.
    NotListed,
    /// The name is listed but resolves only to addresses that are not public and
    /// that no listed network holds.
    PrivateAddress {
        /// The addresses it resolved to.
        addresses: Vec<IpAddr>,
    },
    /// A TLS client hello named another server than the one asked for, and that one
    /// is not listed.
    ServerNameMismatch {
        /// The server name in the client hello.
        server_name: String,
    },
    /// A TLS connection without a server name, so nothing to check it against.
    NoServerName,
    /// A plain HTTP request in a tunnel named another host than the tunnel's, and that
    /// one is not listed.
    HostMismatch {
        /// The request's `Host` header (empty if it had none, or several).
        host_header: String,
    },
    /// A connection to a host a secret is bound to, which the proxy reads through
    /// TLS, named another host inside (its TLS server name or a request's `Host`):
    /// a bound secret goes to the host it is bound to and nowhere else.
    BoundElsewhere {
        /// The server name or `Host` it named (empty if none, or several).
        named: String,
    },
    /// A request the policy's request rules ([`RequestRules`]) refuse.
    Request {
        /// Its method.
        method: String,
        /// Its path, without the query.
        path: String,
        /// The deny rule that matched; `None` when no allow rule of the host did.
        rule: Option<String>,
        /// Why its path could not be checked against the rules, when that is why.
        unreadable: Option<String>,
    },
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NotListed => f.write_str("not on the policy's allow-list"),
            DenyReason::PrivateAddress { addresses } => {
                let list: Vec<String> = addresses.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "listed, but it resolves only to addresses that are not public ({}); \
                     add the address or its network to the allow-list to reach it",
                    list.join(", ")
                )
            }
            DenyReason::ServerNameMismatch { server_name } => write!(
                f,
                "the TLS client hello names `{server_name}`, which is not on the allow-list"
            ),
            DenyReason::NoServerName => {
                f.write_str("a TLS connection that names no server cannot be checked")
            }
            DenyReason::HostMismatch { host_header } if host_header.is_empty() => {
                f.write_str("a request in the tunnel names no single Host")
            }
            DenyReason::HostMismatch { host_header } => write!(
                f,
                "a request in the tunnel is for `{host_header}`, which is not on the allow-list"
            ),
            DenyReason::BoundElsewhere { named } => write!(
                f,
                "a connection to a host a secret is bound to named `{named}` inside; \
                 it must name the host it connected to, and only that one"
            ),
            DenyReason::Request {
                unreadable: Some(why),
                ..
            } => write!(f, "{why}"),
            DenyReason::Request {
                method,
                path,
                rule: Some(rule),
                ..
            } => write!(f, "`{method} {path}` is refused by the rule `{rule}`"),
            DenyReason::Request { method, path, .. } => write!(
                f,
                "no request rule of this host allows `{method} {path}`; add one to the \
                 policy's requests"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::try_from(entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn every_name_a_denial_carries_is_masked() {
        let mask = |name: &str| name.to_ascii_lowercase().replace("secret", "***");
        let denial = Denial {
            host: "SECRET.evil.test".into(),
            port: Some(443),
            via: Via::Tls,
            reason: DenyReason::ServerNameMismatch {
                server_name: "x.SeCrEt.test".into(),
            },
        }
        .masked(mask);
        assert_eq!(denial.host, "***.evil.test");
        assert_eq!(
            denial.reason,
            DenyReason::ServerNameMismatch {
                server_name: "x.***.test".into()
            }
        );
        let host = Denial {
            host: "allowed.test".into(),
            port: Some(80),
            via: Via::Connect,
            reason: DenyReason::HostMismatch {
                host_header: "SECRET".into(),
            },
        }
        .masked(mask);
        assert_eq!(
            host.reason,
            DenyReason::HostMismatch {
                host_header: "***".into()
            }
        );
    }

    #[test]
    fn names_match_exactly_and_wildcards_only_below() {
        let allow = list(&["PyPI.org.", "*.example.com"]);
        assert!(allow.allows_name("pypi.org"));
        assert!(allow.allows_name("PYPI.ORG."));
        assert!(!allow.allows_name("files.pypi.org"));
        assert!(!allow.allows_name("evilpypi.org"));
        assert!(allow.allows_name("a.b.example.com"));
        assert!(!allow.allows_name("example.com"));
        assert!(!allow.allows_name("badexample.com"));
        assert!(!allow.allows_name("example.com.evil.net"));
    }

    #[test]
    fn networks_hold_addresses_and_mapped_addresses() {
        let allow = list(&["10.1.0.0/16", "192.0.2.7", "fd00::/8"]);
        assert!(allow.allows_address("10.1.200.3".parse().unwrap()));
        assert!(allow.allows_address("::ffff:10.1.0.1".parse().unwrap()));
        assert!(allow.allows_address("192.0.2.7".parse().unwrap()));
        assert!(!allow.allows_address("192.0.2.8".parse().unwrap()));
        assert!(allow.allows_address("fd12::1".parse().unwrap()));
        assert!(!allow.allows_name("10.1.0.1"));
    }

    #[test]
    fn bad_entries_name_the_entry_and_the_fix() {
        for (entry, says) in [
            ("example.com:443", "ports are not part"),
            ("*example.com", "wildcard"),
            ("a.*.com", "wildcard"),
            ("exa mple", "label"),
            ("bücher.de", "xn--"),
            ("-x.com", "label"),
            ("10.0.0.0/33", "neither a network"),
            ("", "1 to 253"),
            ("127.1", "IPv4 address"),
            ("0x7f.0x1", "IPv4 address"),
        ] {
            let error = entry.parse::<Destination>().unwrap_err();
            assert_eq!(error.entry, entry.trim());
            assert!(error.to_string().contains(says), "{entry}: {error}");
        }
    }

    #[test]
    fn entries_read_back_as_written() {
        let allow: AllowList = "pypi.org, *.pythonhosted.org 10.0.0.0/8 192.0.2.1"
            .parse()
            .unwrap();
        assert_eq!(
            allow.to_string(),
            "pypi.org, *.pythonhosted.org, 10.0.0.0/8, 192.0.2.1"
        );
        let json = serde_json::to_string(&allow).unwrap();
        let back: AllowList = serde_json::from_str(&json).unwrap();
        assert_eq!(back, allow);
    }

    #[test]
    fn a_narrower_list_is_within_a_wider_one() {
        let server = list(&["pypi.org", "*.example.com", "10.0.0.0/8"]);
        assert!(list(&[
            "pypi.org",
            "a.example.com",
            "*.b.example.com",
            "10.2.0.0/16"
        ])
        .within(&server));
        assert!(AllowList::empty().within(&server));
        assert!(!list(&["*.pypi.org"]).within(&server));
        assert!(!list(&["example.com"]).within(&server));
        assert!(!list(&["11.0.0.1"]).within(&server));
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.3.4.5",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "fec0::1",
            "2002:7f00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "198.18.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
