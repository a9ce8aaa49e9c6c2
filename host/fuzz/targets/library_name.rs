//! A library name a session asked for: no installer's grammar takes a path, an
//! option or an address for a name.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::library_name(data));
