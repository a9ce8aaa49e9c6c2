//! A tar archive out of a sandbox, unpacked on the host.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::unpack(data));
