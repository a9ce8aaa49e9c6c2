//! The choice of a session's backend: the one named, or for `auto` the first that
//! answers and can serve; and having its provider prepare it first.

use super::sandlot::Sandlot;
use super::slot::Slot;
use crate::backend::{Backend, BackendName, Needs};
use crate::error::{Error, Result};
use crate::provider::{Asked, Prepared, Progress};
use crate::request::BackendChoice;
use std::sync::Arc;

/// The backend [`Sandlot::choose`] picked.
#[derive(Clone)]
#[non_exhaustive]
pub struct Chosen {
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// The backends tried before it, and why each could not serve.
    pub passed_over: Vec<(BackendName, String)>,
}

impl Sandlot {
    /// Whether opening a session with `needs` on `choice` would first have a provider
    /// prepare its backend (install a runtime): a front end then says so, and takes
    /// the time.
    pub fn needs_preparing(&self, choice: &BackendChoice, needs: &Needs<'_>) -> bool {
        for (slot, asked) in self.candidates(choice) {
            let preparing = slot
                .provider
                .as_ref()
                .is_some_and(|p| p.needs_preparing(&self.context, needs, asked));
            if preparing {
                return true;
            }
            if slot.serves(needs) {
                return false;
            }
        }
        false
    }

    /// Has the provider of the backend a session with `needs` would get on `choice`
    /// prepare it, if it needs to (the wasm provider installs the language's runtime
    /// on first use, and says when a runtime is compiled); `progress` hears about the
    /// slow steps. For `auto`, each provider in order, until a backend made serves
    /// `needs` (one not made yet is not connected for this).
    pub fn prepare(
        &self,
        choice: &BackendChoice,
        needs: &Needs<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        for (slot, asked) in self.candidates(choice) {
            if let Some(provider) = &slot.provider {
                if provider.prepare(&self.context, needs, asked, progress)? == Prepared::Remake {
                    slot.remake(&self.context)?;
                }
            }
            if slot.serves(needs) {
                break;
            }
        }
        Ok(())
    }

    /// The slots whose providers are asked to prepare for `choice`, and how: the one
    /// named, or for `auto` those `auto` tries, in order.
    fn candidates(&self, choice: &BackendChoice) -> Vec<(&Slot, Asked)> {
        match choice {
            BackendChoice::Named(name) => self
                .slot(name)
                .ok()
                .map(|slot| (slot, Asked::ByName))
                .into_iter()
                .collect(),
            BackendChoice::Auto => self
                .slots
                .iter()
                .filter(|slot| slot.auto)
                .map(|slot| (slot.as_ref(), Asked::ByAuto))
                .collect(),
        }
    }

    /// The backend a session gets: the one named, checked against `needs`, or for
    /// `auto` the first that answers and can serve `needs`. Says why each backend
    /// before it was passed over (in the error, when none can).
    pub fn choose(&self, choice: &BackendChoice, needs: &Needs<'_>) -> Result<Chosen> {
        match choice {
            BackendChoice::Named(name) => {
                let backend = self.backend(name)?;
                backend
                    .supports(needs)
                    .map_err(|why| Error::BackendUnsuitable {
                        backend: name.to_string(),
                        language: needs.language.to_string(),
                        reason: why.0,
                    })?;
                Ok(Chosen {
                    backend,
                    passed_over: Vec::new(),
                })
            }
            BackendChoice::Auto => {
                let mut passed_over = Vec::new();
                for slot in self.slots.iter().filter(|slot| slot.auto) {
                    match slot.get(&self.context) {
                        Ok(backend) => match backend.supports(needs) {
                            Ok(()) => {
                                return Ok(Chosen {
                                    backend,
                                    passed_over,
                                })
                            }
                            Err(why) => passed_over.push((slot.name.clone(), why.0)),
                        },
                        Err(error) => passed_over.push((slot.name.clone(), error.to_string())),
                    }
                }
                Err(Error::NoBackend {
                    language: needs.language.to_string(),
                    passed_over: passed_over
                        .into_iter()
                        .map(|(name, why)| (name.to_string(), why))
                        .collect(),
                })
            }
        }
    }
}
