//! A session's files, in as the raw body and out with the type their name suggests: the
//! one area of the API whose bodies are not JSON.

use super::api::{blocking, Api};
use super::bodies::unreadable;
use super::errors::Answer;
use crate::manager::{ClientId, SessionId};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

pub(super) async fn upload(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path((id, path)): Path<(String, String)>,
    contents: Result<Bytes, BytesRejection>,
) -> Answer<Json<Value>> {
    let contents = contents.map_err(|e| unreadable(e.status(), e.body_text()))?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let size = contents.len();
    let written = path.clone();
    blocking(move || manager.with_session(&client, &id, |s| s.write_file(&path, &contents)))
        .await?;
    Ok(Json(json!({ "written": written, "size": size })))
}

pub(super) async fn download(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path((id, path)): Path<(String, String)>,
) -> Answer<Response> {
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let mime = sandlot_core::artifact::mime_of(&path);
    let bytes =
        blocking(move || manager.with_session(&client, &id, |s| s.read_file(&path))).await?;
    Ok(([(header::CONTENT_TYPE, mime)], bytes).into_response())
}
