//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A component built by `guests/build.sh`: `builtin/python`, `examples/lua`,
/// `fixtures/trap`, ...
pub fn component(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guests/dist")
        .join(format!("{name}.wasm"))
}

/// A fresh plugin directory holding copies of `components`, each under the file name
/// given (`("examples/lua", "lua.wasm")`).
pub fn plugin_dir(components: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (component_name, file_name) in components {
        std::fs::copy(component(component_name), dir.path().join(file_name)).unwrap();
    }
    dir
}
