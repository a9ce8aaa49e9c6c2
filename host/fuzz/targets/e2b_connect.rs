//! The body of a Connect call an E2B client sends: envelopes and JSON messages.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::server::e2b::connect::fuzz_body(data));
