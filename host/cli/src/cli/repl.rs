//! `sandlot repl`: one session, many runs. At a terminal it reads cells with line
//! editing, history and multi-line input; from a pipe it takes one cell per line, so
//! scripts can drive it.

use super::exit;
use super::global::{plugin_notes, Global};
use super::run::{ctrl_c, notes, say_where, streaming, write_artifacts, SandboxArgs};
use anyhow::{Context, Result};
use clap::Args;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::Helper;
use sandlot::sandbox_path::escape_controls;
use sandlot::service::Service;
use sandlot::{
    EarlierOutput, EndReason, Execution, Interrupt, OpenRequest, RunOptions, Session, SessionState,
};
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct ReplArgs {
    /// The language, by name or alias (`sandlot languages` lists them).
    #[arg(short, long, value_name = "LANG")]
    language: String,
    #[command(flatten)]
    sandbox: SandboxArgs,
    /// Write the plots and files each cell makes into DIR, and print their paths.
    #[arg(long, default_value = "sandlot-output", value_name = "DIR")]
    out: PathBuf,
    /// Empty the sandbox's output directory before each cell, instead of keeping the
    /// files earlier cells made there for later code to read.
    #[arg(long)]
    clear_output: bool,
}

pub(super) fn command(global: &Global, args: ReplArgs) -> Result<ExitCode> {
    let mut service =
        Service::from_config(global.config()?, &global.overrides(), sandlot::providers())?;
    plugin_notes(service.sandlot().plugins());
    let language = service
        .sandlot()
        .plugins()
        .language(&args.language)?
        .info()
        .id
        .clone();
    let configured = service.sandlot().config().policy.clone();
    let mut request = args.sandbox.request(&language, configured)?;
    if args.clear_output {
        request.earlier_output = EarlierOutput::Clear;
    }
    let mut session = service
        .open(&request, |step| note!("sandlot: {step}"))
        .context("cannot open the session")?;
    say_where(&service, &session, &request, false);
    let mut repl = Repl {
        session: &mut session,
        service: &mut service,
        request: &mut request,
        memory: args.sandbox.memory,
        out: &args.out,
        last: 0,
        terminal_input: std::io::stdin().is_terminal(),
        // At the prompt the line editor reads Ctrl-C as a key, not a signal; during a
        // cell it interrupts the cell, however often it is pressed.
        interrupt: ctrl_c(false)?,
    };
    if repl.terminal_input {
        repl.terminal(&language)?;
    } else {
        repl.pipe()?;
    }
    let last = repl.last;
    session.close();
    Ok(ExitCode::from(last))
}

/// The loop's state: the session and what the last cell's status was.
struct Repl<'a> {
    session: &'a mut Session,
    /// What opened the session, to restore one saved (`:load`).
    service: &'a mut Service,
    request: &'a mut OpenRequest,
    memory: usize,
    out: &'a Path,
    /// Exit status of the last cell, which `sandlot repl` exits with.
    last: u8,
    /// Whether cells come from a person at a terminal.
    terminal_input: bool,
    /// Set by Ctrl-C; interrupts the cell that runs.
    interrupt: Interrupt,
}

impl Repl<'_> {
    /// Reads cells at a terminal until `:quit` or end of input.
    fn terminal(&mut self, language: &str) -> Result<()> {
        let config = rustyline::Config::builder().auto_add_history(true).build();
        let mut editor =
            rustyline::Editor::<Cells, rustyline::history::FileHistory>::with_config(config)?;
        editor.set_helper(Some(Cells));
        let history = history_file(language);
        if let Some(file) = &history {
            // A first session has none yet.
            let _ = editor.load_history(file);
        }
        note!(
            "sandlot: {language} on {}; a cell ends at a blank line once it spans \
             several; Ctrl-C interrupts a cell; :quit or Ctrl-D leaves",
            self.session.backend()
        );
        let prompt = format!("{language}> ");
        loop {
            match editor.readline(&prompt) {
                Ok(line) => {
                    if !self.cell(&line)? {
                        break;
                    }
                }
                // Ctrl-C at the prompt drops the line, as a shell does.
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(error) => return Err(error.into()),
            }
        }
        if let Some(file) = &history {
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.save_history(file);
        }
        Ok(())
    }

    /// Runs one cell per line of standard input. Ctrl-C (SIGINT) interrupts the
    /// running cell and stops: the session closes and the exit status is 130.
    fn pipe(&mut self) -> Result<()> {
        for line in std::io::stdin().lock().lines() {
            if !self.cell(&line.context("cannot read standard input")?)? {
                break;
            }
            if self.interrupt.is_interrupted() {
                self.last = 130;
                break;
            }
        }
        Ok(())
    }

    /// Runs `text` as a cell, or obeys it as a command; `false` when it says to leave.
    fn cell(&mut self, text: &str) -> Result<bool> {
        let code = text.trim_end();
        match code.trim() {
            "" => return Ok(true),
            ":quit" | ":q" | ":exit" => return Ok(false),
            ":help" => {
                eprintln!(
                    ":quit leaves (or Ctrl-D); :save FILE saves the session, :load FILE \
                     replaces it with one saved; anything else is a cell of code. Plots \
                     and files go to {}.",
                    self.out.display()
                );
                return Ok(true);
            }
            command => {
                if let Some(file) = command.strip_prefix(":save ") {
                    self.save(Path::new(file.trim()));
                    return Ok(true);
                }
                if let Some(file) = command.strip_prefix(":load ") {
                    self.load(Path::new(file.trim()));
                    return Ok(true);
                }
            }
        }
        // A Ctrl-C at the prompt, or one that came after the last cell ended, is not
        // for this cell.
        self.interrupt.reset();
        let options = RunOptions {
            interrupt: Some(self.interrupt.clone()),
            ..streaming()
        };
        let execution = match self.session.run_with(code, options) {
            Ok(execution) => execution,
            Err(error) => {
                // A refused cell or a failed install: the session goes on.
                eprintln!("error: {error}");
                self.last = 125;
                return Ok(true);
            }
        };
        self.after(&execution)?;
        Ok(true)
    }

    /// `:save FILE`: the session, into FILE; a failure is said and the session goes on.
    fn save(&mut self, file: &Path) {
        if let Err(error) = super::snapshot::save(self.session, file) {
            eprintln!("error: {error:#}");
            self.last = 125;
        }
    }

    /// `:load FILE`: the session saved in FILE replaces this one.
    fn load(&mut self, file: &Path) {
        match super::snapshot::restore(self.service, self.request, file) {
            Ok(restored) => {
                *self.session = restored;
                note!(
                    "sandlot: restored the session saved in {} ({} on {})",
                    file.display(),
                    self.session.language(),
                    self.session.backend()
                );
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                self.last = 125;
            }
        }
    }

    /// Says what the output does not: files written, the end reason, lost state.
    fn after(&mut self, execution: &Execution) -> Result<()> {
        // A cell's output that does not end its line would run into the prompt.
        if execution.stdout.last().is_some_and(|&b| b != b'\n') {
            println!();
        }
        if !execution.artifacts.is_empty() {
            write_artifacts(execution, self.out)?;
            for artifact in &execution.artifacts {
                let kind = if artifact.is_plot { "plot" } else { "file" };
                // The path is a SandboxPath: its Display escapes what could read as
                // a separator, and it holds no control character.
                eprintln!(
                    "sandlot: {kind} {}/{}",
                    escape_controls(&self.out.display().to_string()),
                    artifact.path
                );
            }
        }
        notes(execution, self.memory, true);
        match execution.session {
            SessionState::Restarted { .. } => {
                note!("sandlot: the interpreter was restarted; earlier state is gone")
            }
            SessionState::Open if execution.end == EndReason::Interrupted => {
                note!("sandlot: the session keeps its state")
            }
            _ => {}
        }
        self.last = exit::of_execution(execution);
        Ok(())
    }
}

/// Where a language's history is kept: `$XDG_STATE_HOME/sandlot` (or
/// `~/.local/state/sandlot`), one file per language.
fn history_file(language: &str) -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(
        state
            .join("sandlot")
            .join(format!("repl-{language}.history")),
    )
}

/// Decides when a cell typed at the terminal is complete; completes, hints and
/// highlights nothing.
struct Cells;

impl Helper for Cells {}
impl Highlighter for Cells {}

impl Completer for Cells {
    type Candidate = String;
}

impl Hinter for Cells {
    type Hint = String;
}

impl Validator for Cells {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if complete(ctx.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

/// Whether `input` is a whole cell: brackets closed, no line continuation, and, once
/// it spans several lines (a block), a blank last line, as Python's prompt wants.
fn complete(input: &str) -> bool {
    let trimmed = input.trim_end_matches([' ', '\t']);
    if trimmed.trim().is_empty() {
        return true;
    }
    if trimmed.ends_with('\\') || open_brackets(trimmed) > 0 {
        return false;
    }
    if input.contains('\n') {
        return input.ends_with('\n') || input.lines().last().is_some_and(|l| l.trim().is_empty());
    }
    // A line that opens a block (`def f():`, `for x in y:`) goes on.
    !trimmed.ends_with(':')
}

/// How many brackets `code` leaves open, outside string literals (roughly: quotes of
/// the usual kinds, with backslash escapes).
fn open_brackets(code: &str) -> i32 {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, _) => {}
        }
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_ends_when_it_is_whole() {
        assert!(complete("print(1)"));
        assert!(complete("x = {'a': [1, 2]}"));
        assert!(!complete("for i in range(3):"));
        assert!(!complete("f(1,"));
        assert!(!complete("x = 1 + \\"));
        assert!(!complete("for i in range(3):\n    print(i)"));
        assert!(complete("for i in range(3):\n    print(i)\n"));
        assert!(complete("function f() {\n  return 1\n}\n"));
        assert!(!complete("function f() {\n  return 1"));
        // Brackets inside strings do not count.
        assert!(complete("print('(')"));
        assert!(complete("s = \"}\\\"\""));
    }
}
