//! What each feature of the facade brings in, read from cargo's own dependency tree:
//! an application that runs code in the wasm backend must not compile a container
//! client, a Kubernetes client, a web framework or the command line's dependencies.

use std::collections::BTreeSet;
use std::process::Command;

/// The packages `sandlot` depends on, normal dependencies only, with `features`.
fn packages(features: &str) -> BTreeSet<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "--manifest-path",
            manifest,
            "-p",
            "sandlot",
        ])
        .args([
            "--edges",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(["--no-default-features", "--features", features])
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Crates only a container engine, a cluster, a server or the binary need.
const NOT_FOR_WASM: &[&str] = &[
    "bollard",
    "kube",
    "kube-client",
    "k8s-openapi",
    "axum",
    "rmcp",
    "clap",
    "rustyline",
    "tracing-subscriber",
    "sandlot-docker",
    "sandlot-kubernetes",
    "sandlot-container",
    "sandlot-server",
];

#[test]
fn the_wasm_feature_brings_no_engine_client_server_or_cli_crate() {
    let wasm = packages("wasm");
    assert!(
        wasm.contains("sandlot-wasm") && wasm.contains("wasmtime"),
        "{wasm:?}"
    );
    let found: Vec<_> = NOT_FOR_WASM.iter().filter(|p| wasm.contains(**p)).collect();
    assert!(found.is_empty(), "the wasm feature compiles {found:?}");
}

#[test]
fn each_backend_feature_brings_its_own_client_and_full_brings_all() {
    let docker = packages("docker");
    assert!(
        docker.contains("bollard") && !docker.contains("kube"),
        "{docker:?}"
    );
    assert!(
        !docker.contains("wasmtime-wasi"),
        "docker alone compiles the wasm backend"
    );
    let kubernetes = packages("kubernetes");
    assert!(kubernetes.contains("kube") && !kubernetes.contains("bollard"));
    let server = packages("server");
    assert!(server.contains("sandlot-server"), "{server:?}");
    assert!(
        !server.contains("axum") && !server.contains("rmcp"),
        "the manager alone compiles a web framework"
    );
    let full = packages("full");
    let wasm = packages("wasm");
    for crate_ in [
        "bollard",
        "kube",
        "axum",
        "rmcp",
        "sandlot-wasm",
        "sandlot-server",
    ] {
        assert!(full.contains(crate_), "full lacks {crate_}");
    }
    assert!(
        !full.contains("clap"),
        "the library compiles the CLI's parser"
    );
    assert!(full.len() > wasm.len(), "full is not bigger than wasm");
}
