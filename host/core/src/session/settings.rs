//! What a session's builder hands the session: the settings every run of it shares,
//! kept apart because snapshots and forks build them too.

use super::gate::Readers;
use super::limits::Limits;
use crate::artifact::EarlierOutput;
use crate::policy::Policy;
use crate::secret::Secrets;
use crate::tool::ToolSet;
use std::sync::Arc;

/// What a session keeps for all its runs, as its builder set it.
pub(crate) struct Settings {
    pub(crate) limits: Limits,
    pub(crate) policy: Policy,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) secrets: Secrets,
    pub(crate) libraries: Vec<String>,
    /// The language's kernel, if the sandbox was opened with it.
    pub(crate) kernel: Option<crate::language::KernelSpec>,
    /// Whether each run is a program on its own rather than a cell.
    pub(crate) one_shot: bool,
    /// What happens to the output directory's files before each run.
    pub(crate) earlier_output: EarlierOutput,
    /// Libraries the sandbox came with (a pool installed them while warming).
    pub(crate) preinstalled: Vec<String>,
    /// The image the sandbox was made from, where the backend runs images.
    pub(crate) image: String,
    /// The tools the code may call.
    pub(crate) tools: ToolSet,
    /// The key its snapshots are sealed with.
    pub(crate) snapshots: Arc<crate::snapshot::Keeper>,
    /// The handlers command lines are read with.
    pub(crate) readers: Arc<Readers>,
}
