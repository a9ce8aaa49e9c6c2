//! What a run prints, sent to the client as progress notifications while it runs: a
//! task of its own beside the run, so a room of its own beside the tools.

use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use sandlot_core::session::RunOptions;
use std::time::Duration;

/// Sends what a run prints as progress notifications, when the client asked for
/// progress. Returns the options that do it, and the sender's task: awaited before the
/// tool answers, since no notification may follow the result.
pub(super) fn progress_options(
    context: &RequestContext<RoleServer>,
) -> (RunOptions, Option<tokio::task::JoinHandle<()>>) {
    let mut options = RunOptions::default();
    let Some(token) = context.meta.get_progress_token() else {
        return (options, None);
    };
    let peer = context.peer.clone();
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<(String, Vec<u8>)>();
    let task = tokio::spawn(async move {
        // Whole lines, one notification each: a program's writes come in pieces.
        let mut step = 0.0;
        let mut partial: std::collections::HashMap<String, Vec<u8>> = Default::default();
        let mut notes = Vec::new();
        loop {
            let received = received.recv().await;
            let ended = received.is_none();
            match received {
                Some((stream, bytes)) => {
                    let buffer = partial.entry(stream.clone()).or_default();
                    buffer.extend_from_slice(&bytes);
                    while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buffer.drain(..=end).collect();
                        notes.push((stream.clone(), line));
                    }
                }
                None => notes.extend(partial.drain().filter(|(_, rest)| !rest.is_empty())),
            }
            for (stream, line) in notes.drain(..) {
                step += 1.0;
                let text = String::from_utf8_lossy(&line);
                let note = ProgressNotificationParam::new(token.clone(), step)
                    .with_message(format!("{stream}: {}", text.trim_end_matches('\n')));
                if peer.notify_progress(note).await.is_err() {
                    return;
                }
            }
            if ended {
                return;
            }
        }
    });
    let stderr = sender.clone();
    options.on_stdout = Some(Box::new(move |bytes: &[u8]| {
        let _ = sender.send(("stdout".into(), bytes.to_vec()));
    }));
    options.on_stderr = Some(Box::new(move |bytes: &[u8]| {
        let _ = stderr.send(("stderr".into(), bytes.to_vec()));
    }));
    (options, Some(task))
}

/// Waits (briefly) for the progress a run sent to go out; the run's options, and with
/// them the senders, are gone once it returned.
pub(super) async fn progress_sent(task: Option<tokio::task::JoinHandle<()>>) {
    if let Some(task) = task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
}
