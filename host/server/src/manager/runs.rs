//! Calls on a session: one at a time, a paused one resumed first; runs and commands
//! held to the server's limits, stopped when the session closes, and counted.

use super::entry::{Entry, Slot};
use super::ids::{session_span, ClientId, SessionId};
use super::info::Ended;
use super::table::Inner;
use sandlot_core::error::{Error, Result};
use sandlot_core::execution::Execution;
use sandlot_core::request::OpenRequest;
use sandlot_core::session::{Limits, RunOptions, Session};
use std::sync::atomic::Ordering;

impl Inner {
    /// The work of [`SessionManager::with_session`](super::SessionManager::with_session).
    pub(super) fn with_session<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        let span = session_span(client, id);
        let _entered = span.enter();
        self.in_session(client, id, f)
    }

    /// [`SessionManager::with_session`], in the caller's spans.
    pub(super) fn in_session<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        self.in_entry(client, id, |_, session| f(session))
    }

    /// [`SessionManager::in_session`], `f` also given the session's entry.
    pub(super) fn in_entry<T>(
        &self,
        client: &ClientId,
        id: &SessionId,
        f: impl FnOnce(&Entry, &mut Session) -> Result<T>,
    ) -> Result<T> {
        let entry = self.entry(client, id)?;
        let _turn = entry.queue()?;
        entry.touch();
        let result = {
            let mut slot = entry.session.lock().unwrap_or_else(|e| e.into_inner());
            if entry.ending.load(Ordering::Acquire) {
                drop(slot);
                return Err(self.ended(client, id));
            }
            if matches!(*slot, Slot::Paused) {
                match self.resume(&entry) {
                    Ok(session) => *slot = Slot::Live(Box::new(session)),
                    Err(error) => {
                        drop(slot);
                        return Err(self.not_resumed(&entry, error));
                    }
                }
            }
            let Slot::Live(session) = &mut *slot else {
                return Err(self.ended(client, id));
            };
            f(&entry, session)
        };
        entry.touch();
        result
    }

    /// The work of [`SessionManager::run`](super::SessionManager::run).
    pub(super) fn run(
        &self,
        client: &ClientId,
        id: &SessionId,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let base = &self.settings.limits;
        let this_run = Limits {
            timeout: options.timeout.unwrap_or(base.timeout),
            max_output: options.max_output.unwrap_or(base.max_output),
            ..*base
        };
        let looser: Vec<String> = this_run
            .looser_than(base)
            .iter()
            .map(|name| format!("limits.{name}"))
            .collect();
        if !looser.is_empty() {
            return self.count_run(Err(Error::NotAllowed { fields: looser }));
        }
        let session = session_span(client, id);
        let _in_session = session.enter();
        let run = tracing::info_span!("run");
        let _in_run = run.enter();
        self.count_run(self.in_run(client, id, options, |s, options| s.run_with(code, options)))
    }

    /// [`SessionManager::in_session`] for a run or a command: its interrupt (the
    /// caller's, or one of the manager's) is the session's to trigger while it runs,
    /// so closing the session stops it.
    pub(super) fn in_run(
        &self,
        client: &ClientId,
        id: &SessionId,
        mut options: RunOptions,
        run: impl FnOnce(&mut Session, RunOptions) -> Result<Execution>,
    ) -> Result<Execution> {
        let interrupt = options
            .interrupt
            .get_or_insert_with(sandlot_core::Interrupt::new)
            .clone();
        self.in_entry(client, id, |entry, s| {
            *entry.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(interrupt.clone());
            // Closed between the turn and the line above: stopped at once.
            if entry.ending.load(Ordering::Acquire) {
                interrupt.interrupt();
            }
            let ran = run(s, options);
            *entry.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
            ran
        })
    }

    /// The work of [`SessionManager::run_command_with`](super::SessionManager::run_command_with).
    pub(super) fn run_command_with(
        &self,
        client: &ClientId,
        id: &SessionId,
        command_line: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let base = &self.settings.limits;
        if options.timeout.is_some_and(|t| t > base.timeout) {
            return self.count_run(Err(Error::NotAllowed {
                fields: vec!["limits.timeout".into()],
            }));
        }
        let session = session_span(client, id);
        let _in_session = session.enter();
        let command = tracing::info_span!("command");
        let _in_command = command.enter();
        self.count_run(self.in_run(client, id, options, |s, options| {
            s.execute_command_with(command_line, options)
        }))
    }

    /// The work of [`SessionManager::run_once`](super::SessionManager::run_once).
    pub(super) fn run_once(
        &self,
        client: &ClientId,
        request: OpenRequest,
        code: &str,
        options: RunOptions,
    ) -> Result<Execution> {
        let opened = self.open(client, request)?;
        let run = self.run(client, &opened.id, code, options);
        let _ = self.end(&opened.id, Ended::Closed);
        run
    }

    pub(super) fn count_run(&self, run: Result<Execution>) -> Result<Execution> {
        match &run {
            // At debug: a busy server runs thousands a second.
            Ok(execution) => {
                tracing::debug!(
                    exit_code = execution.exit_code,
                    end = ?execution.end,
                    ms = execution.duration.as_millis() as u64,
                    tool_calls = execution.tool_calls.len(),
                    "run finished"
                );
                for call in &execution.tool_calls {
                    tracing::debug!(
                        tool = %call.name,
                        outcome = call.outcome.as_str(),
                        us = call.duration.as_micros() as u64,
                        argument_bytes = call.argument_bytes,
                        result_bytes = call.result_bytes,
                        "tool call"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "run failed"),
        }
        let counters = &self.counters;
        counters.runs.fetch_add(1, Ordering::Relaxed);
        match &run {
            Ok(execution) => {
                let micros = u64::try_from(execution.duration.as_micros()).unwrap_or(u64::MAX);
                counters.run_micros.fetch_add(micros, Ordering::Relaxed);
                let calls = &execution.tool_calls;
                let failed = calls
                    .iter()
                    .filter(|c| c.outcome != sandlot_core::tool::ToolOutcome::Ok)
                    .count();
                counters
                    .tool_calls
                    .fetch_add(calls.len() as u64, Ordering::Relaxed);
                counters
                    .tool_call_failures
                    .fetch_add(failed as u64, Ordering::Relaxed);
            }
            Err(_) => {
                counters.run_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        run
    }

    /// The error of a call on `entry`, paused, that could not resume it. A state
    /// that cannot be read back (damaged, of a runtime this server no longer has)
    /// never will be: the session ends. Anything else (a backend down) may pass, and
    /// the session stays paused.
    pub(super) fn not_resumed(&self, entry: &Entry, error: Error) -> Error {
        tracing::warn!(session = %entry.id, client = %entry.client, %error, "paused session not resumed");
        if error.kind() == sandlot_core::error::ErrorKind::InvalidInput {
            self.end(&entry.id, Ended::Unresumable);
            return Error::SessionEnded {
                reason: format!("it was paused, and its state cannot be taken back: {error}"),
            };
        }
        error
    }
}
