//! Tests of the handler's checks and its kept kernel answers.

use super::checks::{check_command, check_relative_path};
use crate::language::{check_language_name, Command, Phase};

#[test]
fn a_kernel_is_asked_of_the_plugin_once_per_pair_of_directories() {
    let plugins = crate::plugin::PluginHost::builder().load().unwrap();
    let python = plugins.language("python").unwrap();
    let spec = python.kernel("/workspace", "/workspace/output").unwrap();
    assert!(spec.is_some());
    // Clones share the answers; another pair is asked again.
    assert_eq!(
        python
            .clone()
            .kernel("/workspace", "/workspace/output")
            .unwrap(),
        spec
    );
    assert_eq!(python.kernels.lock().unwrap().len(), 1);
    let elsewhere = python.kernel("/w", "/w/output").unwrap();
    assert!(elsewhere.is_some());
    assert_eq!(python.kernels.lock().unwrap().len(), 2);
}

#[test]
fn paths_that_leave_the_workdir_are_refused() {
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a//b",
        "./a",
        "a\\b",
        "a\0b",
    ] {
        assert!(check_relative_path(bad).is_err(), "{bad:?} accepted");
    }
    for good in ["main.py", "src/Main.java", ".sandlot/x", "a..b"] {
        assert!(check_relative_path(good).is_ok(), "{good:?} refused");
    }
}

#[test]
fn names_are_command_line_friendly() {
    for good in ["python", "c++", "c#", "lua5.4", "objective-c"] {
        assert!(check_language_name("id", good).is_ok(), "{good}");
    }
    for bad in ["", "Python", "two words", "-x", "a;b", &"x".repeat(33)] {
        assert!(check_language_name("id", bad).is_err(), "{bad}");
    }
}

#[test]
fn commands_need_a_program_and_valid_env() {
    let command = |argv: &[&str], env: &[(&str, &str)]| Command {
        phase: Phase::Run,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        needs_network: false,
    };
    assert!(check_command(&command(&["python3", "main.py"], &[("A_1", "x")])).is_ok());
    assert!(check_command(&command(&[], &[])).is_err());
    assert!(check_command(&command(&[""], &[])).is_err());
    assert!(check_command(&command(&["x"], &[("1A", "x")])).is_err());
    assert!(check_command(&command(&["x"], &[("A=B", "x")])).is_err());
    assert!(check_command(&command(&["x", "a\0"], &[])).is_err());
}
