//! Tests of the session that need no backend.

use super::execute::masked_call;
use crate::secret::{Secret, Secrets};
use crate::tool::{ToolCall, ToolOutcome};
use std::time::Duration;

/// A tool call's record holds what the code sent: a name and a message that may
/// be a secret, the name cut at 64 bytes, and so a value's beginning.
#[test]
fn a_call_record_has_its_secrets_masked_in_its_name_and_message() {
    let value = format!("sk-{}", "x".repeat(70));
    let secrets = Secrets::new(
        vec![Secret::new("KEY", &value).unwrap()],
        Default::default(),
    )
    .unwrap();
    let cut: String = value.chars().take(64).collect();
    let call = ToolCall {
        name: cut,
        duration: Duration::ZERO,
        argument_bytes: 10,
        result_bytes: 0,
        outcome: ToolOutcome::UnknownTool,
        message: Some(format!("there is no tool `{value}`")),
    };
    let masked = masked_call(&secrets, call);
    assert_eq!(masked.name, "***");
    assert_eq!(masked.message.as_deref(), Some("there is no tool `***`"));
}
