//! envd's file endpoints: `GET /files` (download) and `POST /files` (upload,
//! multipart or raw), over the sandbox's workspace, and the path mapping every E2B
//! file operation shares: E2B's home directory `/home/user` is the workspace.

use super::connect::{Code, ConnectError};
use super::sandboxes::E2bSandbox;
use super::{blocking, E2b, E2bError};
use axum::body::Bytes;
use axum::extract::{Multipart, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// E2B's home directory, where relative paths start: the sandbox's workspace.
pub const HOME: &str = "/home/user";

pub(super) fn router(e2b: E2b) -> Router {
    // Uploads take the upload limit; every other route keeps the server's smaller
    // one ([`super::MAX_REQUEST`]).
    let upload_limit = axum::extract::DefaultBodyLimit::max(e2b.max_upload);
    Router::new()
        .route("/files", get(download).post(upload).layer(upload_limit))
        .route("/health", get(health))
        .with_state(e2b)
}

async fn health() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// sandlot's own name for the workspace, where code in its containers runs: E2B
/// paths under it name the same files as under [`HOME`].
pub const WORKSPACE: &str = sandlot_core::layout::Layout::WORKSPACE;

/// An E2B path (absolute under [`HOME`] or [`WORKSPACE`], or relative to the home)
/// as a path relative to the workspace; `""` is the workspace. Anything else is
/// refused with what to use.
pub fn workspace_path(path: &str) -> Result<String, ConnectError> {
    Place::of(path).map(|place| place.relative)
}

/// A path of the sandbox's files, as the caller named it and as the workspace holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The root the caller named it under ([`HOME`] or [`WORKSPACE`]).
    root: &'static str,
    /// Relative to the workspace; `""` for the workspace itself.
    pub relative: String,
}

impl Place {
    /// `path` as E2B's SDKs send it.
    pub fn of(path: &str) -> Result<Place, ConnectError> {
        let (root, relative) = match [HOME, WORKSPACE]
            .into_iter()
            .find_map(|root| Some((root, path.strip_prefix(root)?)))
        {
            Some((root, "")) => (root, ""),
            Some((root, rest)) => (root, rest.strip_prefix('/').ok_or_else(|| outside(path))?),
            None if path.starts_with('/') => return Err(outside(path)),
            None => (HOME, path),
        };
        let relative = relative.trim_end_matches('/');
        // `.` and `..` are the session's to refuse with its own words; a `..` that
        // stays inside is refused too, which the SDKs never send.
        let relative = relative.strip_prefix("./").unwrap_or(relative);
        Ok(Place {
            root,
            relative: if relative == "." { "" } else { relative }.to_string(),
        })
    }

    /// The absolute E2B path, under the root the caller used.
    pub fn e2b(&self) -> String {
        if self.relative.is_empty() {
            self.root.to_string()
        } else {
            format!("{}/{}", self.root, self.relative)
        }
    }

    /// The place of entry `name` in this directory.
    pub fn join(&self, name: &str) -> Place {
        Place {
            root: self.root,
            relative: if self.relative.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", self.relative)
            },
        }
    }
}

fn outside(path: &str) -> ConnectError {
    ConnectError::new(
        Code::InvalidArgument,
        format!(
            "`{}` is outside the sandbox's files: sandlot keeps them under {HOME} (its \
             workspace, also named {WORKSPACE}); use a path there, or one relative to it",
            crate::serve::shown(path)
        ),
    )
}

/// The E2B path of a workspace path, under [`HOME`].
pub fn e2b_path(relative: &str) -> String {
    Place {
        root: HOME,
        relative: relative.to_string(),
    }
    .e2b()
}

#[derive(Debug, Deserialize)]
struct FileQuery {
    path: Option<String>,
    /// E2B's user; every sandlot sandbox has one, so it is only checked for form.
    #[allow(dead_code)]
    username: Option<String>,
}

/// A files error as envd answers it: `{"code", "message"}` with the status.
fn refused(error: ConnectError) -> E2bError {
    let status = match error.code {
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::PAYLOAD_TOO_LARGE,
        Code::Unavailable => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    E2bError::new(status, error.message)
}

async fn download(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    Query(query): Query<FileQuery>,
) -> Result<Response, E2bError> {
    let path = query
        .path
        .ok_or_else(|| E2bError::new(StatusCode::BAD_REQUEST, "the `path` query is required"))?;
    let relative = workspace_path(&path).map_err(refused)?;
    let session = main_session(&sandbox)?;
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    let bytes =
        blocking(move || manager.with_session(&client, &session, |s| s.read_file(&relative)))
            .await
            .map_err(|e| refused(e.into()))?;
    let mime = sandlot_core::artifact::mime_of(&path);
    Ok(([(header::CONTENT_TYPE, mime)], bytes).into_response())
}

fn main_session(sandbox: &E2bSandbox) -> Result<crate::manager::SessionId, E2bError> {
    sandbox
        .main_session()
        .ok_or_else(|| E2bError::new(StatusCode::BAD_GATEWAY, "the sandbox has ended"))
}

/// `POST /files`: one file as a raw body (`?path=`), or any number as multipart
/// parts named `file`, each going where its part's file name says (or to `?path=`
/// when there is one part and a path).
async fn upload(
    State(e2b): State<E2b>,
    Extension(sandbox): Extension<Arc<E2bSandbox>>,
    Query(query): Query<FileQuery>,
    headers: HeaderMap,
    request: Request,
) -> Result<Json<Value>, E2bError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut files: Vec<(String, Bytes)> = Vec::new();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart =
            <Multipart as axum::extract::FromRequest<()>>::from_request(request, &())
                .await
                .map_err(|e| E2bError::new(e.status(), e.body_text()))?;
        while let Some(field) = multipart
            .next_field()
            .await
            .map_err(|e| E2bError::new(e.status(), e.body_text()))?
        {
            if field.name() != Some("file") {
                continue;
            }
            let name = field.file_name().map(str::to_string);
            let data = field
                .bytes()
                .await
                .map_err(|e| E2bError::new(e.status(), e.body_text()))?;
            files.push((name.unwrap_or_default(), data));
        }
        if let (1, Some(path)) = (files.len(), &query.path) {
            files[0].0 = path.clone();
        } else if files.iter().any(|(name, _)| name.is_empty()) {
            return Err(E2bError::new(
                StatusCode::BAD_REQUEST,
                "a part of several files needs its path as its file name",
            ));
        }
    } else {
        let path = query.path.clone().ok_or_else(|| {
            E2bError::new(StatusCode::BAD_REQUEST, "the `path` query is required")
        })?;
        if headers.contains_key(header::CONTENT_ENCODING) {
            return Err(E2bError::new(
                StatusCode::BAD_REQUEST,
                "compressed uploads are not accepted: send the file as it is",
            ));
        }
        let data = axum::body::to_bytes(request.into_body(), e2b.max_upload)
            .await
            .map_err(|e| {
                E2bError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the upload is over this server's {} bytes: {e}",
                        e2b.max_upload
                    ),
                )
            })?;
        files.push((path, data));
    }
    if files.is_empty() {
        return Err(E2bError::new(
            StatusCode::BAD_REQUEST,
            "no file in the request: send a multipart part named `file`, or a raw body with \
             `?path=`",
        ));
    }
    let mut targets = Vec::with_capacity(files.len());
    let mut written = Vec::with_capacity(files.len());
    for (path, data) in files {
        let place = Place::of(&path).map_err(refused)?;
        targets.push((place.relative.clone(), data));
        written.push(place);
    }
    let session = main_session(&sandbox)?;
    let manager = e2b.manager.clone();
    let client = sandbox.client.clone();
    blocking(move || {
        manager.with_session(&client, &session, |s| {
            for (path, data) in &targets {
                s.write_file(path, data)?;
            }
            Ok(())
        })
    })
    .await
    .map_err(|e| refused(e.into()))?;
    let entries: Vec<Value> = written
        .iter()
        .map(|place| {
            let path = place.e2b();
            json!({
                "name": path.rsplit('/').next().unwrap_or_default(),
                "type": "file",
                "path": path,
            })
        })
        .collect();
    Ok(Json(Value::Array(entries)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_is_the_workspace() {
        assert_eq!(workspace_path("/home/user").unwrap(), "");
        assert_eq!(workspace_path("/home/user/").unwrap(), "");
        assert_eq!(workspace_path("/home/user/a/b.txt").unwrap(), "a/b.txt");
        assert_eq!(workspace_path("a.txt").unwrap(), "a.txt");
        assert_eq!(workspace_path("./a.txt").unwrap(), "a.txt");
        assert_eq!(e2b_path("a/b.txt"), "/home/user/a/b.txt");
        for outside in ["/etc/passwd", "/home/username/x", "/tmp/a"] {
            let refused = workspace_path(outside).unwrap_err();
            assert_eq!(refused.code, Code::InvalidArgument, "{outside}");
            assert!(refused.message.contains("/home/user"), "{refused:?}");
        }
    }
}
