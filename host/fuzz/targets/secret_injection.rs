//! A request head carrying bound secrets' placeholders, and an answer echoing them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::secret_injection(data));
