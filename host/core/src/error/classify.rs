//! Which kind each error is: the one place that maps every variant to its
//! [`ErrorKind`], so a new variant is classified where the others are.

use super::kind::ErrorKind;
use super::variants::Error;

impl Error {
    /// What kind of failure this is; see [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self {
            Error::Masked { kind, .. } => *kind,
            Error::Blocked { .. } => K::Blocked,
            Error::InvalidPath { .. }
            | Error::InvalidBackendName { .. }
            | Error::InvalidSecret { .. }
            | Error::InvalidLibrary { .. }
            | Error::InvalidRequest { .. }
            | Error::InvalidTool { .. }
            | Error::InvalidPolicy { .. }
            | Error::InvalidPool { .. }
            | Error::InvalidSnapshot { .. }
            // A handler refuses what it was given, e.g. a library name.
            | Error::Refused { .. } => K::InvalidInput,
            Error::UnknownLanguage { .. }
            | Error::UnknownBackend { .. }
            | Error::UnknownRuntime { .. }
            | Error::UnknownRecipe { .. }
            | Error::NoSuchSession { .. }
            | Error::NoSuchSnapshot { .. }
            | Error::NoSuchFile { .. } => K::NotFound,
            Error::NotAllowed { .. } => K::NotAllowed,
            Error::BackendUnsuitable { .. }
            | Error::NoBackend { .. }
            | Error::BackendCannot { .. }
            | Error::LibrariesUnavailable { .. }
            | Error::NotPooled { .. } => K::Unsupported,
            Error::PoolExhausted { .. }
            | Error::PoolTimeout { .. }
            | Error::TooManySessions { .. }
            | Error::SessionBusy { .. }
            | Error::StoreFull { .. }
            | Error::StoreShareFull { .. }
            | Error::MemoryBudget { .. } => K::Exhausted,
            Error::SessionEnded { .. } | Error::PoolClosed { .. } => K::SessionEnded,
            Error::EngineUnavailable { .. } | Error::ManagerClosed => K::Unavailable,
            Error::ImageMissing { .. } | Error::RuntimeNotInstalled { .. } => K::NotInstalled,
            Error::ReadPlugin { .. }
            | Error::PluginDir { .. }
            | Error::NotWasm { .. }
            | Error::CoreModule { .. }
            | Error::NotAPlugin { .. }
            | Error::UnsupportedApi { .. }
            | Error::HandlerImports { .. }
            | Error::Compile { .. }
            | Error::ContractMismatch { .. }
            | Error::Trap { .. }
            | Error::Deadline { .. }
            | Error::MemoryLimit { .. }
            | Error::InvalidResponse { .. }
            | Error::Unsupported { .. } => K::Plugin,
            Error::Manifest { .. } | Error::Config { .. } | Error::PodTemplate { .. } => {
                K::Config
            }
            Error::HashMismatch { .. }
            | Error::Runtime { .. }
            | Error::PoolWarm { .. }
            | Error::Serve { .. }
            | Error::Cancelled { .. }
            | Error::RuntimeInstall { .. }
            | Error::ImageBuild { .. }
            | Error::Io { .. }
            | Error::Engine { .. }
            | Error::Agent { .. }
            | Error::KernelStart { .. } => K::Internal,
        }
    }
}
