//! [`Denials`]: what one proxy refused, kept for the run to report.

use sandlot_core::egress::{Denial, DenyReason, Via};
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

    /// What was refused since the last call.
    pub(super) fn take(&self) -> Vec<Denial> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
