//! Builds `sandlot-agent`, the program that runs as process 1 in every container, as a
//! static executable from the sources of the `sandlot-agent` dependency, and hands its
//! path to the crate, which embeds it. It runs in images whose C library sandlot does
//! not know, so it must not link one dynamically.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    // In this repository the agent's sources sit beside this package, and are taken
    // from there, watched by a relative path. Two checkouts that share a target dir
    // share build-script outputs (cargo hashes paths relative to the workspace), so
    // anything absolute — a watched path, or the root that sandlot-agent's build
    // script reported when it last ran, perhaps in another checkout — would build and
    // embed the other checkout's agent. Unpacked from a registry, this crate has no
    // such neighbour: sandlot-agent's build script says where its sources are.
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let beside = PathBuf::from("../../images/agent");
    let (agent, watched) = if manifest_dir.join(&beside).join("Cargo.toml").is_file() {
        (manifest_dir.join(&beside), beside)
    } else {
        let root = PathBuf::from(
            std::env::var_os("DEP_SANDLOT_AGENT_ROOT")
                .expect("sandlot-agent's build script sets it"),
        );
        (root.clone(), root)
    };
    println!("cargo:rerun-if-changed={}", watched.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        watched.join("Cargo.toml").display()
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let target = std::env::var("TARGET").expect("cargo sets it");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = out.join("agent-target");
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "--offline",
            "--bin",
            "sandlot-agent",
        ])
        .arg("--manifest-path")
        .arg(agent.join("Cargo.toml"))
        .arg("--target")
        .arg(&target)
        .arg("--target-dir")
        .arg(&target_dir)
        // The outer build's flags, wrapper (clippy, the fuzz build's instrumentation)
        // and target dir are not the agent's.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            [
                "-Ctarget-feature=+crt-static",
                "-Cstrip=symbols",
                "-Copt-level=s",
            ]
            .join("\x1f"),
        )
        .status()
        .expect("cannot start cargo to build sandlot-agent");
    assert!(status.success(), "building sandlot-agent failed");
    let binary = target_dir.join(&target).join("release/sandlot-agent");
    println!("cargo:rustc-env=SANDLOT_AGENT_PATH={}", binary.display());
}
