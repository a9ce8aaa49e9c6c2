//! Snapshots: taking one of a session, listing, sending and fetching them whole (streamed,
//! they may be gigabytes), deleting, and opening a session from one.

use super::api::{blocking, Api};
use super::bodies::{optional_body, unreadable};
use super::errors::{Answer, ApiError};
use crate::manager::{ClientId, SessionId, StoredSnapshotId};
use crate::serve::requests::{Restore, TakeSnapshot};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use sandlot_core::error::Error;
use serde_json::{json, Value};

pub(super) async fn snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let TakeSnapshot { files_only } = optional_body(body)?;
    let manager = api.manager.clone();
    let id = SessionId::from(id);
    let info = blocking(move || {
        if files_only {
            manager.snapshot_files(&client, &id)
        } else {
            manager.snapshot(&client, &id)
        }
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}

pub(super) async fn snapshots(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
) -> Json<Value> {
    Json(json!({ "snapshots": api.manager.snapshots(&client) }))
}

/// A snapshot sent whole: streamed to a private file (it may be gigabytes, beyond
/// the API's body limit; at most the room left in the store), then checked and kept.
pub(super) async fn upload_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    body: axum::body::Body,
) -> Answer<(StatusCode, Json<Value>)> {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let limit = api.manager.settings().max_stored_bytes;
    let failed = |e: std::io::Error| {
        ApiError::from(Error::Io {
            context: "cannot take the snapshot's bytes".into(),
            source: e,
        })
    };
    let file = blocking(|| {
        tempfile::tempfile().map_err(|e| Error::Io {
            context: "cannot make a file for the snapshot".into(),
            source: e,
        })
    })
    .await?;
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = body.into_data_stream();
    let mut received: u64 = 0;
    // Taken as the bytes arrive, so uploads under way and what the store holds
    // together stay within its room; given back before the snapshot is kept, which
    // takes its own.
    let mut room = api.manager.incoming(&client);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| unreadable(StatusCode::BAD_REQUEST, e.to_string()))?;
        received += chunk.len() as u64;
        if received <= limit {
            room.take(chunk.len() as u64)?;
        } else {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_input",
                format!(
                    "a snapshot of more than {limit} bytes, the server's store, cannot be kept"
                ),
            ));
        }
        file.write_all(&chunk).await.map_err(failed)?;
    }
    file.flush().await.map_err(failed)?;
    drop(room);
    let mut file = file.into_std().await;
    let manager = api.manager.clone();
    let info = blocking(move || {
        use std::io::Seek as _;
        file.rewind().map_err(|e| Error::Io {
            context: "cannot read the snapshot's bytes".into(),
            source: e,
        })?;
        manager.upload_snapshot(
            &client,
            &mut std::io::BufReader::with_capacity(1 << 20, file),
        )
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}

/// A snapshot's bytes, streamed from its file: they may be gigabytes.
pub(super) async fn download_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<Response> {
    let id = StoredSnapshotId::from(id);
    let (path, info) = api.manager.snapshot_file(&client, &id)?;
    let file = tokio::fs::File::open(&path).await.map_err(|e| {
        ApiError::from(Error::Io {
            context: format!("cannot read snapshot {id}"),
            source: e,
        })
    })?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, info.bytes.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.sandlot\""),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

pub(super) async fn delete_snapshot(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
) -> Answer<StatusCode> {
    api.manager
        .delete_snapshot(&client, &StoredSnapshotId::from(id))?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn restore(
    State(api): State<Api>,
    Extension(client): Extension<ClientId>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<(StatusCode, Json<Value>)> {
    let ask = optional_body::<Restore>(body)?.ask();
    let manager = api.manager.clone();
    let id = StoredSnapshotId::from(id);
    let info = blocking(move || manager.restore(&client, &id, Some(ask))).await?;
    Ok((StatusCode::CREATED, Json(json!(info))))
}
