//! `sandlot config show`: the configuration in force and where each value came from;
//! `sandlot completions SHELL`: a completion script.

use super::global::Global;
use anyhow::Result;
use clap::Subcommand;
use sandlot::dirs::Origin;
use serde_json::{json, Value};
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum ConfigCommand {
    /// The configuration in force: the file, every directory, the engines, the policy,
    /// pools and the cluster, each with where it came from.
    Show {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn command(global: &Global, command: ConfigCommand) -> Result<ExitCode> {
    let ConfigCommand::Show { json } = command;
    let shown = effective(global)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        print!("{}", as_text(&shown));
    }
    Ok(ExitCode::SUCCESS)
}

/// A value and its origin, as JSON.
fn sourced(value: impl serde::Serialize, origin: impl std::fmt::Display) -> Value {
    json!({ "value": value, "from": origin.to_string() })
}

/// The effective configuration, as JSON.
fn effective(global: &Global) -> Result<Value> {
    let config = global.config()?;
    let dirs = global.dirs()?;
    let file = match (&global.config, std::env::var_os("SANDLOT_CONFIG")) {
        (Some(path), _) => sourced(path, Origin::Flag),
        (None, Some(path)) if !path.is_empty() => sourced(
            path.to_string_lossy(),
            Origin::Environment("SANDLOT_CONFIG"),
        ),
        _ => match &config.path {
            Some(path) => sourced(path, "found in the search path"),
            None => sourced(Value::Null, "no file: every value is a default"),
        },
    };
    let in_file = |present: bool, default: Origin| -> String {
        match (&config.path, present) {
            (Some(path), true) => Origin::ConfigFile(path.clone()).to_string(),
            _ => default.to_string(),
        }
    };
    let engine = |configured: &Option<String>, variable: &'static str, default: &str| match (
        configured,
        std::env::var(variable),
    ) {
        (Some(host), _) => sourced(host, in_file(true, Origin::Default)),
        (None, Ok(host)) if !host.is_empty() => sourced(host, Origin::Environment(variable)),
        _ => sourced(default, Origin::Default),
    };
    let policy = config.policy.clone().unwrap_or_default();
    let kubernetes = &config.kubernetes;
    let cluster_configured = kubernetes != &sandlot::config::KubernetesConfig::default();
    Ok(json!({
        "file": file,
        "cache_dir": sourced(&dirs.cache.value, &dirs.cache.origin),
        "runtimes_dir": sourced(&dirs.runtimes.value, &dirs.runtimes.origin),
        "plugin_dirs": dirs.plugins.iter().map(|d| sourced(&d.path, &d.origin)).collect::<Vec<_>>(),
        "docker_host": engine(&config.docker_host, "DOCKER_HOST", "unix:///var/run/docker.sock"),
        "podman_host": engine(&config.podman_host, "CONTAINER_HOST", "Podman's usual sockets"),
        "images": sourced(&config.images, in_file(!config.images.is_empty(), Origin::Default)),
        "policy": sourced(policy, in_file(config.policy.is_some(), Origin::Default)),
        "pools": sourced(&config.pools, in_file(!config.pools.is_empty(), Origin::Default)),
        "serve_tokens_file": sourced(
            &config.serve.tokens_file,
            in_file(config.serve.tokens_file.is_some(), Origin::Default),
        ),
        "kubernetes": if cluster_configured {
            sourced(json!({
                "kubeconfig": kubernetes.kubeconfig,
                "context": kubernetes.context,
                "namespace": kubernetes.namespace,
                "image_prefix": kubernetes.image_prefix,
                "pod_template": kubernetes.pod_template,
                "network_policy_enforced": kubernetes.network_policy_enforced,
                "start_timeout": kubernetes.start_timeout,
                "pod_lifetime": kubernetes.pod_lifetime,
            }), in_file(true, Origin::Default))
        } else {
            sourced(
                Value::Null,
                "not configured: `auto` never picks the cluster; `--backend kubernetes` \
                 uses $KUBECONFIG or ~/.kube/config",
            )
        },
    }))
}

/// The JSON of [`effective`] as aligned text, one setting per line.
fn as_text(shown: &Value) -> String {
    let mut text = String::new();
    let mut line = |key: &str, entry: &Value| {
        let value = match &entry["value"] {
            Value::Null => "-".to_string(),
            Value::String(s) => s.clone(),
            Value::Object(map) if map.is_empty() => "none".to_string(),
            other => other.to_string(),
        };
        let from = entry["from"].as_str().unwrap_or_default();
        text.push_str(&format!("{key:<14} {value}  ({from})\n"));
    };
    for key in [
        "file",
        "cache_dir",
        "runtimes_dir",
        "docker_host",
        "podman_host",
        "images",
        "pools",
        "serve_tokens_file",
        "kubernetes",
    ] {
        line(key, &shown[key]);
    }
    for dir in shown["plugin_dirs"].as_array().into_iter().flatten() {
        line("plugin_dir", dir);
    }
    let policy = &shown["policy"];
    text.push_str(&format!(
        "policy         ({})\n",
        policy["from"].as_str().unwrap_or_default()
    ));
    if let Some(fields) = policy["value"].as_object() {
        for (field, value) in fields {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            text.push_str(&format!("  {field:<18} {value}\n"));
        }
    }
    text
}

/// Prints the completion script of `command` (the whole command line) for `shell`.
pub(super) fn completions(
    shell: clap_complete::Shell,
    mut command: clap::Command,
) -> Result<ExitCode> {
    clap_complete::generate(shell, &mut command, "sandlot", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
