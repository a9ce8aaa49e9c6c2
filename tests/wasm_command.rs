//! A third-party runtime in the `command` form: a WASI preview-1 command module plus a
//! `runtime.toml`, dropped into a runtimes directory. One fresh instance per run.

use sandlot::{PluginHost, Sandlot};
use sha2::{Digest, Sha256};

/// A command that prints its arguments (NUL-separated, as WASI hands them over) and
/// exits with status 7.
const ECHO_ARGS: &str = r#"(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $sizes (i32.const 0) (i32.const 4)))
    (drop (call $args (i32.const 1024) (i32.const 2048)))
    ;; one iovec at 8: the argument bytes at 2048, their total length from offset 4
    (i32.store (i32.const 8) (i32.const 2048))
    (i32.store (i32.const 12) (i32.load (i32.const 4)))
    (drop (call $write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 32)))
    (call $exit (i32.const 7))))"#;

#[test]
fn a_command_runtime_from_a_manifest_runs_each_piece_of_code_fresh() {
    let runtimes = tempfile::tempdir().unwrap();
    let dir = runtimes.path().join("echo");
    std::fs::create_dir(&dir).unwrap();
    let wasm = wat::parse_str(ECHO_ARGS).unwrap();
    std::fs::write(dir.join("echo.wasm"), &wasm).unwrap();
    std::fs::write(
        dir.join("runtime.toml"),
        format!(
            "id = \"echo\"\nlanguages = [\"bash\"]\nversion = \"1\"\nmodule = \"echo.wasm\"\n\
             sha256 = \"{}\"\nprotocol = \"command\"\nargv = [\"echo\", \"--file\", \"{{file}}\"]\n",
            hex::encode(Sha256::digest(&wasm))
        ),
    )
    .unwrap();
    let plugins = PluginHost::builder().no_cache().load().unwrap();
    let sandlot = Sandlot::new(plugins, runtimes.path(), None).unwrap();
    let mut session = sandlot.session("bash").open().unwrap();
    for _ in 0..2 {
        let run = session.run("echo hi").unwrap();
        assert_eq!(run.stdout, b"echo\0--file\0/workspace/.sandlot/code\0");
        assert_eq!(run.exit_code, 7);
        assert!(
            run.session_ended.is_none(),
            "a command's exit ends only that run"
        );
    }
    assert_eq!(session.read_file(".sandlot/code").unwrap(), b"echo hi");
}
