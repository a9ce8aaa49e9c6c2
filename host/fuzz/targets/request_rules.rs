//! Request rules as a user writes them, and a request checked against them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        sandlot::fuzzing::request_rules(text);
    }
});
