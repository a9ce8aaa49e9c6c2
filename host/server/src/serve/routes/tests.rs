//! The error mapping against the documented table, and the loopback guard's names.

use super::errors::status_of;
use super::guard::{is_loopback_authority, is_loopback_origin};
use axum::http::StatusCode;
use sandlot_core::error::{Error, ErrorKind};

/// The error table of docs/servers.md names every kind in the row of the status it
/// answers with (`tests/serve.rs` provokes the rows over HTTP).
#[test]
fn the_documented_error_table_is_this_mapping() {
    let docs = include_str!("../../../../../docs/servers.md");
    let row = |status: StatusCode| {
        docs.lines()
            .find(|line| line.starts_with(&format!("| {} |", status.as_u16())))
            .unwrap_or_else(|| panic!("no row for {status} in docs/servers.md"))
    };
    for &kind in ErrorKind::ALL {
        let error = Error::Masked {
            message: String::new(),
            kind,
        };
        let status = status_of(&error);
        assert!(
            row(status).contains(&format!("`{kind}`")),
            "the row of {status} does not name {kind}: {}",
            row(status)
        );
    }
    let missing = Error::NoSuchFile { path: "x".into() };
    assert_eq!(status_of(&missing), StatusCode::NOT_FOUND);
    assert!(row(StatusCode::NOT_FOUND).contains("`not_found`"));
}

#[test]
fn only_this_machines_names_pass_without_tokens() {
    for host in [
        "localhost",
        "LOCALHOST:8080",
        "127.0.0.1:9",
        "127.1.2.3",
        "[::1]:80",
        "[::1]",
    ] {
        assert!(is_loopback_authority(host), "{host}");
    }
    for host in [
        "evil.example:8080",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "10.0.0.1",
        "[::2]:80",
        "127.0.0.1:",
        "127.0.0.1:80:80",
        "",
    ] {
        assert!(!is_loopback_authority(host), "{host}");
    }
    assert!(is_loopback_origin("http://127.0.0.1:8080"));
    assert!(is_loopback_origin("https://localhost"));
    for origin in [
        "null",
        "http://evil.example",
        "http://127.0.0.1:8080/x",
        "file://",
    ] {
        assert!(!is_loopback_origin(origin), "{origin}");
    }
}
