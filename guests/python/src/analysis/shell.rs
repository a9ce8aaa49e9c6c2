//! Whether a subprocess call runs a shell: `shell=True`, or a shell as the program.
//! It is its own check because the same call without a shell is a milder finding.

use super::tokens::Kind;
use super::walk::Analysis;

/// Programs that are shells: `subprocess.run(["sh", "-c", ...])` runs a shell command
/// as surely as `os.system` does.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "csh", "tcsh",
];

/// Whether a program named by a string literal is a shell (`sh`, `/bin/bash`).
fn is_shell(program: &str) -> bool {
    let name = program.trim().rsplit('/').next().unwrap_or("");
    SHELLS.contains(&name)
}

impl Analysis<'_, '_> {
    /// Whether the call whose `(` is at `open` starts a shell: `shell=True`, or a
    /// shell as its first string (`["sh", "-c", ...]`, `"/bin/bash"`).
    pub(super) fn runs_a_shell(&self, open: usize) -> bool {
        let mut depth = 0usize;
        let mut first_string = true;
        let mut i = open;
        while i < self.tokens.len() {
            match self.kind(i) {
                Kind::Op("(") | Kind::Op("[") | Kind::Op("{") => depth += 1,
                Kind::Op(")") | Kind::Op("]") | Kind::Op("}") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                Kind::Name("shell")
                    if depth == 1
                        && self.kind(i + 1) == Kind::Op("=")
                        && self.kind(i + 2) != Kind::Name("False")
                        && self.kind(i + 2) != Kind::Name("None") =>
                {
                    return true;
                }
                Kind::Str(index) if first_string => {
                    first_string = false;
                    if is_shell(&self.scan.literals[index].text) {
                        return true;
                    }
                }
                Kind::End => return false,
                _ => {}
            }
            i += 1;
        }
        false
    }
}
