//! The one shape of a session to open. Every front end turns what it receives into an
//! [`OpenRequest`] once — the builder of the Rust API, the CLI's flags, the servers'
//! requests (through the manager, which tightens them to the server's policy) — and
//! a [`Sandlot`](crate::Sandlot) opens it with
//! [`session_for`](crate::Sandlot::session_for). A pool keys its sandboxes on what of
//! it is fixed for a sandbox's life ([`SandboxSpec`](crate::backend::SandboxSpec)).
//!
//! ```
//! use sandlot::{OpenRequest, Network};
//! let mut request = OpenRequest::new("python");
//! request.libraries = vec!["numpy".into()];
//! request.policy.network = Network::InstallOnly;
//! assert_eq!(request.backend, sandlot::BackendChoice::Auto);
//! ```

use crate::artifact::EarlierOutput;
use crate::backend::{BackendName, Capability, Needs};
use crate::policy::Policy;
use crate::secret::{Secret, UpstreamCa};
use crate::session::Limits;
use crate::tool::ToolSet;

/// A session to open: its language, where it runs, what it needs and what it may do.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OpenRequest {
    /// Language id or alias.
    pub language: String,
    /// `auto` or a backend's name.
    pub backend: BackendChoice,
    /// A container image, instead of the configured one or the handler's default;
    /// `auto` then picks a backend that runs images.
    pub image: Option<String>,
    /// Libraries every run needs, installed with the first run that can.
    pub libraries: Vec<String>,
    /// Capabilities the backend must have.
    pub required: Vec<Capability>,
    /// Limits of every run, and the sandbox's memory.
    pub limits: Limits,
    /// The security policy.
    pub policy: Policy,
    /// Environment of every run; nothing else from the host is visible.
    pub env: Vec<(String, String)>,
    /// Secrets: variables of every run whose values are masked in what comes back.
    pub secrets: Vec<Secret>,
    /// Roots the egress proxy trusts, beside the host's, for the hosts it sees
    /// through TLS to put a bound secret in.
    pub upstream_ca: UpstreamCa,
    /// Each run a program of its own, not a cell of the language's kernel (see
    /// [`SessionBuilder::one_shot`](crate::SessionBuilder::one_shot)).
    pub one_shot: bool,
    /// What happens to the files earlier runs left in the output directory.
    pub earlier_output: EarlierOutput,
    /// Functions of the host the code may call ([`crate::tool`]); none by default.
    pub tools: ToolSet,
}

impl OpenRequest {
    /// A session for `language` with every default: `auto`, [`Policy::default`],
    /// [`Limits::default`].
    pub fn new(language: &str) -> OpenRequest {
        OpenRequest {
            language: language.to_string(),
            ..OpenRequest::default()
        }
    }

    /// What the session needs of its backend, `language` being the id the request's
    /// language resolved to (the kernel is the builder's to add).
    pub(crate) fn needs<'a>(&'a self, language: &'a str) -> Needs<'a> {
        Needs::language(language)
            .with_libraries(&self.libraries)
            .with_image(self.image.as_deref())
            .with_capabilities(&self.required)
            .with_network(self.policy.network)
            .with_tools(!self.tools.is_empty())
    }
}

/// Which backend runs a session's code.
///
/// ```
/// use sandlot::BackendChoice;
/// assert_eq!(BackendChoice::from("auto"), BackendChoice::Auto);
/// assert!(matches!(BackendChoice::from("docker"), BackendChoice::Named(n) if n == "docker"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BackendChoice {
    /// The first backend, in registration order, that answers and can serve the
    /// session (its language, its libraries, its image, the capabilities it requires).
    #[default]
    Auto,
    /// The backend of this name.
    Named(String),
}

impl From<&str> for BackendChoice {
    fn from(name: &str) -> Self {
        match name {
            "auto" => BackendChoice::Auto,
            name => BackendChoice::Named(name.to_string()),
        }
    }
}

impl From<String> for BackendChoice {
    fn from(name: String) -> Self {
        BackendChoice::from(name.as_str())
    }
}

impl From<BackendName> for BackendChoice {
    fn from(name: BackendName) -> Self {
        BackendChoice::Named(name.to_string())
    }
}
