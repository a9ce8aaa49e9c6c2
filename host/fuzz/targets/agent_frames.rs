//! Frames from a sandbox's agent (and to it).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::fuzzing::agent_frames(data));
