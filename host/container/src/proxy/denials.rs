//! [`Denials`]: what one proxy refused, kept for the run to report.

use sandlot_core::egress::http::Request;
use sandlot_core::egress::{Denial, DenyReason, RequestRules, Ruling, Via};
use std::sync::Mutex;

/// Denials kept for one run; a loop that is refused a million times reports the first.
const MAX_DENIALS: usize = 100;

/// What a proxy refused since it was last asked, each once, in order.
#[derive(Default)]
pub(super) struct Denials(Mutex<Vec<Denial>>);

impl Denials {
    /// Records that `host` (at `port`, reached `via`) was refused for `reason`.
    pub(super) fn deny(
        &self,
        host: &str,
        port: Option<u16>,
        via: Via,
        reason: DenyReason,
    ) -> Denial {
        let denial = Denial::new(host, port, via, reason);
        let mut denials = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
            denials.push(denial.clone());
        }
        denial
    }

    /// Records and returns the denial of `request` (for `path`, to `host:port`,
    /// reached `via`) if `rules` refuse it; `None` if they let it go.
    pub(super) fn rule_out(
        &self,
        rules: &RequestRules,
        request: &Request,
        (host, port): (&str, u16),
        path: &str,
        via: Via,
    ) -> Option<Denial> {
        let Ruling::Denied { rule, unreadable } = rules.rule(&request.method, host, path) else {
            return None;
        };
        // The query is the code's to fill: it is not part of what a rule matches.
        let path = path.split(['?', '#']).next().unwrap_or_default();
        Some(self.deny(
            host,
            Some(port),
            via,
            DenyReason::Request {
                method: request.method.clone(),
                path: path.to_string(),
                rule: rule.map(ToString::to_string),
                unreadable,
            },
        ))
    }

    /// What was refused since the last call.
    pub(super) fn take(&self) -> Vec<Denial> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
