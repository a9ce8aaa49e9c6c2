//! The first bytes of a TLS connection from a sandbox, read for the server name.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::tls_hello(data));
