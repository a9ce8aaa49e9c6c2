//! Tests of the error kinds and messages.

use super::kind::ErrorKind;
use super::variants::Error;

#[test]
fn every_kind_has_its_own_name() {
    let names: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names.len(), ErrorKind::ALL.len());
}

#[test]
fn a_masked_error_keeps_the_kind_of_the_one_it_masks() {
    let error = Error::Masked {
        message: "secret ****".into(),
        kind: Error::ManagerClosed.kind(),
    };
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(error.kind().is_retryable());
}

#[test]
fn refusals_of_the_request_are_the_callers_and_failures_of_the_host_are_not() {
    let blocked = Error::Blocked {
        findings: vec![],
        threshold: crate::language::Severity::High,
    };
    assert!(blocked.kind().is_caller_error());
    assert!(!blocked.kind().is_retryable());
    let lost = Error::Agent {
        reason: "it stopped answering".into(),
    };
    assert_eq!(lost.kind(), ErrorKind::Internal);
    assert!(!lost.kind().is_caller_error());
}

#[test]
fn a_missing_image_names_the_command_that_builds_it_for_its_engine() {
    let missing = |engine: &str| {
        Error::ImageMissing {
            engine: engine.into(),
            image: "sandlot/ruby:latest".into(),
            language: "ruby".into(),
        }
        .to_string()
    };
    assert!(missing("docker").contains("`sandlot images build ruby`"));
    assert!(missing("podman").contains("`sandlot images build --engine podman ruby`"));
    assert!(missing("native").contains("`sandlot images build --engine native ruby`"));
}
