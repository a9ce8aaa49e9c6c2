//! envd's `filesystem.Filesystem` service over the sandbox's workspace: `Stat`,
//! `ListDir`, `MakeDir`, `Move` and `Remove`, each a unary Connect call on the
//! sandbox's main session. Watching a directory is not offered yet: the calls answer
//! `unimplemented` with the reason.

use super::connect::{self, Code, ConnectError};
use super::files::Place;
use super::sandboxes::{rfc3339, E2bSandbox};
use super::E2b;
use crate::manager::{SessionId, SessionManager};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use axum::{Extension, Router};
use sandlot_core::backend::{FileInfo, FileKind};
use sandlot_core::Session;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// Most entries one `ListDir` answers: a deeper walk is refused, not truncated.
const MAX_LISTED: usize = 100_000;

pub(super) fn router(e2b: E2b) -> Router {
    Router::new()
        .route("/filesystem.Filesystem/Stat", call(stat))
        .route("/filesystem.Filesystem/ListDir", call(list_dir))
        .route("/filesystem.Filesystem/MakeDir", call(make_dir))
        .route("/filesystem.Filesystem/Move", call(rename))
        .route("/filesystem.Filesystem/Remove", call(remove))
        .route("/filesystem.Filesystem/WatchDir", post(unwatched_stream))
        .route("/filesystem.Filesystem/CreateWatcher", post(unwatched))
        .route("/filesystem.Filesystem/GetWatcherEvents", post(unwatched))
        .route("/filesystem.Filesystem/RemoveWatcher", post(unwatched))
        .with_state(e2b)
}

#[derive(Debug, Deserialize)]
struct PathRequest {
    #[serde(default)]
    path: String,
}

#[derive(Debug, Deserialize)]
struct ListRequest {
    #[serde(default)]
    path: String,
    #[serde(default)]
    depth: u32,
}

#[derive(Debug, Deserialize)]
struct MoveRequest {
    #[serde(default)]
    source: String,
    #[serde(default)]
    destination: String,
}

/// One filesystem call on the sandbox's main session.
type Work<T> = fn(T, &mut Session) -> Result<Value, ConnectError>;

/// The route of a unary call that `work` answers.
fn call<T: DeserializeOwned + Send + 'static>(work: Work<T>) -> MethodRouter<E2b> {
    post(
        move |State(e2b): State<E2b>,
              Extension(sandbox): Extension<Arc<E2bSandbox>>,
              headers: HeaderMap,
              body: Bytes| async move {
            on_session(&e2b, &sandbox, &headers, &body, work).await
        },
    )
}

/// Decodes a unary request, runs `work` on the sandbox's main session off the async
/// workers, and answers its message or its error.
async fn on_session<T: DeserializeOwned + Send + 'static>(
    e2b: &E2b,
    sandbox: &E2bSandbox,
    headers: &HeaderMap,
    body: &[u8],
    work: Work<T>,
) -> Response {
    let answered = async {
        let request: T = connect::unary_call(headers, body)?;
        let session = main_session(sandbox)?;
        let manager: SessionManager = e2b.manager.clone();
        let client = sandbox.client.clone();
        let done = tokio::task::spawn_blocking(move || {
            manager
                .with_session(&client, &session, |s| Ok(work(request, s)))
                .map_err(ConnectError::from)?
        });
        done.await.map_err(|e| {
            ConnectError::new(
                Code::Internal,
                format!("the call failed inside the server: {e}"),
            )
        })?
    };
    match answered.await {
        Ok(message) => connect::unary(message),
        Err(error) => error.into_response(),
    }
}

/// The session of the sandbox's files and commands, while it has one.
pub(super) fn main_session(sandbox: &E2bSandbox) -> Result<SessionId, ConnectError> {
    sandbox
        .main_session()
        .ok_or_else(|| ConnectError::new(Code::Unavailable, "the sandbox has ended"))
}

/// A path the caller must give.
fn required(path: &str, what: &str) -> Result<Place, ConnectError> {
    if path.is_empty() {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            format!("`{what}` is required"),
        ));
    }
    Place::of(path)
}

/// E2B's `EntryInfo` of the file at `place`.
fn entry_info(place: &Place, info: &FileInfo) -> Value {
    let kind = match info.kind {
        FileKind::Directory => "FILE_TYPE_DIRECTORY",
        FileKind::Link => "FILE_TYPE_SYMLINK",
        // envd names only files, directories and links; a FIFO or a socket is a file
        // to it as well.
        _ => "FILE_TYPE_FILE",
    };
    let path = place.e2b();
    let name = path.rsplit('/').next().unwrap_or_default().to_string();
    let mut entry = json!({
        "name": name,
        "type": kind,
        "path": path,
        // int64 is a string in protobuf's JSON.
        "size": info.size.to_string(),
        "mode": info.mode,
        "permissions": info.permissions(),
        // Every file of a sandlot sandbox belongs to its one user, E2B's `user`.
        "owner": "user",
        "group": "user",
    });
    if let Some(modified) = info.modified {
        entry["modifiedTime"] = json!(rfc3339(modified));
    }
    entry
}

fn stat(r: PathRequest, s: &mut Session) -> Result<Value, ConnectError> {
    let place = required(&r.path, "path")?;
    let info = s.file_info(&place.relative)?;
    Ok(json!({ "entry": entry_info(&place, &info) }))
}

fn list_dir(r: ListRequest, s: &mut Session) -> Result<Value, ConnectError> {
    let place = required(&r.path, "path")?;
    // envd lists one level when no depth is given.
    let depth = r.depth.max(1);
    let info = s.file_info(&place.relative)?;
    if !info.is_dir() {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            format!("`{}` is not a directory", place.e2b()),
        ));
    }
    let mut entries = Vec::new();
    walk(s, &place, depth, &mut entries)?;
    Ok(json!({ "entries": entries }))
}

/// The entries of directory `root` and, `depth` levels down, of those below it, in
/// the order a depth-first walk meets them; a link is listed, never followed. The
/// directories being listed are kept on a stack of their own, not the thread's: the
/// client picks the depth and the sandbox's code the tree.
fn walk(
    session: &mut Session,
    root: &Place,
    depth: u32,
    entries: &mut Vec<Value>,
) -> Result<(), ConnectError> {
    let listing = session.list_files(&root.relative)?.entries.into_iter();
    let mut open = vec![(root.clone(), depth, listing)];
    while let Some((place, depth, listing)) = open.last_mut() {
        let Some(entry) = listing.next() else {
            open.pop();
            continue;
        };
        if entries.len() == MAX_LISTED {
            return Err(ConnectError::new(
                Code::ResourceExhausted,
                format!(
                    "`{}` holds more than {MAX_LISTED} entries at this depth: list a \
                     smaller depth or a directory below it",
                    place.e2b()
                ),
            ));
        }
        let child = place.join(entry.name.as_str());
        entries.push(entry_info(&child, &entry.info));
        if entry.is_dir && *depth > 1 {
            let below = *depth - 1;
            match session.list_files(&child.relative) {
                Ok(listing) => open.push((child, below, listing.entries.into_iter())),
                // Gone since it was listed (the sandbox's code goes on): listed as
                // it was, not a failure of the whole walk.
                Err(error) if error.kind() == sandlot_core::error::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

fn make_dir(r: PathRequest, s: &mut Session) -> Result<Value, ConnectError> {
    let place = required(&r.path, "path")?;
    if !s.make_dir(&place.relative)? {
        // The SDKs' make_dir answers `false` to this.
        return Err(ConnectError::new(
            Code::AlreadyExists,
            format!("directory `{}` exists already", place.e2b()),
        ));
    }
    let info = s.file_info(&place.relative)?;
    Ok(json!({ "entry": entry_info(&place, &info) }))
}

fn rename(r: MoveRequest, s: &mut Session) -> Result<Value, ConnectError> {
    let from = required(&r.source, "source")?;
    let to = required(&r.destination, "destination")?;
    s.rename(&from.relative, &to.relative)?;
    let info = s.file_info(&to.relative)?;
    Ok(json!({ "entry": entry_info(&to, &info) }))
}

fn remove(r: PathRequest, s: &mut Session) -> Result<Value, ConnectError> {
    let place = required(&r.path, "path")?;
    s.remove_path(&place.relative)?;
    Ok(json!({}))
}

const UNWATCHED: &str = "watching a directory is not supported by sandlot yet: list it \
                         (files.list) after the command or code that changes it";

async fn unwatched() -> Response {
    ConnectError::new(Code::Unimplemented, UNWATCHED).into_response()
}

/// A streaming call's refusal travels in its last frame, where the SDKs read it.
async fn unwatched_stream() -> Response {
    connect::failed_stream(&ConnectError::new(Code::Unimplemented, UNWATCHED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_described_as_envd_does() {
        let place = Place::of("/home/user/data/a.csv").unwrap();
        let info = FileInfo::new(FileKind::File, 11)
            .with_mode(0o644)
            .with_modified(Some(std::time::UNIX_EPOCH));
        let entry = entry_info(&place, &info);
        assert_eq!(entry["name"], "a.csv");
        assert_eq!(entry["type"], "FILE_TYPE_FILE");
        assert_eq!(entry["path"], "/home/user/data/a.csv");
        assert_eq!(entry["size"], "11");
        assert_eq!(entry["mode"], 0o644);
        assert_eq!(entry["permissions"], "-rw-r--r--");
        assert_eq!(entry["modifiedTime"], "1970-01-01T00:00:00.000Z");
        let root = Place::of("/workspace").unwrap();
        let dir = entry_info(&root.join("out"), &FileInfo::new(FileKind::Directory, 0));
        assert_eq!(dir["path"], "/workspace/out");
        assert_eq!(dir["type"], "FILE_TYPE_DIRECTORY");
        assert!(required("", "path").is_err());
        assert!(required("/etc/passwd", "path").is_err());
    }
}
