//! Where things are inside every sandbox, whatever backend runs it.

/// The paths every sandbox has, on every backend: the code runs in the workspace, and
/// new or changed files in its output directory come back as artifacts.
///
/// ```
/// use sandlot::layout::Layout;
/// let layout = Layout::default();
/// assert_eq!(layout.workspace(), "/workspace");
/// assert_eq!(layout.output_dir(), "/workspace/output");
/// assert_eq!(Layout::OUTPUT, "output");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout;

impl Layout {
    /// Absolute path of the workspace inside the sandbox.
    pub const WORKSPACE: &'static str = "/workspace";
    /// The output directory, relative to the workspace.
    pub const OUTPUT: &'static str = "output";

    /// Absolute path of the workspace inside the sandbox.
    pub fn workspace(&self) -> &'static str {
        Self::WORKSPACE
    }

    /// Absolute path of the output directory inside the sandbox.
    pub fn output_dir(&self) -> String {
        format!("{}/{}", Self::WORKSPACE, Self::OUTPUT)
    }
}
