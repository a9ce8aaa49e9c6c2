//! The key: what one pooled sandbox is fixed to. A sandbox is only ever handed to a
//! session that asks for the same key, so this is what every other part matches on.

use crate::backend::SandboxSpec;
use crate::language::{KernelSpec, Plan};
use crate::policy::Policy;

/// Libraries every sandbox of a key has before it is handed out, and the plan that
/// installs them (from the language handler's `install`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preinstall {
    /// The libraries, as the session names them.
    pub libraries: Vec<String>,
    /// The commands that install them in a fresh sandbox.
    pub plan: Plan,
}

/// A [`SandboxSpec`] the pool owns, and what is installed beforehand: what one sandbox
/// is fixed to, the key.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Key {
    pub(super) language: String,
    image: String,
    policy: Policy,
    memory: usize,
    pub(super) kernel: Option<KernelSpec>,
    pub(super) preinstall: Option<Preinstall>,
}

impl Key {
    pub(super) fn of(spec: &SandboxSpec<'_>, preinstall: Option<&Preinstall>) -> Key {
        Key {
            language: spec.language.to_string(),
            image: spec.image.to_string(),
            policy: spec.policy.clone(),
            memory: spec.memory,
            kernel: spec.kernel.cloned(),
            preinstall: preinstall.cloned(),
        }
    }

    pub(super) fn spec(&self) -> SandboxSpec<'_> {
        SandboxSpec::new(&self.language, &self.image, &self.policy, self.memory)
            .with_kernel(self.kernel.as_ref())
    }
}
