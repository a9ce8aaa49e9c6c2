//! The API's one error shape, and the status each library error answers with: every
//! area of the API answers its failures through it, so it stands apart from all of them.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sandlot_core::error::{Error, ErrorKind};
use serde_json::json;

/// An error as the API answers it: a status and
/// `{"error": {"kind", "message", "retryable"}}`. A library error's kind is its
/// [`ErrorKind`]; the API's own are `unauthorized`, `forbidden_origin`,
/// `invalid_input` (a body it cannot read) and `no_route`.
pub(super) struct ApiError {
    status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
    /// Seconds a client should wait before trying again, for a retryable failure.
    pub(super) retry_after: Option<u32>,
}

impl ApiError {
    pub(super) fn new(
        status: StatusCode,
        kind: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
}

/// The status a library error answers with: 4xx where the request is at fault,
/// 503 where the server cannot serve it now, 500 where it failed.
pub(crate) fn status_of(error: &Error) -> StatusCode {
    match error.kind() {
        ErrorKind::Blocked | ErrorKind::Unsupported => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
        // The session and its files are the URL's resources; a language or backend
        // is a field of the body, which names something this server does not have.
        ErrorKind::NotFound
            if matches!(
                error,
                Error::NoSuchSession { .. }
                    | Error::NoSuchFile { .. }
                    | Error::NoSuchSnapshot { .. }
            ) =>
        {
            StatusCode::NOT_FOUND
        }
        ErrorKind::NotFound => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::NotAllowed => StatusCode::FORBIDDEN,
        ErrorKind::Exhausted => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::SessionEnded => StatusCode::GONE,
        ErrorKind::Unavailable | ErrorKind::NotInstalled => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let kind = error.kind();
        let retry_after = match kind {
            // A pool's sandbox or a session slot frees up in about a run's time.
            ErrorKind::Exhausted => Some(1),
            ErrorKind::Unavailable => Some(5),
            _ => None,
        };
        ApiError {
            status: status_of(&error),
            kind: kind.as_str(),
            message: error.to_string(),
            retry_after,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": {
            "kind": self.kind,
            "message": self.message,
            "retryable": self.retry_after.is_some(),
        } }));
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

pub(super) type Answer<T> = Result<T, ApiError>;

pub(super) async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_route",
        "no such route; the API is under /v1 (see docs/servers.md, or GET /openapi.json)",
    )
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "no_route",
        "this route does not take that method (see docs/servers.md, or GET /openapi.json)",
    )
}
