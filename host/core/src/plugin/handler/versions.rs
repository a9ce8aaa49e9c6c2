//! The contract versions a handler may be built for: the prepared handler and the
//! instance of each, and the macros that run one body over their look-alike types.
//! Adding a contract version starts here.

use crate::wasmtime_engine::MemoryCap;

// Bindings of each supported contract version, bound once in sandlot-wit, so plugins
// built against an older contract keep loading.
use sandlot_wit::v0_1_0::handler as v0_1_0;
use sandlot_wit::v0_2_0::handler as v0_2_0;
use sandlot_wit::v0_3_0::handler as v0_3_0;

use v0_1_0::exports::sandlot::plugin::handler as wit1;
use v0_2_0::exports::sandlot::plugin::handler as wit2;
use v0_3_0::exports::sandlot::plugin::handler as wit3;

/// A prepared handler, by the contract version it was built for.
#[derive(Clone)]
pub(super) enum Pre {
    V0_1(v0_1_0::LanguageHandlerPre<MemoryCap>),
    V0_2(v0_2_0::LanguageHandlerPre<MemoryCap>),
    V0_3(v0_3_0::LanguageHandlerPre<MemoryCap>),
}

/// The exports of one fresh instance, by contract version.
#[derive(Clone, Copy)]
pub(super) enum Guest<'a> {
    V0_1(&'a wit1::Guest),
    V0_2(&'a wit2::Guest),
    V0_3(&'a wit3::Guest),
}

/// The contract version a handler was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Version {
    V0_1,
    V0_2,
    V0_3,
}

/// Runs `$body` on a handler of contract 0.2 or later, with `$wit` naming that
/// version's bindings (their types differ, the calls do not); a handler of 0.1 answers
/// `$older` without being instantiated.
macro_rules! since_0_2 {
    ($self:expr, $function:literal, $older:expr, |$h:ident, $store:ident, $wit:ident| $body:expr) => {
        since_0_2!($self, $function, 0, $older, |$h, $store, $wit| $body)
    };
    ($self:expr, $function:literal, $code_bytes:expr, $older:expr, |$h:ident, $store:ident, $wit:ident| $body:expr) => {{
        if $self.guest_kind() == Version::V0_1 {
            Ok($older)
        } else {
            $self.call($function, $code_bytes, |guest, $store| match guest {
                Guest::V0_1(_) => Ok($older),
                Guest::V0_2($h) => {
                    // Bodies that name no type of their version leave it unused.
                    #[allow(unused_imports)]
                    use wit2 as $wit;
                    $body
                }
                Guest::V0_3($h) => {
                    // Bodies that name no type of their version leave it unused.
                    #[allow(unused_imports)]
                    use wit3 as $wit;
                    $body
                }
            })
        }
    }};
}

/// The same conversion for the types every contract version defines alike.
macro_rules! convert_command {
    ($wit:ident, $c:expr) => {{
        let c = $c;
        Command {
            phase: match c.phase {
                $wit::Phase::Setup => Phase::Setup,
                $wit::Phase::Install => Phase::Install,
                $wit::Phase::Build => Phase::Build,
                $wit::Phase::Run => Phase::Run,
            },
            argv: c.argv,
            env: c.env,
            needs_network: c.needs_network,
        }
    }};
}

/// Calls `plan` of either version and converts its answer: file contents are a string
/// in 0.1 and bytes in 0.2, which `Into<Vec<u8>>` covers both ways.
macro_rules! call_plan {
    ($wit:ident, $h:expr, $store:expr, $code:expr, $libraries:expr, $options:expr) => {{
        let options = $wit::PlanOptions {
            workdir: $options.workdir.clone(),
            output_dir: $options.output_dir.clone(),
            capture_plots: $options.capture_plots,
            args: $options.args.clone(),
        };
        $h.call_plan($store, $code, $libraries, &options)?
            .map(|plan| {
                let files: Vec<SourceFile> = plan
                    .files
                    .into_iter()
                    .map(|f| SourceFile {
                        path: f.path,
                        contents: f.contents.into(),
                    })
                    .collect();
                let commands: Vec<Command> = plan
                    .commands
                    .into_iter()
                    .map(|c| convert_command!($wit, c))
                    .collect();
                (files, commands)
            })
    }};
}

/// A handler's `info` of any contract version, with its capabilities already read.
macro_rules! language_info {
    ($info:expr, $capabilities:expr) => {{
        let info = $info;
        LanguageInfo {
            id: info.id,
            aliases: info.aliases,
            display_name: info.display_name,
            file_extension: info.file_extension,
            default_image: info.default_image,
            capabilities: $capabilities,
            version: info.version,
        }
    }};
}

/// The capabilities of contract 0.2 or later.
macro_rules! capabilities {
    ($wit:ident, $list:expr) => {
        $list
            .iter()
            .map(|c| match c {
                $wit::Capability::InstallLibraries => LanguageCapability::InstallLibraries,
                $wit::Capability::CapturePlots => LanguageCapability::CapturePlots,
                $wit::Capability::Interactive => LanguageCapability::Interactive,
            })
            .collect()
    };
}

macro_rules! convert_finding {
    ($wit:ident, $f:expr) => {{
        let f = $f;
        Finding {
            rule_id: f.rule_id,
            severity: match f.severity {
                $wit::Severity::Info => Severity::Info,
                $wit::Severity::Low => Severity::Low,
                $wit::Severity::Medium => Severity::Medium,
                $wit::Severity::High => Severity::High,
                $wit::Severity::Critical => Severity::Critical,
            },
            line: f.line,
            message: f.message,
        }
    }};
}

pub(super) use call_plan;
pub(super) use capabilities;
pub(super) use convert_command;
pub(super) use convert_finding;
pub(super) use language_info;
pub(super) use since_0_2;
