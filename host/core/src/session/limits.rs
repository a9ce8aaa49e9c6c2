//! A session's resource limits, apart from the session: a server compares a client's
//! asked-for limits with its own before any session exists.

use crate::artifact::ArtifactLimits;
use crate::tool::ToolLimits;
use std::time::Duration;

/// Resource limits of a session. The defaults suit model-written data analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit of one run.
    pub timeout: Duration,
    /// Most memory the sandbox may use.
    pub memory: usize,
    /// Most bytes kept (and streamed) of each of stdout and stderr per run; the rest is
    /// dropped and the execution says so. A program that writes twice as much is
    /// stopped (see [`crate::backend::stop_threshold`]).
    pub max_output: usize,
    /// Bounds on the files handed back per run.
    pub artifacts: ArtifactLimits,
    /// Bounds on the tool calls of a run.
    pub tools: ToolLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory: 1 << 30,
            max_output: 1 << 20,
            artifacts: ArtifactLimits::default(),
            tools: ToolLimits::default(),
        }
    }
}

impl Limits {
    /// The limits in which these allow more than `base`, named as `timeout`,
    /// `memory`, `max_output`, `artifacts.max_files`, `artifacts.max_bytes`,
    /// `tools.max_calls` and the other fields of `tools`: empty when
    /// they are as tight or tighter everywhere. A memory limit of 0 is none at all, the
    /// loosest.
    ///
    /// ```
    /// use sandlot::Limits;
    /// let server = Limits::default();
    /// let shorter = Limits { timeout: server.timeout / 2, ..server };
    /// assert!(shorter.looser_than(&server).is_empty());
    /// let unlimited = Limits { memory: 0, ..server };
    /// assert_eq!(unlimited.looser_than(&server), ["memory"]);
    /// let chatty = Limits {
    ///     tools: sandlot::tool::ToolLimits { max_calls: 1_000_000, ..server.tools },
    ///     ..server
    /// };
    /// assert_eq!(chatty.looser_than(&server), ["tools.max_calls"]);
    /// ```
    pub fn looser_than(&self, base: &Limits) -> Vec<&'static str> {
        let more_memory = base.memory != 0 && (self.memory == 0 || self.memory > base.memory);
        [
            ("timeout", self.timeout > base.timeout),
            ("memory", more_memory),
            ("max_output", self.max_output > base.max_output),
            (
                "artifacts.max_files",
                self.artifacts.max_files > base.artifacts.max_files,
            ),
            (
                "artifacts.max_bytes",
                self.artifacts.max_bytes > base.artifacts.max_bytes,
            ),
            (
                "tools.max_calls",
                self.tools.max_calls > base.tools.max_calls,
            ),
            (
                "tools.max_concurrent",
                self.tools.max_concurrent > base.tools.max_concurrent,
            ),
            (
                "tools.max_argument_bytes",
                self.tools.max_argument_bytes > base.tools.max_argument_bytes,
            ),
            (
                "tools.max_result_bytes",
                self.tools.max_result_bytes > base.tools.max_result_bytes,
            ),
            (
                "tools.call_timeout",
                self.tools.call_timeout > base.tools.call_timeout,
            ),
        ]
        .into_iter()
        .filter_map(|(name, looser)| looser.then_some(name))
        .collect()
    }
}
