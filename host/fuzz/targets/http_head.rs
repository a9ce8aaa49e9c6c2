//! An HTTP request head a sandbox sends the egress proxy.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::http_head(data));
