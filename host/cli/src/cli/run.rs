//! `sandlot run`: runs code in a fresh sandbox, streaming its output.

use super::exit;
use super::global::{plugin_notes, Global};
use super::plan::CodeSource;
use anyhow::{Context, Result};
use clap::builder::TypedValueParser;
use clap::Args;
use sandlot::backend::Needs;
use sandlot::policy::BlockAt;
use sandlot::sandbox_path::escape_controls;
use sandlot::secret::{Binding, Secret, UpstreamCa};
use sandlot::service::Service;
use sandlot::{
    BackendChoice, EndReason, Execution, Interrupt, Network, OpenRequest, Policy, RunOptions,
    Session,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    source: CodeSource,
    #[command(flatten)]
    sandbox: SandboxArgs,
    /// Print one JSON document with everything (the `sandlot.execution/1` form).
    #[arg(long)]
    json: bool,
    /// Write the files the program made into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Say on stderr where the code ran, and why other backends were passed over.
    #[arg(short, long)]
    verbose: bool,
    /// Run the code in the session saved in FILE (by `--save` or the REPL's `:save`),
    /// with its variables and files, on the backend it was saved on: the code runs as
    /// a cell of that session, not as a program of its own.
    #[arg(long, value_name = "FILE")]
    restore: Option<PathBuf>,
    /// Save the session to FILE after the run (its files and, where the backend
    /// captures it, its interpreter's state: `sandlot run --restore FILE` picks it up).
    /// The code runs as a cell, so that its variables are what is saved.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Give the program no standard input. Without it, a pipe or a file on sandlot's
    /// standard input is read to its end and handed to the program (a terminal is
    /// not: the program then reads an empty input).
    #[arg(long)]
    no_stdin: bool,
    /// Arguments for the program, after `--`: it sees them as `python3 main.py ARGS`
    /// would (`sys.argv[1:]`, `process.argv.slice(2)`).
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

/// The most standard input a run is handed: it is held in memory, and sent whole.
const MAX_STDIN: u64 = 64 << 20;

/// What the program reads on its standard input: a pipe's or a file's contents, read
/// to the end; nothing from a terminal or a device such as `/dev/null`.
fn program_input() -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let kind = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|stdin| stdin.metadata())
        .map(|m| m.file_type());
    let Ok(kind) = kind else {
        // No standard input at all (closed): nothing to pass.
        return Ok(Vec::new());
    };
    if !(kind.is_file() || kind.is_fifo() || kind.is_socket()) {
        return Ok(Vec::new());
    }
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        let mut input = Vec::new();
        let read = std::io::stdin()
            .lock()
            .take(MAX_STDIN + 1)
            .read_to_end(&mut input)
            .map(|_| input);
        let _ = sender.send(read);
    });
    // A caller may hold a pipe open and never write to it (a parent that spawned
    // sandlot with a pipe it does not use): say what is awaited instead of hanging
    // silently.
    let read = match receiver.recv_timeout(Duration::from_secs(2)) {
        Ok(read) => read,
        Err(RecvTimeoutError::Timeout) => {
            note!(
                "sandlot: waiting for standard input to end (the program is handed all of \
                 it); close it, or pass --no-stdin"
            );
            receiver
                .recv()
                .map_err(|_| anyhow::anyhow!("standard input could not be read"))?
        }
        Err(RecvTimeoutError::Disconnected) => {
            return Err(anyhow::anyhow!("standard input could not be read"))
        }
    };
    let input = read.map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))?;
    if input.len() as u64 > MAX_STDIN {
        return Err(exit::usage(format!(
            "standard input is over {} MiB, the most a run is handed; pass the data as a \
             file the code reads instead",
            MAX_STDIN >> 20
        )));
    }
    Ok(input)
}

/// Where and under which limits and policy code runs: what `run` and `repl` share.
#[derive(Args)]
pub(super) struct SandboxArgs {
    /// Library the code needs. Repeatable. The wasm backend's runtimes cannot install
    /// libraries but bundle many (Python: numpy, pandas, scipy, scikit-learn,
    /// matplotlib, seaborn, statsmodels, ...); `auto` goes to a container backend for
    /// any other.
    #[arg(long = "lib", value_name = "NAME")]
    libraries: Vec<String>,
    /// Where to run it: `auto` (the first backend that can, in the order `sandlot
    /// doctor` lists them), or a backend's name.
    #[arg(long, default_value = "auto", value_name = "BACKEND")]
    backend: String,
    /// The container image to run in, instead of the configured or default one.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Wall-clock limit in seconds (of each cell, in `repl`).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    timeout: f64,
    /// Memory cap in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub(super) memory: usize,
    /// Most output kept and shown of each of stdout and stderr (of each cell, in
    /// `repl`): a number of bytes, or with `K`, `M` or `G` (1024-based). The rest is
    /// dropped, and a program that writes on is stopped (exit status 141).
    #[arg(long, default_value = "1M", value_name = "SIZE", value_parser = size)]
    max_output: usize,
    /// The security policy: a preset (`strict`, `standard`, `permissive`) or a policy
    /// file (a preset and overrides, as `[policy]` in sandlot.toml). Default: the
    /// configuration's `[policy]`, else `standard`.
    #[arg(long, value_name = "FILE|PRESET")]
    policy: Option<String>,
    /// Refuse code whose static analysis finds something this severe or worse
    /// (overrides the policy's; the standard policy's is `critical`).
    #[arg(
        long,
        value_name = "SEVERITY",
        value_parser = clap::builder::PossibleValuesParser::new(BlockAt::NAMES)
            .map(|name| BlockAt::named(&name).expect("one of the possible values")),
    )]
    block_at: Option<BlockAt>,
    /// Run the code without reading it first: no static analysis, so no findings
    /// and nothing refused for them (the policy's `analyze = false`).
    #[arg(long, conflicts_with = "block_at")]
    no_analysis: bool,
    /// When a container may reach the network (overrides the policy's; the standard
    /// policy's is `install`).
    #[arg(
        long,
        value_name = "NETWORK",
        value_parser = clap::builder::PossibleValuesParser::new(["off", "install", "on", "allow-list"])
            .map(|name| Network::named(&name).expect("one of the possible values")),
    )]
    network: Option<Network>,
    /// Lets the code reach this destination and no other: a name (`pypi.org`), a
    /// wildcard (`*.pythonhosted.org`), an address or a network (`10.0.0.0/8`).
    /// Implies `--network allow-list`; repeatable, or comma-separated. Container
    /// backends on this machine only.
    #[arg(long = "allow", value_name = "DEST")]
    allow: Vec<String>,
    /// Lets requests to a host through only as this rule says:
    /// `[allow|deny] [METHOD] HOST[/PATH]`, the path a pattern (`*` within a segment,
    /// `**` any number of them): `GET api.github.com/repos/**`, `deny DELETE
    /// *.example.com`. A host an allow rule names takes only what allow rules match,
    /// and is listed as by `--allow`; a deny rule wins. The proxy reads each request,
    /// through TLS too. Implies `--network allow-list`; repeatable. Docker, Podman and
    /// native backends.
    #[arg(long = "request", value_name = "RULE")]
    requests: Vec<String>,
    /// Passes this environment variable of yours to the code as a secret: its value
    /// is masked (`***`) in the output and the files that come back. The value is
    /// read from your environment, so it never shows in a command line. With
    /// `=HOSTS[@PLACEMENT]` (`GITHUB_TOKEN=api.github.com`, `KEY=api.example.com@header:X-Api-Key`)
    /// the code gets a placeholder instead, which the egress proxy replaces with the
    /// value in requests to those hosts only (bearer, basic, header:NAME or
    /// query:NAME; bearer by default). Repeatable.
    #[arg(long = "secret", value_name = "NAME[=HOSTS[@PLACEMENT]]")]
    secrets: Vec<String>,
    /// Trusts the CAs of this PEM file, besides this machine's roots, for the hosts
    /// bound secrets go to over HTTPS (an internal API with a CA of its own). The
    /// egress proxy sends a secret only to a host whose certificate it verifies.
    #[arg(long = "upstream-ca", value_name = "FILE")]
    upstream_ca: Option<std::path::PathBuf>,
}

impl SandboxArgs {
    /// The request that opens a session of `language` as the flags say, over the
    /// configuration's policy `configured`.
    pub(super) fn request(
        &self,
        language: &str,
        configured: Option<Policy>,
    ) -> Result<OpenRequest> {
        if !(self.timeout > 0.0 && self.timeout.is_finite()) {
            return Err(exit::usage(
                "--timeout must be a positive number of seconds",
            ));
        }
        // The library reads a cap of 0 as none at all; on the command line it is a slip.
        if self.memory == 0 {
            return Err(exit::usage("--memory must be at least 1 MiB"));
        }
        let mut request = OpenRequest::new(language);
        request.backend = BackendChoice::from(self.backend.as_str());
        request.image = self.image.clone();
        request.libraries = self.libraries.clone();
        request.limits.timeout = Duration::from_secs_f64(self.timeout);
        request.limits.memory = self.memory.saturating_mul(1 << 20);
        request.limits.max_output = self.max_output;
        let mut policy = match &self.policy {
            Some(value) => Policy::from_preset_or_file(value)?,
            None => configured.unwrap_or_default(),
        };
        if let Some(block_at) = self.block_at {
            policy.block_at = block_at.severity();
        }
        if self.no_analysis {
            policy.analyze = false;
        }
        if let Some(network) = self.network {
            policy.network = network;
        }
        if !self.allow.is_empty() {
            if self.network.is_some_and(|n| n != Network::AllowList) {
                return Err(exit::usage(
                    "--allow lists where the code may go, so it goes with --network allow-list only",
                ));
            }
            let listed: sandlot::egress::AllowList = self
                .allow
                .join(",")
                .parse()
                .map_err(|e| exit::usage(format!("--allow: {e}")))?;
            policy.network = Network::AllowList;
            let mut entries = policy.allow.entries().to_vec();
            entries.extend(listed.entries().iter().cloned());
            policy.allow = entries.into();
        }
        if !self.requests.is_empty() {
            if self.network.is_some_and(|n| n != Network::AllowList) {
                return Err(exit::usage(
                    "--request narrows what an allow-list lets through, so it goes with \
                     --network allow-list only",
                ));
            }
            let rules: sandlot::egress::RequestRules = self
                .requests
                .clone()
                .try_into()
                .map_err(|e| exit::usage(format!("--request: {e}")))?;
            policy.network = Network::AllowList;
            let mut entries = policy.allow.entries().to_vec();
            for rule in rules.rules() {
                let host = sandlot::egress::AllowList::from(vec![rule.host().clone()]);
                if rule.action() == sandlot::egress::RuleAction::Allow
                    && !host.within(&entries.clone().into())
                {
                    entries.push(rule.host().clone());
                }
            }
            policy.allow = entries.into();
            let written: Vec<String> = policy
                .requests
                .rules()
                .iter()
                .chain(rules.rules())
                .map(ToString::to_string)
                .collect();
            policy.requests = written
                .try_into()
                .map_err(|e| exit::usage(format!("--request: {e}")))?;
        }
        request.policy = policy;
        request.secrets = secrets_from_environment(&self.secrets)?;
        request.upstream_ca = upstream_ca(self.upstream_ca.as_deref())?;
        Ok(request)
    }
}

/// The most `--max-output` takes: every byte kept is held in memory until the run ends.
const MAX_OUTPUT_CEILING: usize = 1 << 30;

/// A size as `--max-output` takes it: bytes, or a number with `K`, `M` or `G`.
fn size(text: &str) -> std::result::Result<usize, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((at, unit @ ('K' | 'M' | 'G' | 'k' | 'm' | 'g'))) => (&text[..at], Some(unit)),
        _ => (text, None),
    };
    let shift = match unit.map(|u| u.to_ascii_uppercase()) {
        Some('K') => 10,
        Some('M') => 20,
        Some('G') => 30,
        _ => 0,
    };
    let bytes = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| {
            format!("`{text}` is not a size: write bytes, or a number with K, M or G")
        })?;
    if bytes == 0 {
        return Err("0 would keep no output at all; give at least 1 byte".into());
    }
    if bytes > MAX_OUTPUT_CEILING {
        return Err(
            "at most 1G: output is held in memory until the run ends (write to a \
                    file in the workspace and keep it with --out for more)"
                .into(),
        );
    }
    Ok(bytes)
}

/// The CAs of `--upstream-ca FILE`, or none.
pub(super) fn upstream_ca(file: Option<&std::path::Path>) -> Result<UpstreamCa> {
    let Some(file) = file else {
        return Ok(UpstreamCa::default());
    };
    let pem = std::fs::read_to_string(file)
        .map_err(|e| exit::usage(format!("--upstream-ca {}: {e}", file.display())))?;
    UpstreamCa::from_pem(&pem)
        .map_err(|e| exit::usage(format!("--upstream-ca {}: {e}", file.display())))
}

/// The secrets `--secret NAME[=HOSTS[@PLACEMENT]]` names, their values read from
/// this environment so they never show in a command line, each bound to the hosts
/// written after `=`.
pub(super) fn secrets_from_environment(names: &[String]) -> Result<Vec<Secret>> {
    names
        .iter()
        .map(|written| {
            let (name, binding) = match written.split_once('=') {
                Some((name, hosts)) => {
                    let binding: Binding = hosts.parse().map_err(|reason| {
                        exit::usage(format!(
                            "--secret {written}: {reason} (HOSTS as --allow writes them, \
                             then @bearer, @basic, @header:NAME or @query:NAME)"
                        ))
                    })?;
                    (name, Some(binding))
                }
                None => (written.as_str(), None),
            };
            let Some(value) = std::env::var_os(name) else {
                return Err(exit::no_input(format!(
                    "--secret {name}: {name} is not set in this environment; export it \
                     first (the value is read from there, so it never shows in a command line)"
                )));
            };
            let value = value
                .into_string()
                .map_err(|_| exit::usage(format!("--secret {name}: the value is not UTF-8")))?;
            let secret = Secret::new(name, &value)?;
            Ok(match binding {
                Some(binding) => secret.bound_to(binding)?,
                None => secret,
            })
        })
        .collect()
}

/// An interrupt that Ctrl-C (SIGINT) sets, instead of killing sandlot with a sandbox
/// open: the run stops as its backend allows and the session closes as usual. With
/// `second_exits`, a second Ctrl-C before the run has stopped exits at once (130).
pub(super) fn ctrl_c(second_exits: bool) -> Result<Interrupt> {
    use signal_hook::consts::SIGINT;
    let interrupt = Interrupt::new();
    if second_exits {
        // Registered first, so that it sees the flag as the first Ctrl-C left it.
        signal_hook::flag::register_conditional_shutdown(SIGINT, 130, interrupt.flag())
            .context("cannot catch Ctrl-C")?;
    }
    signal_hook::flag::register(SIGINT, interrupt.flag()).context("cannot catch Ctrl-C")?;
    Ok(interrupt)
}

/// Says where `session` runs and with what interpreter: with `verbose`, always (and
/// which backends were passed over, and why); else only when `auto` passed over a
/// backend that runs the language but not this request, since the same code then
/// meets another interpreter and other libraries than it would there.
pub(super) fn say_where(
    service: &Service,
    session: &Session,
    request: &OpenRequest,
    verbose: bool,
) {
    let sandlot = service.sandlot();
    let language = session.language();
    let moved_from = match request.backend {
        BackendChoice::Auto => session.passed_over().iter().find(|(name, _)| {
            sandlot
                .backend(name.as_str())
                .is_ok_and(|b| b.supports(&Needs::language(language)).is_ok())
        }),
        _ => None,
    };
    if !verbose && moved_from.is_none() {
        return;
    }
    let toolchain = session.toolchain();
    if verbose {
        for (backend, why) in session.passed_over() {
            note!("sandlot: passed over {backend}: {why}");
        }
        let sandbox = session.sandbox_name().map(|name| format!(" ({name})"));
        let with = toolchain.map(|t| format!(" with {t}, from {}", t.source));
        note!(
            "sandlot: running on {}{}{}",
            session.backend(),
            sandbox.unwrap_or_default(),
            with.unwrap_or_default()
        );
    } else if let Some((from, why)) = moved_from {
        let with = toolchain.map(|t| format!(" with {t}"));
        note!(
            "sandlot: running on {}{}, not {from}: {why}",
            session.backend(),
            with.unwrap_or_default()
        );
    }
}

/// Run options that stream the program's output to this terminal as it is written.
pub(super) fn streaming() -> RunOptions {
    use std::io::Write;
    RunOptions {
        on_stdout: Some(Box::new(|bytes: &[u8]| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(bytes);
            let _ = out.flush();
        })),
        on_stderr: Some(Box::new(|bytes: &[u8]| {
            let _ = std::io::stderr().lock().write_all(bytes);
        })),
        ..RunOptions::default()
    }
}

pub(super) fn command(global: &Global, args: RunArgs) -> Result<ExitCode> {
    let mut service =
        Service::from_config(global.config()?, &global.overrides(), sandlot::providers())?;
    plugin_notes(service.sandlot().plugins());
    let (code, handler) = args.source.load(service.sandlot().plugins())?;
    let configured = service.sandlot().config().policy.clone();
    let mut request = args.sandbox.request(&handler.info().id, configured)?;
    // A file run is a program, as `python3 FILE` runs it: it prints what it prints,
    // not the value of its last line, and has a command line. One that restores or
    // saves a session is a cell of it.
    request.one_shot = args.restore.is_none() && args.save.is_none();
    let stdin = if args.no_stdin || args.source.reads_stdin() {
        Vec::new()
    } else {
        program_input()?
    };
    let mut session = match &args.restore {
        Some(file) => super::snapshot::restore(&mut service, &mut request, file)?,
        None => service.open(&request, |step| note!("sandlot: {step}"))?,
    };
    say_where(&service, &session, &request, args.verbose);
    if args.verbose && !session.unenforced().is_empty() {
        let fields: Vec<String> = session.unenforced().iter().map(|f| f.to_string()).collect();
        eprintln!(
            "sandlot: {} cannot apply the policy's {}",
            session.backend(),
            fields.join(", ")
        );
    }
    // Output streams as it is written, unless it all goes into one document.
    let mut options = if args.json {
        RunOptions::default()
    } else {
        streaming()
    };
    options.stdin = stdin;
    options.args = args.args;
    options.interrupt = Some(ctrl_c(true)?);
    let execution = session.run_with(&code, options)?;
    if let Some(file) = &args.save {
        super::snapshot::save(&mut session, file)?;
    }
    if let Some(dir) = &args.out {
        write_artifacts(&execution, dir)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&execution.to_json())?);
    } else {
        notes(&execution, args.sandbox.memory, args.out.is_some());
    }
    Ok(ExitCode::from(exit::of_execution(&execution)))
}

/// Writes the files a run made into `dir`, which is made if missing: each through a
/// capability handle on `dir`, so no name the code chose leads outside it.
pub(super) fn write_artifacts(execution: &Execution, dir: &std::path::Path) -> Result<()> {
    Ok(execution.write_artifacts(dir)?)
}

/// What a person at a terminal should know about a run besides its output; `kept`
/// when its files were written somewhere already.
pub(super) fn notes(execution: &Execution, memory_mib: usize, kept: bool) {
    for note in [
        execution
            .stdout_truncated
            .then_some("stdout was cut at the output limit (--max-output raises it)"),
        execution
            .stderr_truncated
            .then_some("stderr was cut at the output limit (--max-output raises it)"),
        execution
            .artifacts_truncated
            .then_some("some files were left out by the artifact limits"),
    ]
    .into_iter()
    .flatten()
    {
        note!("sandlot: {note}");
    }
    match execution.artifacts_refused {
        0 => {}
        1 => note!(
            "sandlot: 1 file was left out: its name cannot be shown safely (not UTF-8, or a \
             control character)"
        ),
        n => note!(
            "sandlot: {n} files were left out: their names cannot be shown safely (not UTF-8, \
             or control characters)"
        ),
    }
    match &execution.end {
        EndReason::Completed => {}
        EndReason::TimedOut { limit } => note!(
            "sandlot: stopped at the time limit of {} s (--timeout), after {:.1} s",
            limit.as_secs_f64(),
            execution.duration.as_secs_f64()
        ),
        EndReason::MemoryLimit => {
            note!("sandlot: stopped at the memory cap of {memory_mib} MiB (--memory)")
        }
        EndReason::Interrupted => note!(
            "sandlot: interrupted (Ctrl-C) after {:.1} s",
            execution.duration.as_secs_f64()
        ),
        // A lost sandbox's cause can quote what its agent said.
        other => note!("sandlot: {}", escape_controls(&other.to_string())),
    }
    for denial in &execution.egress_denied {
        // The names in a denial are what the code asked for: any bytes.
        note!(
            "sandlot: egress refused: {}",
            escape_controls(&denial.to_string())
        );
    }
    if !execution.artifacts.is_empty() && !kept {
        let names: Vec<String> = execution
            .artifacts
            .iter()
            .map(|a| a.path.to_string())
            .collect();
        note!(
            "sandlot: made {} (use --out DIR to keep them)",
            names.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_as_bytes_or_with_a_binary_unit_and_out_of_range_is_refused() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("64K"), Ok(64 << 10));
        assert_eq!(size("100m"), Ok(100 << 20));
        assert_eq!(size("1G"), Ok(1 << 30));
        for bad in ["", "M", "1.5M", "-1", "10T", "ten"] {
            assert!(size(bad).unwrap_err().contains("not a size"), "{bad}");
        }
        assert!(size("0").unwrap_err().contains("at least 1 byte"));
        assert!(size("2G").unwrap_err().contains("at most 1G"));
    }
}
