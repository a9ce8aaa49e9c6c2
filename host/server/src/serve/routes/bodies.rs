//! Request bodies as the handlers take them: JSON (required or optional) or raw bytes,
//! whose failures answer in the API's error shape rather than axum's plain text.

use super::errors::{Answer, ApiError};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::http::StatusCode;
use axum::Json;

/// A JSON body, or a 400 that says what is wrong with it.
pub(super) fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Answer<T> {
    parsed
        .map(|Json(value)| value)
        .map_err(|e| unreadable(e.status(), e.body_text()))
}

/// A request body axum could not take (malformed, too large, the wrong type), in the
/// API's one error shape.
pub(super) fn unreadable(status: StatusCode, text: String) -> ApiError {
    ApiError::new(status, "invalid_input", text)
}

/// A JSON body that may be left out (empty: the type's default), or a 400 that says
/// what is wrong with it.
pub(super) fn optional_body<T: serde::de::DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
) -> Answer<T> {
    let body = body.map_err(|e| unreadable(e.status(), e.body_text()))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&body).map_err(|e| {
        unreadable(
            StatusCode::BAD_REQUEST,
            format!("Failed to deserialize the JSON body: {e}"),
        )
    })
}
