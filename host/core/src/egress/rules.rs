//! Request rules: which requests to a host the code may make, by method and path,
//! on top of the host allow-list.
//!
//! ```
//! use sandlot::egress::{RequestRules, Ruling};
//! let rules: RequestRules = [
//!     "GET api.github.com/repos/**",
//!     "POST api.github.com/repos/*/issues",
//!     "deny DELETE *.github.com",
//! ]
//! .try_into()?;
//! assert!(rules.governs("api.github.com"));
//! assert!(matches!(rules.rule("GET", "api.github.com", "/repos/a/b?x=1"), Ruling::Allowed(_)));
//! assert!(matches!(rules.rule("PUT", "api.github.com", "/repos/a/b"), Ruling::Denied { .. }));
//! // A host no rule names is left to the allow-list.
//! assert!(matches!(rules.rule("PUT", "pypi.org", "/simple/"), Ruling::Unruled));
//! # Ok::<(), sandlot::egress::InvalidRule>(())
//! ```
//!
//! A deny rule wins over every allow rule. A host some allow rule names takes only
//! the requests an allow rule lets through; a host only deny rules name takes every
//! request but theirs. A path is checked as the server would read it: percent-decoded,
//! without its query; one with `.` or `..` segments, an empty segment or an encoded
//! `/` or `\` is refused wherever rules apply, since servers read those differently.

use super::Destination;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Rules one list may hold: each is checked against every request to its host.
const MAX_RULES: usize = 256;

/// `**` segments one path pattern may hold.
const MAX_ANY_SEGMENTS: usize = 4;

/// Whether a rule lets requests through or refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RuleAction {
    /// The requests it matches may go (and, for its host, only those and the other
    /// allow rules').
    Allow,
    /// The requests it matches are refused, whatever else allows them.
    Deny,
}

/// One rule, as written: `[allow|deny] [METHOD] HOST[/PATH]`, where `HOST` is a
/// name or `*.name` and `PATH` a pattern of segments (`*` within a segment, `**`
/// for any number of segments; none means every path).
///
/// ```
/// use sandlot::egress::RequestRule;
/// let rule: RequestRule = "deny post API.example.com/v1/*/delete".parse()?;
/// assert_eq!(rule.to_string(), "deny POST api.example.com/v1/*/delete");
/// # Ok::<(), sandlot::egress::InvalidRule>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestRule {
    action: RuleAction,
    method: Option<String>,
    host: Destination,
    path: String,
}

impl RequestRule {
    /// Whether it allows or denies.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// The hosts it is about: a name, or every name below one.
    pub fn host(&self) -> &Destination {
        &self.host
    }

    /// Whether it is about `host` (lower-case, no trailing dot).
    fn names(&self, host: &str) -> bool {
        match &self.host {
            Destination::Domain(name) => name.as_str() == host,
            Destination::Subdomains(parent) => {
                host != parent.as_str() && parent.is_or_contains(host)
            }
            Destination::Network(_) => false,
        }
    }

    /// Whether it matches a request with `method` for the decoded path `segments`.
    fn matches(&self, method: &str, segments: &[&str]) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path_matches(&pattern_segments(&self.path), segments)
    }
}

impl FromStr for RequestRule {
    type Err = InvalidRule;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| InvalidRule {
            rule: text.to_string(),
            reason,
        };
        let mut words: Vec<&str> = text.split_whitespace().collect();
        let action = match words.first().map(|w| w.to_ascii_lowercase()) {
            Some(word) if word == "allow" => Some(RuleAction::Allow),
            Some(word) if word == "deny" => Some(RuleAction::Deny),
            _ => None,
        };
        if action.is_some() {
            words.remove(0);
        }
        let (method, target) = match words[..] {
            [target] => (None, target),
            [method, target] => (Some(method), target),
            _ => {
                return Err(invalid(
                    "a rule is `[allow|deny] [METHOD] HOST[/PATH]`, e.g. \
                     `GET api.github.com/repos/**`"
                        .into(),
                ))
            }
        };
        let method = match method {
            None | Some("*") => None,
            // A method called ALLOW or DENY would print as an action.
            Some(word)
                if ["allow", "deny"]
                    .iter()
                    .any(|a| word.eq_ignore_ascii_case(a)) =>
            {
                return Err(invalid(format!(
                    "`{word}` is an action, and a rule has one, first: `deny GET host/path`"
                )))
            }
            Some(method)
                if !method.is_empty()
                    && method.len() <= 16
                    && method.bytes().all(|b| b.is_ascii_alphabetic()) =>
            {
                Some(method.to_ascii_uppercase())
            }
            Some(method) => {
                return Err(invalid(format!(
                    "`{method}` is not a method: write one such as GET or POST, or `*` for any"
                )))
            }
        };
        let (host, path) = match target.find('/') {
            Some(at) => target.split_at(at),
            None => (target, "/**"),
        };
        let host = match host.parse::<Destination>() {
            Ok(host @ (Destination::Domain(_) | Destination::Subdomains(_))) => host,
            Ok(Destination::Network(_)) => {
                return Err(invalid(
                    "a rule names a host by name (`api.example.com`, `*.example.com`): \
                     requests to an address are checked by the allow-list alone"
                        .into(),
                ))
            }
            Err(e) => return Err(invalid(e.reason)),
        };
        check_pattern(path).map_err(invalid)?;
        Ok(RequestRule {
            action: action.unwrap_or(RuleAction::Allow),
            method,
            host,
            path: path.to_string(),
        })
    }
}

/// Whether `path` is a pattern a request's path can be matched against.
fn check_pattern(path: &str) -> Result<(), String> {
    if path.contains(['?', '#', '%', '\\']) || path.chars().any(char::is_whitespace) {
        return Err(format!(
            "the path `{path}` holds `?`, `#`, `%`, `\\` or a space: a rule matches the \
             decoded path alone, so write it as the server reads it"
        ));
    }
    let segments = pattern_segments(path);
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if matches!(*segment, "." | "..") || (segment.is_empty() && !last) {
            return Err(format!(
                "the path `{path}` has an empty, `.` or `..` segment, which no request \
                 checked against a rule has"
            ));
        }
        if segment.contains("**") && *segment != "**" {
            return Err(format!(
                "in `{path}`, `**` stands alone between slashes (any number of segments); \
                 `*` matches within one"
            ));
        }
    }
    if segments.iter().filter(|s| **s == "**").count() > MAX_ANY_SEGMENTS {
        return Err(format!(
            "`{path}` has more than {MAX_ANY_SEGMENTS} `**` segments"
        ));
    }
    Ok(())
}

impl fmt::Display for RequestRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.action == RuleAction::Deny {
            f.write_str("deny ")?;
        }
        if let Some(method) = &self.method {
            write!(f, "{method} ")?;
        }
        write!(f, "{}{}", self.host, self.path)
    }
}

/// A request rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{rule}` is not a request rule: {reason}")]
pub struct InvalidRule {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

/// What the rules say about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ruling<'a> {
    /// No rule names its host: the allow-list alone decides.
    Unruled,
    /// It may go; the allow rule that lets it, if one had to.
    Allowed(Option<&'a RequestRule>),
    /// It may not.
    Denied {
        /// The deny rule that matched; `None` when no allow rule of its host did.
        rule: Option<&'a RequestRule>,
        /// Why the path could not be checked, when that is the reason.
        unreadable: Option<String>,
    },
}

/// The request rules of a sandbox, in the order written (which does not change what
/// they decide: a deny wins wherever it stands).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestRules(Vec<RequestRule>);

impl RequestRules {
    /// No rules: every request a listed host is sent goes.
    pub fn none() -> RequestRules {
        RequestRules(Vec::new())
    }

    /// The rules, in the order written.
    pub fn rules(&self) -> &[RequestRule] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether some rule names `host`, so its requests must be read to be checked.
    pub fn governs(&self, host: &str) -> bool {
        let host = normal_host(host);
        self.0.iter().any(|rule| rule.names(&host))
    }

    /// What the rules say about a `method` request to `host` for `target` (its path
    /// and query, as the request line has them).
    pub fn rule(&self, method: &str, host: &str, target: &str) -> Ruling<'_> {
        let host = normal_host(host);
        let about: Vec<&RequestRule> = self.0.iter().filter(|r| r.names(&host)).collect();
        if about.is_empty() {
            return Ruling::Unruled;
        }
        let decoded = match decoded_path(target) {
            Ok(decoded) => decoded,
            Err(why) => {
                return Ruling::Denied {
                    rule: None,
                    unreadable: Some(why),
                }
            }
        };
        let segments: Vec<&str> = decoded[1..].split('/').collect();
        let matching = |action| {
            about
                .iter()
                .copied()
                .find(|r| r.action == action && r.matches(method, &segments))
        };
        if let Some(rule) = matching(RuleAction::Deny) {
            return Ruling::Denied {
                rule: Some(rule),
                unreadable: None,
            };
        }
        match matching(RuleAction::Allow) {
            Some(rule) => Ruling::Allowed(Some(rule)),
            None if about.iter().any(|r| r.action == RuleAction::Allow) => Ruling::Denied {
                rule: None,
                unreadable: None,
            },
            None => Ruling::Allowed(None),
        }
    }

    /// Whether these rules let through a request `base` refuses: they hold every rule
    /// of `base`, and add allow rules only for hosts no allow rule of `base` names
    /// (where they narrow what was unruled, never widen what was ruled).
    pub fn looser_than(&self, base: &RequestRules) -> bool {
        base.0.iter().any(|rule| !self.0.contains(rule))
            || self
                .0
                .iter()
                .filter(|r| r.action == RuleAction::Allow && !base.0.contains(r))
                .any(|added| {
                    base.0
                        .iter()
                        .any(|r| r.action == RuleAction::Allow && overlap(&r.host, &added.host))
                })
    }

    fn parse_rules<S: AsRef<str>>(rules: impl IntoIterator<Item = S>) -> Result<Self, InvalidRule> {
        let rules = rules
            .into_iter()
            .map(|r| r.as_ref().parse())
            .collect::<Result<Vec<RequestRule>, _>>()?;
        if rules.len() > MAX_RULES {
            return Err(InvalidRule {
                rule: format!("{} rules", rules.len()),
                reason: format!("at most {MAX_RULES} request rules"),
            });
        }
        Ok(RequestRules(rules))
    }
}

/// Whether some name is matched by both `a` and `b`.
fn overlap(a: &Destination, b: &Destination) -> bool {
    use Destination::{Domain, Subdomains};
    match (a, b) {
        (Domain(a), Domain(b)) => a == b,
        (Domain(name), Subdomains(parent)) | (Subdomains(parent), Domain(name)) => {
            name != parent && parent.is_or_contains(name.as_str())
        }
        (Subdomains(a), Subdomains(b)) => {
            a.is_or_contains(b.as_str()) || b.is_or_contains(a.as_str())
        }
        _ => false,
    }
}

fn normal_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// The segments of a pattern, after its first `/`.
fn pattern_segments(path: &str) -> Vec<&str> {
    path.strip_prefix('/').unwrap_or(path).split('/').collect()
}

/// The path of `target` (a request line's path and query) as a server reads it:
/// percent-decoded, without the query; or why it cannot be checked.
fn decoded_path(target: &str) -> Result<String, String> {
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if !path.starts_with('/') {
        return Err(format!("the request's target `{target}` is not a path"));
    }
    let raw: Vec<&str> = path[1..].split('/').collect();
    let mut decoded = String::with_capacity(path.len());
    for (i, segment) in raw.iter().enumerate() {
        let segment = super::http::percent_decode(segment)
            .ok_or_else(|| format!("the path `{path}` is not percent-encoded UTF-8"))?;
        let last = i + 1 == raw.len();
        if segment.contains(['/', '\\', '\0'])
            || matches!(segment.as_str(), "." | "..")
            || (segment.is_empty() && !last)
        {
            return Err(format!(
                "the path `{path}` has a `.`, `..` or empty segment or an encoded `/` or `\\`, \
                 which servers read differently, so no rule can be checked against it"
            ));
        }
        decoded.push('/');
        decoded.push_str(&segment);
    }
    Ok(decoded)
}

/// Whether the path `segments` match the pattern's: a table of which pattern
/// prefixes match which path prefixes, so no pattern costs more than their product.
fn path_matches(pattern: &[&str], path: &[&str]) -> bool {
    let width = path.len() + 1;
    let mut table = vec![false; (pattern.len() + 1) * width];
    table[0] = true;
    for (p, piece) in pattern.iter().enumerate() {
        for s in 0..width {
            let here = (p + 1) * width + s;
            table[here] = if *piece == "**" {
                table[p * width + s] || (s > 0 && table[here - 1])
            } else {
                s > 0 && table[p * width + s - 1] && segment_matches(piece, path[s - 1])
            };
        }
    }
    table[pattern.len() * width + path.len()]
}

/// Whether one path segment matches a pattern segment, where `*` stands for any run
/// of characters.
fn segment_matches(pattern: &str, segment: &str) -> bool {
    let (pattern, segment) = (pattern.as_bytes(), segment.as_bytes());
    let (mut p, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while s < segment.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, s));
            p += 1;
        } else if p < pattern.len() && pattern[p] == segment[s] {
            p += 1;
            s += 1;
        } else if let Some((star_p, star_s)) = star {
            p = star_p + 1;
            s = star_s + 1;
            star = Some((star_p, star_s + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}

impl FromStr for RequestRules {
    type Err = InvalidRule;

    /// Rules one per line, or separated by `;`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        RequestRules::parse_rules(
            text.split(['\n', ';'])
                .map(str::trim)
                .filter(|rule| !rule.is_empty()),
        )
    }
}

impl<S: AsRef<str>, const N: usize> TryFrom<[S; N]> for RequestRules {
    type Error = InvalidRule;

    fn try_from(rules: [S; N]) -> Result<Self, Self::Error> {
        RequestRules::parse_rules(rules)
    }
}

impl TryFrom<Vec<String>> for RequestRules {
    type Error = InvalidRule;

    fn try_from(rules: Vec<String>) -> Result<Self, Self::Error> {
        RequestRules::parse_rules(rules)
    }
}

impl fmt::Display for RequestRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rule) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{rule}")?;
        }
        Ok(())
    }
}

impl Serialize for RequestRules {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(ToString::to_string))
    }
}

impl<'de> Deserialize<'de> for RequestRules {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rules = Vec::<String>::deserialize(deserializer)?;
        RequestRules::try_from(rules).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for RequestRules {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RequestRules".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = <Vec<String>>::json_schema(generator);
        schema.insert(
            "description".into(),
            "Request rules, each `[allow|deny] [METHOD] HOST[/PATH]` \
             (`GET api.github.com/repos/**`): a host an allow rule names takes only the \
             requests allow rules match; a deny rule wins."
                .into(),
        );
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &[&str]) -> RequestRules {
        RequestRules::parse_rules(text).unwrap()
    }

    fn allowed(rules: &RequestRules, method: &str, host: &str, target: &str) -> bool {
        !matches!(rules.rule(method, host, target), Ruling::Denied { .. })
    }

    #[test]
    fn an_allow_rule_confines_its_host_to_what_allow_rules_match() {
        let rules = rules(&[
            "GET api.github.com/repos/**",
            "POST api.github.com/repos/*/*/issues",
        ]);
        assert!(allowed(
            &rules,
            "GET",
            "api.github.com",
            "/repos/a/b/pulls?page=2"
        ));
        assert!(allowed(&rules, "get", "API.github.com.", "/repos"));
        assert!(allowed(
            &rules,
            "POST",
            "api.github.com",
            "/repos/o/r/issues"
        ));
        assert!(!allowed(
            &rules,
            "POST",
            "api.github.com",
            "/repos/o/r/pulls"
        ));
        assert!(!allowed(&rules, "GET", "api.github.com", "/user"));
        assert!(!allowed(&rules, "DELETE", "api.github.com", "/repos/o/r"));
        // Another host is the allow-list's to decide.
        assert_eq!(rules.rule("DELETE", "github.com", "/x"), Ruling::Unruled);
    }

    #[test]
    fn a_deny_rule_wins_and_leaves_the_rest_of_its_host_open() {
        let rules = rules(&["deny POST *.example.com/admin/**", "*.example.com/**"]);
        assert!(!allowed(&rules, "POST", "a.example.com", "/admin/users"));
        assert!(allowed(&rules, "GET", "a.example.com", "/admin/users"));
        let only_deny = self::rules(&["deny DELETE example.com"]);
        assert!(!allowed(&only_deny, "DELETE", "example.com", "/anything"));
        assert!(allowed(&only_deny, "PATCH", "example.com", "/anything"));
        // `*.example.com` is the names below it, not the name itself.
        assert_eq!(
            rules.rule("POST", "example.com", "/admin/x"),
            Ruling::Unruled
        );
    }

    #[test]
    fn a_path_servers_read_otherwise_is_refused_where_rules_apply() {
        let rules = rules(&["GET api.example.com/public/**"]);
        for sneaky in [
            "/public/../admin",
            "/public/%2e%2e/admin",
            "/public/%2E%2e/admin",
            "/public/a%2fb",
            "/public//admin",
            "/public/.%2fadmin",
            "/public/%5c..%5cadmin",
            "/public/%ff",
            "/public/%zz",
            "*",
            "http://elsewhere/public/x",
        ] {
            match rules.rule("GET", "api.example.com", sneaky) {
                Ruling::Denied {
                    rule: None,
                    unreadable: Some(_),
                } => {}
                other => panic!("{sneaky}: {other:?}"),
            }
        }
        // Encoded plain characters are what the server reads.
        assert!(allowed(&rules, "GET", "api.example.com", "/public/%61dmin"));
        assert!(!allowed(&rules, "GET", "api.example.com", "/%70ublic2/x"));
        assert!(allowed(&rules, "GET", "api.example.com", "/public/"));
    }

    #[test]
    fn patterns_match_segments_as_written() {
        let cases = [
            ("/v1/*/completions", "/v1/chat/completions", true),
            ("/v1/*/completions", "/v1/chat/x/completions", false),
            ("/v1/**/completions", "/v1/completions", true),
            ("/v1/**/completions", "/v1/a/b/c/completions", true),
            ("/files/*.json", "/files/report.json", true),
            ("/files/*.json", "/files/report.json.exe", false),
            ("/files/a*b*c", "/files/aXXbYYc", true),
            ("/files/a*b*c", "/files/aXXbYY", false),
            ("/**", "/", true),
            ("/exact", "/exact/", false),
            ("/", "/", true),
        ];
        for (pattern, path, expected) in cases {
            let pattern = pattern_segments(pattern);
            let decoded = decoded_path(path).unwrap();
            let segments: Vec<&str> = decoded[1..].split('/').collect();
            assert_eq!(
                path_matches(&pattern, &segments),
                expected,
                "{pattern:?} {path}"
            );
        }
    }

    #[test]
    fn rules_read_and_print_the_same() {
        for (written, printed) in [
            ("GET api.github.com/repos/**", "GET api.github.com/repos/**"),
            ("allow get API.github.com", "GET api.github.com/**"),
            ("deny * *.example.com/x", "deny *.example.com/x"),
            ("example.com/", "example.com/"),
        ] {
            let rule: RequestRule = written.parse().unwrap();
            assert_eq!(rule.to_string(), printed);
            assert_eq!(printed.parse::<RequestRule>().unwrap(), rule);
        }
        let list = rules(&["GET a.example.com", "deny b.example.com/x"]);
        assert_eq!(list.to_string().parse::<RequestRules>().unwrap(), list);
    }

    #[test]
    fn a_bad_rule_says_what_is_wrong() {
        for (rule, says) in [
            ("", "a rule is"),
            ("GET POST x.com/a", "a rule is"),
            ("G3T x.com", "not a method"),
            ("allow deny x.com", "one, first"),
            ("GET 10.0.0.1/x", "by name"),
            ("GET x.com/a?b=1", "decoded path"),
            ("GET x.com/a/../b", "segment"),
            ("GET x.com/a//b", "segment"),
            ("GET x.com/a**/b", "stands alone"),
            ("GET x.com/**/**/**/**/**", "more than"),
            ("GET exa*mple.com/", "wildcard"),
        ] {
            let error = rule.parse::<RequestRule>().unwrap_err();
            assert!(error.to_string().contains(says), "{rule}: {error}");
        }
    }

    #[test]
    fn added_allow_rules_are_looser_only_where_the_base_already_confined() {
        let base = rules(&["GET api.example.com/v1/**", "deny *.example.com/admin"]);
        let narrower = rules(&[
            "GET api.example.com/v1/**",
            "deny *.example.com/admin",
            "deny GET api.example.com/v1/secret",
            "GET other.test/x",
        ]);
        assert!(!narrower.looser_than(&base));
        let widened = rules(&[
            "GET api.example.com/v1/**",
            "deny *.example.com/admin",
            "POST *.example.com/**",
        ]);
        assert!(widened.looser_than(&base));
        let dropped = rules(&["GET api.example.com/v1/**"]);
        assert!(dropped.looser_than(&base));
        assert!(!base.looser_than(&base));
        assert!(!base.looser_than(&RequestRules::none()));
        assert!(RequestRules::none().looser_than(&base));
    }
}
