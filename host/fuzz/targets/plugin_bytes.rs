//! A plugin file, as the plugin host inspects it before running anything.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::plugin_bytes(data));
