//! The exit statuses of `sandlot`: the program's own, the limits', and sandlot's own
//! refusals and failures, each in a range of its own.
//!
//! A script that runs `sandlot run` must tell "the program exited 1" from "sandlot
//! could not read the file" from "the policy refused the code". sandlot's own statuses
//! are the BSD `sysexits.h` ones (64–78), which programs seldom use; the limits have
//! the statuses a shell gives (`timeout`'s 124, a SIGKILL's 137, a closed pipe's 141),
//! and an interrupted run a Ctrl-C's 130.
//! The kinds are the library's [`ErrorKind`]s, the same ones the HTTP API and MCP
//! answer with. The README has the table and `tests/cli.rs` checks every row.

use sandlot::{EndReason, ErrorKind, Execution};
use std::fmt;

/// A status of sandlot's own, with the name it has in the documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    /// The command line is wrong: an unknown option, a bad value, no code.
    Usage = 64,
    /// What the command names is not there: a file, a language, a backend, a runtime.
    NoInput = 66,
    /// What the run needs cannot serve it now: the engine or cluster is down, no
    /// backend can, an image or runtime is not installed.
    Unavailable = 69,
    /// sandlot or a plugin failed.
    Software = 70,
    /// Every sandbox of a pool is in use: worth retrying.
    TempFail = 75,
    /// The policy refused the code or the request.
    NoPermission = 77,
    /// The configuration is invalid.
    Config = 78,
}

impl Status {
    /// The status of an error of `kind`.
    pub(super) fn of_kind(kind: ErrorKind) -> Status {
        match kind {
            ErrorKind::InvalidInput => Status::Usage,
            ErrorKind::NotFound => Status::NoInput,
            ErrorKind::Unsupported | ErrorKind::Unavailable | ErrorKind::NotInstalled => {
                Status::Unavailable
            }
            ErrorKind::Exhausted => Status::TempFail,
            ErrorKind::Blocked | ErrorKind::NotAllowed => Status::NoPermission,
            ErrorKind::Config => Status::Config,
            ErrorKind::SessionEnded | ErrorKind::Plugin | ErrorKind::Internal => Status::Software,
            // A kind added later is a failure of sandlot's until it is placed.
            _ => Status::Software,
        }
    }

    /// The status of a command that failed with `error`: the first cause in its chain
    /// that says what went wrong decides.
    pub(super) fn of_error(error: &anyhow::Error) -> Status {
        for cause in error.chain() {
            if let Some(refusal) = cause.downcast_ref::<Refusal>() {
                return refusal.status;
            }
            if let Some(error) = cause.downcast_ref::<sandlot::Error>() {
                return Status::of_kind(error.kind());
            }
        }
        Status::Software
    }

    pub(super) fn code(self) -> u8 {
        self as u8
    }
}

/// The status of a run that ended: the program's own, unless a limit stopped it (the
/// limit's code, [`EndReason::exit_code`]) or its sandbox was lost.
pub(super) fn of_execution(execution: &Execution) -> u8 {
    if let EndReason::SandboxLost { .. } = execution.end {
        return Status::Software.code();
    }
    let code = execution.end.exit_code().unwrap_or(execution.exit_code);
    (code & 0xff) as u8
}

/// An error of the command line itself, with the status it exits with.
#[derive(Debug)]
pub(super) struct Refusal {
    status: Status,
    message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// The command line is wrong: exits [`Status::Usage`].
pub(super) fn usage(message: impl Into<String>) -> anyhow::Error {
    Refusal {
        status: Status::Usage,
        message: message.into(),
    }
    .into()
}

/// What the command line names is not there: exits [`Status::NoInput`].
pub(super) fn no_input(message: impl Into<String>) -> anyhow::Error {
    Refusal {
        status: Status::NoInput,
        message: message.into(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The codes of the limits and of an interrupt, from [`EndReason::exit_code`].
    fn limits() -> [u8; 4] {
        [
            EndReason::TimedOut {
                limit: Duration::from_secs(1),
            },
            EndReason::MemoryLimit,
            EndReason::OutputLimit,
            EndReason::Interrupted,
        ]
        .map(|end| end.exit_code().expect("a limit overrides the code") as u8)
    }

    #[test]
    fn every_kind_has_a_status_of_sandlots_own_apart_from_the_limits() {
        for &kind in ErrorKind::ALL {
            let code = Status::of_kind(kind).code();
            assert!((64..=78).contains(&code), "{kind:?}: {code}");
        }
        for limit in limits() {
            assert!(!(64..=78).contains(&limit));
        }
    }

    /// The README's table names each kind in the row of its status.
    #[test]
    fn the_readmes_table_is_this_mapping() {
        let readme = include_str!("../../../../README.md");
        let row = |code: u8| {
            readme
                .lines()
                .find(|line| line.starts_with(&format!("| {code} |")))
                .unwrap_or_else(|| panic!("no row for {code} in the README's exit status table"))
        };
        for &kind in ErrorKind::ALL {
            let code = Status::of_kind(kind).code();
            assert!(
                row(code).contains(&format!("`{}`", kind.as_str())),
                "the row of {code} does not name {kind:?}: {}",
                row(code)
            );
        }
        for limit in limits() {
            row(limit);
        }
    }

    #[test]
    fn the_first_cause_that_says_what_went_wrong_decides() {
        let error = anyhow::Error::from(sandlot::Error::UnknownLanguage {
            name: "cobol".into(),
            known: vec!["python".into()],
        })
        .context("cannot run the file");
        assert_eq!(Status::of_error(&error), Status::NoInput);
        let error = usage("--timeout must be positive").context("run");
        assert_eq!(Status::of_error(&error), Status::Usage);
        assert_eq!(
            Status::of_error(&anyhow::anyhow!("something broke")),
            Status::Software
        );
    }
}
