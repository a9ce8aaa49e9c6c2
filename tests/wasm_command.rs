//! A third-party runtime in the `command` form: a WASI preview-1 command module plus a
//! `runtime.toml`, dropped into a runtimes directory. One fresh instance per run.

mod support;

use sandlot::{Error, PluginHost};
use sha2::{Digest, Sha256};

#[test]
fn a_command_runtime_from_a_manifest_runs_each_piece_of_code_fresh() {
    let runtimes = tempfile::tempdir().unwrap();
    support::install_echo_runtime(runtimes.path(), "bash", &support::echo_module("!"), None);
    let plugins = PluginHost::builder().no_cache().load().unwrap();
    let sandlot = sandlot::builder(plugins)
        .runtimes_dir(runtimes.path())
        .cache_dir(None)
        .build()
        .unwrap();
    let mut session = sandlot.session("bash").open().unwrap();
    for _ in 0..2 {
        let run = session.run("echo hi").unwrap();
        assert_eq!(run.stdout, b"echo\0--file\0/workspace/.sandlot/code\0!");
        assert_eq!(run.exit_code, 7);
        assert_eq!(
            run.session,
            sandlot::SessionState::Open,
            "a command's exit ends only that run"
        );
    }
    assert_eq!(session.read_file(".sandlot/code").unwrap(), b"echo hi");
}

#[test]
fn a_replaced_runtime_module_is_never_served_from_a_stale_artifact() {
    let runtimes = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let open = || {
        let plugins = PluginHost::builder().no_cache().load().unwrap();
        let sandlot = sandlot::builder(plugins)
            .runtimes_dir(runtimes.path())
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
            .unwrap();
        sandlot.session("bash").open()
    };
    let first = support::echo_module("first!");
    support::install_echo_runtime(runtimes.path(), "bash", &first, None);
    let run = open().unwrap().run("x").unwrap();
    assert!(run.stdout.ends_with(b"first!"), "{:?}", run.stdout_text());

    // New bytes behind the unchanged manifest: refused, naming both hashes, and the
    // artifact compiled from the old bytes is not run.
    let second = support::echo_module("other!");
    let claimed = hex::encode(Sha256::digest(&first));
    support::install_echo_runtime(runtimes.path(), "bash", &second, Some(&claimed));
    let error = open().unwrap_err();
    let actual = hex::encode(Sha256::digest(&second));
    assert!(matches!(error, Error::HashMismatch { .. }), "{error}");
    let text = error.to_string();
    assert!(text.contains(&claimed) && text.contains(&actual), "{text}");

    // With a manifest that tells the truth, the new bytes are what runs.
    support::install_echo_runtime(runtimes.path(), "bash", &second, None);
    let run = open().unwrap().run("x").unwrap();
    assert!(run.stdout.ends_with(b"other!"), "{:?}", run.stdout_text());
}
