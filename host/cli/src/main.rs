//! The `sandlot` command-line tool.

mod cli;

fn main() -> std::process::ExitCode {
    // Started as a wasm backend's worker, this process serves it and exits.
    sandlot::wasm::worker::serve_if_asked();
    cli::main()
}
