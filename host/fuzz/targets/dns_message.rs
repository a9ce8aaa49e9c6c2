//! A DNS message a sandbox sends its resolver (answered on the host under an egress allow-list).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::dns_message(data));
