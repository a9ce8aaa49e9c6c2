//! Sessions saved to a file and opened again: `sandlot run --save/--restore` and the
//! REPL's `:save` and `:load`.

use anyhow::{Context, Result};
use sandlot::request::BackendChoice;
use sandlot::service::Service;
use sandlot::{ErrorKind, OpenRequest, Session};
use std::path::Path;

/// Saves `session` to `file`: its interpreter's state with its files where the backend
/// captures it, a Python kernel's variables by serialisation where it cannot (naming
/// those it could not save); elsewhere the files alone, and says so.
pub(super) fn save(session: &mut Session, file: &Path) -> Result<()> {
    let snapshot = match session.snapshot() {
        Ok(snapshot) => snapshot,
        Err(error) if error.kind() == ErrorKind::Unsupported => {
            note!(
                "sandlot: {} cannot save the interpreter's variables ({error}); saving the \
                 workspace's files alone",
                session.backend()
            );
            session.snapshot_files()?
        }
        Err(error) => return Err(error.into()),
    };
    snapshot
        .save(file)
        .with_context(|| format!("cannot save the session to {}", file.display()))?;
    if !snapshot.unsaved().is_empty() {
        note!(
            "sandlot: these variables could not be saved (a restored session lacks them): {}",
            snapshot.unsaved().join(", ")
        );
    }
    note!(
        "sandlot: saved the session ({}, {} KiB) to {}",
        if snapshot.holds_memory() || snapshot.holds_namespace() {
            "its variables and files"
        } else {
            "its files"
        },
        snapshot.len().div_ceil(1024),
        file.display()
    );
    Ok(())
}

/// A session holding what `file` holds, under `request`'s policy and limits; a request
/// for `auto` gets the backend the snapshot was taken on when it holds an
/// interpreter's state or variables.
pub(super) fn restore(
    service: &mut Service,
    request: &mut OpenRequest,
    file: &Path,
) -> Result<Session> {
    let snapshot = service
        .sandlot()
        .open_snapshot(file)
        .with_context(|| format!("cannot restore the session saved in {}", file.display()))?;
    let variables = snapshot.holds_memory() || snapshot.holds_namespace();
    if variables && request.backend == BackendChoice::Auto {
        request.backend = BackendChoice::from(snapshot.backend());
    }
    service.prepare(request, |step| note!("sandlot: {step}"))?;
    service
        .builder_for(request)
        .restore(&snapshot)
        .with_context(|| format!("cannot restore the session saved in {}", file.display()))
}
