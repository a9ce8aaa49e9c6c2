//! A plugin's manifest and a runtime's manifest.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        sandlot::fuzzing::manifests(text);
        sandlot::wasm::fuzzing::runtime_manifest(text);
    }
});
