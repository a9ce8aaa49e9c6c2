//! The `sandlot` command-line tool.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
