//! The web playground's page and files: public, without a token, under a strict
//! content security policy; static assets, not the API, so a room of their own.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The web playground: one page, no build step, no third-party code. It reads
/// nothing without a token where the server needs one; the page itself is public.
pub(super) async fn playground() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, PLAYGROUND_CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        include_str!("../playground.html"),
    )
        .into_response()
}

/// Only the page's own script and style files (nothing inline, so markup that ever
/// got into the page could not run), images from data: URLs (plots), requests to
/// this server.
const PLAYGROUND_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                              img-src data:; connect-src 'self'; base-uri 'none'; \
                              form-action 'none'; frame-ancestors 'none'";

pub(super) async fn playground_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../playground.js"),
    )
}

pub(super) async fn playground_style() -> Response {
    asset("text/css; charset=utf-8", include_str!("../playground.css"))
}

/// One of the playground's own files, as `content_type` and nothing else.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}
