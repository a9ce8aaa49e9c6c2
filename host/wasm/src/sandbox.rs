//! One sandbox of the wasm backend: a workspace and the interpreter working in it,
//! given each run's environment, working directory and arguments, restarted when a
//! run leaves it untrustworthy.

use crate::interpreter::{Interpreter, Ran, Stdio, SETUP_TIMEOUT};
use crate::workspace::Workspace;
use crate::{door, program, snapshot};
use sandlot_core::backend::{
    BackendName, EndReason, LastValue, Outcome, RunRequest, Sandbox, SandboxFiles, SessionState,
    Workload,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::interrupt::Interrupt;
use sandlot_core::layout::Layout;
use sandlot_core::snapshot::{InterpreterState, RuntimeIdentity};
use std::path::PathBuf;
use wasmtime::Trap;

/// exports (see [`module::RuntimeManifest::set_env`]).
/// Code a module runtime's manifest gives for what a 0.2 component does through its
pub(crate) struct Templates {
    /// Sets environment variables, `{env}` standing for a JSON object.
    pub(crate) set_env: Option<String>,
    /// Changes the working directory, `{cwd}` standing for a JSON string.
    pub(crate) set_cwd: Option<String>,
}

/// How the code of a runtime that can call tools gets its `sandlot_tools`.
#[derive(Clone, Copy)]
pub(crate) enum ToolBindings {
    /// It cannot call tools.
    Absent,
    /// sandlot runs this code in each new interpreter (a module runtime's door).
    Hook(&'static str),
    /// The runtime binds them itself (a component of contract 0.4).
    Native,
}

/// What an interpreter has beyond its defaults and its memory that a snapshot
/// carries: the working directory and program arguments runs gave it, whether its
/// tool bindings ran, and a component's globals.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InterpreterSettings {
    pub(crate) cwd: String,
    pub(crate) args: Vec<String>,
    pub(crate) tools_bound: bool,
    /// The names (never the values) of the variables runs set in it: a restoring
    /// session removes those its own runs do not set, or it would see the earlier
    /// session's environment, secrets included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) env_keys: Vec<String>,
    /// A component's mutable globals (see [`state_access`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) globals: Vec<u64>,
}

/// Starts an interpreter with the sandbox's streams and extra environment.
pub(crate) type Starter =
    Box<dyn Fn(&Stdio, &[(String, String)]) -> Result<Box<dyn Interpreter>> + Send>;

/// One sandbox of the wasm backend: a workspace and the interpreter working in it.
pub(crate) struct WasmSandbox {
    pub(crate) name: String,
    pub(crate) runtime: String,
    /// The runtime it runs, which a snapshot's state belongs to, and a module
    /// runtime's module file (`None` altogether: a component without state access,
    /// whose state is not captured).
    pub(crate) identity: Option<(RuntimeIdentity, Option<PathBuf>)>,
    /// A fresh instance per run (a `command` module): nothing persists.
    pub(crate) one_shot: bool,
    /// How the runtime runs code as a program, where sandlot knows.
    pub(crate) form: Option<&'static program::ProgramForm>,
    /// How `sandlot_tools` becomes importable, where the runtime can call tools.
    pub(crate) tool_bindings: ToolBindings,
    /// Whether the interpreter running now has run `tool_bindings`.
    pub(crate) tools_bound: bool,
    pub(crate) templates: Templates,
    pub(crate) workspace: Workspace,
    pub(crate) stdio: Stdio,
    pub(crate) interpreter: Option<Box<dyn Interpreter>>,
    pub(crate) start: Starter,
    /// The environment the interpreter has now, beyond its defaults (`None`: not
    /// known, as after a restore).
    pub(crate) env: Option<Vec<(String, String)>>,
    /// The names of the variables the session it was restored from had set: what
    /// its environment holds beyond its defaults while `env` is `None`.
    pub(crate) restored_env: Vec<String>,
    /// The working directory a run last asked for, relative to the workspace.
    pub(crate) cwd: String,
    /// The program arguments the interpreter has now (empty: its own argv).
    pub(crate) args: Vec<String>,
}

impl WasmSandbox {
    fn failed(&self, reason: String) -> Error {
        Error::Runtime {
            runtime: self.runtime.clone(),
            reason,
        }
    }

    /// Gives the interpreter the run's environment.
    fn apply_env(&mut self, env: &[(String, String)]) -> Result<()> {
        if self.env.as_deref() == Some(env) {
            return Ok(());
        }
        if self.one_shot {
            // A fresh instance per run: it simply starts with this environment.
            self.interpreter = Some((self.start)(&self.stdio, env)?);
            self.env = Some(env.to_vec());
            self.args.clear();
            return Ok(());
        }
        // What earlier runs set, and this one does not: removed where the runtime's
        // code can (`{unset}`), else emptied.
        let stale: Vec<String> = self
            .env_keys()
            .into_iter()
            .filter(|k| !env.iter().any(|(name, _)| name == k))
            .collect();
        let emptied: Vec<(String, String)> = env
            .iter()
            .cloned()
            .chain(stale.iter().map(|k| (k.clone(), String::new())))
            .collect();
        let native = self.interpreter.as_mut().and_then(|i| i.set_env(&emptied));
        match (native, self.templates.set_env.clone()) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!("setting the environment failed: {reason}"))
            })?,
            (None, Some(template)) => {
                let removes = template.contains("{unset}");
                let object: serde_json::Map<String, serde_json::Value> =
                    (if removes { env } else { &emptied[..] })
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                        .collect();
                let code = template
                    .replace("{unset}", &serde_json::json!(stale).to_string())
                    .replace("{env}", &serde_json::Value::Object(object).to_string());
                self.hook(&code, "setting the environment")?;
            }
            (None, None) => {
                return Err(self.failed(
                    "this runtime cannot change its environment once started (a 0.1 runtime \
                     component has no `set-env`, its runtime.toml no `set_env`); open the \
                     session with its environment instead"
                        .into(),
                ))
            }
        }
        self.env = Some(env.to_vec());
        Ok(())
    }

    /// The names of the variables runs set in the interpreter, here or in the session
    /// it was restored from: the next run's environment removes those it does not
    /// set again.
    fn env_keys(&self) -> Vec<String> {
        match &self.env {
            Some(env) => env.iter().map(|(k, _)| k.clone()).collect(),
            None => self.restored_env.clone(),
        }
    }

    /// Moves the interpreter to the run's working directory, if it asks for another
    /// one than the last run did (code may change directory itself, as in a notebook).
    fn apply_cwd(&mut self, workdir: &str) -> Result<()> {
        if workdir == self.cwd {
            return Ok(());
        }
        let cannot = |sandbox: &Self| {
            sandbox.failed(
                "this runtime cannot run in another working directory (a 0.1 runtime \
                 component has no `set-cwd`, its runtime.toml no `set_cwd`)"
                    .into(),
            )
        };
        if self.one_shot {
            return Err(cannot(self));
        }
        // Made if missing, as writing a plan's files there would on other backends.
        self.workspace.create_dir_all(workdir)?;
        let path = if workdir.is_empty() {
            Layout::WORKSPACE.to_string()
        } else {
            format!("{}/{workdir}", Layout::WORKSPACE)
        };
        let native = self.interpreter.as_mut().and_then(|i| i.set_cwd(&path));
        match (native, self.templates.set_cwd.clone()) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!("changing the working directory failed: {reason}"))
            })?,
            (None, Some(template)) => {
                let code = template.replace("{cwd}", &serde_json::Value::String(path).to_string());
                self.hook(&code, "changing the working directory")?;
            }
            (None, None) => return Err(cannot(self)),
        }
        self.cwd = workdir.to_string();
        Ok(())
    }

    /// Hands the program `args` after its name, if they are not what it has.
    fn apply_args(&mut self, args: &[String]) -> Result<()> {
        if args == self.args.as_slice() {
            return Ok(());
        }
        let native = self.interpreter.as_mut().and_then(|i| i.set_args(args));
        match (native, self.form) {
            (Some(answer), _) => answer.map_err(|reason| {
                self.failed(format!(
                    "handing the program its arguments failed: {reason}"
                ))
            })?,
            (None, Some(form)) => {
                let hook = form.argv_hook(args);
                self.hook(&hook, "handing the program its arguments")?;
            }
            (None, None) => {
                return Err(self.failed(
                    "this runtime cannot hand a program arguments (sandlot does not know \
                     its interpreter, and it is not a command module); run the program \
                     on a container backend, or without arguments"
                        .into(),
                ))
            }
        }
        self.args = args.to_vec();
        Ok(())
    }

    /// The interpreter's state for a snapshot: its memory, whole if `whole` (a
    /// snapshot for this process, mapped back in one piece), else as the pages that
    /// differ from a fresh instance's.
    fn capture_as(
        &mut self,
        out: &mut dyn std::io::Write,
        whole: bool,
    ) -> Result<Option<InterpreterState>> {
        let Some((identity, module)) = self.identity.clone() else {
            return Ok(None);
        };
        if let Some(module) = module {
            snapshot::check_exact(&identity, &module).map_err(|reason| {
                self.failed(format!(
                    "its state cannot be captured exactly: {reason}; snapshot the files alone"
                ))
            })?;
        }
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Err(Error::SessionEnded {
                reason: "its interpreter could not be restarted".into(),
            });
        };
        if self.one_shot {
            return Ok(None);
        }
        let captured = match interpreter.capture(out, whole) {
            None => return Ok(None),
            Some(written) => written?,
        };
        let memory = captured.memory;
        let settings = InterpreterSettings {
            cwd: self.cwd.clone(),
            args: self.args.clone(),
            tools_bound: self.tools_bound,
            env_keys: self.env_keys(),
            globals: captured.globals,
        };
        Ok(Some(InterpreterState {
            runtime: identity,
            memory,
            detail: serde_json::to_value(settings).map_err(|e| self.failed(e.to_string()))?,
        }))
    }

    /// Makes `sandlot_tools` importable in the interpreter, once per interpreter (only
    /// runtimes that keep theirs across runs offer tools).
    fn bind_tools(&mut self) -> Result<()> {
        if self.tools_bound {
            return Ok(());
        }
        match self.tool_bindings {
            ToolBindings::Absent => {
                return Err(self.failed(
                    "this runtime cannot call tools (it has no door for them, or sandlot \
                     knows no tool bindings for it)"
                        .into(),
                ))
            }
            ToolBindings::Hook(bindings) => {
                self.hook(bindings, "making the session's tools importable")?
            }
            ToolBindings::Native => {}
        }
        self.tools_bound = true;
        Ok(())
    }

    /// Runs host code (a manifest hook) in the interpreter, its output discarded.
    fn hook(&mut self, code: &str, what: &str) -> Result<()> {
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Ok(());
        };
        self.stdio.start(64 << 10);
        let ran = interpreter.run(code, SETUP_TIMEOUT, None);
        let (_, stderr) = self.stdio.finish();
        match ran {
            Ran::Returned {
                exit_code: 0,
                quit: false,
            } => Ok(()),
            _ => Err(self.failed(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&stderr.bytes).trim()
            ))),
        }
    }

    /// A fresh interpreter in the same workspace, after the old one was stopped.
    fn restart(&mut self, reason: String) -> SessionState {
        match self.start_fresh() {
            Ok(()) => SessionState::Restarted { reason },
            Err(e) => SessionState::Ended {
                reason: format!("{reason}, and a new interpreter could not be started: {e}"),
            },
        }
    }

    /// Drops the interpreter and starts a new one with its defaults: no extra
    /// environment, the workspace as its directory, its own argv. If the start fails
    /// there is no interpreter, and the next run says the session ended.
    fn start_fresh(&mut self) -> Result<()> {
        self.interpreter = None;
        self.tools_bound = false;
        self.env = Some(Vec::new());
        self.cwd.clear();
        self.args.clear();
        self.interpreter = Some((self.start)(&self.stdio, &[])?);
        Ok(())
    }
}

impl WasmSandbox {
    /// [`Sandbox::run`] with the door open to `door` rather than to the request's
    /// tools: a worker process relays the calls to the process that holds them.
    pub(crate) fn run_through(
        &mut self,
        request: RunRequest<'_>,
        door: Option<std::sync::Arc<dyn door::Answer>>,
    ) -> Result<Outcome> {
        let code = match request.workload {
            Workload::Code(code) => code,
            other => return Err(other.unsupported(BackendName::WASM.as_str())),
        };
        if self.interpreter.is_none() {
            return Err(Error::SessionEnded {
                reason: "its interpreter could not be restarted".into(),
            });
        }
        self.apply_env(request.env)?;
        self.apply_cwd(request.workdir)?;
        self.apply_args(request.args)?;
        if door.is_some() {
            self.bind_tools()?;
        }
        let program;
        let code = match (request.last_value, self.form) {
            // A command module runs a file, which shows no value anyway.
            (LastValue::Hidden, Some(form)) if !self.one_shot => {
                program = form.program(code);
                program.as_str()
            }
            _ => code,
        };
        if self.one_shot {
            // Written through the workspace's handle: the guest may have left a link
            // where the file goes.
            self.workspace.write(".sandlot/code", code.as_bytes())?;
        }
        self.stdio.stdin.set(request.stdin);
        self.stdio
            .stdout
            .start(request.max_output, request.on_stdout);
        self.stdio
            .stderr
            .start(request.max_output, request.on_stderr);
        // The door is open for this run only: code it leaves behind calls into nothing.
        self.stdio.door.set(door);
        let ran = match self.interpreter.as_mut() {
            Some(interpreter) => interpreter.run(code, request.timeout, request.interrupt),
            None => Ran::Gone,
        };
        self.stdio.door.set(None);
        let (stdout, stderr) = self.stdio.finish();
        let mut outcome = Outcome {
            stdout: stdout.bytes,
            stderr: stderr.bytes,
            stdout_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            ..Outcome::default()
        };
        let flooded = stdout.flooded || stderr.flooded;
        let interrupted = request.interrupt.is_some_and(Interrupt::is_interrupted);
        let persistent = !self.one_shot;
        let limit = request.timeout;
        let stopped = match ran {
            Ran::Returned { exit_code, quit } => {
                outcome.exit_code = exit_code;
                quit.then(|| "the program ended the interpreter".to_string())
            }
            Ran::Deadline if interrupted => {
                outcome.exit_code = 130;
                outcome.end = EndReason::Interrupted;
                Some("it was interrupted while waiting in a host call".into())
            }
            Ran::Deadline => {
                outcome.exit_code = 124;
                outcome.end = EndReason::TimedOut { limit };
                Some("it ran past its time limit while waiting in a host call".into())
            }
            Ran::Trapped { error, memory_hit } => {
                let (end, why) = if flooded {
                    (
                        EndReason::OutputLimit,
                        "it kept writing far past the output cap",
                    )
                } else if memory_hit {
                    (
                        EndReason::MemoryLimit,
                        "it used more memory than the sandbox allows",
                    )
                } else if interrupted {
                    (EndReason::Interrupted, "it was interrupted")
                } else if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    (EndReason::TimedOut { limit }, "it ran past its time limit")
                } else {
                    let cause = format!("the interpreter crashed: {error:#}");
                    outcome
                        .stderr
                        .extend_from_slice(format!("sandlot: {cause}\n").as_bytes());
                    (EndReason::SandboxLost { cause }, "the interpreter crashed")
                };
                // A limit's code is the one EndReason gives; a crash exits as an abort.
                outcome.exit_code = end.exit_code().unwrap_or(134);
                outcome.end = end;
                Some(why.to_string())
            }
            Ran::Gone => {
                return Err(Error::SessionEnded {
                    reason: "its interpreter is gone".into(),
                })
            }
            Ran::Refused(reason) => return Err(self.failed(reason)),
        };
        outcome.session = match stopped {
            // A command's instance lives for one run anyway.
            Some(_) if !persistent => SessionState::Open,
            Some(reason) => self.restart(reason),
            None => SessionState::Open,
        };
        Ok(outcome)
    }
}

impl Sandbox for WasmSandbox {
    fn run(&mut self, request: RunRequest<'_>) -> Result<Outcome> {
        let door = request
            .tools
            .clone()
            .map(|calls| calls as std::sync::Arc<dyn door::Answer>);
        self.run_through(request, door)
    }

    fn capture(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, false)
    }

    fn capture_here(&mut self, out: &mut dyn std::io::Write) -> Result<Option<InterpreterState>> {
        self.capture_as(out, true)
    }

    fn reset(&mut self) -> Result<()> {
        // A command module's instance lives for one run anyway.
        if self.one_shot {
            return Ok(());
        }
        self.start_fresh()
    }

    fn files(&mut self) -> &mut dyn SandboxFiles {
        &mut self.workspace
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}
