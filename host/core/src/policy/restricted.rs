//! Modules and calls a policy restricts, per language: `[policy.restricted.LANGUAGE]`
//! with `modules` and `calls`, each a list of names (every one at `critical`) or a
//! table of names and severities.
//!
//! ```
//! use sandlot::policy::Policy;
//! let policy = Policy::from_toml(
//!     r#"
//! [restricted.python]
//! modules = ["socket", "ctypes"]
//! calls = { "os.system" = "critical", "eval" = "high" }
//! "#,
//!     "inline".as_ref(),
//! )?;
//! assert_eq!(policy.restricted.language("python").count(), 4);
//! # Ok::<(), sandlot::Error>(())
//! ```

use crate::language::{
    check_language_name, LanguageInfo, RestrictedName, Restriction, RestrictionKind, Severity,
};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The severity of a restriction written as a bare name in a list: restricting a
/// module usually means refusing code that uses it, and `critical` blocks under
/// every preset but `permissive`.
pub const LISTED_SEVERITY: Severity = Severity::Critical;

/// The modules and calls a policy restricts, by language id or alias, as
/// `[policy.restricted.LANGUAGE]` writes them. Each language's handler looks for them
/// in the code it analyzes; the policy's thresholds decide what blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Restrictions(BTreeMap<String, BTreeSet<Restriction>>);

impl Restrictions {
    /// No restrictions.
    pub fn none() -> Restrictions {
        Restrictions::default()
    }

    /// Whether nothing is restricted.
    pub fn is_empty(&self) -> bool {
        self.0.values().all(BTreeSet::is_empty)
    }

    /// Adds `restriction` for `language` (an id or an alias), replacing one of the
    /// same kind and name.
    pub fn add(&mut self, language: &str, restriction: Restriction) -> &mut Self {
        let set = self.0.entry(language.to_string()).or_default();
        set.retain(|r| (r.kind, &r.name) != (restriction.kind, &restriction.name));
        set.insert(restriction);
        self
    }

    /// The languages named, as written.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The restrictions written under `language` exactly.
    pub fn language<'a>(&'a self, language: &str) -> impl Iterator<Item = &'a Restriction> {
        self.0.get(language).into_iter().flatten()
    }

    /// The restrictions for the language `info` describes, under its id or any of
    /// its aliases.
    pub fn for_language(&self, info: &LanguageInfo) -> Vec<Restriction> {
        let mut all: Vec<Restriction> = std::iter::once(&info.id)
            .chain(&info.aliases)
            .flat_map(|name| self.language(name))
            .cloned()
            .collect();
        all.sort();
        // The most severe of one name written under two names of the language.
        all.dedup_by(|later, earlier| {
            let same = (later.kind, &later.name) == (earlier.kind, &earlier.name);
            if same {
                earlier.severity = earlier.severity.max(later.severity);
            }
            same
        });
        all
    }

    /// Whether these restrict at least everything `base` does, each at least as
    /// severely, so a client that adds restrictions tightens a server's policy and
    /// one that drops them loosens it.
    pub fn cover(&self, base: &Restrictions) -> bool {
        base.0.iter().all(|(language, wanted)| {
            wanted.iter().all(|w| {
                self.language(language)
                    .any(|r| (r.kind, &r.name) == (w.kind, &w.name) && r.severity >= w.severity)
            })
        })
    }
}

/// `[policy.restricted.LANGUAGE]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LanguageSection {
    #[serde(default)]
    modules: Names,
    #[serde(default)]
    calls: Names,
}

/// `["a", "b"]` or `{ a = "high", b = "critical" }`.
#[derive(Default)]
struct Names(Vec<(RestrictedName, Severity)>);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NamesVisitor;
        impl<'de> Visitor<'de> for NamesVisitor {
            type Value = Names;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a list of names (each restricted at critical) or a table of names and \
                     severities (info, low, medium, high, critical)",
                )
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push((name.parse().map_err(de::Error::custom)?, LISTED_SEVERITY));
                }
                Ok(Names(names))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Names, A::Error> {
                let mut names = Vec::new();
                while let Some((name, severity)) = map.next_entry::<String, Severity>()? {
                    names.push((name.parse().map_err(de::Error::custom)?, severity));
                }
                Ok(Names(names))
            }
        }
        deserializer.deserialize_any(NamesVisitor)
    }
}

impl<'de> Deserialize<'de> for Restrictions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let sections = BTreeMap::<String, LanguageSection>::deserialize(deserializer)?;
        let mut restrictions = Restrictions::none();
        for (language, section) in sections {
            check_language_name("language", &language).map_err(de::Error::custom)?;
            let kinds = [
                (RestrictionKind::Module, section.modules),
                (RestrictionKind::Call, section.calls),
            ];
            for (kind, names) in kinds {
                for (name, severity) in names.0 {
                    restrictions.add(
                        &language,
                        Restriction {
                            kind,
                            name,
                            severity,
                        },
                    );
                }
            }
        }
        Ok(restrictions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn info(id: &str, aliases: &[&str]) -> LanguageInfo {
        LanguageInfo {
            id: id.into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            display_name: id.into(),
            file_extension: id.into(),
            default_image: String::new(),
            capabilities: Default::default(),
            version: String::new(),
        }
    }

    fn parse(text: &str) -> Result<Policy, String> {
        Policy::from_toml(text, "p.toml".as_ref()).map_err(|e| e.to_string())
    }

    #[test]
    fn lists_restrict_at_critical_and_tables_at_their_severity() {
        let policy = parse(
            "[restricted.python]\nmodules = [\"socket\"]\ncalls = { \"os.system\" = \"medium\" }\n\
             [restricted.js]\ncalls = [\"child_process.exec\"]\n",
        )
        .unwrap();
        let python = policy.restricted.for_language(&info("python", &["py"]));
        assert_eq!(
            python
                .iter()
                .map(|r| (r.kind, r.name.as_str(), r.severity))
                .collect::<Vec<_>>(),
            [
                (RestrictionKind::Module, "socket", Severity::Critical),
                (RestrictionKind::Call, "os.system", Severity::Medium),
            ]
        );
        // Written under an alias, found under the id.
        let js = policy
            .restricted
            .for_language(&info("javascript", &["js", "node"]));
        assert_eq!(js.len(), 1);
        assert!(policy
            .restricted
            .for_language(&info("ruby", &[]))
            .is_empty());
    }

    #[test]
    fn one_name_under_an_id_and_an_alias_keeps_the_most_severe() {
        let policy = parse(
            "[restricted.python]\nmodules = { socket = \"low\" }\n\
             [restricted.py]\nmodules = { socket = \"high\" }\n",
        )
        .unwrap();
        let python = policy.restricted.for_language(&info("python", &["py"]));
        assert_eq!(python.len(), 1);
        assert_eq!(python[0].severity, Severity::High);
    }

    #[test]
    fn bad_sections_are_errors_that_name_the_key_and_the_line() {
        for (text, needle) in [
            (
                "[restricted.python]\nmodule = [\"os\"]\n",
                "unknown field `module`",
            ),
            (
                "[restricted.python]\nmodules = [\"os system\"]\n",
                "`os system`",
            ),
            (
                "[restricted.python]\ncalls = { eval = \"severe\" }\n",
                "severe",
            ),
            ("[restricted.python]\nmodules = \"os\"\n", "a list of names"),
            ("[restricted.Python]\nmodules = [\"os\"]\n", "`Python`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
            assert!(error.contains("line"), "{text}: {error}");
        }
    }

    #[test]
    fn dropping_or_softening_a_restriction_loosens_a_policy() {
        let base = parse("[restricted.python]\nmodules = { socket = \"high\" }\n").unwrap();
        let more =
            parse("[restricted.python]\nmodules = { socket = \"critical\", ctypes = \"low\" }\n")
                .unwrap();
        let softer = parse("[restricted.python]\nmodules = { socket = \"low\" }\n").unwrap();
        assert!(more.restricted.cover(&base.restricted));
        assert!(!softer.restricted.cover(&base.restricted));
        assert!(!Restrictions::none().cover(&base.restricted));
        assert!(base.restricted.cover(&Restrictions::none()));
    }
}
