//! Fuzz target: see [`sparsile_fuzz::trace_json`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::trace_json(data));
