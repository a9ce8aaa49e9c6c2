//! A snapshot file of unknown origin, read and checked before anything restores it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::snapshot(data));
