//! The gate's doors on a session: a run's code and a command line are read under the
//! session's policy here, apart from the reading of command lines itself (`gate.rs`),
//! which needs no session.

use super::gate::inline_code;
use super::state::Session;
use crate::error::{Error, Result};
use crate::language::Finding;
use crate::policy::Gate;

impl Session {
    /// Reads `code` with the analysis gate, as a run of it would be read: the
    /// findings the policy reports (empty when [`Policy::analyze`](crate::Policy) is
    /// off), or [`Error::Blocked`] with those it blocks. For a front end that runs
    /// code of the session's language by a way of its own (a command's program it
    /// wraps in code of its own), so that the gate reads what the client sent.
    pub fn check(&self, code: &str) -> Result<Vec<Finding>> {
        if !self.policy.analyze {
            return Ok(Vec::new());
        }
        let findings = self.handler.analyze(code, &self.restricted)?;
        self.gate(findings)
    }

    /// Reads a shell command line with the analysis gate, as
    /// [`Session::execute_command`] does: as shell code, and each piece of code it
    /// hands an interpreter inline as code of that interpreter's language.
    pub fn check_command(&self, line: &str) -> Result<Vec<Finding>> {
        if !self.policy.analyze {
            return Ok(Vec::new());
        }
        let mut findings = Vec::new();
        let mut pieces = vec![("bash", line.to_string())];
        pieces.extend(inline_code(line, 0));
        for (language, code) in pieces {
            let handler = match language {
                "bash" => self.readers.shell.as_ref(),
                other => self.readers.handler(other),
            };
            // A language not loaded here reads nothing; the shell's reading stands.
            let Some(handler) = handler else { continue };
            let restricted = self.policy.restricted.for_language(handler.info());
            findings.extend(handler.analyze(&code, &restricted)?);
        }
        self.gate(findings)
    }

    /// `findings` as the policy treats them: those it ignores dropped, an error with
    /// those it blocks.
    pub(super) fn gate(&self, mut findings: Vec<Finding>) -> Result<Vec<Finding>> {
        findings.retain(|f| self.policy.gate(f.severity) != Gate::Ignore);
        if let Some(threshold) = self.policy.block_at {
            let blocking: Vec<Finding> = findings
                .iter()
                .filter(|f| self.policy.gate(f.severity) == Gate::Block)
                .cloned()
                .collect();
            if !blocking.is_empty() {
                return Err(Error::Blocked {
                    findings: blocking,
                    threshold,
                });
            }
        }
        Ok(findings)
    }
}
