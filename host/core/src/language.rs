//! What a language handler tells the host, as plain Rust types.
//!
//! These types are the host's own, independent of the WIT version a plugin was built
//! against: each supported contract version converts into them (see
//! [`crate::plugin`]), and every value is checked on the way in, so the rest of the
//! host can trust them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// What a handler declares about its language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LanguageInfo {
    /// Stable identifier, e.g. `python`.
    pub id: String,
    /// Other names users may type, e.g. `py`.
    pub aliases: Vec<String>,
    /// Human name, e.g. `Python 3`.
    pub display_name: String,
    /// File extension of source files, without the dot.
    pub file_extension: String,
    /// Container image the container backends use by default.
    pub default_image: String,
    /// What the handler offers beyond planning and analysis.
    pub capabilities: BTreeSet<LanguageCapability>,
    /// Version of the handler itself.
    pub version: String,
}

impl LanguageInfo {
    /// Whether the handler offers `capability`.
    ///
    /// ```
    /// # let info = sandlot::plugin::PluginHost::builder().load().unwrap();
    /// # let info = info.language("python").unwrap().info();
    /// use sandlot::language::LanguageCapability;
    /// assert!(info.has(LanguageCapability::Interactive));
    /// ```
    pub fn has(&self, capability: LanguageCapability) -> bool {
        self.capabilities.contains(&capability)
    }
}

/// Something a language handler offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LanguageCapability {
    /// Turns library names into install commands.
    InstallLibraries,
    /// Makes plotting libraries save figures as files.
    CapturePlots,
    /// Has a kernel ([`KernelSpec`]): state persists from one run to the next in a
    /// container too.
    Interactive,
}

impl fmt::Display for LanguageCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            LanguageCapability::InstallLibraries => "install-libraries",
            LanguageCapability::CapturePlots => "capture-plots",
            LanguageCapability::Interactive => "interactive",
        })
    }
}

/// A language's kernel: a long-lived driver that runs cells of code in one
/// interpreter, so variables, functions and imports persist across runs. The framing
/// it speaks is documented on `sandlot_agent::Request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelSpec {
    /// Source of the driver, written into the sandbox before it starts.
    pub driver: String,
    /// File name of the driver, a plain name.
    pub driver_name: String,
    /// Program and arguments; `{driver}` stands for the driver file's absolute path.
    pub argv: Vec<String>,
    /// Extra environment for the kernel.
    pub env: Vec<(String, String)>,
}

impl KernelSpec {
    /// `argv` with `{driver}` replaced by `path`.
    pub fn command(&self, path: &str) -> Vec<String> {
        self.argv
            .iter()
            .map(|arg| arg.replace("{driver}", path))
            .collect()
    }
}

/// Options for [`crate::plugin::LanguageHandler::plan`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanOptions {
    /// Absolute path of the working directory inside the sandbox.
    pub workdir: String,
    /// Absolute path of the directory whose new files become artifacts.
    pub output_dir: String,
    /// Whether figures should be saved as files.
    pub capture_plots: bool,
    /// Arguments for the user's program.
    pub args: Vec<String>,
}

impl Default for PlanOptions {
    /// The layout every sandlot sandbox uses: code in `/workspace`, artifacts in
    /// `/workspace/output`, plots captured.
    fn default() -> Self {
        let layout = crate::layout::Layout;
        PlanOptions {
            workdir: layout.workspace().into(),
            output_dir: layout.output_dir(),
            capture_plots: true,
            args: Vec::new(),
        }
    }
}

/// A file the host writes into the sandbox before running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceFile {
    /// Path relative to the working directory, checked to stay inside it.
    pub path: String,
    /// Contents, any bytes. In JSON: a string when they are UTF-8, otherwise
    /// `{"base64": "..."}`.
    #[serde(serialize_with = "text_or_base64")]
    pub contents: Vec<u8>,
}

impl SourceFile {
    /// The contents as text, when they are UTF-8 (as program sources are).
    ///
    /// ```
    /// let file = sandlot::SourceFile { path: "main.py".into(), contents: b"print(1)".to_vec() };
    /// assert_eq!(file.text(), Some("print(1)"));
    /// ```
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.contents).ok()
    }
}

fn text_or_base64<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine as _;
    use serde::ser::SerializeMap;
    match std::str::from_utf8(bytes) {
        Ok(text) => s.serialize_str(text),
        Err(_) => {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry(
                "base64",
                &base64::engine::general_purpose::STANDARD.encode(bytes),
            )?;
            map.end()
        }
    }
}

/// Why a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Prepares the working directory.
    Setup,
    /// Installs libraries; the only phase that may be given the network.
    Install,
    /// Compiles; a failure is a compile error.
    Build,
    /// Runs the user's program.
    Run,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Phase::Setup => "setup",
            Phase::Install => "install",
            Phase::Build => "build",
            Phase::Run => "run",
        })
    }
}

/// One process to start, without a shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    /// Why it runs.
    pub phase: Phase,
    /// Program and arguments; never empty.
    pub argv: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Whether it needs the network (granted only if policy allows).
    pub needs_network: bool,
}

/// Everything needed to run one piece of code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Files to write first.
    pub files: Vec<SourceFile>,
    /// Commands to run in order.
    pub commands: Vec<Command>,
}

/// How serious a finding is, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Unlikely to matter.
    Low,
    /// Could do harm in a sandbox with weak policy.
    Medium,
    /// Tries something the sandbox should stop.
    High,
    /// Clearly hostile.
    Critical,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        })
    }
}

/// One thing a handler's static analysis noticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule id, e.g. `python.os-command`.
    pub rule_id: String,
    /// How serious it is.
    pub severity: Severity,
    /// 1-based line, if the finding concerns one.
    pub line: Option<u32>,
    /// What was found.
    pub message: String,
}

/// Language ids and aliases: short, lower case, usable on a command line.
pub(crate) fn check_language_name(what: &str, name: &str) -> std::result::Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-_.#".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{what} `{}` must be 1-32 lower-case letters, digits or `+-_.#`, starting with a letter or digit",
            name.escape_debug()
        ))
    }
}

/// Whether a [`Restriction`] names a module or a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RestrictionKind {
    /// A module, package or library as the language imports it (`socket`,
    /// `child_process`, `os/exec`): importing it or a module beneath it is a finding.
    Module,
    /// A function or command as the language calls it, with its module where it has
    /// one (`os.system`, `child_process.exec`, `curl`): reaching it under any name
    /// the code bound it to is a finding.
    Call,
}

impl fmt::Display for RestrictionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            RestrictionKind::Module => "module",
            RestrictionKind::Call => "call",
        })
    }
}

/// A module or call name as a language writes it: what a [`Restriction`] names.
///
/// 1 to 200 characters: letters, digits and `_ . / : - $ @ +`, with an optional `*` at
/// the end that matches any continuation (`os.exec*`).
///
/// ```
/// use sandlot::RestrictedName;
/// assert!("child_process.exec".parse::<RestrictedName>().is_ok());
/// assert!("os.exec*".parse::<RestrictedName>().is_ok());
/// assert!("os system".parse::<RestrictedName>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RestrictedName(String);

impl RestrictedName {
    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RestrictedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::str::FromStr for RestrictedName {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        let body = name.strip_suffix('*').unwrap_or(name);
        let valid = !body.is_empty()
            && name.len() <= 200
            && body
                .chars()
                .all(|c| c.is_alphanumeric() || "_./:-$@+".contains(c));
        if valid {
            Ok(RestrictedName(name.to_string()))
        } else {
            Err(format!(
                "`{}` is not a module or call name: use 1-200 letters, digits or `_./:-$@+`, \
                 with an optional `*` at the end",
                name.escape_debug()
            ))
        }
    }
}

/// A module or call a policy restricts in one language, and the severity of each
/// finding it gives. The language's handler finds it under the names code binds it
/// to; the policy's thresholds decide whether that blocks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Restriction {
    /// Whether [`Restriction::name`] is a module or a call.
    pub kind: RestrictionKind,
    /// The module or call.
    pub name: RestrictedName,
    /// The severity of its findings.
    pub severity: Severity,
}
