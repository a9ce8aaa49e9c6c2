//! What a wasm worker process sends its backend: a worker runs untrusted code, so
//! its messages are read as carefully as a sandbox's.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandlot::wasm::fuzzing::worker_frames(data));
