//! What the host accepts from a handler: paths, commands, kernels and declared info.
//! Pure functions over the answers, shared by every call and by the fuzz targets.

use crate::language::{check_language_name, Command, KernelSpec, LanguageInfo, Phase};

/// A kernel the host can start: a plain driver file name and a program to run.
pub(super) fn check_kernel(spec: &KernelSpec) -> std::result::Result<(), String> {
    check_relative_path(&spec.driver_name)?;
    if spec.driver_name.contains('/') {
        return Err(format!(
            "driver name `{}` must be a plain file name",
            spec.driver_name.escape_debug()
        ));
    }
    check_command(&Command {
        phase: Phase::Run,
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        needs_network: false,
    })
}

pub(super) fn check_info(info: LanguageInfo) -> std::result::Result<LanguageInfo, String> {
    check_language_name("language id", &info.id)?;
    for alias in &info.aliases {
        check_language_name("alias", alias)?;
    }
    let extension_ok = !info.file_extension.is_empty()
        && info.file_extension.len() <= 16
        && info
            .file_extension
            .chars()
            .all(|c| c.is_ascii_alphanumeric());
    if !extension_ok {
        return Err(format!(
            "file extension `{}` must be 1-16 letters or digits, without the dot",
            info.file_extension.escape_debug()
        ));
    }
    for (what, value) in [
        ("display name", &info.display_name),
        ("default image", &info.default_image),
        ("version", &info.version),
    ] {
        if value.trim().is_empty() || value.len() > 200 || value.chars().any(char::is_control) {
            return Err(format!(
                "{what} `{}` must be 1-200 printable characters",
                value.escape_debug()
            ));
        }
    }
    Ok(info)
}

/// A path the host may write: relative, normal components only, no NUL.
pub(crate) fn check_relative_path(path: &str) -> std::result::Result<(), String> {
    let escapes = path.is_empty()
        || path.starts_with('/')
        || path.contains('\0')
        || path.contains('\\')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if escapes {
        Err(format!(
            "file path `{}` must be relative to the working directory, without `.`, `..` or empty parts",
            path.escape_debug()
        ))
    } else {
        Ok(())
    }
}

pub(crate) fn check_command(command: &Command) -> std::result::Result<(), String> {
    match command.argv.first() {
        None => return Err("a command has an empty argv".into()),
        Some(program) if program.is_empty() => return Err("a command's program is empty".into()),
        _ => {}
    }
    if let Some(arg) = command.argv.iter().find(|a| a.contains('\0')) {
        return Err(format!(
            "argument `{}` contains a NUL byte",
            arg.escape_debug()
        ));
    }
    for (key, value) in &command.env {
        let key_ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !key_ok {
            return Err(format!(
                "environment name `{}` is not valid",
                key.escape_debug()
            ));
        }
        if value.contains('\0') {
            return Err(format!("environment value of `{key}` contains a NUL byte"));
        }
    }
    Ok(())
}
