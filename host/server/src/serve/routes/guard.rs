//! Who may ask: a client by its bearer token, or, without tokens, only a request made on
//! this machine. Kept apart from the handlers, which take the client as given.

use super::api::Api;
use super::errors::ApiError;
use crate::manager::ClientId;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The client of a request without tokens configured (loopback only).
const LOCAL_CLIENT: &str = "local";

/// Refuses (403) a request whose `Host` is not a loopback name or address, or whose
/// `Origin`, if it has one, is not a loopback origin.
pub(crate) async fn loopback_only(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("?"));
    let problem = match (host, origin) {
        (None, _) => Some("it has no Host header".to_string()),
        (Some(host), _) if !is_loopback_authority(host) => {
            Some(format!("its Host `{}` is not this machine", shown(host)))
        }
        (_, Some(origin)) if !is_loopback_origin(origin) => Some(format!(
            "its Origin `{}` is not a page of this machine",
            shown(origin)
        )),
        _ => None,
    };
    match problem {
        None => next.run(request).await,
        Some(problem) => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            format!(
                "refused: {problem}; without tokens this server answers only requests made \
                 on this machine (set SANDLOT_API_TOKENS to serve others)"
            ),
        )
        .into_response(),
    }
}

/// A header value as an error message may quote it: short, without control characters.
pub(crate) fn shown(value: &str) -> String {
    let value: String = value.chars().take(100).collect();
    sandlot_core::sandbox_path::escape_controls(&value).into_owned()
}

/// Whether `authority` (`host[:port]`) names this machine: `localhost`, or a loopback
/// address (`127.0.0.0/8`, `[::1]`).
pub(super) fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((address, port))
                if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) =>
            {
                return address
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|a| a.is_loopback());
            }
            _ => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        }
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

fn is_port(digits: &str) -> bool {
    !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether an `Origin` is a page of this machine: `http(s)://` and a loopback
/// authority, nothing after it. `null` (a sandboxed frame, a file) is not.
pub(super) fn is_loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| !authority.contains('/') && is_loopback_authority(authority))
}

/// Finds the client of the request's bearer token, or answers 401.
pub(super) async fn authenticate(
    State(api): State<Api>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = if api.tokens.is_empty() {
        Some(ClientId::new(LOCAL_CLIENT))
    } else {
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                // The scheme's name is case-insensitive (RFC 9110).
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
            .and_then(|given| api.tokens.iter().find(|t| t.matches(given.trim())))
            .map(|t| t.client().clone())
    };
    match client {
        Some(client) => {
            request.extensions_mut().insert(client);
            next.run(request).await
        }
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this API needs `Authorization: Bearer TOKEN` with one of the server's tokens",
        )
        .into_response(),
    }
}
