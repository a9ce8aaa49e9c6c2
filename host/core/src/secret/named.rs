//! [`Secret`]: a named value, checked, and bound to hosts or not.

use super::binding::Binding;
use crate::error::{Error, Result};
use std::fmt;

/// The shortest value accepted: masking a shorter one would garble ordinary output.
pub const MIN_LEN: usize = 4;

/// A named secret value. Its `Debug` form shows the name (and binding) only.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    pub(super) name: String,
    pub(super) value: String,
    pub(super) binding: Option<Binding>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// A secret for the environment variable `name`. The name must be a valid
    /// variable name and the value at least [`MIN_LEN`] bytes, without NUL.
    pub fn new(name: &str, value: &str) -> Result<Secret> {
        let invalid = |reason: String| Error::InvalidSecret {
            name: name.to_string(),
            reason,
        };
        let valid_name = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err(invalid(
                "a secret's name is an environment variable name: letters, digits and _, \
                 not starting with a digit"
                    .into(),
            ));
        }
        if value.len() < MIN_LEN {
            return Err(invalid(format!(
                "the value has {} bytes; secrets need at least {MIN_LEN}, or masking them \
                 would garble ordinary output",
                value.len()
            )));
        }
        if value.contains('\0') {
            return Err(invalid("the value contains a NUL byte".into()));
        }
        Ok(Secret {
            name: name.to_string(),
            value: value.to_string(),
            binding: None,
        })
    }

    /// The same secret bound to hosts: the sandbox's variable holds a placeholder
    /// (made for each session, as long as the value, useless anywhere else), and the
    /// egress proxy puts the value in its place only in requests to `binding`'s hosts,
    /// where it says. A bound value has at least [`MIN_BOUND_LEN`] bytes, all visible
    /// ASCII (it travels in a header or a URL).
    ///
    /// ```
    /// use sandlot::secret::{Binding, Secret};
    ///
    /// let binding: Binding = "api.github.com".parse().expect("a host, Bearer by default");
    /// let token = Secret::new("GITHUB_TOKEN", "ghp_0123456789abcdefghijklmnopqrstuvwxyz")?
    ///     .bound_to(binding)?;
    /// assert_eq!(token.binding().unwrap().to_string(), "api.github.com@bearer");
    /// # Ok::<(), sandlot::Error>(())
    /// ```
    pub fn bound_to(mut self, binding: Binding) -> Result<Secret> {
        let invalid = |reason: String| Error::InvalidSecret {
            name: self.name.clone(),
            reason,
        };
        if self.value.len() < MIN_BOUND_LEN {
            return Err(invalid(format!(
                "a secret bound to hosts needs at least {MIN_BOUND_LEN} bytes (this one has \
                 {}): its placeholder is as long as the value, and a shorter one could be \
                 guessed",
                self.value.len()
            )));
        }
        if !self
            .value
            .bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ')
        {
            return Err(invalid(
                "a secret bound to hosts is sent in a header or a URL: its value must be \
                 visible ASCII, without control characters"
                    .into(),
            ));
        }
        if binding.hosts().is_empty() {
            return Err(invalid("a binding names at least one host".into()));
        }
        self.binding = Some(binding);
        Ok(self)
    }

    /// The environment variable it is given as.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hosts it is bound to and where it goes, if it is bound
    /// ([`Secret::bound_to`]).
    pub fn binding(&self) -> Option<&Binding> {
        self.binding.as_ref()
    }
}

/// The shortest value a secret bound to hosts may have: its placeholder has the
/// value's length, and a shorter one could be guessed.
pub const MIN_BOUND_LEN: usize = 16;
