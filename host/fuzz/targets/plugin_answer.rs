//! A language handler's answers: file paths, argument lists, environments.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::plugin_answer(data));
