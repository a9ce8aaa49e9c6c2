//! A name a sandbox chose, as a host path: it never leads outside the destination.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::sandbox_path(data));
