//! Static analysis for the security policy: the handler's findings, plus what the
//! host adds for contracts that cannot look for restrictions, in a stable order.

use super::language_handler::LanguageHandler;
use super::versions::{convert_finding, Guest, Version};
use crate::error::Result;
use crate::language::{Finding, Restriction, RestrictionKind, Severity};
use sandlot_wit::v0_1_0::handler::exports::sandlot::plugin::handler as wit1;
use sandlot_wit::v0_2_0::handler::exports::sandlot::plugin::handler as wit2;
use sandlot_wit::v0_3_0::handler::exports::sandlot::plugin::handler as wit3;

impl LanguageHandler {
    /// Static analysis of `code` for the security policy, most severe first: the
    /// handler's own rules and the `restricted` modules and calls of its language.
    ///
    /// A handler built before contract 0.3 cannot look for restrictions; it gives
    /// one finding, `sandlot.restrictions-unchecked`, as severe as the most severe
    /// restriction, so a policy that would block a restricted name blocks the code
    /// instead of letting it through unchecked.
    ///
    /// ```
    /// # fn main() -> Result<(), sandlot::Error> {
    /// use sandlot::{Restriction, RestrictionKind, Severity};
    /// let host = sandlot::PluginHost::builder().no_cache().load()?;
    /// let python = host.language("python")?;
    /// let socket = Restriction {
    ///     kind: RestrictionKind::Module,
    ///     name: "socket".parse().unwrap(),
    ///     severity: Severity::Critical,
    /// };
    /// let findings = python.analyze("import socket as s\ns.create_connection", &[socket])?;
    /// assert_eq!(findings[0].rule_id, "python.restricted-module.socket");
    /// assert_eq!(findings[0].line, Some(1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn analyze(&self, code: &str, restricted: &[Restriction]) -> Result<Vec<Finding>> {
        let rules: Vec<wit3::Restriction> = restricted
            .iter()
            .map(|r| wit3::Restriction {
                kind: match r.kind {
                    RestrictionKind::Module => wit3::RestrictionKind::Module,
                    RestrictionKind::Call => wit3::RestrictionKind::Call,
                },
                name: r.name.to_string(),
                severity: match r.severity {
                    Severity::Info => wit3::Severity::Info,
                    Severity::Low => wit3::Severity::Low,
                    Severity::Medium => wit3::Severity::Medium,
                    Severity::High => wit3::Severity::High,
                    Severity::Critical => wit3::Severity::Critical,
                },
            })
            .collect();
        let mut findings = self.call("analyze", code.len(), |guest, store| {
            Ok(match guest {
                Guest::V0_1(h) => h
                    .call_analyze(store, code)?
                    .into_iter()
                    .map(|f| convert_finding!(wit1, f))
                    .collect::<Vec<_>>(),
                Guest::V0_2(h) => h
                    .call_analyze(store, code)?
                    .into_iter()
                    .map(|f| convert_finding!(wit2, f))
                    .collect(),
                Guest::V0_3(h) => h
                    .call_analyze(store, code, &rules)?
                    .into_iter()
                    .map(|f| convert_finding!(wit3, f))
                    .collect(),
            })
        })?;
        if self.guest_kind() < Version::V0_3 {
            if let Some(severity) = restricted.iter().map(|r| r.severity).max() {
                findings.push(Finding {
                    rule_id: "sandlot.restrictions-unchecked".into(),
                    severity,
                    line: None,
                    message: format!(
                        "the `{}` handler is built for plugin contract {}, which cannot look \
                         for restricted modules and calls: use a handler built for 0.3.0, or \
                         drop the policy's restrictions for `{}`",
                        self.info.id, self.api_version, self.info.id
                    ),
                });
            }
        }
        for f in &findings {
            if f.rule_id.trim().is_empty() {
                return Err(self.invalid("analyze", "a finding has an empty rule id".into()));
            }
            if f.line == Some(0) {
                return Err(self.invalid("analyze", "line numbers start at 1".into()));
            }
        }
        // Stable whatever order the plugin answers in, and one finding per rule and line.
        findings.sort_by(|a, b| {
            (b.severity, a.line, &a.rule_id).cmp(&(a.severity, b.line, &b.rule_id))
        });
        findings.dedup_by(|a, b| a.rule_id == b.rule_id && a.line == b.line);
        Ok(findings)
    }
}
