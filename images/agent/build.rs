//! Tells the build scripts of dependent packages where this package's sources are
//! (`DEP_SANDLOT_AGENT_ROOT`): sandlot-container builds the static agent binary from
//! them, whether they are in this repository or unpacked from a registry.

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it");
    println!("cargo:root={root}");
    println!("cargo:rerun-if-changed=build.rs");
}
